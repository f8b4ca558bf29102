//! The status query: one UDP datagram to a server's game port asks what it is, one answers.
//! It is how `hailfire servers --lan` and the Join menu find servers on the local network,
//! and how `hailfire servers --query` lets a monitoring script ask one server.
//!
//! It is answered by the server's secure layer before any session exists (like the cookie),
//! so it must not be usable to amplify traffic at a spoofed address:
//! - the query is padded to `QUERY_LEN` bytes and the answer is never longer than the query
//!   (the name and the message of the day are cut to fit);
//! - a server answers at most `MAX_ANSWERS_PER_ADDRESS` queries a second from one address
//!   and `MAX_ANSWERS_PER_SECOND` in all.
//!
//! Layouts (integers little-endian):
//! - query: `u8 9, u8 STATUS_VERSION, u32 nonce`, zero padding to `QUERY_LEN`;
//! - answer: `u8 10, u32 nonce, u8 STATUS_VERSION, u16 protocol, u16 players, u16 max,
//!   u16 port, u8 flags (1: password), [u8; 8] key (the start of the server's public key:
//!   tells two addresses of one server apart), str name, str motd` (str: u8 length, UTF-8).

use super::wire::{DecodeError, Reader, Writer};

pub const T_QUERY: u8 = 9;
pub const T_STATUS: u8 = 10;
pub const STATUS_VERSION: u8 = 1;
/// Size of a query, and the most an answer may take.
pub const QUERY_LEN: usize = 160;
/// Answers a server sends per second at most, in all and to one address (queries over
/// that are dropped): one address cannot use up the answers everyone else needs.
pub const MAX_ANSWERS_PER_SECOND: u32 = 256;
pub const MAX_ANSWERS_PER_ADDRESS: u32 = 4;

/// What a server says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStatus {
    pub protocol: u16,
    pub players: u16,
    pub max_players: u16,
    /// The game port (where players connect).
    pub port: u16,
    pub password: bool,
    pub key: [u8; 8],
    pub name: String,
    pub motd: String,
}

/// A query with this nonce.
pub fn query(nonce: u32) -> Vec<u8> {
    let mut q = vec![0u8; QUERY_LEN];
    q[0] = T_QUERY;
    q[1] = STATUS_VERSION;
    q[2..6].copy_from_slice(&nonce.to_le_bytes());
    q
}

/// The nonce of a well-formed query.
pub fn read_query(data: &[u8]) -> Option<u32> {
    (data.len() == QUERY_LEN && data[0] == T_QUERY && data[1] == STATUS_VERSION)
        .then(|| u32::from_le_bytes([data[2], data[3], data[4], data[5]]))
}

impl ServerStatus {
    /// The answer to a query with `nonce`, at most `QUERY_LEN` bytes: the message of the
    /// day, then the name, are cut (on character boundaries) to fit.
    pub fn answer(&self, nonce: u32) -> Vec<u8> {
        let head = 1 + 4 + 1 + 2 * 5 + 1 + 8;
        let room = QUERY_LEN - head - 2;
        let name = super::names::clip(&self.name, room.min(super::messages::MAX_SERVER_NAME));
        let motd = super::names::clip(&self.motd, room - name.len());
        let mut w = Writer::new();
        w.u8(T_STATUS);
        w.u32(nonce);
        w.u8(STATUS_VERSION);
        w.u16(self.protocol);
        w.u16(self.players);
        w.u16(self.max_players);
        w.u16(self.port);
        w.u8(self.password as u8);
        w.bytes(&self.key);
        w.str(&name);
        w.str(&motd);
        debug_assert!(w.buf.len() <= QUERY_LEN);
        w.buf
    }

    /// Reads an answer: its nonce and the status. Never panics on any input.
    pub fn read_answer(data: &[u8]) -> Result<(u32, ServerStatus), DecodeError> {
        if data.len() > QUERY_LEN {
            return Err(DecodeError::TooLarge(data.len()));
        }
        let mut r = Reader::new(data);
        if r.u8()? != T_STATUS {
            return Err(DecodeError::BadValue("status type"));
        }
        let nonce = r.u32()?;
        if r.u8()? != STATUS_VERSION {
            return Err(DecodeError::BadValue("status version"));
        }
        let s = ServerStatus {
            protocol: r.u16()?,
            players: r.u16()?,
            max_players: r.u16()?,
            port: r.u16()?,
            password: r.u8()? & 1 != 0,
            key: r.array()?,
            name: r.str(QUERY_LEN, "server name")?,
            motd: r.str(QUERY_LEN, "motd")?,
        };
        r.finish()?;
        Ok((nonce, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_and_never_outgrow_the_query() {
        let s = ServerStatus {
            protocol: 6,
            players: 3,
            max_players: 16,
            port: 24680,
            password: true,
            key: [7; 8],
            name: "Zoë's den".into(),
            motd: "be kind".into(),
        };
        let a = s.answer(99);
        assert_eq!(ServerStatus::read_answer(&a).unwrap(), (99, s.clone()));
        // The longest name and message of the day still fit in a query's size.
        let long = ServerStatus { name: "N".repeat(300), motd: "€".repeat(300), ..s };
        let a = long.answer(1);
        assert!(a.len() <= QUERY_LEN, "{} bytes", a.len());
        let (_, back) = ServerStatus::read_answer(&a).unwrap();
        assert_eq!(back.name, "N".repeat(48));
        assert!(back.motd.chars().all(|c| c == '€') && !back.motd.is_empty());
        assert_eq!(read_query(&query(5)), Some(5));
        assert_eq!(read_query(&query(5)[..100]), None, "a short query is not answered");
        // Truncations and garbage are errors, not panics.
        for n in 0..a.len() {
            assert!(ServerStatus::read_answer(&a[..n]).is_err());
        }
    }
}
