//! A closed-loop HTTP/1.1 load generator: N keep-alive connections each send
//! `POST /v1/chat/completions` back to back for a fixed time, reading every
//! response to its end. Prints requests/s and latency percentiles.
//!
//! Usage: cargo run --release --example loadgen -- URL CONNECTIONS SECONDS stream|json
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

async fn worker(url: hyper::Uri, body: Bytes, until: Instant) -> (Vec<u32>, u64) {
    let addr = format!("{}:{}", url.host().unwrap(), url.port_u16().unwrap());
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut lat = Vec::with_capacity(100_000);
    let mut bytes = 0u64;
    while Instant::now() < until {
        let req = hyper::Request::post(url.clone())
            .header("host", url.authority().unwrap().as_str())
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .unwrap();
        let t = Instant::now();
        let resp = send.send_request(req).await.unwrap();
        assert!(resp.status().is_success(), "status {}", resp.status());
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        lat.push(t.elapsed().as_micros() as u32);
        bytes += b.len() as u64;
    }
    (lat, bytes)
}

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let url: hyper::Uri = a[1].parse().unwrap();
    // "json" and "stream" post a chat request; anything else posts it as a plain JSON body too.
    let conns: usize = a[2].parse().unwrap();
    let secs: u64 = a[3].parse().unwrap();
    let stream = a[4] == "stream";
    let body = Bytes::from(serde_json::json!({"model": "mock", "stream": stream, "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}).to_string());
    let start = Instant::now();
    let until = start + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..conns)
        .map(|_| tokio::spawn(worker(url.clone(), body.clone(), until)))
        .collect();
    let mut all = Vec::new();
    let mut bytes = 0;
    for t in tasks {
        let (l, b) = t.await.unwrap();
        all.extend(l);
        bytes += b;
    }
    let wall = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)] as f64 / 1000.0;
    println!(
        "{{\"requests\":{},\"rps\":{:.0},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"bytes_per_resp\":{}}}",
        all.len(),
        all.len() as f64 / wall,
        pct(0.50),
        pct(0.99),
        *all.last().unwrap() as f64 / 1000.0,
        bytes / all.len().max(1) as u64
    );
}
