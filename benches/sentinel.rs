//! Sentinel costs: a decision whose judgment is cached, and the latency an
//! uncached judgment adds compared with one bare round trip to the judge
//! (an in-process judge on 127.0.0.1 answering from memory).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use toolgate::call::Call;
use toolgate::context::{Context, Declared};
use toolgate::gate::sentinel::Sentinel;
use toolgate::gate::{Gates, Parts};
use toolgate::policy::PolicySet;
use toolgate::upstream::judge::Judge;

async fn judge_server() -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let answer = Bytes::from(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"decision\":\"approve\",\"reason\":\"ok\",\"confidence\":0.95}"}}]}).to_string());
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let a = answer.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |r: hyper::Request<hyper::body::Incoming>| {
                    let a = a.clone();
                    async move {
                        let _ = r.into_body().collect().await;
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(a)))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(judge_server());
    std::env::set_var("TG_BENCH_JUDGE_KEY", "k");
    let cfg = toolgate::Config::from_toml(
        &format!(
            "[judge]\nbase_url = \"http://{addr}/v1\"\napi_key_env = \"TG_BENCH_JUDGE_KEY\"\n"
        ),
        "bench",
        std::path::Path::new("."),
    )
    .unwrap();
    let judge = Judge::new(cfg.judge.as_ref().unwrap()).unwrap();
    let policy = PolicySet::from_sources(&[
        (
            "default.toml".into(),
            toolgate::policy::DEFAULT_POLICY.into(),
        ),
        (
            "c.toml".into(),
            "[[tool]]\nmatch = \"email.send\"\nclass = \"irreversible\"\n".into(),
        ),
    ])
    .unwrap();
    let parts = Parts {
        namespaces: toolgate::gate::signals::Namespaces {
            separators: vec![".".into()],
            prefixes: Vec::new(),
        },
        threshold: 0.8,
        sensors: vec![Arc::new(Sentinel::new(judge.clone(), 0.8, false))],
        ..Parts::default()
    };
    let gates = Gates::new(Arc::new(policy), &parts);
    let mut ctx = Context {
        phase: "execution".into(),
        principal: "p".into(),
        session: "s".into(),
        agent: "a".into(),
        ..Context::default()
    };
    ctx.original_request = Some("Send John the confirmation".into());
    ctx.declared
        .insert("email.send".into(), Declared { parameters: None });
    let call = |i: u64| Call {
        id: "c".into(),
        name: "email.send".into(),
        arguments: format!("{{\"to\":\"john@example.com\",\"n\":{i}}}"),
        kind: toolgate::call::Kind::Function,
        ..Call::default()
    };

    // Uncached: distinct arguments each time; compared with a bare round trip.
    let mut uncached = Vec::new();
    let mut bare = Vec::new();
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
    for i in 0..300u64 {
        let t = Instant::now();
        let d = rt.block_on(gates.decide(&call(i), &ctx));
        uncached.push(t.elapsed());
        assert_eq!(d.verdict, toolgate::policy::Verdict::Allow);
        let t = Instant::now();
        rt.block_on(async {
            let r = client
                .request(
                    hyper::Request::post(format!("http://{addr}/v1/chat/completions"))
                        .body(Full::new(Bytes::from_static(b"{}")))
                        .unwrap(),
                )
                .await
                .unwrap();
            let _ = r.into_body().collect().await;
        });
        bare.push(t.elapsed());
    }
    let med = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    eprintln!(
        "uncached decision: median {:?}; bare judge round trip: median {:?}",
        med(&mut uncached),
        med(&mut bare)
    );

    let warm = call(1);
    rt.block_on(gates.decide(&warm, &ctx));
    let mut g = c.benchmark_group("sentinel");
    g.bench_function("cached_decision", |b| {
        b.iter(|| rt.block_on(gates.decide(&warm, &ctx)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
