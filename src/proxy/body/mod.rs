//! The body adapter: drives a protocol's sans-IO [`Rewriter`] over the upstream body.
//!
//! [`GatedBody`] is the agent's response body, polled in place by hyper: each
//! poll reads upstream frames, feeds the rewriter and returns what the agent
//! may see; held calls are decided inside the poll (sending `: keepalive`
//! comments while a slow gate works). When the agent goes away hyper drops
//! the body, and the upstream body with it, which cancels the upstream
//! request. Also here: [`Pieces`] (a rewritten whole body) and [`Deadline`]
//! (a pass-through body bounded by the upstream timeout).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};

use crate::call::Release;
use crate::context::Context;
use crate::error::Error;
use crate::gate::Gates;
use crate::protocol::{Protocol, Rewriter, Step, KEEPALIVE};
use crate::proxy::budget::Charge;
use crate::proxy::release;
use crate::proxy::resume::{FollowUp, Sending, Sent};
use crate::proxy::state::State;
use crate::upstream::encoding::ContentDecoder;
use crate::upstream::ResponseBody;

/// The error a response body may end with: the agent sees a cut-off response.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

mod ahead;
mod end;
mod follow;
mod foresight;
mod hosted;
mod idle;
mod plain;
mod stirred;
mod updates;
pub use plain::{Deadline, Pieces, Scrubbed};

type Decide = Pin<Box<dyn Future<Output = Vec<Release>> + Send>>;

/// Output held back to join the next upstream frame that has already
/// arrived, at most.
const COALESCE_MAX: usize = 16 * 1024;
/// What the agent's next frame starts with room for; it grows as needed.
/// Small, because every open stream holds one, taken again each time the
/// frames sent use it up (a paced event is a few hundred bytes).
const OUT_CAPACITY: usize = 512;
type Chore = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where the gated body is.
enum Phase {
    /// Reading upstream frames.
    Reading,
    /// Upstream ended: the last events (`Rewriter::process`), then
    /// `Rewriter::end`, each of which may still need a gate.
    Draining { ending: bool },
    /// The held calls are being decided; `then` is where to go after.
    Gating {
        decide: Decide,
        tick: Option<Pin<Box<tokio::time::Sleep>>>,
        since: Option<std::time::Instant>,
        started: tokio::time::Instant,
        /// Upstream bytes read while deciding (`ahead.rs`).
        ahead: usize,
        then: Box<Phase>,
    },
    /// Upstream failed (or failed while calls were decided): the fault,
    /// handled once any gate is done.
    Broken(Error),
    /// Upstream ended and its calls were all withheld for `resume`: the
    /// follow-up's answer is awaited, then read as the continuation.
    Resuming,
    /// A fault: the dropped calls are audited, then the error ending goes out.
    Failing(Chore),
    /// Everything is written; what is left in `out` is the last frame.
    Done,
}

/// The agent's response body, driven where hyper polls it: upstream frames
/// are read, fed to the protocol's sans-IO [`Rewriter`], and what the agent
/// may see is returned as the next frame. Held calls are decided in place
/// (text received before them goes out first, and `: keepalive` comments
/// follow while a slow gate works). No task or channel per stream: when the
/// agent goes away hyper drops this body, and with it the upstream body,
/// which cancels the upstream request.
pub struct GatedBody {
    state: Arc<State>,
    /// The pipeline the request started with (a reload does not change it mid-request).
    gates: Arc<Gates>,
    ctx: Arc<Context>,
    rw: Box<dyn Rewriter>,
    upstream: ResponseBody,
    dec: ContentDecoder,
    /// The upstream's total deadline and idle timeout.
    timeouts: idle::Timeouts,
    /// Whether upstream woke since it last had nothing.
    stirred: stirred::Stirred,
    out: BytesMut,
    /// The shared budget's charge for what the rewriter holds back.
    held: Charge,
    phase: Phase,
    /// When the frame with the last call event came (noted once a frame).
    last_call_delta: Option<std::time::Instant>,
    /// The time of this poll (see [`PollTime`]).
    now: PollTime,
    /// Audit records of provider-run calls being written beside the stream;
    /// the stream ends only once they are.
    hosted: Option<Chore>,
    /// What a follow-up (`rewrite = "resume"`) needs, while none is under way.
    /// Boxed like `sent`: few streams have one, and every stream holds the field.
    follow: Option<Box<FollowUp>>,
    /// The follow-up under way (started as soon as the calls are decided),
    /// then its answer.
    sending: Option<Sending>,
    sent: Option<Box<Result<Sent, Error>>>,
    /// The wire format, for the shape of an error event.
    protocol: Protocol,
    /// The facts of the thread the answer belongs to, remembered under its id.
    thread: Option<crate::proxy::threads::Shared>,
    /// This request's turn of the conversation, remembered under the
    /// answer's id (with the calls decided in it) when it is one a
    /// follow-up may continue.
    history: Option<Arc<crate::context::Turn>>,
    /// The answer's id, once the rewriter read it.
    answer: Option<String>,
    /// Judges asked ahead of their calls' decisions (`foresight.rs`),
    /// driven beside the stream.
    foresight: Vec<Chore>,
}

