//! Content sent at join: the raw decoder and validator, and the inflater with a size cap.
#![no_main]
use hailfire::protocol::content::{unpack, ClientContent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = ClientContent::decode(data) {
        // What validates survives a round trip (the bytes may differ: a varint may have
        // been sent in a longer form than ours).
        let again = ClientContent::decode(&hailfire::protocol::content::encode(&c.defs)).expect("re-encoded content");
        assert_eq!(again.defs, c.defs);
    }
    if data.len() > 4 {
        let claimed = u32::from_le_bytes([data[0], data[1], data[2], 0]) as usize;
        if let Ok(raw) = unpack(&data[4..], claimed) {
            assert_eq!(raw.len(), claimed);
        }
    }
});
