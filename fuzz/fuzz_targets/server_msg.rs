//! Server messages as a client decodes them (a hostile server): never a panic, also not
//! when a snapshot is rebuilt on a base or a burst is expanded into bullets; and status
//! answers to a LAN or `servers --query` query.
#![no_main]
use hailfire::protocol::messages::{SnapPlayer, Snapshot};
use hailfire::protocol::{ServerMsg, WireEvent};
use hailfire::sim::Vec2;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A status answer (LAN and --query) comes from any address: never a panic either.
    if let Ok((nonce, s)) = hailfire::protocol::status::ServerStatus::read_answer(data) {
        assert!(s.answer(nonce).len() <= hailfire::protocol::status::QUERY_LEN);
    }
    if let Ok(m) = ServerMsg::decode(data) {
        let _ = ServerMsg::decode(&m.encode());
        match &m {
            ServerMsg::Snapshot(s) => {
                let base = Snapshot {
                    instance: s.instance,
                    tick: s.base.unwrap_or(0),
                    last_input_tick: None,
                    report: None,
                    players: vec![SnapPlayer { id: 1, pos: Vec2::new(8191.0, 0.0), hp: 1, flags: 0, escape: 0, aim: 0 }],
                    enemies: Vec::new(),
                    boss: None,
                };
                let _ = s.apply(None);
                let _ = s.apply(Some(&base));
            }
            ServerMsg::Events { events, .. } => {
                for e in events {
                    if let WireEvent::Burst(b) = e {
                        let _ = b.spawns().count();
                    }
                }
            }
            _ => {}
        }
    }
});