/// Starts gating the upstream response and returns the agent's response body.
pub fn gated_stream(
    protocol: Protocol,
    state: Arc<State>,
    gates: Arc<Gates>,
    upstream: Sent,
    follow: Option<Box<FollowUp>>,
) -> GatedBody {
    let mut options = state.stream_options();
    options.resume = follow.as_ref().is_some_and(|f| f.left());
    options.refusal = upstream.ctx.structured_output;
    options.early = gates.prompt();
    // A rule that requires a configured sensor: then no call is let go
    // early (`prompt` is false), and its judge is asked ahead instead.
    options.foresee = gates.foresees();
    let rw = protocol.rewriter(&options);
    let quiet = state.upstream_for(protocol).idle_timeout;
    GatedBody {
        protocol,
        thread: upstream.thread,
        history: upstream.history,
        answer: None,
        timeouts: idle::Timeouts::new(upstream.deadline, quiet),
        stirred: stirred::Stirred::new(),
        held: state.budget.charge(),
        state,
        gates,
        ctx: upstream.ctx,
        rw,
        upstream: upstream.body,
        dec: upstream.decoder,
        out: BytesMut::with_capacity(OUT_CAPACITY),
        phase: Phase::Reading,
        last_call_delta: None,
        now: PollTime::default(),
        hosted: None,
        follow,
        sending: None,
        sent: None,
        foresight: Vec::new(),
    }
}

/// What one step of the body's state machine produced.
enum Next {
    /// Go on stepping.
    Continue,
    /// Send what `out` holds (if anything) and be polled again.
    Flush,
    /// Nothing can be done until woken.
    Wait,
    /// A slow gate is still deciding: send a keep-alive comment.
    Keepalive,
}

/// The time of one poll, read off the clock once, when first asked: the
/// frames one poll reads came together. A field of its own, so it is read
/// while other fields of the body are borrowed.
#[derive(Default)]
struct PollTime(Option<tokio::time::Instant>);

impl PollTime {
    fn get(&mut self) -> tokio::time::Instant {
        *self.0.get_or_insert_with(tokio::time::Instant::now)
    }

    /// A new poll: the next reading goes to the clock.
    fn reset(&mut self) {
        self.0 = None;
    }
}

impl GatedBody {
    /// Runs the rewriter over what it was given; a gate or a fault changes the phase.
    fn process(&mut self, ending: Option<bool>) -> Next {
        let step = match ending {
            Some(true) => self.rw.end(&mut self.out),
            _ => self.rw.process(&mut self.out),
        };
        // A format that decides to continue at its message's end (not in
        // `resolve`) reports the follow-up now.
        self.updates();
        self.foresee();
        let held = self.rw.held_bytes();
        let step = step.and_then(|s| self.held.hold(held).map(|()| s));
        match step {
            Ok(Step::NeedMore) => match ending {
                // Upstream frames that have already arrived are read before
                // a write, so what came together goes out in one write
                // (nothing waits: `read` flushes when upstream has no more).
                None if self.out.len() < COALESCE_MAX => Next::Continue,
                None => Next::Flush,
                Some(false) => {
                    self.phase = Phase::Draining { ending: true };
                    Next::Continue
                }
                Some(true) => {
                    self.phase = match self.sending.is_some() || self.sent.is_some() {
                        true => Phase::Resuming,
                        false => Phase::Done,
                    };
                    Next::Continue
                }
            },
            Ok(Step::Gate) => {
                let then = match ending {
                    None => Phase::Reading,
                    Some(e) => Phase::Draining { ending: e },
                };
                self.start_gate(then);
                Next::Continue
            }
            Err(e) => {
                self.fail(e);
                Next::Continue
            }
        }
    }

