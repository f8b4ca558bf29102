//! The wire format: golden byte fixtures (a change to the bytes must bump
//! PROTOCOL_VERSION and update these), round trips, the encoding as a validator, and
//! decoding hostile bytes without a panic.

use hailfire::protocol::content::ContentDigest;
use hailfire::protocol::messages::*;
use hailfire::protocol::*;
use hailfire::sim::{BulletSpawn, InputFrame, Team, Vec2};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn protocol_version_is_pinned_by_these_fixtures() {
    assert_eq!(PROTOCOL_VERSION, 4, "a new version: update the fixtures below and the history");
}

#[test]
fn golden_hello() {
    let mut d = [0u8; 32];
    d[0] = 0xab;
    d[31] = 0xcd;
    let m = ClientMsg::Hello { version: 4, content: ContentDigest(d), name: "Ann".into() };
    assert_eq!(
        hex(&m.encode()),
        "01 04 00 ab 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 cd 03 41 6e 6e"
    );
    assert_eq!(ClientMsg::decode(&m.encode()).unwrap(), m);
}

#[test]
fn golden_content_messages() {
    let d = ContentDigest([7; 32]);
    let want = ClientMsg::ContentWant;
    assert_eq!(hex(&want.encode()), "03");
    let ready = ClientMsg::ContentReady { digest: d };
    assert_eq!(ready.encode().len(), 33);
    assert_eq!(ready.encode()[0], 4);
    let offer = ServerMsg::ContentOffer { digest: d, raw_len: 300, packed_len: 200 };
    let b = offer.encode();
    assert_eq!(hex(&b[..1]), "0d");
    assert_eq!(hex(&b[33..]), "ac 02 c8 01");
    let chunk = ServerMsg::ContentChunk { offset: 1024, data: vec![1, 2, 3] };
    assert_eq!(hex(&chunk.encode()), "0e 80 08 03 01 02 03");
    for m in [want, ready] {
        assert_eq!(ClientMsg::decode(&m.encode()).unwrap(), m);
    }
    for m in [offer, chunk] {
        assert_eq!(ServerMsg::decode(&m.encode()).unwrap(), m);
    }
    // A chunk larger than CONTENT_CHUNK, or empty, cannot be expressed.
    assert!(ServerMsg::decode(&[14, 0, 0]).is_err(), "empty chunk");
    let mut big = vec![14u8, 0, 0x81, 0x08];
    big.extend(vec![0u8; 1025]);
    assert!(ServerMsg::decode(&big).is_err(), "a chunk over 1024 bytes");
}

#[test]
fn golden_input_three_frames_21_bytes() {
    let frames = vec![
        WireInput { mx: 100, my: -100, aim: 0x4000, buttons: 1 },
        WireInput { mx: 0, my: 50, aim: 0, buttons: 0 },
        WireInput { mx: -1, my: 0, aim: 0xffff, buttons: 7 },
    ];
    let m = ClientMsg::Input { newest_tick: 0x01020304, frames };
    let b = m.encode();
    assert_eq!(b.len(), 21);
    assert_eq!(hex(&b), "02 03 04 03 02 01 64 9c 00 40 01 00 32 00 00 00 ff 00 ff ff 07");
    assert_eq!(ClientMsg::decode(&b).unwrap(), m);
}

#[test]
fn golden_welcome_and_reject() {
    let w = ServerMsg::Welcome { version: 1, player_id: 300, tick: 5, tick_rate: 60 };
    assert_eq!(hex(&w.encode()), "0a 01 00 ac 02 05 00 00 00 3c");
    let r = ServerMsg::Reject(RejectReason::VersionMismatch { server: 1, client: 2 });
    assert_eq!(hex(&r.encode()), "0b 01 01 00 02 00");
    for m in [w, r] {
        assert_eq!(ServerMsg::decode(&m.encode()).unwrap(), m);
    }
}

fn spawn() -> BulletSpawn {
    BulletSpawn {
        uid: 1000,
        pos: Vec2::new(100.25, 50.5),
        angle: 90.0,
        speed: 2.5,
        radius: 4.0,
        lifetime: 300,
        kind: 3,
        team: Team::Enemy,
        accel: 0.0,
        turn: 0.0,
        max_speed: f32::INFINITY,
        tick: 77,
    }
    .quantized()
}

