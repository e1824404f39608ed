//! A script: rules that pick the model's turn from what a request asks,
//! written in TOML for `toolgate mock --script`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

use super::asked::{Asked, Wire};
use super::render::{render, Cut, Turn, Use};
use super::reply::Reply;
use super::server::Seen;
use crate::error::Error;

/// The script `toolgate mock` runs without `--script`: a mention of email
/// gets a `comm.email` call, anything else a `get_weather` call; once tool
/// results came back, the model answers with text.
pub const DEFAULT: &str = include_str!("default.toml");

/// When a rule applies, and the turn the model then takes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The user's last words contain this (any case).
    #[serde(default)]
    pub cue: Option<String>,
    /// The request declares a tool of this name.
    #[serde(default)]
    pub declared: Option<String>,
    /// Whether tool results have come back in the request.
    #[serde(default)]
    pub results: Option<bool>,
    /// What the model says.
    #[serde(default)]
    pub text: String,
    /// The calls it makes, in order.
    #[serde(default, rename = "call")]
    pub calls: Vec<Call>,
    /// Milliseconds the model thinks before it answers (0: at once).
    #[serde(default)]
    pub delay_ms: u64,
}

/// One call of a rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

fn two() -> usize {
    2
}

/// The rules, tried in order (the first that applies answers), and how
/// the turn is streamed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Fragments each call's arguments are streamed in.
    #[serde(default = "two")]
    pub fragments: usize,
    /// A usage chunk on every Chat Completions stream, asked for or not.
    #[serde(default)]
    pub usage: bool,
    /// Milliseconds between streamed events (0: all at once).
    #[serde(default)]
    pub event_delay_ms: u64,
    #[serde(default, rename = "rule")]
    pub rules: Vec<Rule>,
    /// Bodies already rendered, by what decides them.
    #[serde(skip)]
    rendered: Arc<Mutex<HashMap<Key, (&'static str, Bytes)>>>,
}

/// What decides a rendered body: the rule, the wire format, streaming,
/// usage asked for, the model.
type Key = (usize, Wire, bool, bool, String);

/// Rendered bodies kept at most.
const RENDERED: usize = 256;

impl Rule {
    fn applies(&self, asked: &Asked) -> bool {
        let cue = self.cue.as_ref().is_none_or(|c| {
            asked
                .last_user_text
                .to_lowercase()
                .contains(&c.to_lowercase())
        });
        let declared = self
            .declared
            .as_ref()
            .is_none_or(|d| asked.declared.iter().any(|n| n == d));
        let results = self
            .results
            .is_none_or(|came_back| came_back != asked.tool_results.is_empty());
        cue && declared && results
    }

