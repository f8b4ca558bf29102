//! Client messages as the server decodes them: any bytes, never a panic; what decodes
//! re-encodes to something that decodes to the same message.
#![no_main]
use hailfire::protocol::ClientMsg;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ClientMsg::decode(data) {
        assert_eq!(ClientMsg::decode(&m.encode()).as_ref(), Ok(&m));
    }
    let _ = ClientMsg::hello_version(data);
});
