//! Token usage read from responses, whatever their protocol, for the
//! metrics (`toolgate_tokens_total`): `usage` of a whole body, and of the
//! stream events that carry it (Chat Completions' last chunk, Responses'
//! `response.completed`, Messages' `message_start` and `message_delta`).

use serde::Deserialize;

use crate::json::Obj;

/// Tokens of one response (or of every upstream response a stream spliced).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Usage {
    pub model: Option<String>,
    /// The response's id (`chatcmpl-…`, `msg_…`, `resp_…`), from the body
    /// or the event that carried the usage.
    pub id: Option<String>,
    pub input: u64,
    pub output: u64,
    /// Why the model stopped, as the provider said it (Chat's
    /// `finish_reason` by choice, Messages' `stop_reason`, Responses'
    /// `status`), by choice.
    pub finish: Vec<(u32, String)>,
    /// [`Usage::identify`] has read an event.
    pub identified: bool,
    /// The model the stream's first event named: the model when no event
    /// with usage names one ([`Usage::settle`]).
    pub first_model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Numbers {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl Numbers {
    /// Anthropic counts cached input apart from `input_tokens`; OpenAI's
    /// `input_tokens`/`prompt_tokens` include it.
    fn input(&self) -> u64 {
        let own = self.prompt_tokens.or(self.input_tokens).unwrap_or(0);
        own + self.cache_creation_input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0)
    }

    fn output(&self) -> u64 {
        self.completion_tokens.or(self.output_tokens).unwrap_or(0)
    }
}

/// The members of an event or body that usage is read from (others are
/// skipped unread).
#[derive(Debug, Default, Deserialize)]
struct Carrier {
    #[serde(rename = "type")]
    ty: Option<String>,
    id: Option<String>,
    model: Option<String>,
    usage: Option<Numbers>,
    /// `message_start`'s message, `response.completed`'s response.
    message: Option<Box<Carrier>>,
    response: Option<Box<Carrier>>,
    /// `message_delta`'s delta (its `stop_reason`).
    delta: Option<Box<Stopped>>,
    /// A Responses envelope's status.
    status: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Stopped {
    stop_reason: Option<String>,
}

/// A whole Chat body's choice, for its finish.
#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u32>,
    finish_reason: Option<String>,
}

impl Usage {
    /// The usage of a whole body's top-level object.
    pub fn of_top(top: &Obj) -> Usage {
        let mut u = Usage::default();
        let numbers = top
            .present("usage")
            .and_then(|raw| serde_json::from_str::<Numbers>(raw.get()).ok());
        if let Some(n) = numbers {
            u.input = n.input();
            u.output = n.output();
        }
        let text = |k: &str| {
            top.present(k)
                .and_then(crate::json::string)
                .map(|m| m.into_owned())
        };
        u.model = text("model");
        u.id = text("id");
        let choices = top
            .present("choices")
            .and_then(|raw| serde_json::from_str::<Vec<Choice>>(raw.get()).ok());
        for (i, c) in choices.into_iter().flatten().enumerate() {
            if let Some(f) = c.finish_reason {
                u.finished(c.index.unwrap_or(i as u32), &f);
            }
        }
        if let Some(f) = text("stop_reason").or_else(|| text("status")) {
            u.finished(0, &f);
        }
        u
    }

    /// Reads the response's id and model from a stream's first event
    /// (Chat Completions repeats them on every chunk; a stream without a
    /// usage event says them nowhere else). Once per stream.
    pub fn identify(&mut self, data: &[u8]) {
        if self.identified {
            return;
        }
        self.identified = true;
        #[derive(Deserialize)]
        struct Named {
            id: Option<String>,
            model: Option<String>,
        }
        if let Ok(n) = serde_json::from_slice::<Named>(data) {
            self.id = self.id.take().or(n.id);
            self.first_model = n.model;
        }
    }

    /// At the stream's end: the model its first event named, when no event
    /// with usage named one.
    pub fn settle(&mut self) {
        if self.model.is_none() {
            self.model = self.first_model.take();
        }
    }

