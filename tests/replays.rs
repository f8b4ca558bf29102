//! Replays: a session recorded over a far link plays back bit for bit through a fresh
//! client (every keyframe's bullets checked), seeking back and forth lands on the states
//! playing straight through reaches, a recording with one packet lost is caught, and
//! hostile or foreign files are refused with a reason.

mod common;

use std::sync::Arc;

use hailfire::client::bot::{Brain, Plan};
use hailfire::client::replay::{Keyframe, Player, Replay, ReplayError, FORMAT, KEYFRAME_EVERY, MAX_BODY};
use hailfire::net::LinkProfile;
use hailfire::protocol::messages::ServerMsg;
use hailfire::protocol::WireEvent;
use hailfire::protocol::PROTOCOL_VERSION;
use hailfire::server::ServerConfig;
use hailfire::stepper::Stepper;

/// A dodging bot's first `seconds` in the Warden's Keep over the far link (200 ms, 30 ms
/// jitter, 10 % loss), recorded.
fn recorded(seconds: u32) -> Replay {
    let mut st = Stepper::new(common::base(), ServerConfig::default());
    st.add_client("pilot", LinkProfile::FAR);
    st.clients[0].record();
    let mut brain = Brain::new(Plan::Dodge, "warden_keep", 5);
    for _ in 0..seconds * 60 {
        st.step(|_, cl| brain.think(cl));
    }
    let r = st.clients[0].recording().expect("a recording once joined");
    // What the recording client ended with is what a replay must end with.
    let last = Keyframe::of(0, st.clients[0].view.as_ref().map(|v| &v.replica));
    let bytes = r.encode();
    let back = Replay::decode(&bytes).expect("the file reads back");
    assert_eq!(back.frames, r.frames);
    let mut p = Player::new(Arc::new(back.clone()));
    while p.step() {}
    let end = Keyframe::of(0, p.client.view.as_ref().map(|v| &v.replica));
    assert_eq!(end, last, "the replay ends where the recorded client did");
    back
}

#[test]
fn a_far_link_session_replays_bit_for_bit_and_a_lost_packet_is_caught() {
    let r = recorded(40);
    assert!(r.seconds() > 38.0, "{} s", r.seconds());
    assert!(r.keyframes.len() >= 7, "{} keyframes", r.keyframes.len());
    assert!(r.keyframes.iter().any(|k| k.bullets > 20), "the fight had bullets: {:?}", r.keyframes);
    let (n, _) = Player::new(Arc::new(r.clone())).check().expect("the replay re-simulates bit for bit");
    assert_eq!(n, r.keyframes.len());
    // The events that spawned bullets in the two seconds before a keyframe after 20 s
    // lost from the recording: those bullets are missing at the keyframe, and the check
    // says when.
    let mut cut = r.clone();
    let k = r.keyframes.iter().find(|k| k.frame >= 20 * 60).expect("a keyframe after 20 s").frame as usize;
    let spawns = |d: &[u8]| match ServerMsg::decode(d) {
        Ok(ServerMsg::Events { events, .. }) => {
            events.iter().any(|e| matches!(e, WireEvent::Spawn(_) | WireEvent::Burst(_)))
        }
        _ => false,
    };
    let mut lost = 0;
    for f in &mut cut.frames[k - 120..k] {
        let before = f.packets.len();
        f.packets.retain(|(_, d)| !spawns(d));
        lost += before - f.packets.len();
    }
    assert!(lost > 0, "the fight spawned bullets before the keyframe");
    let e = Player::new(Arc::new(cut)).check().unwrap_err();
    assert!(e.contains("differs from the recording at"), "{e}");
}

#[test]
fn a_keyframe_tells_apart_replicas_that_differ_in_one_bullet_by_one_bit() {
    let r = Arc::new(recorded(12));
    let mut p = Player::new(r);
    p.seek(11 * 60);
    let replica = &p.client.view.as_ref().expect("in a place").replica;
    let live = (0..replica.pool.len()).find(|&i| replica.pool.life[i] > 0).expect("a live bullet at 11 s");
    let same = Keyframe::of(1, Some(replica));
    assert_eq!(same, Keyframe::of(1, Some(&replica.clone())));
    // The same count and tick, one coordinate one bit off: another hash.
    for field in 0..3 {
        let mut other = replica.clone();
        match field {
            0 => other.pool.x[live] = f32::from_bits(other.pool.x[live].to_bits() ^ 1),
            1 => other.pool.vy[live] = f32::from_bits(other.pool.vy[live].to_bits() ^ 1),
            _ => other.pool.kind[live] ^= 1,
        }
        let k = Keyframe::of(1, Some(&other));
        assert_eq!((k.tick, k.bullets), (same.tick, same.bullets));
        assert_ne!(k.hash, same.hash, "field {field}");
    }
}

