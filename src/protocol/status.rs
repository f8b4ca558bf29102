//! The status query: one UDP datagram to a server's game port asks what it is, one answers.
//! It is how `hailfire servers --lan` and the Join menu find servers on the local network,
//! and how `hailfire servers --query` lets a monitoring script ask one server.
//!
//! It is answered by the server's secure layer before any session exists (like the cookie),
//! so it must not be usable to amplify traffic at a spoofed address:
//! - the query is padded to `QUERY_LEN` bytes and the answer is never longer than the query
//!   (the name and the message of the day are cut to fit);
//! - a server answers at most `MAX_ANSWERS_PER_ADDRESS` queries a second from one address
//!   and `MAX_ANSWERS_PER_SECOND` in all to addresses it has not verified;
//! - past that, it answers with a 21-byte cookie (`MAX_COOKIES_PER_SECOND` at most): a
//!   querier whose address is real asks again with the cookie and is answered from a
//!   second budget (`MAX_VERIFIED_PER_SECOND`) that spoofed addresses cannot reach, so a
//!   flood from many forged addresses cannot starve a real monitoring query.
//!
//! Layouts (integers little-endian):
//! - query: `u8 9, u8 STATUS_VERSION, u32 nonce, [u8; 16] cookie` (zeros when it has
//!   none), zero padding to `QUERY_LEN`;
//! - cookie: `u8 11, u32 nonce, [u8; 16] cookie`: ask again with this cookie;
//! - answer: `u8 10, u32 nonce, u8 STATUS_VERSION, u16 protocol, u16 players, u16 joining,
//!   u16 max, u16 port, u8 flags (1: password), [u8; 8] key (the start of the server's
//!   public key: tells two addresses of one server apart), str name, str motd` (str: u8
//!   length, UTF-8).

use super::wire::{DecodeError, Reader, Writer};

pub const T_QUERY: u8 = 9;
pub const T_STATUS: u8 = 10;
pub const T_STATUS_COOKIE: u8 = 11;
pub const STATUS_VERSION: u8 = 2;
/// Size of a query, and the most an answer may take.
pub const QUERY_LEN: usize = 160;
/// Answers a server sends per second at most, in all and to one address (queries over
/// that are dropped): one address cannot use up the answers everyone else needs.
pub const MAX_ANSWERS_PER_SECOND: u32 = 256;
pub const MAX_ANSWERS_PER_ADDRESS: u32 = 4;
/// Answers per second to queries whose cookie proves their address.
pub const MAX_VERIFIED_PER_SECOND: u32 = 1024;
/// Cookie answers per second when the unverified budget is spent.
pub const MAX_COOKIES_PER_SECOND: u32 = 4096;
/// Size of a cookie answer.
pub const COOKIE_ANSWER_LEN: usize = 21;

/// What a server says about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStatus {
    pub protocol: u16,
    pub players: u16,
    /// Players downloading the content or otherwise on their way in.
    pub joining: u16,
    pub max_players: u16,
    /// The game port (where players connect).
    pub port: u16,
    pub password: bool,
    pub key: [u8; 8],
    pub name: String,
    pub motd: String,
}

/// A query with this nonce and no cookie.
pub fn query(nonce: u32) -> Vec<u8> {
    query_with(nonce, [0; 16])
}

/// A query with this nonce, carrying the cookie a server handed out.
pub fn query_with(nonce: u32, cookie: [u8; 16]) -> Vec<u8> {
    let mut q = vec![0u8; QUERY_LEN];
    q[0] = T_QUERY;
    q[1] = STATUS_VERSION;
    q[2..6].copy_from_slice(&nonce.to_le_bytes());
    q[6..22].copy_from_slice(&cookie);
    q
}

/// The nonce and cookie of a well-formed query.
pub fn read_query(data: &[u8]) -> Option<(u32, [u8; 16])> {
    if data.len() != QUERY_LEN || data[0] != T_QUERY || data[1] != STATUS_VERSION {
        return None;
    }
    let mut cookie = [0u8; 16];
    cookie.copy_from_slice(&data[6..22]);
    Some((u32::from_le_bytes([data[2], data[3], data[4], data[5]]), cookie))
}

/// The answer that asks a querier to come back with `cookie`.
pub fn cookie_answer(nonce: u32, cookie: [u8; 16]) -> Vec<u8> {
    let mut a = vec![T_STATUS_COOKIE];
    a.extend_from_slice(&nonce.to_le_bytes());
    a.extend_from_slice(&cookie);
    a
}

/// The nonce and cookie of a cookie answer.
pub fn read_cookie_answer(data: &[u8]) -> Option<(u32, [u8; 16])> {
    if data.len() != COOKIE_ANSWER_LEN || data[0] != T_STATUS_COOKIE {
        return None;
    }
    let mut cookie = [0u8; 16];
    cookie.copy_from_slice(&data[5..21]);
    Some((u32::from_le_bytes([data[1], data[2], data[3], data[4]]), cookie))
}

impl ServerStatus {
    /// The answer to a query with `nonce`, at most `QUERY_LEN` bytes: the message of the
    /// day, then the name, are cut (on character boundaries) to fit.
    pub fn answer(&self, nonce: u32) -> Vec<u8> {
        let head = 1 + 4 + 1 + 2 * 6 + 1 + 8;
        let room = QUERY_LEN - head - 2;
        let name = super::names::clip(&self.name, room.min(super::messages::MAX_SERVER_NAME));
        let motd = super::names::clip(&self.motd, room - name.len());
        let mut w = Writer::new();
        w.u8(T_STATUS);
        w.u32(nonce);
        w.u8(STATUS_VERSION);
        w.u16(self.protocol);
        w.u16(self.players);
        w.u16(self.joining);
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
            joining: r.u16()?,
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
            joining: 2,
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
        assert_eq!(read_query(&query(5)), Some((5, [0; 16])));
        assert_eq!(read_query(&query_with(6, [3; 16])), Some((6, [3; 16])));
        let c = cookie_answer(7, [9; 16]);
        assert_eq!(c.len(), COOKIE_ANSWER_LEN);
        assert_eq!(read_cookie_answer(&c), Some((7, [9; 16])));
        assert_eq!(read_query(&query(5)[..100]), None, "a short query is not answered");
        // Truncations and garbage are errors, not panics.
        for n in 0..a.len() {
            assert!(ServerStatus::read_answer(&a[..n]).is_err());
        }
    }
}