    /// Notes that choice `choice` finished for `reason` (its first finish
    /// stands).
    pub fn finished(&mut self, choice: u32, reason: &str) {
        if !self.finish.iter().any(|(c, _)| *c == choice) {
            self.finish.push((choice, reason.to_string()));
        }
    }

    /// The finish reasons in choice order.
    pub fn finish_reasons(&self) -> Vec<String> {
        let mut f = self.finish.clone();
        f.sort_by_key(|(c, _)| *c);
        f.into_iter().map(|(_, r)| r).collect()
    }

    /// Adds what a stream event's data says, when it carries usage (an
    /// object under `usage`, at the top or in its `message`/`response`).
    /// Events without one cost a substring search.
    pub fn sniff(&mut self, data: &[u8]) {
        if !carries_usage(data) {
            return;
        }
        let Ok(c) = serde_json::from_slice::<Carrier>(data) else {
            return;
        };
        let ty = c.ty.as_deref();
        let inner = c.message.as_deref().or(c.response.as_deref());
        if self.model.is_none() {
            self.model = c
                .model
                .clone()
                .or_else(|| inner.and_then(|i| i.model.clone()));
        }
        if self.id.is_none() {
            self.id = inner.and_then(|i| i.id.clone()).or(c.id.clone());
        }
        let stop = c.delta.as_ref().and_then(|d| d.stop_reason.as_deref());
        if let Some(f) = stop.or(c.response.as_ref().and_then(|r| r.status.as_deref())) {
            self.finished(0, f);
        }
        let Some(n) = c.usage.as_ref().or(inner.and_then(|i| i.usage.as_ref())) else {
            return;
        };
        match ty {
            // Messages: the input once at the start, the output (a running
            // total) in `message_delta`.
            Some("message_start") => self.input += n.input(),
            Some("message_delta") => self.output += n.output(),
            _ => {
                self.input += n.input();
                self.output += n.output();
            }
        }
    }

    /// Adds a response's `usage` (an object) and notes its `model`: what
    /// [`Usage::sniff`] reads from a Responses envelope, for one read
    /// without a tree.
    pub fn add_response(
        &mut self,
        (id, model): (Option<&str>, Option<&str>),
        usage: &serde_json::Value,
    ) {
        let Ok(n) = Numbers::deserialize(usage) else {
            return;
        };
        if self.model.is_none() {
            self.model = model.map(str::to_string);
        }
        if self.id.is_none() {
            self.id = id.map(str::to_string);
        }
        self.input += n.input();
        self.output += n.output();
    }

    /// Anything to count.
    pub fn any(&self) -> bool {
        self.input > 0 || self.output > 0
    }

    /// Counts the tokens in the metrics (nothing when none were reported).
    pub fn count(&self, metrics: &crate::metrics::Metrics) {
        if self.any() {
            metrics.tokens(
                self.model.as_deref().unwrap_or("unknown"),
                self.input,
                self.output,
            );
        }
    }
}

