//! A whole (non-streamed) upstream body, gated: read by its protocol, its
//! calls decided and audited, rewritten as `drop` says (new text and slices
//! of the original, no second copy) and, when it is to be continued
//! (`rewrite = "resume"`), what the follow-up needs.

use bytes::Bytes;

use crate::context::Context;
use crate::error::Error;
use crate::gate::Gates;
use crate::json::Spliced;
use crate::protocol::{chat, messages, responses, Protocol, Resumption};
use crate::proxy::release;
use crate::proxy::state::State;

/// One whole response, gated.
pub struct Round {
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

impl Round {
    fn unchanged(raw: &Bytes) -> Round {
        Round {
            pieces: vec![raw.clone()],
            changed: false,
            again: None,
            id: None,
        }
    }
}

/// Gates the whole body `raw` of `protocol`.
pub async fn round(
    state: &State,
    gates: &Gates,
    ctx: &Context,
    protocol: Protocol,
    raw: &Bytes,
    more: bool,
) -> Result<Round, Error> {
    let text =
        std::str::from_utf8(raw).map_err(|_| Error::UpstreamUnreadable("response is not UTF-8"))?;
    let max_args = state.config.limits.max_tool_args_bytes;
    let rw = &state.config.rewrite;
    let (neutral, result) = (&rw.neutral_message, &rw.neutral_result);
    let mut out = Spliced::new(text, raw);
    let mut id = None;
    let (changed, again) = match protocol {
        Protocol::Chat => {
            let mut parsed = chat::complete::Completion::parse(text, max_args)?;
            parsed.usage().count(&state.metrics);
            parsed.refuse(ctx.structured_output);
            if state.config.text_tool_calls {
                parsed.read_text_calls();
            }
            if parsed.calls().is_empty() {
                return Ok(Round::unchanged(raw));
            }
            let verdicts = release::decide(state, gates, ctx, parsed.calls()).await;
            let again = more.then(|| parsed.resumption(&verdicts, result)).flatten();
            parsed.forget_calls();
            (parsed.rewrite(&verdicts, neutral, &mut out), again)
        }
        Protocol::Responses => {
            let mut parsed = responses::complete::Answer::parse(text, max_args)?;
            parsed.usage().count(&state.metrics);
            parsed.refuse(ctx.structured_output);
            id = Some(parsed.id().to_string()).filter(|i| !i.is_empty());
            if parsed.calls().is_empty() {
                return Ok(Round {
                    id,
                    ..Round::unchanged(raw)
                });
            }
            let verdicts = release::decide(state, gates, ctx, parsed.calls()).await;
            parsed.forget_calls();
            let again = more
                .then(|| responses::follow::whole(text, &verdicts, result))
                .flatten();
            let seed = responses::Ids::new(&state.id_key);
            let changed = parsed.rewrite(&verdicts, neutral, &seed, &mut out);
            // Calls a follow-up answers are not withheld from what the
            // agent may continue; the others are.
            if let (None, Some(w)) = (&again, parsed.withheld(&verdicts)) {
                state.remember_withheld(w);
            }
            (changed, again)
        }
        Protocol::Messages => {
            let mut parsed = messages::complete::Answer::parse(text, max_args)?;
            parsed.usage().count(&state.metrics);
            release::hosted(state, gates, ctx, parsed.hosted()).await;
            if parsed.calls().is_empty() {
                return Ok(Round::unchanged(raw));
            }
            let verdicts = release::decide(state, gates, ctx, parsed.calls()).await;
            let again = more
                .then(|| messages::follow::whole(text, &verdicts, result))
                .flatten();
            parsed.forget_calls();
            (parsed.rewrite(&verdicts, neutral, &mut out), again)
        }
    };
    let pieces = match changed {
        true => out.finish(),
        false => vec![raw.clone()],
    };
    Ok(Round {
        pieces,
        changed,
        again,
        id,
    })
}