#[test]
fn golden_events_spawn_is_about_15_bytes() {
    let m = ServerMsg::Events {
        instance: 2,
        tick: 77,
        events: vec![
            WireEvent::Spawn(spawn()),
            WireEvent::Hit { uid: 999, target: WireTarget::Boss },
            WireEvent::Death { target: WireTarget::Player(4) },
            WireEvent::Phase { phase: 1 },
        ],
    };
    let b = m.encode();
    assert_eq!(hex(&b), "16 02 4d 00 00 00 04 01 00 d0 0f 03 91 01 ca 00 00 40 80 02 10 ac 02 02 01 02 04 00 04 05 01");
    // Spawn event: tag + 15 bytes here (a uid far from the previous one costs 2 extra).
    assert_eq!(ServerMsg::decode(&b).unwrap(), m);
}

#[test]
fn golden_events_ring_repeats_cost_8_bytes() {
    // Three bullets of one ring: the first in full, the others as repeats.
    let a = spawn();
    let b = BulletSpawn { uid: 1001, pos: Vec2::new(100.25, 50.5), angle: 210.0, ..a }.quantized();
    let c = BulletSpawn { uid: 1002, angle: 330.0, tick: 76, ..b }.quantized();
    let m = ServerMsg::Events {
        instance: 2,
        tick: 77,
        events: vec![WireEvent::Spawn(a), WireEvent::Spawn(b), WireEvent::Spawn(c)],
    };
    let bytes = m.encode();
    assert_eq!(
        hex(&bytes),
        "16 02 4d 00 00 00 03 01 00 d0 0f 03 91 01 ca 00 00 40 80 02 10 ac 02 01 20 02 91 01 ca 00 55 95 01 30 02 91 01 ca 00 ab ea 01"
    );
    assert_eq!(ServerMsg::decode(&bytes).unwrap(), m);
    // A repeat with nothing before it is malformed, not a panic.
    let bad = [22u8, 2, 77, 0, 0, 0, 1, 1, 32, 2, 0, 0, 0, 0, 0, 0];
    assert!(ServerMsg::decode(&bad).is_err());
}

#[test]
fn golden_snapshot() {
    let s = Snapshot {
        instance: 1,
        tick: 600,
        last_input_tick: Some(598),
        players: vec![SnapPlayer {
            id: 1,
            pos: Vec2::new(480.0, 600.125),
            hp: 90,
            flags: F_SPAWN_GRACE,
            escape: 0,
            aim: 192,
        }],
        enemies: vec![SnapEnemy { id: 3, def: 2, pos: Vec2::new(10.0, 20.0), hp: 60 }],
        boss: Some(SnapBoss { def: 1, pos: Vec2::new(480.0, 160.0), hp: 2000, max_hp: 2400, phase: 1 }),
    };
    let m = ServerMsg::Snapshot(s);
    let b = m.encode();
    assert_eq!(
        hex(&b),
        "1e 01 58 02 00 00 03 01 01 00 0f c1 12 5a 01 00 c0 01 03 02 50 00 a0 00 3c 01 01 00 0f 00 05 d0 0f e0 12 01"
    );
    assert_eq!(ServerMsg::decode(&b).unwrap(), m);
    assert!(b.len() < 1200, "snapshots stay far under one MTU");
}

#[test]
fn round_trips_for_every_message() {
    let msgs = vec![
        ServerMsg::Reject(RejectReason::ContentTimeout),
        ServerMsg::Reject(RejectReason::ServerFull { max: 16 }),
        ServerMsg::Reject(RejectReason::Kicked { reason: "bye".into() }),
        ServerMsg::Reject(RejectReason::TooManyMalformed),
        ServerMsg::Stats { inputs_dropped: 3, ticks_coasted: 99 },
        ServerMsg::Enter { instance: 7, tick: 1234, dungeon: "warden_keep".into(), arena: (960, 720) },
        ServerMsg::Roster { instance: 7, players: vec![(1, "a".into()), (20, "bee".into())] },
        ServerMsg::Events {
            instance: 7,
            tick: 1234,
            events: vec![
                WireEvent::Spawn(
                    BulletSpawn {
                        uid: 5,
                        team: Team::Player,
                        accel: 0.05,
                        turn: -1.5,
                        max_speed: 6.0,
                        tick: 1230,
                        ..spawn()
                    }
                    .quantized(),
                ),
                WireEvent::Despawn { uid: 4 },
                WireEvent::Cleared,
                WireEvent::Sfx { name: "shotgun".into(), pos: Vec2::new(1.25, 2.5) },
                WireEvent::Hit { uid: 9, target: WireTarget::Enemy(12) },
            ],
        },
    ];
    for m in msgs {
        assert_eq!(ServerMsg::decode(&m.encode()).unwrap(), m);
    }
}