/// `"usage":` followed by an object (not `null`), anywhere in `data`.
fn carries_usage(data: &[u8]) -> bool {
    // Built once: a finder per event cost more than the search.
    static USAGE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"usage\""));
    USAGE.find_iter(data).any(|at| {
        let rest = &data[at + 7..];
        let rest = rest.trim_ascii_start();
        rest.first() == Some(&b':') && rest[1..].trim_ascii_start().first() == Some(&b'{')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sniffed(events: &[&str]) -> Usage {
        let mut u = Usage::default();
        for e in events {
            u.sniff(e.as_bytes());
        }
        u
    }

    #[test]
    fn reads_each_protocols_usage_events_once() {
        let chat = sniffed(&[
            r#"{"id":"c","model":"gpt-x","choices":[{"delta":{"content":"hi"}}],"usage":null}"#,
            r#"{"id":"c","model":"gpt-x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
        ]);
        assert_eq!(
            chat,
            Usage {
                model: Some("gpt-x".into()),
                id: Some("c".into()),
                input: 12,
                output: 3,
                ..Usage::default()
            }
        );
        let messages = sniffed(&[
            r#"{"type":"message_start","message":{"id":"msg_x","model":"claude-x","usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
        ]);
        assert_eq!(
            messages,
            Usage {
                model: Some("claude-x".into()),
                id: Some("msg_x".into()),
                input: 25,
                output: 7,
                finish: vec![(0, "end_turn".into())],
                ..Usage::default()
            }
        );
        let responses = sniffed(&[
            r#"{"type":"response.created","response":{"model":"o-x","usage":null}}"#,
            r#"{"type":"response.completed","response":{"id":"resp_x","model":"o-x","status":"completed","usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}}"#,
        ]);
        assert_eq!(
            responses,
            Usage {
                model: Some("o-x".into()),
                id: Some("resp_x".into()),
                input: 9,
                output: 4,
                finish: vec![(0, "completed".into())],
                ..Usage::default()
            }
        );
        // A continued stream adds its second response's usage.
        let two = sniffed(&[
            r#"{"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            r#"{"model":"m","choices":[],"usage": {"prompt_tokens":10,"completion_tokens":20}}"#,
        ]);
        assert_eq!((two.input, two.output), (11, 22));
    }

    #[test]
    fn a_stream_without_usage_is_named_by_its_first_event() {
        let mut u = Usage::default();
        u.identify(
            br#"{"id":"chatcmpl-1","model":"gpt-x","choices":[{"delta":{"role":"assistant"}}]}"#,
        );
        u.identify(br#"{"id":"chatcmpl-2","model":"gpt-y","choices":[]}"#);
        u.settle();
        // An event with usage names the model the provider answered with.
        let mut v = Usage::default();
        v.identify(br#"{"id":"c","model":"m","choices":[]}"#);
        v.sniff(br#"{"id":"c","model":"gpt-z","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#);
        v.settle();
        assert_eq!(v.model.as_deref(), Some("gpt-z"));
        assert_eq!(
            (u.id.as_deref(), u.model.as_deref()),
            (Some("chatcmpl-1"), Some("gpt-x"))
        );
        let mut bad = Usage::default();
        bad.identify(b"not json");
        assert_eq!(bad.id, None);
    }

    #[test]
    fn whole_bodies_say_why_they_finished_by_choice() {
        let of = |t: &str| {
            let top: Obj = serde_json::from_str(t).unwrap_or(Obj {
                entries: Vec::new(),
            });
            Usage::of_top(&top).finish_reasons()
        };
        let chat = r#"{"choices":[{"index":1,"finish_reason":"stop"},{"index":0,"finish_reason":"tool_calls"}]}"#;
        assert_eq!(of(chat), ["tool_calls", "stop"]);
        assert_eq!(of(r#"{"stop_reason":"tool_use"}"#), ["tool_use"]);
        assert_eq!(
            of(r#"{"object":"response","status":"incomplete"}"#),
            ["incomplete"]
        );
        assert!(of(r#"{"choices":[{"index":0,"finish_reason":null}]}"#).is_empty());
    }

    #[test]
    fn whole_bodies_read_their_top_level_usage() {
        let top: Obj = serde_json::from_str(
            r#"{"id":"r","model":"m","usage":{"input_tokens":4,"output_tokens":2}}"#,
        )
        .unwrap_or(Obj {
            entries: Vec::new(),
        });
        assert_eq!(
            Usage::of_top(&top),
            Usage {
                model: Some("m".into()),
                id: Some("r".into()),
                input: 4,
                output: 2,
                ..Usage::default()
            }
        );
        let none: Obj = serde_json::from_str(r#"{"model":"m","usage":null}"#).unwrap_or(Obj {
            entries: Vec::new(),
        });
        assert!(!Usage::of_top(&none).any());
    }
}
