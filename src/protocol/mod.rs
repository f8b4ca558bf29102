//! The wire: protocol version, channels, and the two message enums with their compact
//! hand-written encodings (`messages`), over a bounded reader/writer (`wire`).
//! See `docs/PROTOCOL.md` for the full byte layouts and the reasoning behind them.

pub mod content;
pub mod messages;
pub mod names;
pub mod status;
pub mod wire;

pub use messages::{ClientMsg, RejectReason, ServerMsg, Snapshot, WireEvent, WireInput, WireTarget};
pub use wire::DecodeError;

/// Bumped on every change to the bytes on the wire.
///
/// History:
/// - 1: first version. Hello/Input up; Welcome/Reject/Stats, Enter/Roster/Events, Snapshot
///   down. Bullet spawns about 15 bytes on the `sim::bullets::grid` steps; snapshots with
///   1/8 px positions; input frames of 5 bytes sent three times.
/// - 2: a bullet spawn may be a "repeat" (spawn flag 32) of the previous spawn in its batch,
///   sending only uid, position, angle and tick: 8 bytes for each bullet after the first of
///   a ring, fan or spiral volley.
/// - 3: content at join. Hello carries a 32-byte SHA-256 content digest instead of a u64;
///   a different digest is no longer refused: the server answers `ContentOffer` and, on
///   `ContentWant`, streams its client-side content in `ContentChunk`s; the client answers
///   `ContentReady` before it is let in. Reject code 2 now means "content timed out".
///   Golden simulation hashes pinned: transcendental functions are the portable `libm`
///   ones, so bullets turn with musl's `sincosf` bits on every platform.
/// - 4: every datagram is sealed below ENet (`net::secure`: a Noise NX handshake after a
///   stateless cookie, then ChaCha20-Poly1305 with a replay window). The messages above
///   are unchanged; a version-3 game cannot reach a version-4 server at all.
/// - 5: network feel and bandwidth. Burst spawn events (a ring or fan is one event),
///   delta snapshots against the snapshot the client acknowledges in `Input`, the
///   one-byte input report in snapshots, coarse positions for other entities, hit runs
///   on the boss.
/// - 6: server operations. `Welcome` carries the server's name and message of the day;
///   `Notice` (type 15) brings the operator's words; reject code 7 "banned"; `Admin`
///   (type 5) lets a player with the admin password run console commands.
/// - 7: holding the door. Reject code 8 "busy" (too many joining at once); the status
///   query carries a cookie and the answer a joining count (status version 2); the secure
///   layer (version 3) refuses with a reason code, says `Busy` when it has no room, and
///   hands ENet only well-formed commands.
/// - 8: the game's rules. Input bits 8 focus and 16 flare; snapshot player flags 16 focus,
///   32 downed (then `hp` is the seconds left and `escape` the revive progress), 64 out;
///   events 10 flare (`var player, svar tick, f32 x, f32 y`: the replica clears what the
///   server cleared), 11 out, 12 revived, 13 wave cleared; `RunSummary` (type 16),
///   `RunStatus` (type 17) and `Records` (type 18) on CONTROL; a player's fan is burst
///   flag 64.
/// - 9: a run's outcome may be 3, "stopped by the server" (a mod's script worker was
///   lost and its fight could not go on).
/// - 10: looks and warnings. Event 14 "telegraph" (a script's warning line or circle before
///   an attack), event 15 "hint" (a script's words for the players); the roster carries
///   each player's ship; content format 4 (bodies of enemies, bosses and ships, a dungeon's
///   difficulty, a place's walls and music).
/// - 11: telegraph kind bit 1 "safe"; `ContentUpdate` (type 19, new looks while playing);
///   `Input` carries `u8 view` (lag compensation); client message 7 `Watch` (spectators).
/// - 12: content format 5 (mods' sprites and sounds, and which looks use a sprite);
///   `People` (type 23: who plays where, for the hub's Watch button).
/// - 13: players have keys (secure layer 4, Noise XX); `Admin` may carry an empty password
///   (an operator, known by their key); an answer to an admin command that was not done
///   starts with "admin command not done: ".
pub const PROTOCOL_VERSION: u16 = 13;

/// How a `Notice` of a fight the server stopped begins: the run summary shows it.
pub const STOPPED_NOTICE: &str = "The fight was stopped: ";

/// Handshake, rejection and stats: reliable.
pub const CH_CONTROL: u8 = 0;
/// Snapshots: unreliable sequenced, newest wins; never blocked by the event stream.
pub const CH_SNAPSHOT: u8 = 1;
/// Instance transitions, rosters, bullet spawns/despawns, hits, deaths, phases: reliable
/// ordered. Transitions share this channel with bullet events on purpose, so a client can
/// never receive a bullet of an instance before the message that put it there.
pub const CH_EVENTS: u8 = 2;
/// Client input: unreliable sequenced (each packet repeats the last frames).
pub const CH_INPUT: u8 = 3;
pub const CHANNEL_COUNT: usize = 4;

/// How a channel delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Reliable,
    /// Unreliable; sequenced means an older packet arriving after a newer one is dropped.
    Unreliable {
        sequenced: bool,
    },
}

pub fn delivery(channel: u8) -> Delivery {
    match channel {
        CH_SNAPSHOT | CH_INPUT => Delivery::Unreliable { sequenced: true },
        _ => Delivery::Reliable,
    }
}

/// Server snapshots per second (every third tick).
pub const SNAPSHOT_EVERY_TICKS: u32 = 3;
/// Default UDP port of a server.
pub const DEFAULT_PORT: u16 = 24_680;
