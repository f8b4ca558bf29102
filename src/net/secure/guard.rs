//! What ENet may be handed from one session. The secure layer opens a client's datagram,
//! then this guard reads every ENet command in it before ENet sees a byte, and lets the
//! datagram through only when all of it is well formed and within bounds. The bounds are
//! checked before ENet allocates anything, so no session can make ENet hold more than
//! `MAX_AHEAD` reliable commands (each at most one datagram) however it numbers them.
//!
//! What an honest Hailfire client sends, and so all that passes:
//! - one ENet `CONNECT` per session (its repeats carry the same connect id): one peer;
//! - on reliable channels only `SEND_RELIABLE` and `SEND_FRAGMENT`; on unreliable channels
//!   only `SEND_UNRELIABLE` and `SEND_UNRELIABLE_FRAGMENT`, tagged with reliable sequence 0
//!   (those channels never carry a reliable command, so nothing waits on one);
//! - no zero-length data, fragments whose numbers add up, no compression, at most
//!   `MAX_COMMANDS` commands and at most one `PING` in a datagram (the acknowledgements a
//!   datagram makes ENet send are about as large as it is: 8 bytes for each command of at
//!   least 7; the address is proven by then, so this amplifies nothing);
//! - nothing but a `CONNECT` to "no peer yet", then the same peer id and session bits.
//!
//! ENet's wire format (all integers big-endian): a header `u16 peer id` (top bit: a `u16
//! sent time` follows; bit 14: compressed; bits 12-13: session), then commands, each
//! `u8 command (low 4 bits: kind; 0x80: acknowledge me; 0x40: unsequenced), u8 channel,
//! u16 reliable sequence number` and a body whose size depends on the kind (see
//! `docs/PROTOCOL.md`).

use crate::protocol::{delivery, Delivery, CHANNEL_COUNT};

/// Reliable commands a session may have ENet hold ahead of a gap in its sequence, over all
/// channels. An honest client rarely has more than a handful in flight.
pub const MAX_AHEAD: usize = 256;
/// Commands in one datagram (ENet itself never puts more than 32 in one).
pub const MAX_COMMANDS: usize = 32;
/// The largest message a client may send in fragments (the game's message limit).
const MAX_TOTAL: u32 = crate::protocol::messages::MAX_PACKET as u32;
/// Fragments are at least this large (ENet's smallest MTU, less headers), so a message has
/// at most `total / MIN_FRAGMENT + 1` of them.
const MIN_FRAGMENT: u32 = 512;
/// How far ahead of the next expected reliable number a command may be (ENet's own window
/// is at most 7 windows of 4,096; past this the datagram is refused).
const WINDOW: u16 = 7 * 4096;
/// How far behind the next expected number a repeat may be (an honest client repeats only
/// the few reliable commands it has in flight). Further behind is refused: the guard's
/// view and ENet's can then differ by at most this much, whatever a client tries.
pub const BEHIND: u16 = 128;
/// Fragmented messages a channel may have open at once.
const MAX_PARTIAL: usize = 4;
/// ENet's peer id for "no peer yet" (only a CONNECT may use it).
const NO_PEER: u16 = 0x0FFF;

const ACKNOWLEDGE: u8 = 1;
const CONNECT: u8 = 2;
const DISCONNECT: u8 = 4;
const PING: u8 = 5;
const SEND_RELIABLE: u8 = 6;
const SEND_UNRELIABLE: u8 = 7;
const SEND_FRAGMENT: u8 = 8;
const BANDWIDTH_LIMIT: u8 = 10;
const THROTTLE_CONFIGURE: u8 = 11;
const SEND_UNRELIABLE_FRAGMENT: u8 = 12;
const CONTROL_CHANNEL: u8 = 0xFF;

/// Why a datagram was not handed to ENet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Well formed and within bounds: hand it to ENet.
    Pass,
    /// Not what an honest client sends: dropped, counted.
    Malformed,
    /// A second ENet connection from one session: dropped, counted.
    ExtraPeer,
    /// More reliable commands ahead of a gap than `MAX_AHEAD`: the session is cut off.
    TooMuchAhead,
}

