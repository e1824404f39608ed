//! A complete (non-streamed) response body, whatever its wire format: its
//! calls in body order, and the same body written again for their
//! verdicts — new text for what changed, slices of the original for the
//! rest. Each codec's `complete::Body` implements [`Complete`];
//! [`super::Protocol::complete`] reads a body into one.

use crate::call::{Call, Release};
use crate::json::Spliced;
use crate::protocol::usage::Usage;
use crate::protocol::{Resumption, Withheld};

/// How a complete body is read.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    /// A call's arguments over this are marked oversized.
    pub max_call_bytes: usize,
    /// The request asked for structured output: a neutral text is said as
    /// a refusal.
    pub refusal: bool,
    /// Tool calls written as text are read too (`text_tool_calls`).
    pub text_calls: bool,
}

/// A complete response body, parsed and borrowed from its text.
pub trait Complete: Send {
    /// The tokens the body reports, for the metrics.
    fn usage(&self) -> Usage;
    /// The calls the agent would run, in body order.
    fn calls(&self) -> &[Call];
    /// Calls the provider ran itself (audited as they pass).
    fn hosted(&self) -> &[Call] {
        &[]
    }
    /// The stored response's id, when the format stores responses.
    fn id(&self) -> Option<&str> {
        None
    }
    /// The follow-up `resume` needs when every call is withheld for it
    /// (`text` is the body read). Asked before [`Complete::forget_calls`].
    fn resumption(&self, text: &str, verdicts: &[Release], result: &str) -> Option<Resumption>;
    /// Drops the calls' own copies (their arguments) once decided.
    fn forget_calls(&mut self);
    /// Writes the body with withheld calls replaced by `neutral`; false,
    /// with nothing written, when it goes out as it came. `id_key` keys the
    /// ids of replacement items.
    fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        id_key: &[u8; 32],
        out: &mut Spliced<'_>,
    ) -> bool;
    /// The calls withheld from a stored response, for a request that
    /// continues from it.
    fn withheld(&self, _verdicts: &[Release]) -> Option<Withheld> {
        None
    }
}
