//! Test support: the mock provider, a launcher for a real toolgate on real
//! ports, a small HTTP client, the fixtures, and the SDK scripts.

mod client;
mod conversations;
mod fixtures;
mod gate;
mod mock;
mod python;
mod sse;

pub use client::*;
pub use conversations::*;
pub use fixtures::*;
pub use gate::*;
pub use mock::*;
pub use python::*;
pub use sse::*;

/// The neutral text a withheld call becomes (the default `neutral_message`).
pub const NEUTRAL: &str = "I wasn't able to complete that action.";
