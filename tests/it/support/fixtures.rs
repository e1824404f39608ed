//! The recorded provider streams (`../shared/fixtures/sse`, by protocol)
//! and the repository's own fixtures, and the test upstream key.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;

pub const UPSTREAM_KEY: &str = "sk-or-v1-test-upstream-key-0123456789abcdef";

pub const KEY_ENV: &str = "TOOLGATE_IT_UPSTREAM_KEY";

/// `../shared/fixtures/sse`, if present.
pub fn fixtures_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/sse");
    d.is_dir().then_some(d)
}

/// This repository's own fixtures.
pub fn own_fixture(name: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    Bytes::from(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// The shared fixtures whose file name `keep` accepts, sorted.
fn shared_fixtures(keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Some(dir) = fixtures_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| keep(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// Every chat-completions fixture (SSE and non-streaming JSON) in the shared set.
pub fn chat_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| {
        let other_api = [
            "anthropic-messages",
            "openai-responses",
            "deepseek-responses",
            "bedrock-mantle",
        ]
        .iter()
        .any(|x| n.starts_with(x));
        !other_api && !n.ends_with(".request.json") && (n.ends_with(".sse") || n.ends_with(".json"))
    })
}

/// Every Responses-API stream in the shared set.
pub fn responses_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| {
        n.ends_with(".sse") && (n.contains("-responses-") || n.starts_with("bedrock-mantle"))
    })
}

/// Every Anthropic Messages stream in the shared set.
pub fn messages_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| n.starts_with("anthropic-messages") && n.ends_with(".sse"))
}

/// The `response` of a Responses stream's `response.completed` event.
pub fn responses_final(sse: &[u8]) -> Value {
    String::from_utf8_lossy(sse)
        .split("\n")
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == "response.completed")
        .map(|v| v["response"].clone())
        .unwrap_or(Value::Null)
}

/// `input` cut at `cuts` (each taken modulo its length, in order).
pub fn cut_at<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.sort();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(&input[last..p]);
        last = p;
    }
    out.push(&input[last..]);
    out
}

/// Skips a test with a clear message when `../shared` is absent, unless
/// `TOOLGATE_REQUIRE_FIXTURES=1` (set by CI), where a missing set fails.
#[macro_export]
macro_rules! need_fixtures {
    () => {
        if $crate::support::fixtures_dir().is_none() {
            assert!(
                std::env::var("TOOLGATE_REQUIRE_FIXTURES").as_deref() != Ok("1"),
                "../shared/fixtures/sse is absent and TOOLGATE_REQUIRE_FIXTURES=1"
            );
            eprintln!("SKIPPED: ../shared/fixtures/sse is absent (clone with ../shared beside the repository)");
            return;
        }
    };
}
