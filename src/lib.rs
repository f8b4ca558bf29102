//! Hailfire: a co-op bullet-hell dungeon game. The library holds every layer; `main.rs`
//! only picks a mode. Dependencies point one way: `sim` <- `content` <- `protocol` <-
//! `server` / `client` <- `app`.

pub mod bench;
pub mod content;
pub mod net;
pub mod protocol;
pub mod sim;
