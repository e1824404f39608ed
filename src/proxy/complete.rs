//! A complete (non-streamed) upstream body, gated: read by its protocol, its
//! calls decided and audited, rewritten as `drop` says (new text and slices
//! of the original, no second copy) and, when it is to be continued
//! (`rewrite = "resume"`), what the follow-up needs.

use bytes::Bytes;

use crate::context::Context;
use crate::error::Error;
use crate::gate::Gates;
use crate::json::Spliced;
use crate::protocol::{Protocol, Reading, Resumption};
use crate::proxy::release;
use crate::proxy::state::State;

/// One complete response, gated.
pub struct Gated {
    /// The body for the agent: the original as it came (one piece), or the
    /// rewrite's new text and slices of the original.
    pub pieces: Vec<Bytes>,
    /// Whether the rewrite changed anything.
    pub changed: bool,
    /// What a follow-up needs, when every call was withheld for resume and
    /// `more` allowed one.
    pub again: Option<Resumption>,
    /// The response's id (Responses), for a continued stored response.
    pub id: Option<String>,
}

impl Gated {
    fn unchanged(raw: &Bytes) -> Gated {
        Gated {
            pieces: vec![raw.clone()],
            changed: false,
            again: None,
            id: None,
        }
    }
}

/// Gates the complete body `raw` of `protocol`.
pub async fn gate(
    state: &State,
    gates: &Gates,
    ctx: &Context,
    protocol: Protocol,
    raw: &Bytes,
    more: bool,
) -> Result<Gated, Error> {
    let text =
        std::str::from_utf8(raw).map_err(|_| Error::UpstreamUnreadable("response is not UTF-8"))?;
    let rw = &state.config.rewrite;
    let reading = Reading {
        max_call_bytes: state.config.limits.max_tool_args_bytes,
        refusal: ctx.structured_output,
        text_calls: state.config.text_tool_calls,
    };
    let mut parsed = protocol.complete(text, reading)?;
    let usage = parsed.usage();
    usage.count(&state.metrics);
    if let Some(x) = &ctx.exchange {
        x.used(
            (usage.model.as_deref(), usage.id.as_deref()),
            usage.input,
            usage.output,
        );
        x.finished(usage.finish_reasons());
    }
    ctx.provider_ran(parsed.hosted());
    release::hosted(state, gates, ctx, parsed.hosted()).await;
    let id = parsed.id().map(str::to_string);
    if parsed.calls().is_empty() {
        return Ok(Gated {
            id,
            ..Gated::unchanged(raw)
        });
    }
    let verdicts = release::decide(state, gates, ctx, parsed.calls()).await;
    release::vouch(
        state,
        &release::vouch_keys(state, ctx, protocol, parsed.calls()),
        &verdicts,
    );
    let again = more
        .then(|| parsed.resumption(text, &verdicts, &rw.neutral_result))
        .flatten();
    parsed.forget_calls();
    let mut out = Spliced::new(text, raw);
    let changed = parsed.rewrite(&verdicts, &rw.neutral_message, &state.id_key, &mut out);
    // Calls a follow-up answers are not withheld from what the agent may
    // continue; the others are.
    if let (None, Some(w)) = (&again, parsed.withheld(&verdicts)) {
        state.remember_withheld(w);
    }
    let pieces = match changed {
        true => out.finish(),
        false => vec![raw.clone()],
    };
    Ok(Gated {
        pieces,
        changed,
        again,
        id,
    })
}