/// A fragmented message not yet whole: its first number, fragment count and total size,
/// and the numbers of the fragments that came.
#[derive(Clone, Debug)]
struct Partial {
    start: u16,
    count: u32,
    total: u32,
    got: Vec<u16>,
}

/// One session's view of what ENet holds for it.
#[derive(Default)]
pub struct Guard {
    connect_id: Option<u32>,
    /// The peer id and session bits every datagram after the connect carries.
    header: Option<u16>,
    /// The next reliable sequence number ENet will deliver, per channel.
    next: [u16; CHANNEL_COUNT],
    /// Reliable numbers (single commands, or whole fragmented messages) received ahead of
    /// `next`, per channel.
    ahead: [Vec<u16>; CHANNEL_COUNT],
    /// Fragmented messages still missing fragments, per channel (ENet holds them too).
    partial: [Vec<Partial>; CHANNEL_COUNT],
    /// Whether the session has asked ENet to disconnect.
    pub disconnected: bool,
}

fn be16(d: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([d[at], d[at + 1]])
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

/// A command's fixed size (header and body, before any data), or None for a kind a
/// client never sends.
fn fixed_size(kind: u8) -> Option<usize> {
    Some(match kind {
        ACKNOWLEDGE => 8,
        CONNECT => 48,
        DISCONNECT => 8,
        PING => 4,
        SEND_RELIABLE => 6,
        SEND_UNRELIABLE => 8,
        SEND_FRAGMENT | SEND_UNRELIABLE_FRAGMENT => 24,
        BANDWIDTH_LIMIT => 12,
        THROTTLE_CONFIGURE => 16,
        _ => return None,
    })
}

impl Guard {
    pub fn connected(&self) -> bool {
        self.connect_id.is_some()
    }

    /// Reliable commands ENet holds ahead of a gap for this session (fragments of messages
    /// not yet whole included).
    pub fn ahead(&self) -> usize {
        self.ahead.iter().map(Vec::len).sum::<usize>()
            + self.partial.iter().flatten().map(|p| p.got.len()).sum::<usize>()
    }

    /// Reads a whole datagram; on `Pass` the bookkeeping is updated as ENet will act.
    pub fn check(&mut self, d: &[u8]) -> Verdict {
        // First pass: the shape of every command, changing nothing.
        let Some(commands) = parse(d) else { return Verdict::Malformed };
        // ENet reads a datagram with no peer yet only for a CONNECT; every later one must
        // carry the peer id and session bits the first one did (ENet drops others whole,
        // and the guard must not count what ENet never saw).
        let header = be16(d, 0) & 0x3FFF;
        if header & 0x0FFF == NO_PEER {
            if commands.iter().any(|c| c.kind != CONNECT) {
                return Verdict::Malformed;
            }
        } else if self.header.is_some_and(|h| h != header) || self.connect_id.is_none() {
            return Verdict::Malformed;
        }
        let mut pings = 0;
        for c in &commands {
            let kind = c.kind;
            match kind {
                PING => pings += 1,
                CONNECT => {
                    let id = be32(d, c.at + 40);
                    if self.disconnected || self.connect_id.is_some_and(|known| known != id) {
                        return Verdict::ExtraPeer;
                    }
                }
                SEND_RELIABLE | SEND_FRAGMENT | SEND_UNRELIABLE | SEND_UNRELIABLE_FRAGMENT => {
                    let ch = c.channel as usize;
                    if ch >= CHANNEL_COUNT {
                        return Verdict::Malformed;
                    }
                    let reliable_channel = delivery(c.channel) == Delivery::Reliable;
                    let reliable_kind = matches!(kind, SEND_RELIABLE | SEND_FRAGMENT);
                    if reliable_channel != reliable_kind || (!reliable_kind && c.reliable != 0) {
                        return Verdict::Malformed;
                    }
                    if reliable_kind {
                        // Far behind (a number ENet delivered long ago) or beyond ENet's
                        // window: nothing an honest client sends.
                        let offset = c.reliable.wrapping_sub(self.next[ch]);
                        let behind = self.next[ch].wrapping_sub(c.reliable);
                        if offset >= WINDOW && behind > BEHIND {
                            return Verdict::Malformed;
                        }
                    }
                }
                _ => {}
            }
        }
        if pings > 1 || commands.len() > MAX_COMMANDS {
            return Verdict::Malformed;
        }
        if header & 0x0FFF != NO_PEER {
            self.header = Some(header);
        }
        // Second pass: what ENet will hold.
        for c in &commands {
            match c.kind {
                CONNECT => self.connect_id = Some(be32(d, c.at + 40)),
                DISCONNECT => self.disconnected = true,
                SEND_RELIABLE => {
                    let ch = c.channel as usize;
                    if !self.arrived(ch, c.reliable) {
                        return Verdict::TooMuchAhead;
                    }
                }
                SEND_FRAGMENT => {
                    let ch = c.channel as usize;
                    let start = be16(d, c.at + 4);
                    let (count, total) = (be32(d, c.at + 8), be32(d, c.at + 16));
                    if self.next[ch].wrapping_sub(start) <= BEHIND && start != self.next[ch] {
                        continue; // a repeat of a message delivered already
                    }
                    let open = &mut self.partial[ch];
                    let at = match open.iter().position(|p| p.start == start) {
                        Some(i) if open[i].count != count || open[i].total != total => return Verdict::Malformed,
                        Some(i) => i,
                        None => {
                            if open.len() >= MAX_PARTIAL {
                                return Verdict::TooMuchAhead;
                            }
                            open.push(Partial { start, count, total, got: Vec::new() });
                            open.len() - 1
                        }
                    };
                    if !open[at].got.contains(&c.reliable) {
                        open[at].got.push(c.reliable);
                    }
                    if open[at].got.len() as u32 >= count {
                        // Whole: ENet delivers it when its turn comes, as one message.
                        let p = open.swap_remove(at);
                        for k in 0..p.count {
                            let n = p.start.wrapping_add(k as u16);
                            if !self.arrived(ch, n) {
                                return Verdict::TooMuchAhead;
                            }
                        }
                    }
                    if self.ahead() > MAX_AHEAD {
                        return Verdict::TooMuchAhead;
                    }
                }
                _ => {}
            }
        }
        Verdict::Pass
    }

    /// A reliable number arrived whole on `ch`: ENet delivers it and any that follow
    /// when it is the next; otherwise it waits. False when that would exceed `MAX_AHEAD`.
    fn arrived(&mut self, ch: usize, n: u16) -> bool {
        let offset = n.wrapping_sub(self.next[ch]);
        if offset == 0 {
            self.next[ch] = self.next[ch].wrapping_add(1);
            while let Some(i) = self.ahead[ch].iter().position(|&s| s == self.next[ch]) {
                self.ahead[ch].swap_remove(i);
                self.next[ch] = self.next[ch].wrapping_add(1);
            }
        } else if offset < WINDOW && !self.ahead[ch].contains(&n) {
            if self.ahead() >= MAX_AHEAD {
                return false;
            }
            self.ahead[ch].push(n);
        }
        // Otherwise a repeat of one delivered: ENet acknowledges it and holds nothing.
        true
    }
}

impl Guard {
    /// A guard for a new session (ENet numbers each channel's reliable commands from 1).
    pub fn new() -> Self {
        Guard { next: [1; CHANNEL_COUNT], ..Default::default() }
    }
}

struct Command {
    kind: u8,
    channel: u8,
    reliable: u16,
    /// Where the command starts in the datagram.
    at: usize,
}

/// Splits a datagram into its commands, checking every size and field a client may send;
/// None when any of it is off.
fn parse(d: &[u8]) -> Option<Vec<Command>> {
    if d.len() < 2 {
        return None;
    }
    let peer = be16(d, 0);
    if peer & 0x4000 != 0 {
        return None; // compressed: we configure no compressor
    }
    let mut at = if peer & 0x8000 != 0 { 4 } else { 2 };
    let mut out = Vec::new();
    while at < d.len() {
        if d.len() - at < 4 || out.len() >= MAX_COMMANDS {
            return None;
        }
        let kind = d[at] & 0x0F;
        let flags = d[at] & 0xF0;
        let channel = d[at + 1];
        let reliable = be16(d, at + 2);
        let fixed = fixed_size(kind)?;
        if d.len() - at < fixed {
            return None;
        }
        let ack = flags & 0x80 != 0;
        // Unsequenced sends are not used (only a disconnect goes unsequenced); no other
        // flag bits exist.
        if flags & 0x30 != 0 || (flags & 0x40 != 0 && kind != DISCONNECT) {
            return None;
        }
        let mut data = 0usize;
        match kind {
            ACKNOWLEDGE => {
                if ack || channel != CONTROL_CHANNEL && channel as usize >= CHANNEL_COUNT {
                    return None;
                }
            }
            CONNECT | PING | BANDWIDTH_LIMIT | THROTTLE_CONFIGURE => {
                if !ack || channel != CONTROL_CHANNEL {
                    return None;
                }
                if kind == CONNECT && be32(d, at + 16) as usize != CHANNEL_COUNT {
                    return None;
                }
            }
            DISCONNECT => {
                if channel != CONTROL_CHANNEL {
                    return None;
                }
            }
            SEND_RELIABLE => {
                data = be16(d, at + 4) as usize;
                if !ack {
                    return None;
                }
            }
            SEND_UNRELIABLE => {
                data = be16(d, at + 6) as usize;
                if ack {
                    return None;
                }
            }
            SEND_FRAGMENT | SEND_UNRELIABLE_FRAGMENT => {
                data = be16(d, at + 6) as usize;
                let (count, number, total, offset) =
                    (be32(d, at + 8), be32(d, at + 12), be32(d, at + 16), be32(d, at + 20));
                let len = data as u32;
                let fits = total > 0
                    && total <= MAX_TOTAL
                    && count >= 2
                    && count <= total / MIN_FRAGMENT + 1
                    && number < count
                    && offset < total
                    && len <= total - offset;
                // The fragments of one message are numbered from its first one.
                let start = be16(d, at + 4);
                let numbered = kind == SEND_UNRELIABLE_FRAGMENT || reliable.wrapping_sub(start) as u32 == number;
                if !fits || !numbered || ack != (kind == SEND_FRAGMENT) {
                    return None;
                }
            }
            _ => return None,
        }
        if matches!(kind, SEND_RELIABLE | SEND_UNRELIABLE | SEND_FRAGMENT | SEND_UNRELIABLE_FRAGMENT) && data == 0 {
            return None;
        }
        if d.len() - at - fixed < data {
            return None;
        }
        out.push(Command { kind, channel, reliable, at });
        at += fixed + data;
    }
    // A datagram with no command at all is nothing ENet sends: only a keep-alive for a
    // session that never connects.
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CH_CONTROL, CH_INPUT};

    fn header() -> Vec<u8> {
        vec![0x80, 0x00, 0x12, 0x34] // peer 0 with a sent time
    }
    fn reliable(d: &mut Vec<u8>, ch: u8, seq: u16, len: u16) {
        d.extend_from_slice(&[0x80 | SEND_RELIABLE, ch]);
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(&len.to_be_bytes());
        d.extend(std::iter::repeat_n(7u8, len as usize));
    }
    fn unreliable(d: &mut Vec<u8>, ch: u8, rel: u16, useq: u16, len: u16) {
        d.extend_from_slice(&[SEND_UNRELIABLE, ch]);
        d.extend_from_slice(&rel.to_be_bytes());
        d.extend_from_slice(&useq.to_be_bytes());
        d.extend_from_slice(&len.to_be_bytes());
        d.extend(std::iter::repeat_n(7u8, len as usize));
    }
    /// A connect datagram: ENet sends it to "no peer yet" (0xFFF).
    fn connect_datagram(id: u32) -> Vec<u8> {
        let mut d = vec![0x8F, 0xFF, 0x12, 0x34];
        connect(&mut d, id);
        d
    }
    fn connected() -> Guard {
        let mut g = Guard::new();
        assert_eq!(g.check(&connect_datagram(1)), Verdict::Pass);
        g
    }
    fn fragment(ch: u8, seq: u16, start: u16, count: u32, number: u32, total: u32, len: u16) -> Vec<u8> {
        let mut d = header();
        d.extend_from_slice(&[0x80 | SEND_FRAGMENT, ch]);
        d.extend_from_slice(&seq.to_be_bytes());
        d.extend_from_slice(&start.to_be_bytes());
        d.extend_from_slice(&len.to_be_bytes());
        for v in [count, number, total, number * 1000] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        d.extend(std::iter::repeat_n(1u8, len as usize));
        d
    }
    fn connect(d: &mut Vec<u8>, id: u32) {
        d.extend_from_slice(&[0x80 | CONNECT, 0xFF, 0, 1, 0, 0, 0, 0]);
        for v in [1392u32, 65536, CHANNEL_COUNT as u32, 0, 0, 5000, 2, 2, id, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
    }

    #[test]
    fn honest_traffic_passes_and_advances_the_sequence() {
        let mut g = Guard::new();
        let d = connect_datagram(99);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.check(&d), Verdict::Pass, "a repeated connect is the same peer");
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 1, 10);
        reliable(&mut d, CH_CONTROL, 2, 10);
        unreliable(&mut d, CH_INPUT, 0, 5, 20);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.ahead(), 0);
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 4, 3);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.ahead(), 1, "4 waits for 3");
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 3, 3);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.ahead(), 0, "3 arrived: both delivered");
    }

    #[test]
    fn what_would_pile_up_in_enet_is_refused_before_it_gets_there() {
        let mut g = connected();
        assert_eq!(g.check(&connect_datagram(2)), Verdict::ExtraPeer, "a second peer from one session");
        let mut d = header();
        unreliable(&mut d, CH_INPUT, 0, 1, 0);
        assert_eq!(g.check(&d), Verdict::Malformed, "zero-length data");
        let mut d = header();
        unreliable(&mut d, CH_INPUT, 9, 1, 4);
        assert_eq!(g.check(&d), Verdict::Malformed, "unreliable waiting on a reliable that never comes");
        let mut d = header();
        unreliable(&mut d, CH_CONTROL, 0, 1, 4);
        assert_eq!(g.check(&d), Verdict::Malformed, "unreliable on a reliable channel");
        let mut d = header();
        for _ in 0..2 {
            d.extend_from_slice(&[0x80 | PING, 0xFF, 0, 1]);
        }
        assert_eq!(g.check(&d), Verdict::Malformed, "two pings in a datagram");
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 1, 4);
        d.push(0);
        assert_eq!(g.check(&d), Verdict::Malformed, "trailing bytes");
        // Reliable commands ahead of a gap: bounded, then the session is cut off.
        let mut verdict = Verdict::Pass;
        for seq in 2..(2 + MAX_AHEAD as u16 + 1) {
            let mut d = header();
            reliable(&mut d, CH_CONTROL, seq, 1);
            verdict = g.check(&d);
            if verdict != Verdict::Pass {
                break;
            }
        }
        assert_eq!(verdict, Verdict::TooMuchAhead);
        assert_eq!(g.ahead(), MAX_AHEAD);
    }

    #[test]
    fn fragments_must_add_up() {
        let frag = |count: u32, number: u32, total: u32, offset: u32, len: u16, seq: u16, start: u16| {
            let mut d = header();
            d.extend_from_slice(&[0x80 | SEND_FRAGMENT, CH_CONTROL]);
            d.extend_from_slice(&seq.to_be_bytes());
            d.extend_from_slice(&start.to_be_bytes());
            d.extend_from_slice(&len.to_be_bytes());
            for v in [count, number, total, offset] {
                d.extend_from_slice(&v.to_be_bytes());
            }
            d.extend(std::iter::repeat_n(1u8, len as usize));
            connected().check(&d)
        };
        assert_eq!(frag(2, 0, 2000, 0, 1000, 1, 1), Verdict::Pass);
        assert_eq!(frag(2, 1, 2000, 1000, 1000, 2, 1), Verdict::Pass);
        assert_eq!(frag(2, 2, 2000, 0, 100, 3, 1), Verdict::Malformed, "number past the count");
        assert_eq!(frag(1000, 0, 2000, 0, 100, 1, 1), Verdict::Malformed, "more fragments than bytes allow");
        assert_eq!(frag(2, 1, 2000, 1500, 1000, 2, 1), Verdict::Malformed, "past the end");
        assert_eq!(frag(2, 0, 2000, 0, 0, 1, 1), Verdict::Malformed, "empty fragment");
        assert_eq!(frag(2, 1, 2000, 1000, 100, 9, 1), Verdict::Malformed, "numbered off its start");
        assert_eq!(frag(40, 0, 1 << 20, 0, 100, 1, 1), Verdict::Malformed, "larger than any message");
    }

    /// What ENet never sees (or sees whole only later) must not move the guard's view
    /// ahead of ENet's: an unfinished fragmented message holds everything after it.
    #[test]
    fn an_unfinished_message_or_a_datagram_enet_drops_cannot_open_a_gap_unseen() {
        // Fragment 0 of 2 at number 1, then single commands 3, 4, ...: ENet waits at 1.
        let mut g = connected();
        assert_eq!(g.check(&fragment(CH_CONTROL, 1, 1, 2, 0, 2000, 100)), Verdict::Pass);
        let mut verdict = Verdict::Pass;
        for seq in 3..(3 + MAX_AHEAD as u16 + 2) {
            let mut d = header();
            reliable(&mut d, CH_CONTROL, seq, 1);
            verdict = g.check(&d);
            if verdict != Verdict::Pass {
                break;
            }
        }
        assert_eq!(verdict, Verdict::TooMuchAhead, "all of it counted: ENet holds it behind the open message");
        // The message completes: delivered with what follows.
        let mut g = connected();
        assert_eq!(g.check(&fragment(CH_CONTROL, 1, 1, 2, 0, 2000, 100)), Verdict::Pass);
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 3, 1);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.ahead(), 2);
        assert_eq!(g.check(&fragment(CH_CONTROL, 2, 1, 2, 1, 2000, 100)), Verdict::Pass);
        assert_eq!(g.ahead(), 0, "the whole message and number 3 went through");
        // A second opening of the same message with other sizes is refused.
        assert_eq!(g.check(&fragment(CH_CONTROL, 4, 4, 2, 0, 2000, 100)), Verdict::Pass);
        assert_eq!(g.check(&fragment(CH_CONTROL, 5, 4, 3, 1, 3000, 100)), Verdict::Malformed);
        // Sends to "no peer yet", or under another peer's header, never reach ENet.
        let mut g = connected();
        let mut d = vec![0x8F, 0xFF, 0, 0];
        reliable(&mut d, CH_CONTROL, 1, 1);
        assert_eq!(g.check(&d), Verdict::Malformed, "a send with no peer");
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 1, 1);
        assert_eq!(g.check(&d), Verdict::Pass);
        let mut d = vec![0x90, 0x01, 0, 0];
        reliable(&mut d, CH_CONTROL, 2, 1);
        assert_eq!(g.check(&d), Verdict::Malformed, "another peer's header");
        // Far behind: refused, so the two views never drift more than BEHIND apart.
        let mut d = header();
        reliable(&mut d, CH_CONTROL, 2u16.wrapping_sub(BEHIND + 5), 1);
        assert_eq!(g.check(&d), Verdict::Malformed);
        // Once disconnected, no new connection from this session.
        let mut d = header();
        d.extend_from_slice(&[0x80 | DISCONNECT, 0xFF, 0, 2, 0, 0, 0, 0]);
        assert_eq!(g.check(&d), Verdict::Pass);
        assert_eq!(g.check(&connect_datagram(1)), Verdict::ExtraPeer);
    }
}
