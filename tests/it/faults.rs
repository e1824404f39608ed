//! Upstream faults over real sockets: a refused connection, a failed TLS
//! handshake, broken HTTP, a reset mid-stream, an idle stream, 429 and 5xx
//! with `Retry-After`, and HTTP/2 GOAWAY (before the answer, under a stream
//! in flight, with an error mid-stream). Each gives the agent a clean,
//! generic error, releases no held call, and is counted by kind in
//! `toolgate_upstream_faults_total`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::accumulate::Acc;
use crate::support::*;

const COMPLETION: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;

/// The `toolgate_upstream_faults_total` counts on the admin port, by kind.
pub(crate) async fn faults(gate: &Gate) -> Vec<(String, u64)> {
    let m = send("GET", &format!("{}/metrics", gate.admin), &[], "").await;
    m.text()
        .lines()
        .filter_map(|l| l.strip_prefix("toolgate_upstream_faults_total{kind=\""))
        .filter_map(|l| {
            let (kind, n) = l.split_once("\"} ")?;
            Some((kind.to_string(), n.trim().parse().ok()?))
        })
        .collect()
}

pub(crate) fn counted(kind: &str) -> Vec<(String, u64)> {
    vec![(kind.to_string(), 1)]
}

/// A generic error in the OpenAI shape, naming nothing of the fault.
pub(crate) fn assert_generic(a: &Answer, status: u16) {
    assert_eq!(a.status, status, "{}", a.text());
    let v = a.json();
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("The model provider"), "{message}");
    for leak in [
        "refused",
        "tls",
        "certificate",
        "reset",
        "GOAWAY",
        "hyper",
        "127.0.0.1",
    ] {
        assert!(!a.text().contains(leak), "{leak} in {}", a.text());
    }
}

