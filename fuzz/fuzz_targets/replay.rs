//! Replay files (`hailfire replay FILE`): a file from anywhere. The reader never panics;
//! whatever it accepts re-encodes to a file that reads back the same.
#![no_main]
use hailfire::client::replay::Replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Replay::decode(data) {
        let again = Replay::decode(&r.encode()).expect("a re-encoded replay");
        assert_eq!(again.frames, r.frames);
        assert_eq!(again.keyframes, r.keyframes);
    }
});
