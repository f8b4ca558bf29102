//! The wire format: golden byte fixtures (a change to the bytes must bump
//! PROTOCOL_VERSION and update these), round trips, the encoding as a validator, and
//! decoding hostile bytes without a panic.

use hailfire::protocol::content::ContentDigest;
use hailfire::protocol::messages::*;
use hailfire::protocol::*;
use hailfire::sim::bullets::Burst;
use hailfire::sim::script::Telegraph;
use hailfire::sim::{BulletSpawn, InputFrame, Team, Vec2};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn protocol_version_is_pinned_by_these_fixtures() {
    assert_eq!(PROTOCOL_VERSION, 13, "a new version: update the fixtures below and the history");
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
fn golden_people_and_its_bounds() {
    let m = ServerMsg::People(vec![("Ann".into(), String::new()), ("Bo".into(), "warden_keep".into())]);
    assert_eq!(hex(&m.encode()), "17 02 03 41 6e 6e 00 02 42 6f 0b 77 61 72 64 65 6e 5f 6b 65 65 70");
    assert_eq!(ServerMsg::decode(&m.encode()).unwrap(), m);
    // A count past the limit, or past what the bytes hold, is refused.
    assert!(ServerMsg::decode(&[0x17, 0x81, 0x02]).is_err(), "257 people");
    assert!(ServerMsg::decode(&[0x17, 0x05, 0x00, 0x00]).is_err(), "5 people in 2 bytes");
    // A name longer than a player's may be is refused.
    let mut long = vec![0x17, 0x01, 25];
    long.extend_from_slice(&[b'a'; 25]);
    long.push(0);
    assert!(ServerMsg::decode(&long).is_err());
}

#[test]
fn golden_choose_ship() {
    let m = ClientMsg::ChooseShip { ship: 3 };
    assert_eq!(hex(&m.encode()), "06 03");
    assert_eq!(ClientMsg::decode(&m.encode()).unwrap(), m);
    assert!(ClientMsg::decode(&[6, 0x80, 0x80, 0x04]).is_err(), "a number past u16");
}

#[test]
fn golden_admin_and_its_limits() {
    let m = ClientMsg::Admin { password: "pw".into(), command: "kick 3".into() };
    assert_eq!(hex(&m.encode()), "05 02 70 77 06 6b 69 63 6b 20 33");
    assert_eq!(ClientMsg::decode(&m.encode()).unwrap(), m);
    // An empty password is an operator's command (taken on their key); no command, or
    // one past its limit, cannot be expressed.
    let op = ClientMsg::Admin { password: String::new(), command: "x".into() };
    assert_eq!(hex(&op.encode()), "05 00 01 78");
    assert_eq!(ClientMsg::decode(&[5, 0, 1, b'x']).unwrap(), op);
    assert!(ClientMsg::decode(&[5, 1, b'p', 1, b' ']).is_err(), "blank command");
    let mut long = vec![5u8, 1, b'p', 201];
    long.extend(vec![b'a'; 201]);
    assert!(ClientMsg::decode(&long).is_err(), "a command over 200 bytes");
    // The encoder cuts to the limit on a character boundary, so what it writes decodes.
    let m = ClientMsg::Admin { password: "pw".into(), command: "é".repeat(150) };
    let ClientMsg::Admin { command, .. } = ClientMsg::decode(&m.encode()).unwrap() else { panic!() };
    assert_eq!(command, "é".repeat(100));
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
    // A live update: the offer's layout under type 19.
    let update = ServerMsg::ContentUpdate { digest: d, raw_len: 300, packed_len: 200 };
    let u = update.encode();
    assert_eq!((hex(&u[..1]).as_str(), &u[1..], ServerMsg::decode(&u).unwrap()), ("13", &b[1..], update));
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
fn golden_input_three_frames_24_bytes() {
    let frames = vec![
        WireInput { mx: 100, my: -100, aim: 0x4000, buttons: 1 },
        WireInput { mx: 0, my: 50, aim: 0, buttons: 0 },
        WireInput { mx: -1, my: 0, aim: 0xffff, buttons: 7 },
    ];
    // The newest snapshot held is 5 ticks older than the newest frame: zigzag(5) + 1 = 11.
    let m = ClientMsg::Input {
        newest_tick: 0x01020304,
        snap_ack: Some(0x01020304 - 5),
        lead: 9,
        view: 12,
        frames: frames.clone(),
    };
    let b = m.encode();
    assert_eq!(b.len(), 24);
    assert_eq!(hex(&b), "02 03 04 03 02 01 0b 09 0c 64 9c 00 40 01 00 32 00 00 00 ff 00 ff ff 07");
    assert_eq!(ClientMsg::decode(&b).unwrap(), m);
    // No snapshot yet (0), and one newer than the frame (a negative distance) round trip.
    for ack in [None, Some(0x01020304 + 9), Some(0)] {
        let m = ClientMsg::Input { newest_tick: 0x01020304, snap_ack: ack, lead: 200, view: 0, frames: frames.clone() };
        assert_eq!(ClientMsg::decode(&m.encode()).unwrap(), m);
    }
}

#[test]
fn golden_welcome_and_reject() {
    let w =
        ServerMsg::Welcome { version: 1, player_id: 300, tick: 5, tick_rate: 60, name: "Hi".into(), motd: "yo".into() };
    assert_eq!(hex(&w.encode()), "0a 01 00 ac 02 05 00 00 00 3c 02 48 69 02 79 6f");
    let r = ServerMsg::Reject(RejectReason::VersionMismatch { server: 1, client: 2 });
    assert_eq!(hex(&r.encode()), "0b 01 01 00 02 00");
    let busy = ServerMsg::Reject(RejectReason::Busy);
    assert_eq!(hex(&busy.encode()), "0b 08", "reject code 8: busy (protocol 7)");
    let status = ServerMsg::RunStatus { flares: 2, charge: 17, grazes: 300, score: 5 };
    assert_eq!(hex(&status.encode()), "11 02 11 ac 02 05", "run status (protocol 8)");
    assert_eq!(ServerMsg::decode(&status.encode()).unwrap(), status);
    for m in [w, r, busy] {
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
        tick: 77,
        events: vec![
            WireEvent::Spawn(spawn()),
            WireEvent::Hit { uid: 999, target: WireTarget::Boss },
            WireEvent::Death { target: WireTarget::Player(4) },
            WireEvent::Phase { phase: 1 },
        ],
    };
    let b = m.encode();
    assert_eq!(hex(&b), "16 4d 01 00 d0 0f 03 91 01 ca 00 00 40 80 02 10 ac 02 09 01 01 04 00 04 05 01");
    // Spawn event: tag + 15 bytes here (a uid far from the previous one costs 2 extra).
    assert_eq!(ServerMsg::decode(&b).unwrap(), m);
}

fn burst() -> Burst {
    let shape = BulletSpawn { uid: 2000, accel: 0.04, max_speed: 4.0, ..spawn() };
    Burst::new(shape, 24, 12.5, 65536, 24, 0.0)
}

#[test]
fn golden_burst_a_whole_ring_in_about_20_bytes() {
    let b = burst();
    let m = ServerMsg::Events { tick: 77, events: vec![WireEvent::Burst(b)] };
    let bytes = m.encode();
    assert_eq!(hex(&bytes), "16 4d 08 0a a0 1f 18 03 91 01 ca 00 e4 08 80 80 04 18 80 02 10 ac 02 a4 00 00 04");
    assert!(bytes.len() - 5 <= 24, "24 bullets in {} bytes (24 separate spawns took 15 + 23 x 8)", bytes.len() - 5);
    assert_eq!(ServerMsg::decode(&bytes).unwrap(), m);
    // The expansion: 24 bullets, consecutive uids, a full turn in equal grid steps.
    let s: Vec<BulletSpawn> = b.spawns().collect();
    assert_eq!(s.len(), 24);
    assert_eq!(s[0].uid, 2000);
    assert_eq!(s[23].uid, 2023);
    assert_eq!(b.last_uid(), 2023);
    for (i, x) in s.iter().enumerate() {
        let q = hailfire::sim::bullets::grid::angle_q(x.angle) as u32;
        assert_eq!(q, (b.angle0 as u32 + (i as u32 * 65536) / 24) % 65536, "bullet {i}");
        assert_eq!(*x, x.quantized(), "on the grid");
        assert_eq!(
            (x.speed, x.accel, x.max_speed, x.pos),
            (b.shape.speed, b.shape.accel, b.shape.max_speed, b.shape.pos)
        );
    }
    // A spawn after a burst may repeat its shape, and uid deltas continue from its last.
    let after = BulletSpawn { uid: 2024, angle: 33.0, ..s[0] }.quantized();
    let m = ServerMsg::Events { tick: 77, events: vec![WireEvent::Burst(b), WireEvent::Spawn(after)] };
    let bytes2 = m.encode();
    assert_eq!(bytes2.len(), bytes.len() + 1 + 8, "the spawn after it is an 8-byte repeat");
    assert_eq!(ServerMsg::decode(&bytes2).unwrap(), m);
    // Counts and steps that cannot be expanded are refused.
    for (at, v) in [(6usize, 0u8), (17, 0)] {
        let mut bad = bytes.clone();
        bad[at] = v;
        assert!(ServerMsg::decode(&bad).is_err(), "byte {at} = {v}");
    }
}

#[test]
fn golden_events_ring_repeats_cost_8_bytes() {
    // Three bullets of one ring: the first in full, the others as repeats.
    let a = spawn();
    let b = BulletSpawn { uid: 1001, pos: Vec2::new(100.25, 50.5), angle: 210.0, ..a }.quantized();
    let c = BulletSpawn { uid: 1002, angle: 330.0, tick: 76, ..b }.quantized();
    let m = ServerMsg::Events { tick: 77, events: vec![WireEvent::Spawn(a), WireEvent::Spawn(b), WireEvent::Spawn(c)] };
    let bytes = m.encode();
    assert_eq!(
        hex(&bytes),
        "16 4d 01 00 d0 0f 03 91 01 ca 00 00 40 80 02 10 ac 02 01 20 02 91 01 ca 00 55 95 01 30 02 91 01 ca 00 ab ea 01"
    );
    assert_eq!(ServerMsg::decode(&bytes).unwrap(), m);
    // A repeat with nothing before it is malformed, not a panic.
    let bad = [22u8, 77, 1, 32, 2, 0, 0, 0, 0, 0, 0];
    assert!(ServerMsg::decode(&bad).is_err());
}

fn snapshot() -> Snapshot {
    Snapshot {
        instance: 1,
        tick: 600,
        last_input_tick: Some(598),
        report: Some(InputReport { max_need: 9, late: 1, missing: 2 }),
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
    }
}

#[test]
fn golden_snapshot_whole() {
    let s = snapshot();
    let m = SnapshotMsg::diff(None, &s, Some(1));
    let b = ServerMsg::Snapshot(m.clone()).encode();
    assert_eq!(
        hex(&b),
        "1e 01 d8 04 03 89 01 02 01 01 80 00 0f c1 12 5a 01 00 c0 01 01 00 0f 00 05 d0 0f e0 12 01 03 80 02 50 00 a0 00 3c"
    );
    assert_eq!(ServerMsg::decode(&b).unwrap(), ServerMsg::Snapshot(m.clone()));
    assert_eq!(m.apply(None).unwrap(), s, "a whole snapshot rebuilds exactly");
}

#[test]
fn delta_snapshots_carry_only_what_changed_and_rebuild_exactly() {
    let base = snapshot();
    let mut s = snapshot();
    s.tick = 603;
    s.last_input_tick = Some(601);
    s.report = Some(InputReport { max_need: 5, late: 0, missing: 0 });
    s.players[0].pos = Vec2::new(484.0, 600.125); // moved 4 px right: +32 on the 1/8 grid
    s.players[0].aim = 10;
    s.boss.as_mut().unwrap().hp = 1990;
    // The enemy is unchanged; a second one appears; a second player joins.
    s.enemies.push(SnapEnemy { id: 4, def: 0, pos: Vec2::new(30.0, 40.0), hp: 10 });
    s.players.push(SnapPlayer { id: 2, pos: Vec2::new(1.0, 2.0), hp: 100, flags: 0, escape: 0, aim: 0 });
    let m = SnapshotMsg::diff(Some(&base), &s, Some(1));
    assert_eq!(m.base, Some(600));
    let b = ServerMsg::Snapshot(m.clone()).encode();
    assert_eq!(
        hex(&b),
        "1e 01 db 04 13 06 02 01 41 40 00 02 80 08 00 10 00 64 00 00 00 02 02 c6 0f 03 00 04 80 00 f0 00 40 01 0a"
    );
    let whole = ServerMsg::Snapshot(SnapshotMsg::diff(None, &s, Some(1))).encode();
    assert!(b.len() + 8 < whole.len(), "a delta ({} bytes) is smaller than the whole ({} bytes)", b.len(), whole.len());
    let ServerMsg::Snapshot(back) = ServerMsg::decode(&b).unwrap() else { panic!() };
    // Base + delta = the new snapshot, except the receiver's own aim, which is not sent
    // (its ship is drawn with its own input's aim).
    let mut want = s.clone().quantized();
    want.players[0].aim = base.players[0].aim;
    assert_eq!(back.apply(Some(&base)).unwrap(), want, "base + delta = the new snapshot");
    // Without the base (or with another one) it is refused, not guessed.
    assert!(back.apply(None).is_err());
    let mut other = base.clone();
    other.tick = 597;
    assert!(back.apply(Some(&other)).is_err());
    // Entities gone from the new snapshot are gone from the rebuilt one.
    let mut gone = s.clone();
    gone.enemies.clear();
    gone.boss = None;
    let r = SnapshotMsg::diff(Some(&base), &gone, Some(1)).apply(Some(&base)).unwrap();
    assert!(r.enemies.is_empty() && r.boss.is_none());
}

#[test]
fn a_snapshot_always_fits_one_datagram_and_keeps_the_receiver() {
    let mut s = snapshot();
    s.players = (1..=200u32)
        .map(|id| SnapPlayer { id: id * 100_000, pos: Vec2::new(100.0, 100.0), hp: 1, flags: 0, escape: 0, aim: 0 })
        .collect();
    s.enemies = (0..500u32)
        .map(|id| SnapEnemy { id: id * 1_000_000, def: 300, pos: Vec2::new(5.0, 5.0), hp: 1_000_000 })
        .collect();
    let own = 200 * 100_000;
    let m = SnapshotMsg::diff(None, &s, Some(own));
    let b = ServerMsg::Snapshot(m.clone()).encode();
    assert!(b.len() <= SNAPSHOT_BUDGET + 64, "{} bytes", b.len());
    assert!(m.players.iter().any(|p| p.id == own), "the receiver is never the one left out");
    let r = m.apply(None).unwrap();
    assert!(!r.enemies.is_empty() && r.enemies.len() < 500);
}

#[test]
fn round_trips_for_every_message() {
    let msgs = vec![
        ServerMsg::Reject(RejectReason::ContentTimeout),
        ServerMsg::Reject(RejectReason::ServerFull { max: 16 }),
        ServerMsg::Reject(RejectReason::Kicked { reason: "bye".into() }),
        ServerMsg::Reject(RejectReason::TooManyMalformed),
        ServerMsg::Reject(RejectReason::Banned { reason: "griefing".into() }),
        ServerMsg::Reject(RejectReason::Busy),
        ServerMsg::RunStatus { flares: 1, charge: 3, grazes: 40, score: 1234 },
        ServerMsg::Records(vec![ServerRecord {
            dungeon: "warden_keep".into(),
            best_time_cs: 5330,
            best_score: 13_700,
            party: "bot-1, bot-2".into(),
        }]),
        ServerMsg::RunSummary(hailfire::sim::events::RunSummary {
            dungeon: "warden_keep".into(),
            outcome: hailfire::sim::events::RunOutcome::Cleared,
            ticks: 7200,
            team_score: 12_345,
            rows: vec![hailfire::sim::events::RunRow {
                id: 3,
                name: "Ann".into(),
                score: 4_000,
                stats: hailfire::sim::player::RunStats {
                    damage: 900,
                    kills: 7,
                    grazes: 40,
                    hits_taken: 2,
                    downs: 1,
                    revives: 1,
                    flares_used: 2,
                },
                out: false,
            }],
        }),
        ServerMsg::RunSummary(hailfire::sim::events::RunSummary {
            dungeon: "whirl_pit".into(),
            outcome: hailfire::sim::events::RunOutcome::Stopped,
            ticks: 90,
            team_score: 0,
            rows: vec![],
        }),
        ServerMsg::Notice { text: "[server] restart in 5 minutes".into() },
        ServerMsg::Welcome {
            version: PROTOCOL_VERSION,
            player_id: 9,
            tick: 1,
            tick_rate: 60,
            name: "Zoë's den".into(),
            motd: "be nice".into(),
        },
        ServerMsg::Stats { inputs_dropped: 3, ticks_coasted: 99 },
        ServerMsg::Enter { instance: 7, tick: 1234, dungeon: "warden_keep".into(), arena: (960, 720) },
        ServerMsg::Roster { instance: 7, players: vec![(1, "a".into(), 0), (20, "bee".into(), 3)] },
        ServerMsg::Events {
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
                WireEvent::Flare { player: 3, tick: 1233, pos: Vec2::new(123.456, 78.9) },
                WireEvent::Out { player: 4 },
                WireEvent::Revived { player: 4, by: 3 },
                WireEvent::Wave { wave: 2 },
                WireEvent::Telegraph(Telegraph {
                    pos: Vec2::new(100.5, 20.25),
                    angle: 90.0,
                    length: 900.0,
                    width: 2.0,
                    ticks: 24,
                    circle: false,
                    safe: false,
                }),
                WireEvent::Hint { text: "Hold {focus} to slow down".into() },
                WireEvent::Telegraph(Telegraph {
                    pos: Vec2::new(10.0, 30.0),
                    angle: 0.0,
                    length: 60.0,
                    width: 3.0,
                    ticks: 30,
                    circle: true,
                    safe: true,
                }),
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
    assert_eq!((w.mx, w.my, w.buttons), (0, 100, 31), "fire, interact, escape, focus, flare; nothing else");
    let back = w.to_frame(1);
    assert!(back.mv.length() <= 1.0 + 1e-6 || back.mv.x.abs() <= 1.0 && back.mv.y.abs() <= 1.0);
    // Hand-made bytes that claim more are refused, not clamped into something legal.
    let mut b = ClientMsg::Input { newest_tick: 1, snap_ack: None, lead: 4, view: 0, frames: vec![w] }.encode();
    b[9] = 101;
    assert!(ClientMsg::decode(&b).is_err());
    let mut b = ClientMsg::Input { newest_tick: 1, snap_ack: None, lead: 4, view: 0, frames: vec![w] }.encode();
    b[13] = 0x20;
    assert!(ClientMsg::decode(&b).is_err(), "unknown button bit");
    let mut b = vec![2u8, 9, 0, 0, 0, 0, 0, 4, 0];
    b.extend(std::iter::repeat_n([0u8; 5], 9).flatten());
    assert!(ClientMsg::decode(&b).is_err(), "more than eight frames");
}

#[test]
fn hostile_bytes_never_panic_and_never_overallocate() {
    let mut rng = hailfire::sim::rng::Rng::new(1);
    let seeds: Vec<Vec<u8>> = vec![
        ClientMsg::Hello { version: 1, content: ContentDigest([9; 32]), name: "x".into() }.encode(),
        ServerMsg::ContentOffer { digest: ContentDigest([1; 32]), raw_len: 5000, packed_len: 900 }.encode(),
        ServerMsg::ContentUpdate { digest: ContentDigest([1; 32]), raw_len: 5000, packed_len: 900 }.encode(),
        ServerMsg::ContentChunk { offset: 77, data: vec![5; 40] }.encode(),
        ServerMsg::Snapshot(SnapshotMsg::diff(None, &snapshot(), Some(1))).encode(),
        ServerMsg::Snapshot(SnapshotMsg::diff(Some(&snapshot()), &snapshot(), Some(1))).encode(),
        ServerMsg::Events { tick: 2, events: vec![WireEvent::Burst(burst())] }.encode(),
        ServerMsg::Events { tick: 2, events: vec![WireEvent::Spawn(spawn())] }.encode(),
        ServerMsg::Roster { instance: 1, players: vec![(1, "a".into(), 2)] }.encode(),
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

/// The fuzz seed corpus of the message decoders (`fuzz/corpus/`) is what the current
/// encoders write, and every seed decodes: a change to the wire fails here until the seeds
/// are rewritten with `HAILFIRE_WRITE_CORPUS=1 cargo test --test protocol fuzz_corpus`.
#[test]
fn fuzz_corpus_matches_the_encoders() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let write = std::env::var_os("HAILFIRE_WRITE_CORPUS").is_some();
    let mut seeds = 0;
    let mut w = |dir: &str, name: &str, bytes: Vec<u8>| {
        let path = root.join(dir).join(name);
        if write {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert_eq!(committed, bytes, "{} is stale: rewrite the seed corpus", path.display());
        let ok = match dir {
            "client_msg" => ClientMsg::decode(&bytes).is_ok(),
            "content" => hailfire::protocol::content::decode(&bytes).is_ok(),
            "replay" => hailfire::client::replay::Replay::decode(&bytes).is_ok(),
            _ => ServerMsg::decode(&bytes).is_ok(),
        };
        assert!(ok, "{} decodes", path.display());
        seeds += 1;
    };
    let frames = vec![WireInput { mx: 100, my: -100, aim: 0x4000, buttons: 1 }; 3];
    w(
        "client_msg",
        "hello",
        ClientMsg::Hello { version: PROTOCOL_VERSION, content: ContentDigest([3; 32]), name: "fuzz".into() }.encode(),
    );
    w(
        "client_msg",
        "input",
        ClientMsg::Input { newest_tick: 900, snap_ack: Some(897), lead: 6, view: 12, frames }.encode(),
    );
    w("client_msg", "content_want", ClientMsg::ContentWant.encode());
    w("client_msg", "content_ready", ClientMsg::ContentReady { digest: ContentDigest([3; 32]) }.encode());
    w(
        "server_msg",
        "welcome",
        ServerMsg::Welcome {
            version: PROTOCOL_VERSION,
            player_id: 3,
            tick: 900,
            tick_rate: 60,
            name: "A Hailfire server".into(),
            motd: "hello".into(),
        }
        .encode(),
    );
    w("server_msg", "notice", ServerMsg::Notice { text: "[server] hello".into() }.encode());
    w("client_msg", "admin", ClientMsg::Admin { password: "pw".into(), command: "status".into() }.encode());
    w("server_msg", "reject", ServerMsg::Reject(RejectReason::Kicked { reason: "bye".into() }).encode());
    w(
        "server_msg",
        "offer",
        ServerMsg::ContentOffer { digest: ContentDigest([1; 32]), raw_len: 5000, packed_len: 900 }.encode(),
    );
    w("server_msg", "chunk", ServerMsg::ContentChunk { offset: 0, data: vec![7; 64] }.encode());
    w(
        "server_msg",
        "update",
        ServerMsg::ContentUpdate { digest: ContentDigest([2; 32]), raw_len: 5000, packed_len: 900 }.encode(),
    );
    // The base game's client-side content, in the current format (themes and all).
    let base = hailfire::content::load(&[hailfire::content::ModRoot::Mod(hailfire::content::content_dir())]);
    w(
        "content",
        "base_content",
        hailfire::protocol::content::encode(&hailfire::sim::ClientDefs::from_defs(&base.defs)),
    );
    // The same with a mod's media: a sprite used by the first bullet kind, and a sound.
    let mut media = hailfire::sim::ClientDefs::from_defs(&base.defs);
    let file = |p: &str| std::sync::Arc::new(std::fs::read(root.join("..").join("..").join(p)).unwrap());
    media.sprites = vec![hailfire::sim::client_defs::MediaAsset {
        name: "petal".into(),
        bytes: file("mods/example_spiral/sprites/petal.png"),
    }];
    media.sounds = vec![hailfire::sim::client_defs::MediaAsset {
        name: "tick".into(),
        bytes: file("fuzz/corpus/media_sound/tiny.wav"),
    }];
    media.bullets[0].sprite = Some(0);
    assert!(hailfire::sim::client_defs::validate(&media).is_ok());
    w("content", "with_media", hailfire::protocol::content::encode(&media));
    // A replay of two ticks: the Welcome, then a notice; one keyframe.
    let tiny = hailfire::client::replay::Replay {
        protocol: PROTOCOL_VERSION,
        spectator: false,
        name: "fuzz".into(),
        started: 1_700_000_000,
        content: hailfire::protocol::content::ClientContent::new(hailfire::sim::ClientDefs::from_defs(&base.defs)),
        frames: vec![
            hailfire::client::replay::Frame {
                now_ms: 16.0,
                rtt_ms: 40.0,
                input: Default::default(),
                packets: vec![(
                    CH_CONTROL,
                    ServerMsg::Welcome {
                        version: PROTOCOL_VERSION,
                        player_id: 1,
                        tick: 60,
                        tick_rate: 60,
                        name: "s".into(),
                        motd: String::new(),
                    }
                    .encode(),
                )],
            },
            hailfire::client::replay::Frame {
                now_ms: 32.5,
                rtt_ms: 41.0,
                input: Default::default(),
                packets: vec![(CH_CONTROL, ServerMsg::Notice { text: "hi".into() }.encode())],
            },
        ],
        keyframes: vec![hailfire::client::replay::Keyframe { frame: 0, tick: 0, bullets: 0, hash: [7; 32] }],
    };
    w("replay", "tiny", tiny.encode());
    let a = spawn();
    let b = BulletSpawn { uid: 1001, angle: 210.0, ..a }.quantized();
    w(
        "server_msg",
        "events",
        ServerMsg::Events {
            tick: 77,
            events: vec![
                WireEvent::Spawn(a),
                WireEvent::Hit { uid: 999, target: WireTarget::Boss },
                WireEvent::Hit { uid: 1000, target: WireTarget::Boss },
                WireEvent::Hit { uid: 998, target: WireTarget::Player(2) },
                WireEvent::Death { target: WireTarget::Enemy(4) },
                WireEvent::Phase { phase: 1 },
                WireEvent::Sfx { name: "shotgun".into(), pos: Vec2::new(3.0, 4.0) },
                WireEvent::Flare { player: 2, tick: 75, pos: Vec2::new(300.5, 200.25) },
                WireEvent::Out { player: 2 },
                WireEvent::Revived { player: 2, by: 1 },
                WireEvent::Wave { wave: 1 },
                WireEvent::Telegraph(Telegraph {
                    pos: Vec2::new(300.0, 100.0),
                    angle: 45.0,
                    length: 600.0,
                    width: 3.0,
                    ticks: 30,
                    circle: false,
                    safe: false,
                }),
            ],
        }
        .encode(),
    );
    w("server_msg", "run_status", ServerMsg::RunStatus { flares: 2, charge: 39, grazes: 1000, score: 99_999 }.encode());
    w(
        "server_msg",
        "repeat_spawns",
        ServerMsg::Events { tick: 77, events: vec![WireEvent::Spawn(a), WireEvent::Spawn(b)] }.encode(),
    );
    w(
        "server_msg",
        "burst",
        ServerMsg::Events { tick: 77, events: vec![WireEvent::Burst(burst()), WireEvent::Spawn(b)] }.encode(),
    );
    w("server_msg", "snapshot", ServerMsg::Snapshot(SnapshotMsg::diff(None, &snapshot(), Some(1))).encode());
    let mut next = snapshot();
    next.tick = 603;
    next.players[0].pos = Vec2::new(490.0, 590.0);
    next.boss.as_mut().unwrap().hp = 10;
    w(
        "server_msg",
        "snapshot_delta",
        ServerMsg::Snapshot(SnapshotMsg::diff(Some(&snapshot()), &next, Some(1))).encode(),
    );
    assert_eq!(seeds, 20, "every seed written above was checked");
}

#[test]
fn chained_deltas_on_the_coarse_grid_never_drift() {
    // A remote player (not the receiver) moving 1.3 px a snapshot, chained through twenty
    // deltas, each based on the previous rebuilt one: the rebuilt position stays within
    // half a coarse step (1/4 px) of the truth, and the receiver's own stays on 1/8 px.
    let mut truth = snapshot();
    truth.players.push(SnapPlayer { id: 2, pos: Vec2::new(100.0, 100.0), hp: 100, flags: 0, escape: 0, aim: 0 });
    let mut held = SnapshotMsg::diff(None, &truth, Some(1)).apply(None).unwrap();
    for k in 1..=20 {
        truth.tick += 3;
        truth.players[1].pos = Vec2::new(100.0 + 1.3 * k as f32, 100.0 - 0.7 * k as f32);
        truth.players[0].pos = Vec2::new(480.0 + 0.375 * k as f32, 600.125);
        let m = SnapshotMsg::diff(Some(&held), &truth, Some(1));
        assert!(m.players.iter().any(|p| p.id == 2 && !p.fine && !p.new && p.pos.is_some()), "a coarse delta");
        let bytes = ServerMsg::Snapshot(m.clone()).encode();
        let ServerMsg::Snapshot(back) = ServerMsg::decode(&bytes).unwrap() else { panic!() };
        let rebuilt = back.apply(Some(&held)).unwrap();
        assert_eq!(rebuilt, m.apply(Some(&held)).unwrap(), "server and client rebuild the same");
        let err = rebuilt.players[1].pos.distance(truth.players[1].pos);
        assert!(err <= 0.25 * std::f32::consts::SQRT_2 + 1e-4, "step {k}: remote off by {err} px");
        assert_eq!(rebuilt.players[0].pos, truth.players[0].pos, "the receiver's own position is exact");
        held = rebuilt;
    }
}

/// A player's unfocused fan is a burst whose count, spread, speed and lifetime are the
/// rules': on the wire it is about as large as one shot, and it decodes to the very burst.
#[test]
fn a_players_fan_travels_as_small_as_one_shot() {
    use hailfire::sim::bullets::Burst;
    use hailfire::sim::config::FAN_SHOTS;
    use hailfire::sim::instance::{fan_span, PLAYER_BULLET_LIFETIME, PLAYER_BULLET_SPEED};
    let shape = BulletSpawn {
        uid: 40,
        pos: Vec2::new(300.25, 410.5),
        angle: 0.0,
        speed: PLAYER_BULLET_SPEED,
        radius: 4.0,
        lifetime: PLAYER_BULLET_LIFETIME,
        kind: 1,
        team: Team::Player,
        accel: 0.0,
        turn: 0.0,
        max_speed: f32::INFINITY,
        tick: 500,
    };
    let fan = Burst::new(shape, FAN_SHOTS, 262.0, fan_span(), FAN_SHOTS - 1, 0.0);
    let m = ServerMsg::Events { tick: 500, events: vec![WireEvent::Burst(fan)] };
    let bytes = m.encode();
    assert_eq!(ServerMsg::decode(&bytes).unwrap(), m);
    assert!(bytes.len() <= 16, "{} bytes: {}", bytes.len(), hex(&bytes));
    // Anything else a player fires as a burst goes in full.
    let other = Burst::new(shape, FAN_SHOTS + 1, 262.0, fan_span(), FAN_SHOTS, 0.0);
    let m = ServerMsg::Events { tick: 500, events: vec![WireEvent::Burst(other)] };
    assert_eq!(ServerMsg::decode(&m.encode()).unwrap(), m);
    assert!(m.encode().len() > bytes.len());
}

/// Found by the fuzzer: an admin command with a right-to-left mark decoded, but re-encoded
/// (cleaned) to something else. Strings with invisible characters are now refused.
#[test]
fn strings_with_invisible_characters_are_refused_so_decoding_round_trips() {
    let bad = ClientMsg::Admin { password: "pw".into(), command: "kick\u{200F} 3".into() };
    let mut b = vec![T_ADMIN, 2, b'p', b'w'];
    let cmd = "kick\u{200F} 3".as_bytes();
    b.push(cmd.len() as u8);
    b.extend_from_slice(cmd);
    assert!(ClientMsg::decode(&b).is_err(), "{bad:?}");
    let crash: &[u8] = &[
        5, 50, 32, 59, 32, 32, 32, 32, 32, 32, 107, 48, 32, 42, 32, 40, 32, 32, 32, 41, 32, 32, 32, 233, 130, 136, 41,
        32, 32, 206, 136, 41, 38, 41, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 226, 128, 136, 41, 32, 41, 32,
        32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 226, 128, 136, 41, 32, 40, 32, 32, 226, 128, 143, 41, 32, 40, 32,
        32, 241, 130, 136, 136, 32,
    ];
    if let Ok(m) = ClientMsg::decode(crash) {
        assert_eq!(ClientMsg::decode(&m.encode()).as_ref(), Ok(&m));
    }
}

/// The client's whole vocabulary: greeting, input (movement, aim, buttons), content
/// download, admin commands, the ship it flies. Nothing else decodes, so there is no way to say "I grazed",
/// "my flare went off there", "I revived them" or "I hit that": flares, grazes, revives and
/// hits are decided by the server from the buttons alone (see `tests/simulation.rs`).
#[test]
fn a_client_has_no_message_for_a_graze_a_flare_a_revive_or_a_hit() {
    let mut rng = hailfire::sim::rng::Rng::new(3);
    let known = [T_HELLO, T_INPUT, T_CONTENT_WANT, T_CONTENT_READY, T_ADMIN, T_CHOOSE_SHIP];
    for t in 0..=255u8 {
        let mut decoded = 0;
        for _ in 0..200 {
            let n = (rng.next_u64() % 64) as usize;
            let mut b = vec![t];
            b.extend((0..n).map(|_| rng.next_u64() as u8));
            if ClientMsg::decode(&b).is_ok() {
                decoded += 1;
            }
        }
        if !known.contains(&t) {
            assert_eq!(decoded, 0, "type {t} is not a client message");
        }
    }
    // An input frame is movement, aim and five buttons; the flare is a button, its place
    // the server's idea of where the ship is.
    let f = WireInput { mx: 0, my: 0, aim: 0, buttons: hailfire::sim::player::BTN_FLARE };
    assert_eq!(f.to_frame(9).buttons, hailfire::sim::player::BTN_FLARE);
}

#[test]
fn themes_travel_in_the_content_and_a_hostile_one_is_refused() {
    use hailfire::content::{self, ModRoot};
    use hailfire::protocol::content::{decode, encode, validate};
    use hailfire::sim::ClientDefs;
    let c = content::load(&[ModRoot::Mod(content::content_dir())]);
    let defs = ClientDefs::from_defs(&c.defs);
    let back = decode(&encode(&defs)).unwrap();
    assert_eq!(back, defs, "themes round-trip");
    assert_eq!(back.hub.theme.background, hailfire::sim::defs::Backdrop::Runes);
    assert!(back.dungeons.iter().all(|d| validate(&back).is_ok() && d.theme.scale >= 8.0));
    // A server sending a floor the loader would never have loaded is refused.
    let mut bad = defs.clone();
    bad.hub.theme.scale = f32::NAN;
    assert!(validate(&decode(&encode(&bad)).unwrap()).unwrap_err().contains("hub: theme: scale"));
    let mut bad = defs.clone();
    bad.dungeons[0].theme.speed = 100.0;
    assert!(validate(&bad).unwrap_err().contains("theme: speed"));
    // An unknown backdrop number does not decode.
    let mut bytes = encode(&defs);
    // Backwards from the end: the ships and media, the music (f32, 3 x u8, u32), the wall,
    // speed, scale, two colours, the backdrop.
    let hub_theme_at = bytes.len() - 1 - encode_ships_len(&defs) - 11 - 1 - 4 - 4 - 3 - 3 - 1;
    assert_eq!(bytes[hub_theme_at], hailfire::sim::defs::Backdrop::Runes.code());
    bytes[hub_theme_at] = 9;
    assert!(decode(&bytes).is_err());
    // Bodies, difficulty and music travel too (format 4), and hostile ones are refused.
    assert!(back.enemies.iter().any(|e| e.body.shape != hailfire::sim::defs::BodyShape::Orb));
    assert!(back.dungeons.iter().all(|d| (1..=5).contains(&d.difficulty)));
    assert_ne!(back.dungeons[0].theme.music, back.hub.theme.music);
    let mut bad = defs.clone();
    bad.enemies[0].body.parts = 200;
    assert!(validate(&decode(&encode(&bad)).unwrap()).unwrap_err().contains("body: parts"));
    let mut bad = defs.clone();
    bad.bosses[0].body.spin = f32::INFINITY;
    assert!(validate(&decode(&encode(&bad)).unwrap()).unwrap_err().contains("body: spin"));
    let mut bad = defs.clone();
    bad.dungeons[0].difficulty = 9;
    assert!(validate(&decode(&encode(&bad)).unwrap()).unwrap_err().contains("difficulty 9"));
    let mut bad = defs.clone();
    bad.hub.theme.music.tempo = f32::NAN;
    assert!(validate(&decode(&encode(&bad)).unwrap()).unwrap_err().contains("music: tempo"));
    let mut bytes = encode(&defs);
    let key_at = bytes.len() - 1 - encode_ships_len(&defs) - 4 - 1 - 1 - 1;
    assert_eq!(bytes[key_at], hailfire::sim::defs::note_semitone(&defs.hub.theme.music.key).unwrap());
    bytes[key_at] = 12;
    assert!(decode(&bytes).is_err(), "a key past B");
    let mut bytes = encode(&defs);
    let wall_at = bytes.len() - 1 - encode_ships_len(&defs) - 11 - 1;
    assert_eq!(bytes[wall_at], defs.hub.theme.wall.code());
    bytes[wall_at] = 3;
    assert!(decode(&bytes).is_err(), "an unknown wall");
}

/// Bytes after the hub's theme: the ships, then the media (three empty lists: sprites,
/// sounds and sprite uses, as the base game has none).
fn encode_ships_len(d: &hailfire::sim::ClientDefs) -> usize {
    assert!(d.sprites.is_empty() && d.sounds.is_empty());
    let mut n = 1 + 3; // the count (under 128), the media
    for s in &d.ships {
        n += 1 + s.id.len() + 1 + s.name.len() + 1 + 3 + 6; // ..., stars, colour, body
    }
    n - 1
}

#[test]
fn a_telegraph_beyond_its_limits_is_refused() {
    let t = Telegraph {
        pos: Vec2::new(8.0, 16.0),
        angle: 180.0,
        length: 300.0,
        width: 4.0,
        ticks: 20,
        circle: false,
        safe: false,
    };
    let m = ServerMsg::Events { tick: 5, events: vec![WireEvent::Telegraph(t)] };
    let b = m.encode();
    assert_eq!(ServerMsg::decode(&b).unwrap(), m);
    // The last three bytes: width, ticks, kind.
    let n = b.len();
    assert_eq!(&b[n - 3..], &[4, 20, 0]);
    for (at, v, why) in [(n - 1, 4u8, "an unknown kind"), (n - 2, 0, "no ticks"), (n - 2, 241, "past 240 ticks")] {
        let mut bad = b.clone();
        bad[at] = v;
        assert!(ServerMsg::decode(&bad).is_err(), "{why} was accepted");
    }
    // An empty hint is nothing to show: refused.
    let h = ServerMsg::Events { tick: 5, events: vec![WireEvent::Hint { text: "x".into() }] }.encode();
    let mut empty = h[..h.len() - 2].to_vec();
    empty.push(0);
    assert!(ServerMsg::decode(&empty).is_err(), "an empty hint was accepted");
    assert!(ServerMsg::decode(&h).is_ok());
    // Lengths past the limit cannot be written (the encoder clamps) nor read.
    let mut bad = b.clone();
    bad[n - 5..n - 3].copy_from_slice(&5000u16.to_le_bytes());
    assert!(ServerMsg::decode(&bad).is_err(), "a 5000 px line was accepted");
}