/// An upstream that accepts and answers every connection with `reply`
/// (raw bytes), then closes it.
async fn raw(reply: &'static [u8]) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(reply).await;
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_faults_are_generic_502s_counted_by_kind() {
    // Refused: a port that is bound but not listening. It stays bound for
    // the test: a port freed instead could be handed to the next listener
    // (the gate's own, say), and then the connection would not be refused.
    let closed = tokio::net::TcpSocket::new_v4().unwrap();
    closed.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    assert_generic(&post_chat(&gate, &chat_request(true, &["t"])).await, 502);
    assert_eq!(faults(&gate).await, counted("refused"));
    gate.stop().await;
    drop(closed);

    // TLS: the upstream speaks plain HTTP where TLS was expected.
    let url = raw(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
    let gate = start_gate(&url.replace("http:", "https:"), ALLOW_ALL, "").await;
    assert_generic(&post_chat(&gate, &chat_request(true, &["t"])).await, 502);
    assert_eq!(faults(&gate).await, counted("tls"));
    gate.stop().await;

    // Broken HTTP.
    let url = raw(b"SMTP ready\r\n\r\n").await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    assert_generic(&post_chat(&gate, &chat_request(false, &["t"])).await, 502);
    assert_eq!(faults(&gate).await, counted("protocol"));
    gate.stop().await;

    // Closed with no answer at all.
    let url = raw(b"").await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    assert_generic(&post_chat(&gate, &chat_request(false, &["t"])).await, 502);
    assert_eq!(faults(&gate).await, counted("reset"));
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_pass_retry_after_and_are_counted_by_kind() {
    for (status, kind, want) in [
        (429, "rate_limited", 429),
        (503, "status_5xx", 503),
        (400, "status_4xx", 400),
    ] {
        let reply = Reply::Headed(
            vec![("retry-after", "9".to_string())],
            Box::new(Reply::json(status, r#"{"error":{"message":"busy org-x"}}"#)),
        );
        let mock = start_mock(vec![reply]).await;
        let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
        let a = post_chat(&gate, &chat_request(true, &["t"])).await;
        assert_eq!(a.status, want, "{}", a.text());
        assert_eq!(a.headers["retry-after"], "9", "{status}");
        // The provider's own words pass (toolgate's errors stay generic).
        assert_eq!(a.json()["error"]["message"], "busy org-x");
        assert_eq!(faults(&gate).await, counted(kind));
        gate.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_or_an_idle_stream_ends_well_formed_releases_nothing_and_is_counted() {
    let held = [
        chunk(0, json!({"content": "partial "}), None),
        chunk(0, call_delta(0, "call_a", "t", "{\"a\":"), None),
    ]
    .concat();
    let reset = Reply::Sse {
        body: held.clone().into(),
        chunk: 50,
        delay: Duration::ZERO,
        reset: true,
        gzip: false,
    };
    let idle = Reply::Paused {
        before: held.into(),
        after: Bytes::new(),
        go: Arc::new(tokio::sync::Notify::new()),
    };
    for (reply, kind) in [(reset, "reset"), (idle, "idle")] {
        let mock = start_mock(vec![reply]).await;
        let gate = start_gate(
            &mock.base_url(),
            ALLOW_ALL,
            "upstream.idle_timeout_secs = 1",
        )
        .await;
        let a = post_chat(&gate, &chat_request(true, &["t"])).await;
        assert_eq!(a.status, 200);
        let acc = Acc::from_sse(&a.body);
        assert!(acc.error, "{kind}: {}", a.text());
        assert!(acc.all_calls().is_empty(), "{kind}: {}", a.text());
        assert!(a.text().ends_with("data: [DONE]\n\n"), "{kind}");
        assert_eq!(faults(&gate).await, counted(kind));
        gate.stop().await;
    }
}

/// Raw HTTP/2 frames, for an upstream that sends GOAWAY when a test says.
mod h2 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    const SETTINGS: u8 = 4;
    const GOAWAY: u8 = 7;
    pub const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;
    pub const NO_ERROR: u32 = 0;
    pub const INTERNAL_ERROR: u32 = 2;

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    pub fn goaway(last: u32, code: u32) -> Vec<u8> {
        frame(
            GOAWAY,
            0,
            0,
            &[last.to_be_bytes(), code.to_be_bytes()].concat(),
        )
    }

    /// `:status: 200` (static index 8) and a literal `content-type`.
    pub fn head(stream: u32, content_type: &str) -> Vec<u8> {
        let mut block = vec![0x88, 0x0f, 0x10, content_type.len() as u8];
        block.extend_from_slice(content_type.as_bytes());
        frame(HEADERS, END_HEADERS, stream, &block)
    }

    /// Reads the client preface and sends the server's settings.
    pub async fn open<S: AsyncReadExt + AsyncWriteExt + Unpin>(s: &mut S) {
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        s.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    }

    /// Reads frames until a request's HEADERS; acknowledges settings on the
    /// way. Its stream id, or None when the client closed.
    pub async fn next_request<S: AsyncReadExt + AsyncWriteExt + Unpin>(s: &mut S) -> Option<u32> {
        loop {
            let mut h = [0u8; 9];
            s.read_exact(&mut h).await.ok()?;
            let n = (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize;
            let mut payload = vec![0u8; n];
            s.read_exact(&mut payload).await.ok()?;
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            match h[3] {
                SETTINGS if h[4] & 1 == 0 => {
                    s.write_all(&frame(SETTINGS, 1, 0, &[])).await.ok()?;
                }
                HEADERS => return Some(stream),
                _ => {}
            }
        }
    }
}

type TlsServer = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// What the scripted HTTP/2 upstream does on its n-th connection.
type Script =
    fn(usize, TlsServer, Arc<tokio::sync::Notify>) -> futures_util::future::BoxFuture<'static, ()>;

/// An HTTP/2 TLS upstream running `script` per connection; the gate trusts
/// its CA. Returns the gate, the connection count and the notify `script`
/// waits on.
async fn h2_upstream(script: Script) -> (Gate, Arc<AtomicUsize>, Arc<tokio::sync::Notify>) {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let tls = crate::upstream::server_tls(&certs.0, &[b"h2"]);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://localhost:{}/v1", l.local_addr().unwrap().port());
    let conns = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(tokio::sync::Notify::new());
    let (c, g) = (conns.clone(), go.clone());
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let Ok(s) = acceptor.accept(s).await else {
                continue;
            };
            tokio::spawn(script(c.fetch_add(1, Ordering::SeqCst), s, g.clone()));
        }
    });
    let ca = format!(
        "upstream.ca_file = \"{}\"\n",
        certs.0.join("ca.pem").display()
    );
    let gate = start_gate(&url, &deny(&["t"]), &ca).await;
    // The certificates are read at start; the dir may go.
    drop(certs);
    (gate, conns, go)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goaway_before_the_answer_is_a_generic_502_counted_as_goaway() {
    let (gate, _, _) = h2_upstream(|_, mut s, _| {
        Box::pin(async move {
            h2::open(&mut s).await;
            if h2::next_request(&mut s).await.is_some() {
                let _ = s.write_all(&h2::goaway(0, h2::NO_ERROR)).await;
                // Held open: the request is refused, not the connection closed.
                let _ = h2::next_request(&mut s).await;
            }
        })
    })
    .await;
    assert_generic(&post_chat(&gate, &chat_request(false, &["t"])).await, 502);
    assert_eq!(faults(&gate).await, counted("goaway"));
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_graceful_goaway_new_requests_go_to_a_new_connection() {
    let (gate, conns, go) = h2_upstream(|n, mut s, go| {
        Box::pin(async move {
            h2::open(&mut s).await;
            let Some(id) = h2::next_request(&mut s).await else {
                return;
            };
            if n > 0 {
                let _ = s.write_all(&h2::head(id, "application/json")).await;
                let done = h2::frame(h2::DATA, h2::END_STREAM, id, COMPLETION.as_bytes());
                let _ = s.write_all(&done).await;
                let _ = h2::next_request(&mut s).await;
                return;
            }
            // The first connection: a stream in flight, then GOAWAY, and
            // the stream finished only once the test says so. The GOAWAY
            // goes before the stream's first data: once the agent has that
            // data, toolgate has read the GOAWAY (frames are read in order),
            // so the next request cannot race it onto this connection.
            let first = chunk(0, json!({"content": "hello "}), None);
            let _ = s.write_all(&h2::head(id, "text/event-stream")).await;
            let _ = s.write_all(&h2::goaway(id, h2::NO_ERROR)).await;
            let _ = s
                .write_all(&h2::frame(h2::DATA, 0, id, first.as_bytes()))
                .await;
            go.notified().await;
            let rest = format!("{}data: [DONE]\n\n", chunk(0, json!({}), Some("stop")));
            let end = h2::frame(h2::DATA, h2::END_STREAM, id, rest.as_bytes());
            let _ = s.write_all(&end).await;
            let _ = h2::next_request(&mut s).await;
        })
    })
    .await;
    let (_, mut stream) = open_stream(&gate, &chat_request(true, &[]), false).await;
    let first = stream.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("hello "));
    // The stream is still open on the connection that is going away.
    let a = post_chat(&gate, &chat_request(false, &[])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(conns.load(Ordering::SeqCst), 2);
    go.notify_one();
    let rest = stream.collect().await.unwrap().to_bytes();
    let all = [first, rest].concat();
    let acc = Acc::from_sse(&all);
    assert!(!acc.error, "{}", String::from_utf8_lossy(&all));
    assert_eq!(acc.content[&0], "hello ");
    assert_eq!(faults(&gate).await, vec![]);
    gate.stop().await;
}

/// A stream cut by GOAWAY: one that abandons it (its last stream id is
/// below the stream's, with an error), and one that covers it but closes
/// the connection under it (counted as what the client saw: a reset).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goaway_mid_stream_releases_nothing() {
    async fn cut(mut s: TlsServer, last: fn(u32) -> u32) {
        h2::open(&mut s).await;
        let Some(id) = h2::next_request(&mut s).await else {
            return;
        };
        // A call to an allowed tool, held until its arguments end.
        let held = [
            chunk(0, json!({"content": "partial "}), None),
            chunk(0, call_delta(0, "call_a", "ok", "{\"a\":"), None),
        ]
        .concat();
        let _ = s.write_all(&h2::head(id, "text/event-stream")).await;
        let _ = s
            .write_all(&h2::frame(h2::DATA, 0, id, held.as_bytes()))
            .await;
        let _ = s.write_all(&h2::goaway(last(id), h2::INTERNAL_ERROR)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = s.shutdown().await;
    }
    let abandon: Script = |_, s, _| Box::pin(cut(s, |_| 0));
    let close: Script = |_, s, _| Box::pin(cut(s, |id| id));
    for (script, kind) in [(abandon, "goaway"), (close, "reset")] {
        let (gate, _, _) = h2_upstream(script).await;
        let a = post_chat(&gate, &chat_request(true, &["ok"])).await;
        assert_eq!(a.status, 200);
        let acc = Acc::from_sse(&a.body);
        assert!(acc.error, "{}", a.text());
        assert!(acc.all_calls().is_empty(), "{}", a.text());
        assert_eq!(acc.content[&0], "partial ");
        assert!(a.text().ends_with("data: [DONE]\n\n"));
        assert_eq!(faults(&gate).await, counted(kind));
        gate.stop().await;
    }
}
