//! Server messages as a client decodes them (a hostile server): never a panic.
#![no_main]
use hailfire::protocol::ServerMsg;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = ServerMsg::decode(data) {
        let _ = ServerMsg::decode(&m.encode());
    }
});