    /// Begins deciding the pending calls.
    fn start_gate(&mut self, then: Phase) {
        let (state, gates, ctx) = (self.state.clone(), self.gates.clone(), self.ctx.clone());
        let protocol = self.protocol;
        let calls = self.rw.pending().to_vec();
        let decide: Decide = Box::pin(async move {
            let judged = release::batch(&state, &gates, &ctx, &calls).await;
            let keys = release::vouch_keys(&state, &ctx, protocol, &calls);
            // A call that waits for a person may wait minutes: its copy goes now.
            drop(calls);
            let releases = judged.answered(&ctx.left).await;
            release::vouch(&state, &keys, &releases);
            releases
        });
        self.phase = Phase::Gating {
            decide,
            tick: None,
            since: self.last_call_delta,
            started: tokio::time::Instant::now(),
            ahead: 0,
            then: Box::new(then),
        };
    }

    /// Ends the stream the protocol's way after `err`; held calls are
    /// dropped and audited before the ending goes out.
    fn fail(&mut self, err: Error) {
        tracing::warn!(request_id = %self.ctx.request_id, error = %err, "stream ended with an error event");
        self.state.metrics.stream_faults.inc();
        self.state.metrics.upstream_fault(&err);
        if let Error::Overloaded(limit) = err {
            self.state.metrics.overloaded(limit);
        }
        let (err, passthrough) = super::errors::event(&self.state, self.protocol, err);
        let dropped = self.rw.fail(&err, passthrough, &mut self.out);
        self.updates();
        let (state, gates, ctx) = (self.state.clone(), self.gates.clone(), self.ctx.clone());
        self.phase = Phase::Failing(Box::pin(async move {
            release::dropped(&state, &gates, &ctx, &dropped, "stream_fault").await;
        }));
    }

    /// What the rewriter wrote so far, as it goes to the agent: upstream
    /// keys masked, line separators in JSON strings escaped (the rewriters
    /// write whole events, so neither is ever cut in two here).
    fn take_out(&mut self) -> Bytes {
        let out = self.state.scrub.bytes(self.out.split().freeze());
        crate::protocol::sse::escape_separators(out)
    }

