//! The ENet guard (what ENet may be handed from one session): any sequence of opened
//! datagrams is passed or refused, never a panic, and the commands it lets ENet hold ahead
//! of a gap never exceed the bound.
#![no_main]
use hailfire::net::secure::guard::{Guard, Verdict, MAX_AHEAD};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut g = Guard::new();
    // Datagrams as `u8 length, bytes`, one after another, into one session's guard.
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = (n as usize).min(tail.len());
        let (d, next) = tail.split_at(n);
        let v = g.check(d);
        assert!(g.ahead() <= MAX_AHEAD, "{} ahead after {v:?}", g.ahead());
        if v == Verdict::TooMuchAhead {
            break;
        }
        rest = next;
    }
});
