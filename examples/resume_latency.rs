//! How soon a follow-up (`rewrite = "resume"`) leaves toolgate after the
//! rejection: a local upstream answers each streamed request with a call to
//! `shell`, which the policy rejects for resume, and the follow-up with
//! text. The upstream notes when it wrote the first response's last byte
//! and when the follow-up arrived; the difference (rejection, audit record,
//! follow-up written and sent) is reported over N requests. Also the time
//! a request without rejection takes end to end, for comparison.
//!
//! Usage: cargo run --release --example resume_latency [N]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

const POLICY: &str = "[[rule]]\nname = \"no-shell\"\ntools = \"shell\"\nverdict = \"reject\"\nrewrite = \"resume\"\n";

fn chunk(delta: &str, finish: &str) -> String {
    format!("data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
}

fn stream(tool: Option<&str>) -> String {
    let mut s = chunk(r#"{"role":"assistant","content":""}"#, "null");
    match tool {
        Some(t) => {
            let call = format!(
                r#"{{"tool_calls":[{{"index":0,"id":"c1","type":"function","function":{{"name":"{t}","arguments":"{{}}"}}}}]}}"#
            );
            s.push_str(&chunk(&call, "null"));
            s.push_str(&chunk("{}", "\"tool_calls\""));
        }
        None => {
            s.push_str(&chunk(r#"{"content":"done"}"#, "null"));
            s.push_str(&chunk("{}", "\"stop\""));
        }
    }
    s.push_str("data: [DONE]\n\n");
    s
}

#[derive(Default)]
struct Marks {
    sent_first: Option<Instant>,
    gaps: Vec<Duration>,
}

async fn upstream(marks: Arc<Mutex<Marks>>) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = l.accept().await.unwrap();
            let marks = marks.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let marks = marks.clone();
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let text = String::from_utf8_lossy(&body);
                        let follow_up = text.contains("\"role\":\"tool\"");
                        let tool = text.contains("\"name\":\"shell\"").then_some("shell");
                        let reply = match follow_up {
                            true => {
                                let mut m = marks.lock().unwrap();
                                if let Some(t) = m.sent_first.take() {
                                    m.gaps.push(t.elapsed());
                                }
                                stream(None)
                            }
                            false => stream(tool),
                        };
                        let resp = http::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Full::new(Bytes::from(reply)))
                            .unwrap();
                        if !follow_up && tool.is_some() {
                            marks.lock().unwrap().sent_first = Some(Instant::now());
                        }
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    addr
}

fn percentiles(mut d: Vec<Duration>) -> String {
    d.sort();
    let at = |p: f64| d[((d.len() - 1) as f64 * p) as usize].as_micros();
    format!(
        "p50 {} µs, p90 {} µs, p99 {} µs, max {} µs (n = {})",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        d.len()
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let marks = Arc::new(Mutex::new(Marks::default()));
    let up = upstream(marks.clone()).await;
    let dir = std::env::temp_dir().join(format!("toolgate-resume-latency-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(dir.join("policies/50-bench.toml"), POLICY).unwrap();
    std::fs::write(
        dir.join("policies/00-default.toml"),
        toolgate::policy::DEFAULT_POLICY,
    )
    .unwrap();
    std::env::set_var("RESUME_BENCH_KEY", "sk-bench");
    let cfg = format!("[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\nbase_url = \"http://{up}/v1\"\napi_key_env = \"RESUME_BENCH_KEY\"\n[audit]\npath = \"audit.jsonl\"\n[policy]\ndir = \"policies\"\n");
    std::fs::write(dir.join("toolgate.toml"), cfg).unwrap();
    let config = toolgate::Config::load(&dir.join("toolgate.toml")).unwrap();
    let state = toolgate::app::build(config).await.unwrap();
    let running = toolgate::server::start(state).await.unwrap();
    let url = format!("http://{}/v1/chat/completions", running.addr);
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut whole = Vec::new();
    for tool in ["shell", "read"] {
        let body = format!(
            r#"{{"model":"m","stream":true,"messages":[{{"role":"user","content":"go"}}],"tools":[{{"type":"function","function":{{"name":"{tool}","parameters":{{"type":"object"}}}}}}]}}"#
        );
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let req = http::Request::post(&url)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body.clone())))
                .unwrap();
            let resp = client.request(req).await.unwrap();
            let text = resp.into_body().collect().await.unwrap().to_bytes();
            assert!(text.ends_with(b"data: [DONE]\n\n"));
            times.push(t.elapsed());
        }
        whole.push((tool, times));
    }
    let gaps = std::mem::take(&mut marks.lock().unwrap().gaps);
    assert_eq!(gaps.len(), n, "every rejected call was followed up");
    println!(
        "rejection → follow-up at the upstream: {}",
        percentiles(gaps)
    );
    for (tool, times) in whole {
        let what = match tool {
            "shell" => "with a follow-up",
            _ => "text only, no follow-up",
        };
        println!("whole request, {what}: {}", percentiles(times));
    }
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
