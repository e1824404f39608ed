//! A scripted provider: the one mock LLM provider that the tests, `toolgate
//! demo`, `toolgate mock` (the compose setup, the benchmarks, trying an agent
//! without a key) all run.
//!
//! [`Provider`] is a real HTTP server on a port. It answers each request with
//! the next of its [`Reply`]s (the last one repeats) and records what it was
//! sent. A reply is a body as bytes (an event stream in pieces, paced,
//! compressed or broken off, or a plain body with a status) or computed from
//! the request when it arrives; [`Script`] computes one from a few rules, in
//! the wire format the request spoke ([`render`]). The provider never reads
//! through toolgate's own parsers: what it sends is what a provider sends.

mod asked;
mod render;
mod reply;
mod script;
mod server;

pub use asked::{Asked, Wire};
pub use render::{render, Cut, Turn, Use};
pub use reply::Reply;
pub use script::{Call, Rule, Script, DEFAULT as DEFAULT_SCRIPT};
pub use server::{Provider, Seen};