#[test]
fn seeking_back_and_forth_lands_on_the_states_playing_straight_through_reaches() {
    let r = Arc::new(recorded(30));
    let state = |p: &Player| {
        let own =
            p.client.interpolated().and_then(|s| s.players.first().map(|pl| (pl.pos.x.to_bits(), pl.pos.y.to_bits())));
        (Keyframe::of(0, p.client.view.as_ref().map(|v| &v.replica)), own, p.client.est.to_bits())
    };
    let targets = [25 * 60 + 17, 7 * 60 + 3, 19 * 60, KEYFRAME_EVERY as usize * 2, 1];
    // Straight through, from a fresh start each time.
    let mut straight = Vec::new();
    for &t in &targets {
        let mut p = Player::new(r.clone());
        for _ in 0..t {
            assert!(p.step());
        }
        straight.push(state(&p));
    }
    // One player seeking back and forth through the same moments (backwards from the
    // nearest keyframe it kept; forwards by playing on).
    let mut p = Player::new(r.clone());
    p.seek(r.frames.len());
    assert!(p.at_end());
    for (k, &t) in targets.iter().enumerate() {
        p.seek(t);
        assert_eq!(p.frame, t);
        assert_eq!(state(&p), straight[k], "seeking to tick {t}");
    }
    // Forward from behind, past a keyframe, and back again.
    p.seek(10);
    p.seek(targets[0]);
    assert_eq!(state(&p), straight[0]);
}

#[test]
fn foreign_truncated_and_hostile_replay_files_are_refused_with_a_reason() {
    let r = recorded(6);
    let good = r.encode();
    assert!(Replay::decode(&good).is_ok());
    // Truncated anywhere: refused, never a panic.
    for cut in [0, 2, 3, 4, 7, 40, good.len() / 3, good.len() / 2, good.len() - 1] {
        let e = Replay::decode(&good[..cut]).unwrap_err();
        assert!(
            matches!(e, ReplayError::NotAReplay | ReplayError::Damaged(_) | ReplayError::Content(_)),
            "cut at {cut}: {e}"
        );
    }
    assert_eq!(Replay::decode(b"PNG....").unwrap_err(), ReplayError::NotAReplay);
    // A newer format or protocol: "update the game"; an older protocol: said so.
    let mut newer = good.clone();
    newer[3] = FORMAT + 1;
    let e = Replay::decode(&newer).unwrap_err();
    assert!(e.to_string().contains("newer Hailfire") && e.to_string().contains("update the game"), "{e}");
    let mut future = good.clone();
    future[4..6].copy_from_slice(&(PROTOCOL_VERSION + 1).to_le_bytes());
    let e = Replay::decode(&future).unwrap_err().to_string();
    assert!(e.contains(&format!("protocol {}", PROTOCOL_VERSION + 1)) && e.contains("update the game"), "{e}");
    let mut older = good.clone();
    older[4..6].copy_from_slice(&(PROTOCOL_VERSION - 1).to_le_bytes());
    let e = Replay::decode(&older).unwrap_err().to_string();
    assert!(e.contains("older Hailfire"), "{e}");
    // A body that claims more than the cap: refused before anything is inflated.
    let mut r2 = r.clone();
    r2.frames.truncate(1);
    let bomb = hostile_body(&r2, (MAX_BODY + 1) as u64, &[0u8; 16]);
    let e = Replay::decode(&bomb).unwrap_err().to_string();
    assert!(e.contains("claims") && e.contains(&MAX_BODY.to_string()), "{e}");
    // A deflate bomb: 50 MB of zeros that claim to be 100 bytes; inflation stops there.
    let zeros = miniz_oxide::deflate::compress_to_vec(&vec![0u8; 50 << 20], 9);
    let e = Replay::decode(&hostile_body(&r2, 100, &zeros)).unwrap_err().to_string();
    assert!(e.contains("does not inflate to the size it claims"), "{e}");
    // A frame count far past what the body holds.
    let mut body = Vec::new();
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]);
    let packed = miniz_oxide::deflate::compress_to_vec(&body, 6);
    let e = Replay::decode(&hostile_body(&r2, body.len() as u64, &packed)).unwrap_err();
    assert!(matches!(e, ReplayError::Damaged(_)), "{e}");
    // Content the game would refuse from a server is refused here too.
    let mut bad = good.clone();
    let content_at = good.windows(3).position(|w| w == b"HFC").expect("the content");
    bad[content_at + 3] = 99;
    assert!(matches!(Replay::decode(&bad).unwrap_err(), ReplayError::Content(_) | ReplayError::Damaged(_)));
}

/// `r`'s header (format, protocol, flags, name, time, content) with a body of our own:
/// `raw_len` claimed, `packed` as the deflated bytes.
fn hostile_body(r: &Replay, raw_len: u64, packed: &[u8]) -> Vec<u8> {
    let good = r.encode();
    // The header ends where the body's two lengths start: after the content.
    let content = &r.content.encoded;
    let at = good.windows(content.len()).position(|w| w == content.as_slice()).unwrap() + content.len();
    let mut out = good[..at].to_vec();
    let var = |mut v: u64, out: &mut Vec<u8>| loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    };
    var(raw_len, &mut out);
    var(packed.len() as u64, &mut out);
    out.extend_from_slice(packed);
    out
}
