//! The secure layer's receive path on a server: any datagram from any address is dropped
//! or answered, never a panic, and nothing unauthenticated reaches ENet.
#![no_main]
use hailfire::net::secure::fuzzing::Harness;
use libfuzzer_sys::fuzz_target;

thread_local! {
    static H: std::cell::RefCell<Harness> = std::cell::RefCell::new(Harness::new());
}

fuzz_target!(|data: &[u8]| {
    H.with(|h| {
        let mut h = h.borrow_mut();
        let port = data.first().copied().unwrap_or(0);
        assert!(h.feed(port, data).is_none(), "an unauthenticated datagram reached ENet");
    });
});
