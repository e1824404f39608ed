//! Many slow streams at once: opens STREAMS streaming chat requests, PER_CONN
//! of them multiplexed on each HTTP/2 (h2c) connection, all started before
//! any ends, and reads each to its end. Prints how many completed whole (a
//! gated call and `[DONE]` seen) and how long it took. Used by
//! `bench/slow_streams.sh`, which measures toolgate's memory meanwhile.
//!
//! Usage: slowload URL STREAMS PER_CONN
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};

const BODY: &str = r#"{"model":"mock","stream":true,"messages":[{"role":"user","content":"weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}"#;

#[tokio::main]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let url: http::Uri = a.get(1).expect("URL").parse().unwrap();
    let streams: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let per_conn: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let addr = format!("{}:{}", url.host().unwrap(), url.port_u16().unwrap_or(80));
    let (ok, failed, open, peak) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..streams.div_ceil(per_conn) {
        let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (tx, conn) = http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(64 * 1024)
            .handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(conn);
        for _ in 0..per_conn.min(streams - c * per_conn) {
            let mut tx = tx.clone();
            let url = url.clone();
            let (ok, failed, open, peak) = (ok.clone(), failed.clone(), open.clone(), peak.clone());
            tasks.push(tokio::spawn(async move {
                let req = http::Request::post(url)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(BODY.as_bytes())))
                    .unwrap();
                let whole = async {
                    tx.ready().await.ok()?;
                    let resp = tx.send_request(req).await.ok()?;
                    let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    let body = resp.into_body().collect().await.ok()?.to_bytes();
                    open.fetch_sub(1, Ordering::SeqCst);
                    let text = String::from_utf8_lossy(&body);
                    (text.contains("get_weather") && text.contains("[DONE]")).then_some(())
                }
                .await;
                match whole {
                    Some(()) => ok.fetch_add(1, Ordering::SeqCst),
                    None => failed.fetch_add(1, Ordering::SeqCst),
                };
            }));
        }
    }
    let started = start.elapsed();
    for t in tasks {
        let _ = t.await;
    }
    println!(
        "streams {streams}: {} whole, {} failed; at most {} open at once; all started in {:.1} s, done in {:.1} s",
        ok.load(Ordering::SeqCst),
        failed.load(Ordering::SeqCst),
        peak.load(Ordering::SeqCst),
        started.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
}
