//! Content sent at join: the raw decoder and validator, and the inflater with a size cap.
#![no_main]
use hailfire::protocol::content::{unpack, ClientContent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = ClientContent::decode(data) {
        // What validates re-encodes to the very same bytes.
        assert_eq!(hailfire::protocol::content::encode(&c.defs), data);
    }
    if data.len() > 4 {
        let claimed = u32::from_le_bytes([data[0], data[1], data[2], 0]) as usize;
        if let Ok(raw) = unpack(&data[4..], claimed) {
            assert_eq!(raw.len(), claimed);
        }
    }
});