    /// Reads the next upstream frame.
    fn read(&mut self, cx: &mut TaskContext<'_>) -> Next {
        match self.stirred.poll(&mut self.upstream, cx) {
            Poll::Ready(Some(Ok(f))) => {
                self.timeouts.frame(self.now.get());
                let Ok(data) = f.into_data() else {
                    return Next::Continue;
                };
                if let Some(x) = self.ctx.exchange.as_ref().filter(|_| !data.is_empty()) {
                    x.upstream_began();
                }
                match self.dec.decode(&data) {
                    Ok(bytes) => self.rw.push(&bytes),
                    Err(e) => {
                        self.fail(e);
                        return Next::Continue;
                    }
                }
                // A body of known length that is complete ends here, so
                // its last piece and the end go out together.
                if self.upstream.is_end_stream() {
                    self.upstream_ended();
                    return Next::Continue;
                }
                self.process(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.fail(e);
                Next::Continue
            }
            Poll::Ready(None) => {
                self.upstream_ended();
                Next::Continue
            }
            Poll::Pending => match self.timeouts.expiry(cx) {
                Some(e) => {
                    self.fail(e);
                    Next::Continue
                }
                None => Next::Wait,
            },
        }
    }

    fn upstream_ended(&mut self) {
        self.phase = ahead::after_upstream(&mut self.dec, &mut *self.rw);
    }

    /// Polls the gate; a slow gate lets the text before it go out, then
    /// sends keep-alives.
    fn gate(&mut self, cx: &mut TaskContext<'_>) -> Next {
        // A call waiting for a person hears `[approval] keepalive` at least.
        let every = self
            .state
            .config
            .stream
            .keepalive
            .min(self.state.config.approval.keepalive);
        let Phase::Gating { decide, since, .. } = &mut self.phase else {
            return Next::Continue;
        };
        let verdicts = match decide.as_mut().poll(cx) {
            Poll::Ready(v) => v,
            Poll::Pending => {
                if !self.out.is_empty() {
                    return Next::Flush;
                }
                self.read_ahead(cx);
                let Phase::Gating { tick, .. } = &mut self.phase else {
                    return Next::Continue;
                };
                if tick.is_none() {
                    // A slow gate (a call waiting for a person) may hold the
                    // stream for minutes: the empty buffer's room goes now,
                    // and what the rewriter holds takes its smallest form.
                    self.out = BytesMut::new();
                    self.rw.compact();
                }
                let t = tick.get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
                if t.as_mut().poll(cx).is_ready() {
                    t.as_mut().reset(tokio::time::Instant::now() + every);
                    // Registers the next tick's wake-up.
                    let _ = t.as_mut().poll(cx);
                    return Next::Keepalive;
                }
                return Next::Wait;
            }
        };
        let since = *since;
        let Phase::Gating { then, started, .. } = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return Next::Continue;
        };
        self.gated_for(started.elapsed());
        self.phase = *then;
        self.rw.resolve(&verdicts, &mut self.out);
        self.updates();
        if let Some(t) = since {
            self.state
                .metrics
                .release_latency
                .observe(t.elapsed().as_secs_f64());
        }
        // Events that came behind the ones that started the gate are already
        // here: they go on now, not when upstream next sends something.
        if matches!(self.phase, Phase::Reading) {
            return self.process(None);
        }
        Next::Continue
    }
}

impl Body for GatedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        this.now.reset();
        this.poll_hosted(cx);
        this.poll_follow(cx);
        this.poll_foresight(cx);
        loop {
            let next = match &mut this.phase {
                Phase::Reading => this.read(cx),
                Phase::Draining { ending } => {
                    let ending = *ending;
                    this.process(Some(ending))
                }
                Phase::Gating { .. } => this.gate(cx),
                Phase::Broken(_) => {
                    if let Phase::Broken(e) = std::mem::replace(&mut this.phase, Phase::Done) {
                        this.fail(e);
                    }
                    Next::Continue
                }
                Phase::Resuming => {
                    this.poll_follow(cx);
                    this.resume()
                }
                Phase::Failing(chore) => match chore.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.phase = Phase::Done;
                        Next::Continue
                    }
                    Poll::Pending => Next::Wait,
                },
                // The last frame, then the end (once provider-run calls
                // are audited: they are woken on).
                Phase::Done if this.out.is_empty() => {
                    return match this.poll_hosted(cx) {
                        true => Poll::Ready(None),
                        false => Poll::Pending,
                    };
                }
                Phase::Done => {
                    return Poll::Ready(Some(Ok(Frame::data(this.take_out()))));
                }
            };
            match next {
                Next::Continue => {}
                Next::Keepalive => return Poll::Ready(Some(Ok(Frame::data(KEEPALIVE)))),
                Next::Flush if !this.out.is_empty() => {
                    return Poll::Ready(Some(Ok(Frame::data(this.take_out()))));
                }
                Next::Flush => {}
                Next::Wait => {
                    if !this.out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(this.take_out()))));
                    }
                    // Questions asked ahead since the first poll start now.
                    this.poll_foresight(cx);
                    return Poll::Pending;
                }
            }
        }
    }

    /// Lets hyper write the last piece and the end of the body in one go.
    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Done) && self.out.is_empty() && self.hosted.is_none()
    }
}