#[test]
fn the_encoding_is_a_validator() {
    // No frame on the wire can ask for more than full speed, NaN, or unknown buttons.
    let f = InputFrame { tick: 1, mv: Vec2::new(f32::NAN, 7.0), aim: f32::INFINITY, buttons: 0xff };
    let w = WireInput::from_frame(&f);
    assert_eq!((w.mx, w.my, w.buttons), (0, 100, 7));
    let back = w.to_frame(1);
    assert!(back.mv.length() <= 1.0 + 1e-6 || back.mv.x.abs() <= 1.0 && back.mv.y.abs() <= 1.0);
    // Hand-made bytes that claim more are refused, not clamped into something legal.
    let mut b = ClientMsg::Input { newest_tick: 1, frames: vec![w] }.encode();
    b[6] = 101;
    assert!(ClientMsg::decode(&b).is_err());
    let mut b = ClientMsg::Input { newest_tick: 1, frames: vec![w] }.encode();
    b[10] = 0x08;
    assert!(ClientMsg::decode(&b).is_err(), "unknown button bit");
    let b = [2u8, 4, 0, 0, 0, 0];
    assert!(ClientMsg::decode(&b).is_err(), "more than three frames");
}

#[test]
fn hostile_bytes_never_panic_and_never_overallocate() {
    let mut rng = hailfire::sim::rng::Rng::new(1);
    let seeds: Vec<Vec<u8>> = vec![
        ClientMsg::Hello { version: 1, content: ContentDigest([9; 32]), name: "x".into() }.encode(),
        ServerMsg::ContentOffer { digest: ContentDigest([1; 32]), raw_len: 5000, packed_len: 900 }.encode(),
        ServerMsg::ContentChunk { offset: 77, data: vec![5; 40] }.encode(),
        ServerMsg::Snapshot(Snapshot {
            instance: 1,
            tick: 2,
            last_input_tick: None,
            players: vec![],
            enemies: vec![],
            boss: None,
        })
        .encode(),
        ServerMsg::Events { instance: 1, tick: 2, events: vec![WireEvent::Spawn(spawn())] }.encode(),
        ServerMsg::Roster { instance: 1, players: vec![(1, "a".into())] }.encode(),
    ];
    for k in 0..200_000u32 {
        let mut b = if k.is_multiple_of(2) {
            let n = (rng.next_u64() % 80) as usize;
            (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>()
        } else {
            let mut s = seeds[(k as usize / 2) % seeds.len()].clone();
            for _ in 0..1 + rng.next_u64() % 4 {
                if s.is_empty() {
                    break;
                }
                let i = (rng.next_u64() as usize) % s.len();
                s[i] = rng.next_u64() as u8;
            }
            if rng.next_u64().is_multiple_of(4) {
                s.truncate((rng.next_u64() as usize) % (s.len() + 1));
            }
            s
        };
        if k.is_multiple_of(7) && !b.is_empty() {
            b[0] = [1u8, 2, 10, 11, 12, 20, 21, 22, 30][(k as usize / 7) % 9];
        }
        let _ = ClientMsg::decode(&b);
        let _ = ServerMsg::decode(&b);
        let _ = ClientMsg::hello_version(&b);
    }
    // Counts that claim more elements than the bytes could hold are refused up front.
    let b = [21u8, 1, 0xff, 0xff, 0xff, 0x0f];
    assert!(ServerMsg::decode(&b).is_err());
}

#[test]
fn channels_deliver_as_documented() {
    assert_eq!(delivery(CH_CONTROL), Delivery::Reliable);
    assert_eq!(delivery(CH_EVENTS), Delivery::Reliable);
    assert_eq!(delivery(CH_SNAPSHOT), Delivery::Unreliable { sequenced: true });
    assert_eq!(delivery(CH_INPUT), Delivery::Unreliable { sequenced: true });
    assert_ne!(CH_SNAPSHOT, CH_EVENTS, "a burst of bullet events never holds back snapshots");
}
