//! The network under attack, over real UDP on loopback: a server on 127.0.0.1 with two
//! honest bots fighting while attackers on 127.0.0.2 and up flood it, hold sessions and
//! slots, open half-open handshakes from many addresses, ask for extra ENet peers, make
//! ENet hold commands ahead of a gap, flood status queries and guess passwords. The same
//! scenarios are `hailfire bench --flood`. The scenarios run one at a time (each measures
//! what the machine can absorb).

mod common;
use common::base;

use std::sync::Mutex;

use hailfire::net::secure::{self, DEFAULT_SESSIONS_PER_ADDRESS};
use hailfire::server::flood::{run, Attack, Report};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn scenario(attack: Attack, secs: f64) -> Report {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&base(), attack, secs).expect("scenario ran");
    println!("{r}");
    r
}

fn attacker(r: &Report, what: &str) -> u64 {
    r.attacker.iter().find(|(k, _)| k == what).map(|(_, v)| *v).unwrap_or_else(|| panic!("no counter {what}"))
}

/// Both honest bots joined, played to the end and kept receiving snapshots (20 a second).
fn honest_played_through(r: &Report) {
    for (i, h) in r.honest.iter().enumerate() {
        assert!(h.playing_at_end && h.failure.is_none(), "honest bot {}: {h:?}\n{r}", i + 1);
        assert!(h.snapshots as f64 >= r.secs * 20.0 * 0.7, "honest bot {} got {} snapshots\n{r}", i + 1, h.snapshots);
    }
}

#[test]
fn honest_bots_play_through_a_garbage_flood_and_the_socket_keeps_up() {
    let r = scenario(Attack::Garbage { rate: 8_000 }, 6.0);
    honest_played_through(&r);
    let sent = attacker(&r, "sent");
    assert!(sent as f64 >= 8_000.0 * 6.0 * 0.8, "the flood ran at its rate: {sent}");
    let refused = r.net.garbage + r.net.no_session;
    assert!(refused as f64 >= sent as f64 * 0.9, "the server read and refused the flood: {refused} of {sent}\n{r}");
    assert!(
        (r.net.kernel_dropped as f64) < sent as f64 * 0.01,
        "the kernel dropped {} datagrams for a full buffer\n{r}",
        r.net.kernel_dropped
    );
}

#[test]
fn one_address_holds_no_more_sessions_than_allowed_and_is_told_why() {
    let r = scenario(Attack::Sessions { tries: 10 }, 4.0);
    honest_played_through(&r);
    let got = attacker(&r, "connected");
    assert!(got as usize <= DEFAULT_SESSIONS_PER_ADDRESS, "one address got {got} sessions\n{r}");
    assert!(got >= 1, "an address gets its share\n{r}");
    assert!(attacker(&r, "told busy") >= 1 && r.net.busy >= 1, "{r}");
    assert!(r.notes.iter().any(|n| n.contains("connections from your address")), "{r}");
}

#[test]
fn half_open_handshakes_from_many_addresses_do_not_keep_an_honest_join_out() {
    let r = scenario(Attack::HalfOpen { addresses: 150 }, 5.0);
    honest_played_through(&r);
    assert!(attacker(&r, "hellos") >= 150 * 8 * 3, "{r}");
    assert!(r.net.handshakes >= 150 * 4, "the server did the handshakes: {r}");
}

#[test]
fn one_session_gets_one_enet_peer() {
    let r = scenario(Attack::Peers { connects: 17 }, 3.0);
    honest_played_through(&r);
    assert_eq!(attacker(&r, "peers verified"), 1, "{r}");
    assert!(r.net.extra_peers >= 10, "{r}");
}

#[test]
fn commands_ahead_of_a_gap_cut_the_session_before_memory_grows() {
    let r = scenario(Attack::Memory, 5.0);
    honest_played_through(&r);
    assert_eq!(attacker(&r, "peers verified"), 1, "the attacker's ENet peer was connected: {r}");
    assert_eq!(r.net.cut_for_memory, 1, "{r}");
    assert!(r.net.enet_refused >= 1, "zero-length commands tagged to wait are refused: {r}");
    assert!(r.max_tick_ms < 50.0, "no tick stalls on what ENet holds (352 ms without the guard): {r}");
    let grew = r.rss_peak_kb.saturating_sub(r.rss_start_kb);
    assert!(grew < 8 * 1024, "memory grew {grew} KiB\n{r}");
    assert!(attacker(&r, "commands sent") >= secure::guard::MAX_AHEAD as u64, "{r}");
}

#[test]
fn a_real_status_query_is_answered_through_a_flood_of_queries_from_many_addresses() {
    let r = scenario(Attack::Status { addresses: 128 }, 4.0);
    honest_played_through(&r);
    assert!(r.notes.iter().any(|n| n.contains("status query was answered")), "{r}");
    assert!(r.net.status_cookies > 0, "the unverified budget ran out and cookies went out instead: {r}");
    let answers = attacker(&r, "answers");
    let budget = hailfire::protocol::status::MAX_ANSWERS_PER_SECOND as f64 * (r.secs + 4.0);
    assert!((answers as f64) <= budget, "{answers} answers to unverified addresses\n{r}");
}

#[test]
fn password_guesses_from_many_addresses_are_capped_for_the_whole_server() {
    let r = scenario(Attack::Passwords { addresses: 24 }, 8.0);
    honest_played_through(&r);
    let answered = r.net.refused_passwords as f64;
    let cap = secure::GLOBAL_GUESS_BURST + (r.secs + 12.0) / secure::GLOBAL_GUESS_REFILL.as_secs_f64();
    assert!(answered <= cap, "{answered} guesses answered (cap {cap})\n{r}");
    assert!(attacker(&r, "guesses") as f64 > answered * 2.0, "far more were tried: {r}");
}

#[test]
fn parked_joiners_never_fill_the_players_slots() {
    let r = scenario(Attack::Joiners { addresses: 4, each: 4 }, 4.0);
    honest_played_through(&r);
    let parked = attacker(&r, "parked");
    assert!(parked as usize <= hailfire::server::max_joining(8), "{r}");
    assert!(attacker(&r, "told busy") >= 1 && r.joins_refused_busy >= 1, "{r}");
    assert_eq!(r.players_at_end, 2, "{r}");
}
