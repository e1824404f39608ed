//! The contract between a stream rewriter and its driver: [`Rewriter`], the
//! [`Step`] it stops at, the [`Update`]s it reports, the [`Options`] it is
//! built with and the [`Totals`] it comes to.

use bytes::BytesMut;

use super::{usage, Resumption, Withheld};
use crate::call::{Call, Release};
use crate::error::Error;

/// What a streaming rewriter's driver must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Everything available was processed; push more bytes (or call `end`).
    NeedMore,
    /// Gate [`Rewriter::pending`] and call [`Rewriter::resolve`].
    Gate,
}

/// Limits and texts for one response.
#[derive(Debug, Clone)]
pub struct Options {
    pub neutral_message: std::sync::Arc<str>,
    pub max_event_bytes: usize,
    pub max_call_bytes: usize,
    pub max_held_bytes: usize,
    /// Keys the ids of messages that replace withheld calls.
    pub id_key: [u8; 32],
    /// A choice whose every call is withheld for `resume` may be continued
    /// by a follow-up request (the request has one choice, and follow-ups
    /// are left); else such a choice gets the neutral text.
    pub resume: bool,
    /// The tool result a follow-up answers each withheld call with.
    pub neutral_result: std::sync::Arc<str>,
    /// The neutral text is a refusal (the request asked for structured
    /// output); Chat Completions writes it as `refusal`, not `content`.
    pub refusal: bool,
    /// Tool calls written as text are held and gated (`[gate] text_tool_calls`).
    pub text_calls: bool,
    /// Every call is decided at once ([`crate::gate::Gates::prompt`]): a
    /// chat call may be gated as soon as its arguments are complete, not
    /// at its choice's finish (calls waiting for a judge or a person are
    /// gated together, so they are asked side by side).
    pub early: bool,
    /// Calls complete before their turn is are reported by
    /// [`Rewriter::foresee`], so the gates may ask the judges they will
    /// need while the rest of the turn streams in.
    pub foresee: bool,
}

/// What a [`Rewriter`] reports to its driver besides the bytes it writes
/// ([`Rewriter::poll`]; an SSE event is [`super::sse::SseEvent`], a different thing).
#[derive(Debug)]
pub enum Update {
    /// Call events were read since the last poll. The driver notes the
    /// time once per upstream frame, not once per event.
    CallRead,
    /// Calls just withheld from a stored response: remembered before
    /// anything of this answer goes out, so a request continuing from it
    /// finds the record.
    Withheld(Withheld),
    /// Calls the provider ran itself (for the audit trail; they were gated
    /// on the request).
    Hosted(Vec<Call>),
    /// Every call of the response was withheld for `resume`: the rest of
    /// this upstream stream is read but not sent, and the driver makes the
    /// follow-up request (or calls [`Rewriter::give_up`]).
    Resumption(Resumption),
    /// A response the agent knows by `first` that the provider continued
    /// as `then` (`resume` on a stored response): a later request
    /// continuing from `first` is sent on from `then`.
    Renamed { first: String, then: String },
    /// The id of the answer, which a later request may continue from (a
    /// Messages thread, a stored Responses response), as soon as it is read.
    Answered(String),
}

/// What a stream came to: the tokens the upstream reported, and the call
/// events that arrived after their call was decided (stripped).
#[derive(Debug, Default)]
pub struct Totals {
    pub usage: usage::Usage,
    pub late_deltas: u64,
}

/// A sans-IO streaming rewriter: one per response, one implementation per
/// wire format. Text passes at once; a call is held from its first event to
/// its last, then gated.
///
/// Feed upstream bytes with [`Rewriter::push`], then call
/// [`Rewriter::process`]: it appends what the agent may see now to `out` and
/// stops with [`Step::Gate`] when calls are held and complete. The driver
/// gates [`Rewriter::pending`] and hands one verdict per call to
/// [`Rewriter::resolve`]. At end of input call [`Rewriter::end`]; on any
/// error call [`Rewriter::fail`], which never releases held calls. After
/// each of these, [`Rewriter::poll`] until it answers `None`.
pub trait Rewriter: Send {
    fn push(&mut self, bytes: &[u8]);
    fn process(&mut self, out: &mut BytesMut) -> Result<Step, Error>;
    /// At end of input: `Gate` when the last events completed held calls;
    /// an error when calls are held that never completed.
    fn end(&mut self, out: &mut BytesMut) -> Result<Step, Error>;
    /// The calls held behind the current gate.
    fn pending(&self) -> &[Call];
    /// Releases or replaces the pending calls; a missing verdict withholds.
    fn resolve(&mut self, verdicts: &[Release], out: &mut BytesMut);
    /// Ends the stream after `err` with the format's error ending. Returns
    /// the calls that were held and are now dropped without release.
    fn fail(&mut self, err: &Error, passthrough: bool, out: &mut BytesMut) -> Vec<Call>;
    /// What the rewriter has to report besides the bytes it wrote, one at a
    /// time; the driver asks after every `process`, `end`, `resolve`,
    /// `fail` and `give_up` until it answers `None`.
    fn poll(&mut self) -> Option<Update>;
    /// The gate is slow (a call waits for a person, maybe for minutes):
    /// what is held meanwhile is kept in its smallest form.
    fn compact(&mut self) {}
    /// The follow-up's stream comes next: it is read as the continuation of
    /// the response the agent is receiving (one id, one ending, usage
    /// summed). `resume` says whether it may be continued again.
    fn continue_with(&mut self, _resume: bool) {}
    /// The follow-up could not be made: the response ends as `drop` would
    /// have ended it.
    fn give_up(&mut self, _out: &mut BytesMut) {}
    /// Calls whose arguments are complete while their turn is still being
    /// read (each reported once; only with [`Options::foresee`]): the
    /// driver may ask the sensors their decision will need ahead of it.
    /// Nothing is released by this; the calls are still gated as pending.
    fn foresee(&mut self) -> Vec<Call> {
        Vec::new()
    }
    /// What the stream(s) came to, asked once when the body is dropped.
    fn totals(&mut self) -> Totals;
    /// Bytes held back from the agent now (held calls and what is kept
    /// behind them), charged to the shared budget while held.
    fn held_bytes(&self) -> usize;
}