    fn turn(&self) -> Turn {
        Turn {
            text: self.text.clone(),
            calls: self
                .calls
                .iter()
                .map(|c| Use {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        }
    }
}

/// An error in the wire format's own shape.
fn error(wire: Option<Wire>, status: u16, kind: &str, message: &str) -> Reply {
    let body = match wire {
        Some(Wire::Messages) => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Some(Wire::Gemini) => {
            json!({"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}})
        }
        _ => json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
    };
    Reply::json(status, body.to_string())
}

impl Script {
    /// Reads a script from TOML; unknown keys are errors.
    pub fn parse(file: &str, text: &str) -> Result<Script, Error> {
        toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| {
                text.get(..s.start)
                    .map_or(0, |t| t.matches('\n').count() + 1)
            });
            Error::config(file, line, e.message())
        })
    }

    /// A script of these rules; arguments in two fragments, usage when asked.
    pub fn with_rules(rules: Vec<Rule>) -> Script {
        Script {
            fragments: two(),
            usage: false,
            event_delay_ms: 0,
            rules,
            rendered: Arc::default(),
        }
    }

    /// The built-in script ([`DEFAULT`]).
    pub fn builtin() -> Result<Script, Error> {
        Script::parse("(built-in mock script)", DEFAULT)
    }

    /// The reply to one request.
    pub fn answer(&self, seen: &Seen) -> Reply {
        let path = seen.path.split('?').next().unwrap_or_default();
        if seen.method == http::Method::GET {
            return match path {
                "/health" | "/readyz" => Reply::Body {
                    status: 200,
                    content_type: "text/plain",
                    body: Bytes::from_static(b"ok"),
                    gzip: false,
                    encoding: None,
                },
                p if p.ends_with("/models") => Reply::json(
                    200,
                    json!({"object": "list", "data": [{"id": "mock-model", "object": "model",
                        "created": 0, "owned_by": "toolgate-mock"}]})
                    .to_string(),
                ),
                _ => error(None, 404, "not_found_error", "not found"),
            };
        }
        if path.ends_with("/count_tokens") {
            return Reply::json(200, r#"{"input_tokens":10}"#);
        }
        let wire = Wire::of_path(path);
        let Some(asked) = Asked::read(seen) else {
            return match wire {
                None => error(None, 404, "not_found_error", "not found"),
                Some(_) => error(
                    wire,
                    400,
                    "invalid_request_error",
                    "the body is no JSON object",
                ),
            };
        };
        let Some((at, rule)) = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.applies(&asked))
        else {
            return error(
                wire,
                400,
                "invalid_request_error",
                "the mock's script has no rule for this request",
            );
        };
        let cut = Cut {
            fragments: self.fragments,
            usage: self.usage,
        };
        let key = (
            at,
            asked.wire,
            asked.stream,
            asked.include_usage,
            asked.model.clone(),
        );
        let (content_type, body) = match self.rendered(&key) {
            Some(done) => done,
            None => {
                let done = render(&rule.turn(), &asked, cut);
                self.keep(key, done.clone());
                done
            }
        };
        let reply = match (asked.stream, self.event_delay_ms) {
            (true, 0) => Reply::Body {
                status: 200,
                content_type,
                body,
                gzip: false,
                encoding: None,
            },
            (true, ms) => Reply::Paced {
                body,
                delay: Duration::from_millis(ms),
            },
            (false, _) => Reply::json(200, body),
        };
        match rule.delay_ms {
            0 => reply,
            ms => Reply::After(Duration::from_millis(ms), Box::new(reply)),
        }
    }

    fn rendered(&self, key: &Key) -> Option<(&'static str, Bytes)> {
        let done = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        done.get(key).cloned()
    }

    /// Keeps a rendered body for the next request that asks the same (at
    /// most [`RENDERED`] of them).
    fn keep(&self, key: Key, done: (&'static str, Bytes)) {
        let mut kept = self.rendered.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= RENDERED {
            kept.clear();
        }
        kept.insert(key, done);
    }

    /// The script as the reply a [`super::Provider`] gives every request.
    pub fn reply(self) -> Reply {
        let script = Arc::new(self);
        Reply::computed(move |seen| script.answer(seen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(path: &str, body: Value) -> Seen {
        Seen {
            path: path.into(),
            method: http::Method::POST,
            version: http::Version::HTTP_11,
            headers: http::HeaderMap::new(),
            body: Bytes::from(body.to_string()),
        }
    }

    fn body(r: Reply) -> (u16, String) {
        match r {
            Reply::Body { status, body, .. } => {
                (status, String::from_utf8_lossy(&body).into_owned())
            }
            r => (0, format!("{r:?}")),
        }
    }

    #[test]
    fn the_builtin_script_calls_by_cue_and_answers_text_after_results() {
        let s = Script::builtin().unwrap_or_else(|e| panic!("{e}"));
        let (st, b) = body(s.answer(&seen(
            "/v1/chat/completions",
            json!({"model": "m", "messages": [{"role": "user", "content": "Email Bob"}]}),
        )));
        assert_eq!(st, 200);
        assert!(b.contains("comm.email"), "{b}");
        let (_, b) = body(s.answer(&seen(
            "/v1/messages",
            json!({"model": "m", "messages": [{"role": "user", "content": "weather?"}]}),
        )));
        assert!(
            b.contains(r#""name":"get_weather""#) && b.contains("tool_use"),
            "{b}"
        );
        let (_, b) = body(s.answer(&seen(
            "/v1/responses",
            json!({"model": "m", "input": [{"role": "user", "content": "weather?"},
                {"type": "function_call_output", "call_id": "c", "output": "sunny"}]}),
        )));
        assert!(!b.contains("function_call"), "{b}");
    }

    #[test]
    fn unknown_keys_and_bad_bodies_are_errors() {
        let e = Script::parse("s.toml", "[[rule]]\ntext = \"x\"\nwhen = 1\n");
        assert!(e.is_err());
        let s = Script::builtin().unwrap_or_else(|e| panic!("{e}"));
        let mut bad = seen("/v1/messages", json!(null));
        bad.body = Bytes::from_static(b"{not json");
        let (st, b) = body(s.answer(&bad));
        assert_eq!(st, 400);
        assert!(b.contains(r#""type":"error""#), "{b}");
        let (st, _) = body(s.answer(&seen("/v1/embeddings", json!({}))));
        assert_eq!(st, 404);
    }
}
