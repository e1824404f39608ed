//! Criterion bench of the deterministic pipeline for one call with a 2 KB
//! argument object against a policy of 100 rules: when 10 rules apply to the
//! tool (the other 90 name other tools and are skipped by the rule index) and
//! when all 100 apply. Also prints p50/p99 over 20,000 single decisions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use toolgate::call::Call;
use toolgate::context::{Context, Declared};
use toolgate::gate::{Gates, Parts};
use toolgate::policy::PolicySet;

/// 100 rules with three-clause conditions; `applying` of them name `target`.
fn policy(applying: usize, all_apply: bool) -> String {
    let mut s = String::from("[defaults]\nverdict = \"allow\"\n");
    for i in 0..100 {
        let tools = if all_apply || i < applying {
            "\"send_report\"".to_string()
        } else {
            format!("\"other_tool_{i}\"")
        };
        s.push_str(&format!(
            "\n[[rule]]\nname = \"r{i}\"\ntools = [{tools}]\nwhen = \"phase == 'planning' && has(args.amount) && args.amount > {i}000.0\"\nverdict = \"reject\"\n"
        ));
    }
    s
}

fn call() -> Call {
    let body = "lorem ipsum dolor sit amet ".repeat(72);
    let args = json!({"to": "finance@corp.example", "amount": 12.5, "url": "https://reports.corp.example/q3", "body": body});
    let arguments = args.to_string();
    assert!(
        (2000..2200).contains(&arguments.len()),
        "{}",
        arguments.len()
    );
    Call {
        id: "c1".into(),
        name: "send_report".into(),
        arguments,
        kind: toolgate::call::Kind::Function,
        ..Call::default()
    }
}

fn ctx() -> Context {
    let mut c = Context {
        phase: "execution".into(),
        principal: "p".into(),
        session: "s".into(),
        agent: "a".into(),
        ..Context::default()
    };
    c.user_text = "send the q3 report to finance".into();
    c.declared.insert("send_report".into(), Declared::new(Some(&json!({"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "number"}}, "required": ["to"]}))));
    c
}

fn gates(src: String) -> Gates {
    let p = PolicySet::from_sources(&[("bench.toml".into(), src)]).unwrap();
    Gates::new(
        Arc::new(p),
        &Parts {
            namespaces: toolgate::gate::signals::Namespaces {
                separators: vec![".".into()],
                prefixes: vec!["comm".into()],
            },
            threshold: 0.8,
            ..Parts::default()
        },
    )
}

fn percentiles(name: &str, g: &Gates, rt: &tokio::runtime::Runtime) {
    let (c, x) = (call(), ctx());
    let mut t: Vec<u128> = (0..20_000)
        .map(|_| {
            let s = Instant::now();
            let d = rt.block_on(g.decide(&c, &x));
            assert_eq!(d.verdict, toolgate::policy::Verdict::Allow);
            s.elapsed().as_nanos()
        })
        .collect();
    t.sort_unstable();
    eprintln!(
        "{name}: p50 {:.1} µs, p99 {:.1} µs",
        t[t.len() / 2] as f64 / 1e3,
        t[t.len() * 99 / 100] as f64 / 1e3
    );
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ten = gates(policy(10, false));
    let all = gates(policy(100, true));
    percentiles("10 of 100 rules apply", &ten, &rt);
    percentiles("100 of 100 rules apply", &all, &rt);
    let (call, ctx) = (call(), ctx());
    let mut g = c.benchmark_group("policy_pipeline");
    g.bench_function("2kb_args_10_of_100_rules", |b| {
        b.iter(|| rt.block_on(ten.decide(&call, &ctx)))
    });
    g.bench_function("2kb_args_100_of_100_rules", |b| {
        b.iter(|| rt.block_on(all.decide(&call, &ctx)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
