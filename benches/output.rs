//! Output validation, stages 1 and 2: claim detectors and the fact
//! check of a 2 KB outgoing message against 10,000 registered facts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use toolgate::facts::{claims, Fact, Registry};

fn registry(n: usize) -> Registry {
    Registry::new(
        (0..n)
            .map(|i| Fact {
                subject: format!("service-{i}"),
                predicate: if i % 3 == 0 {
                    "value".into()
                } else {
                    "request count".into()
                },
                value: format!("{}", 1000 + i * 7),
                source: "bench".into(),
            })
            .collect(),
    )
    .unwrap()
}

/// About 2 KB of announcement prose naming a few registered subjects, with numbers.
fn message() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 2048 {
        s.push_str(&format!(
            "This week service-{} handled a request count of {} with 99.9% uptime, and our team of 40 engineers shipped 12 releases. ",
            i * 97,
            1000 + i * 97 * 7 + (i % 2),
        ));
        i += 1;
    }
    s
}

fn bench(c: &mut Criterion) {
    let reg = registry(10_000);
    let text = message();
    let found = reg.check(&text);
    assert!(!found.relevant.is_empty() && !found.contradictions.is_empty());
    c.bench_function("output: stages 1+2, 2 KB vs 10k facts", |b| {
        b.iter(|| {
            let cl = claims::claims(black_box(&text));
            let f = reg.check(black_box(&text));
            black_box((cl, f))
        })
    });
    c.bench_function("output: stage 1 only (claims), 2 KB", |b| {
        b.iter(|| black_box(claims::claims(black_box(&text))))
    });
    c.bench_function("output: stage 2 only (facts), 2 KB vs 10k facts", |b| {
        b.iter(|| black_box(reg.check(black_box(&text))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
