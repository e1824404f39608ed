//! The audit trail's hash chain per record: linking a typical record to the
//! one before and hashing it (what the chain adds to each audit write), and
//! a whole `record` call to a file.
#![allow(clippy::unwrap_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use toolgate::audit::{chain, AuditLog};
use toolgate::config::{Audit, AuditOnError, AuditPath};

/// A record the size of a real one (about 700 bytes).
fn record() -> serde_json::Value {
    serde_json::json!({
        "ts": "2026-11-24T08:00:00.000Z", "request_id": "tg-0123456789abcdef-42",
        "principal": "agent-a", "choice": 0, "tool": "get_weather", "call_id": "call_abc123",
        "verdict": "allow", "gate": "policy", "reason": "", "rule": "weather-ok",
        "gates": [{"gate": "phase", "verdict": "allow", "us": 1}, {"gate": "schema", "verdict": "allow", "us": 3},
                  {"gate": "policy", "verdict": "allow", "us": 9}],
        "args_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "args_bytes": 18, "args_oversized": false, "policy": "v-0123456789abcdef",
        "signals": {"phase": "execution", "tool.class": "read", "provenance.args_from_tool_results": 0}
    })
}

fn bench(c: &mut Criterion) {
    let body = serde_json::to_vec(&record()).unwrap();
    let prev = chain::hash(None, &body);
    let mut g = c.benchmark_group("audit");
    g.bench_function("chain_link_and_hash", |b| {
        b.iter(|| chain::hash(None, &chain::link(&prev, &body)))
    });
    let path = std::env::temp_dir().join(format!("tg-bench-audit-{}.jsonl", std::process::id()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let cfg = Audit {
        path: AuditPath::File(path.clone()),
        on_error: AuditOnError::FailClosed,
        include_judge_reason: false,
        max_bytes: Some(64 << 20),
        keep: 1,
        key_env: "TOOLGATE_BENCH_NO_AUDIT_KEY".into(),
    };
    let log = rt
        .block_on(AuditLog::start(&cfg, Default::default()))
        .unwrap();
    let rec = record();
    g.bench_function("record_to_file", |b| {
        b.iter(|| rt.block_on(log.record(&rec)).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("jsonl.1"));
}

criterion_group!(benches, bench);
criterion_main!(benches);
