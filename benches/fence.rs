//! Criterion bench of redaction + fencing: one 1 MB tool result, and a request
//! with 50 small tool results (fenced, and found fenced on an earlier turn).
//! Reported in bytes/s of tool-result text.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Value};
use toolgate::fence::redact::Redactor;
use toolgate::fence::Settings;
use toolgate::policy::PolicySet;
use toolgate::protocol::Protocol;

fn page(n: usize) -> String {
    let line = "The quarterly report shows revenue of $12,400 up 8% from last year; see https://corp.example/q3 for details. ";
    let mut s = String::with_capacity(n + line.len());
    let mut i = 0;
    while s.len() < n {
        s.push_str(line);
        if i % 97 == 0 {
            s.push_str("password=hunter2 ");
        }
        i += 1;
    }
    s
}

fn request(results: &[String]) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "summarise"})];
    for (i, r) in results.iter().enumerate() {
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": r}));
    }
    json!({"model": "m", "messages": messages})
}

fn bench(c: &mut Criterion) {
    let policy = PolicySet::embedded().unwrap();
    let redactor = Redactor::new(vec![(
        "sk-or-v1-0123456789abcdef0123456789abcdef".into(),
        "upstream_key",
    )]);
    let s = Settings {
        secret: b"bench-secret",
        redactor: &redactor,
        policy: &policy,
        max_bytes: None,
        kept: None,
        digests: Default::default(),
    };
    let kept = toolgate::fence::kept::Kept::default();
    let seen = Settings {
        secret: b"bench-secret",
        redactor: &redactor,
        policy: &policy,
        max_bytes: None,
        kept: Some(&kept),
        digests: Default::default(),
    };
    let big = request(&[page(1 << 20)]);
    let small = request(&(0..50).map(|_| page(400)).collect::<Vec<_>>());
    let mut g = c.benchmark_group("fence_and_redact");
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("one_1mb_tool_result", |b| {
        b.iter(|| Protocol::Chat.fence(&mut big.clone(), &s, true))
    });
    g.throughput(Throughput::Bytes(50 * 400));
    g.bench_function("fifty_small_tool_results", |b| {
        b.iter(|| Protocol::Chat.fence(&mut small.clone(), &s, true))
    });
    // The same results on the next turn of the conversation.
    Protocol::Chat.fence(&mut small.clone(), &seen, true);
    g.bench_function("fifty_small_tool_results_seen_before", |b| {
        b.iter(|| Protocol::Chat.fence(&mut small.clone(), &seen, true))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
