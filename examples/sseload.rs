//! A closed-loop load generator for long-lived SSE streams: N keep-alive
//! connections each post a streaming chat request, read its events as they
//! come, and post the next when `[DONE]` arrived, for a fixed time. Reports
//! first-byte latency (request sent to the first data event) and last-byte
//! latency (to the end of the response), as JSON on one line.
//!
//! Connections start spread over `--ramp-ms` (default: one stream's length
//! is not known, so 0 = all at once, as wrk does).
//!
//! Usage: sseload URL CONNECTIONS SECONDS [--warmup S] [--ramp-ms MS]
//!        [--body FILE] [--header 'Name: value'] [--events] [--ca FILE]
//!        [--samples FILE]
//! `--events` adds, per event index, the p50 and p99 arrival time;
//! `--samples` writes one line per counted request (when it was sent, µs
//! after the warm-up, then its first and last byte, µs after that), to see
//! which moments of a run its tail came from. An
//! `https` URL is reached over TLS (HTTP/1.1), trusting the CA in `--ca`.
//! Each `{seq}` in the body is replaced by the request's own number, so no
//! two requests ask the same (a judge cannot answer them from its cache).
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

const BODY: &str = r#"{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"What is the weather in San Francisco?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string"},"days":{"type":"integer"},"include_hourly":{"type":"boolean"}},"required":["location"]}}}]}"#;

struct Opts {
    url: hyper::Uri,
    conns: usize,
    secs: f64,
    warmup: f64,
    ramp: Duration,
    body: Bytes,
    headers: Vec<(String, String)>,
    events: bool,
    tls: Option<tokio_rustls::TlsConnector>,
    samples: Option<String>,
}

fn opts() -> Opts {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut pos = Vec::new();
    let mut o = Opts {
        url: "http://127.0.0.1:8080/v1/chat/completions".parse().unwrap(),
        conns: 100,
        secs: 10.0,
        warmup: 0.0,
        ramp: Duration::ZERO,
        body: Bytes::from_static(BODY.as_bytes()),
        headers: Vec::new(),
        events: false,
        tls: None,
        samples: None,
    };
    let mut ca = None;
    let mut i = 0;
    while i < a.len() {
        let next = |i: &mut usize| {
            *i += 1;
            a.get(*i).cloned().expect("a value after the flag")
        };
        match a[i].as_str() {
            "--warmup" => o.warmup = next(&mut i).parse().unwrap(),
            "--ramp-ms" => o.ramp = Duration::from_millis(next(&mut i).parse().unwrap()),
            "--body" => o.body = Bytes::from(std::fs::read(next(&mut i)).unwrap()),
            "--header" => {
                let h = next(&mut i);
                let (k, v) = h.split_once(':').expect("Name: value");
                o.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--events" => o.events = true,
            "--samples" => o.samples = Some(next(&mut i)),
            "--ca" => ca = Some(next(&mut i)),
            _ => pos.push(a[i].clone()),
        }
        i += 1;
    }
    if let Some(u) = pos.first() {
        o.url = u.parse().unwrap();
    }
    if let Some(c) = pos.get(1) {
        o.conns = c.parse().unwrap();
    }
    if let Some(s) = pos.get(2) {
        o.secs = s.parse().unwrap();
    }
    if o.url.scheme_str() == Some("https") {
        o.tls = Some(tls(ca.as_deref()));
    }
    o
}

/// A TLS client trusting the PEM CA at `ca`, offering HTTP/1.1 only.
fn tls(ca: Option<&str>) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = ca.expect("an https URL needs --ca FILE");
    for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
}

/// Either kind of socket the load goes over.
type Io = Box<dyn Socket>;
trait Socket: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Socket for T {}

async fn open(o: &Opts) -> Option<Io> {
    let host = o.url.host().unwrap();
    let port = o
        .url
        .port_u16()
        .unwrap_or(if o.tls.is_some() { 443 } else { 80 });
    let stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
    stream.set_nodelay(true).unwrap();
    match &o.tls {
        None => Some(Box::new(stream)),
        Some(c) => {
            let name = rustls::pki_types::ServerName::try_from(host.to_string()).ok()?;
            Some(Box::new(c.connect(name, stream).await.ok()?))
        }
    }
}

#[derive(Default)]
struct Seen {
    first: Vec<u32>,
    last: Vec<u32>,
    /// Per event index, the arrival times (µs after the request was sent).
    at: Vec<Vec<u32>>,
    /// Per request: when it was sent (µs after the run began), its first
    /// and last byte (µs after it was sent).
    sent: Vec<(u64, u32, u32)>,
    errors: u64,
}

