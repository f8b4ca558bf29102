//! Hailfire: a co-op bullet-hell dungeon game. The library holds every layer; `main.rs`
//! only picks a mode. Dependencies point one way: `sim` <- `content` <- `protocol` <-
//! `server` / `client` <- `app`.

#[cfg(feature = "desktop")]
pub mod app;
pub mod bench;
pub mod client;
pub mod content;
pub mod crash;
pub mod logging;
pub mod media;
pub mod net;
pub mod protocol;
pub mod server;
pub mod sim;
pub mod stepper;
