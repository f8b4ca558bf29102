//! The frames a script worker sends back (untrusted: a mod that escaped Lua would write
//! them) and the ones it reads: any bytes decode or fail, never a panic, and an answer
//! that decodes re-encodes to the same bytes.
#![no_main]
use hailfire::content::worker::wire::{split, Answer, Init, TickReq, MAX_ANSWER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = split(data, MAX_ANSWER);
    if let Ok(a) = Answer::decode(data, 8, |e| e.len() < 8, 2) {
        let bytes = a.encode();
        // Messages are escaped on the way in, so compare what decodes again.
        let again = Answer::decode(&bytes[5..], 8, |e| e.len() < 8, 2).expect("an answer re-decodes");
        assert_eq!(again.cmds, a.cmds);
        assert_eq!(again.tasks, a.tasks);
    }
    let _ = TickReq::decode(data);
    let _ = Init::decode(data);
});