/// One connection's loop: requests back to back until `until`; only those
/// sent after `measure_from` are counted.
async fn connection(
    o: &Opts,
    start_after: Duration,
    measure_from: Instant,
    until: Instant,
) -> Seen {
    tokio::time::sleep(start_after).await;
    let mut seen = Seen::default();
    let Some(stream) = open(o).await else {
        seen.errors += 1;
        return seen;
    };
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    else {
        seen.errors += 1;
        return seen;
    };
    tokio::spawn(conn);
    while Instant::now() < until {
        // Origin form (`POST /v1/...`), as clients send it to a server.
        let path = o.url.path_and_query().map_or("/", |p| p.as_str());
        let mut req = hyper::Request::post(path)
            .header("host", o.url.authority().unwrap().as_str())
            .header("content-type", "application/json");
        for (k, v) in &o.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.body(Full::new(body_of(o))).unwrap();
        let t = Instant::now();
        let counted = t >= measure_from;
        let Ok(resp) = send.send_request(req).await else {
            seen.errors += 1;
            return seen;
        };
        if !resp.status().is_success() {
            seen.errors += 1;
            let _ = resp.into_body().collect().await;
            continue;
        }
        let mut body = resp.into_body();
        let mut first = None;
        let mut done = false;
        let mut index = 0;
        let mut tail = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                seen.errors += 1;
                return seen;
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let now = t.elapsed().as_micros() as u32;
            first.get_or_insert(now);
            // Count the events that ended in this read.
            tail.extend_from_slice(&data);
            while let Some(p) = find(&tail, b"\n\n") {
                if tail[..p].ends_with(b"[DONE]") {
                    done = true;
                }
                if counted && o.events {
                    if seen.at.len() <= index {
                        seen.at.push(Vec::new());
                    }
                    seen.at[index].push(now);
                }
                index += 1;
                tail.drain(..p + 2);
            }
        }
        if !done {
            seen.errors += 1;
            continue;
        }
        if counted {
            let (first, last) = (first.unwrap_or(0), t.elapsed().as_micros() as u32);
            seen.first.push(first);
            seen.last.push(last);
            if o.samples.is_some() {
                let at = t.duration_since(measure_from).as_micros() as u64;
                seen.sent.push((at, first, last));
            }
        }
    }
    seen
}

/// The request body, its `{seq}` replaced by a number no other request had.
fn body_of(o: &Opts) -> Bytes {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Numbered from the clock, so a second run does not repeat the first's.
    static SEQ: std::sync::LazyLock<AtomicU64> = std::sync::LazyLock::new(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        AtomicU64::new(now.map_or(0, |d| d.as_micros() as u64) << 16)
    });
    if find(&o.body, b"{seq}").is_none() {
        return o.body.clone();
    }
    let n = SEQ.fetch_add(1, Ordering::Relaxed).to_string();
    let text = String::from_utf8_lossy(&o.body).replace("{seq}", &n);
    Bytes::from(text)
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn pct(v: &mut [u32]) -> String {
    if v.is_empty() {
        return "null".into();
    }
    v.sort_unstable();
    let at = |p: f64| v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1000.0;
    format!(
        "{{\"p50\":{:.2},\"p90\":{:.2},\"p99\":{:.2},\"max\":{:.2}}}",
        at(0.5),
        at(0.9),
        at(0.99),
        *v.last().unwrap() as f64 / 1000.0
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o: &'static Opts = Box::leak(Box::new(opts()));
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(o.warmup);
    let until = measure_from + Duration::from_secs_f64(o.secs);
    let tasks: Vec<_> = (0..o.conns)
        .map(|i| {
            let after = o.ramp.mul_f64(i as f64 / o.conns as f64);
            tokio::spawn(connection(o, after, measure_from, until))
        })
        .collect();
    let mut all = Seen::default();
    for t in tasks {
        let s = t.await.unwrap();
        all.first.extend(s.first);
        all.last.extend(s.last);
        all.errors += s.errors;
        all.sent.extend(s.sent);
        for (i, v) in s.at.into_iter().enumerate() {
            if all.at.len() <= i {
                all.at.push(Vec::new());
            }
            all.at[i].extend(v);
        }
    }
    if let Some(path) = &o.samples {
        all.sent.sort_unstable();
        let lines: Vec<String> = (all.sent.iter())
            .map(|(at, f, l)| format!("{at} {f} {l}"))
            .collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }
    let n = all.last.len();
    let mut out = format!(
        "{{\"connections\":{},\"requests\":{},\"rps\":{:.0},\"errors\":{},\"first_byte_ms\":{},\"last_byte_ms\":{}",
        o.conns,
        n,
        n as f64 / o.secs,
        all.errors,
        pct(&mut all.first),
        pct(&mut all.last)
    );
    if o.events {
        let ev: Vec<String> = all.at.iter_mut().map(|v| pct(v)).collect();
        out.push_str(&format!(",\"events_ms\":[{}]", ev.join(",")));
    }
    out.push('}');
    println!("{out}");
}
