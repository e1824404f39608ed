//! The upstream client: a kept connection is reused, one the upstream closed
//! is not, a request already written is never sent twice, and TLS upstreams
//! are reached over HTTP/2 or HTTP/1.1 as ALPN agrees (with `ca_file`).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::accumulate::Acc;
use crate::support::*;

const COMPLETION: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_connections_are_reused() {
    let mock = start_mock(vec![Reply::sse(one_call_stream("get_weather", "{}"))]).await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    for _ in 0..4 {
        let a = post_chat(&gate, &chat_request(true, &["get_weather"])).await;
        assert_eq!(a.status, 200);
        assert_eq!(Acc::from_sse(&a.body).calls_of(0).len(), 1);
    }
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(
        mock.connections.load(Ordering::SeqCst),
        1,
        "one upstream connection served every request in turn"
    );
    gate.stop().await;
}

/// What the raw upstream does with the n-th request on the c-th connection.
#[derive(Clone, Copy)]
enum Then {
    /// Answers, keeps the connection open for `ms`, then closes it.
    AnswerThenClose(u64),
    /// Reads the request and closes without an answer.
    Hang,
    /// Answers after `ms` and keeps the connection open.
    AnswerAfter(u64),
}

/// A keep-alive HTTP/1.1 upstream written by hand, so it can close
/// connections the way servers do; counts connections and requests.
async fn raw_upstream(
    then: fn(usize, usize) -> Then,
) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let (conns, reqs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, r) = (conns.clone(), reqs.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let conn = c.fetch_add(1, Ordering::SeqCst);
            let r = r.clone();
            tokio::spawn(async move {
                for n in 0.. {
                    if !read_request(&mut s).await {
                        return;
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    match then(conn, n) {
                        Then::Hang => return,
                        Then::AnswerAfter(ms) => {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", COMPLETION.len());
                            let _ = s.write_all(head.as_bytes()).await;
                            let _ = s.write_all(COMPLETION.as_bytes()).await;
                        }
                        Then::AnswerThenClose(ms) => {
                            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", COMPLETION.len());
                            let _ = s.write_all(head.as_bytes()).await;
                            let _ = s.write_all(COMPLETION.as_bytes()).await;
                            if ms < u64::MAX {
                                // Reads nothing more: a request sent now is lost.
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (url, conns, reqs)
}

/// Reads one request (head and `content-length` body); false at the end.
pub(crate) async fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => buf.extend_from_slice(&b[..n]),
                }
            }
            return true;
        }
        match s.read(&mut b).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_upstream_closed_is_not_used_again() {
    let (url, conns, reqs) = raw_upstream(|_, _| Then::AnswerThenClose(50)).await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    for _ in 0..3 {
        let a = post_chat(&gate, &chat_request(false, &[])).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.json()["choices"][0]["message"]["content"], "hello");
        // The upstream closes the kept connection meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(reqs.load(Ordering::SeqCst), 3);
    assert_eq!(
        conns.load(Ordering::SeqCst),
        3,
        "a new connection each time"
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_named_by_host_takes_a_burst_of_new_connections() {
    // `localhost` is looked up (once, then kept a while), not parsed: 20
    // requests at once open 20 connections to it, each on its addresses.
    let (url, conns, reqs) = raw_upstream(|_, _| Then::AnswerAfter(100)).await;
    let named = url.replace("127.0.0.1", "localhost");
    assert_ne!(named, url);
    let gate = start_gate(&named, ALLOW_ALL, "").await;
    let req = chat_request(false, &[]);
    let all = futures_util::future::join_all((0..20).map(|_| post_chat(&gate, &req))).await;
    for a in &all {
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.json()["choices"][0]["message"]["content"], "hello");
    }
    assert_eq!(reqs.load(Ordering::SeqCst), 20);
    assert_eq!(conns.load(Ordering::SeqCst), 20);
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_lets_go_of_kept_connections_the_upstream_closed() {
    // The first connection is kept open by the upstream (it answers every
    // request on it); the second is closed 50 ms after its answer.
    let (url, conns, _) =
        raw_upstream(|c, _| Then::AnswerThenClose(if c == 0 { u64::MAX } else { 50 })).await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    let state = &gate.running.as_ref().unwrap().state;
    let a = post_chat(&gate, &chat_request(false, &[])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep(),
        1,
        "an open idle connection is kept"
    );
    // Two at once: the kept one and a new one, both back in the pool.
    let req = chat_request(false, &[]);
    let (a, b) = tokio::join!(post_chat(&gate, &req), post_chat(&gate, &req));
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200));
    assert_eq!(conns.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep(),
        1,
        "the connection the upstream closed is gone, the open one stays"
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bursts_extra_connections_are_let_go_sooner_than_the_newest_32() {
    // 40 requests at once, each answered after 300 ms: 40 connections.
    let (url, conns, _) = raw_upstream(|_, _| Then::AnswerAfter(300)).await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    let state = &gate.running.as_ref().unwrap().state;
    let req = chat_request(false, &[]);
    let all = futures_util::future::join_all((0..40).map(|_| post_chat(&gate, &req))).await;
    assert!(all.iter().all(|a| a.status == 200));
    assert_eq!(conns.load(Ordering::SeqCst), 40);
    let now = std::time::Instant::now();
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep_at(now),
        40,
        "all kept at first"
    );
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep_at(now + Duration::from_secs(6)),
        32,
        "the burst's extra ones go after a few seconds"
    );
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep_at(now + Duration::from_secs(60)),
        32
    );
    assert_eq!(
        state
            .upstream_for(toolgate::protocol::Protocol::Chat)
            .sweep_at(now + Duration::from_secs(91)),
        0
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_written_to_a_kept_connection_is_never_sent_twice() {
    // The second request on the first connection is read, then the
    // connection closes without an answer.
    let (url, conns, reqs) = raw_upstream(|c, n| match (c, n) {
        (0, 1) => Then::Hang,
        _ => Then::AnswerThenClose(u64::MAX),
    })
    .await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    let a = post_chat(&gate, &chat_request(false, &[])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = post_chat(&gate, &chat_request(false, &[])).await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(!a.text().contains("127.0.0.1"), "no upstream detail leaks");
    assert_eq!(reqs.load(Ordering::SeqCst), 2, "not sent again");
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    // The next request gets a new connection.
    let a = post_chat(&gate, &chat_request(false, &[])).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(conns.load(Ordering::SeqCst), 2);
    gate.stop().await;
}

pub(crate) fn server_tls(dir: &Path, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let certs = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upstreams_are_reached_over_h2_and_http1() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let ca = format!(
        "upstream.ca_file = \"{}\"\n",
        certs.0.join("ca.pem").display()
    );
    let both: &[&[u8]] = &[b"h2", b"http/1.1"];
    let h1: &[&[u8]] = &[b"http/1.1"];
    // `upstream.http2 = false` offers HTTP/1.1 alone, to a server that
    // offers both.
    let cases = [
        (both, "", http::Version::HTTP_2),
        (h1, "", http::Version::HTTP_11),
        (both, "upstream.http2 = false\n", http::Version::HTTP_11),
    ];
    for (alpn, extra, want) in cases {
        let stream = Bytes::from(one_call_stream("send_email", "{}"));
        let mock = start_mock_tls(
            vec![
                Reply::sse(stream.clone()),
                Reply::sse(stream),
                Reply::json(200, COMPLETION),
            ],
            server_tls(&certs.0, alpn),
        )
        .await;
        let url = format!("https://localhost:{}/v1", mock.addr.port());
        let gate = start_gate(&url, &deny(&["send_email"]), &format!("{ca}{extra}")).await;
        for _ in 0..2 {
            let a = post_chat(&gate, &chat_request(true, &["send_email"])).await;
            assert_eq!(a.status, 200, "{}", a.text());
            assert!(Acc::from_sse(&a.body).calls_of(0).is_empty(), "withheld");
        }
        let a = post_chat(&gate, &chat_request(false, &[])).await;
        assert_eq!(a.status, 200, "{}", a.text());
        let seen = mock.requests();
        assert_eq!(seen.len(), 3);
        assert!(seen.iter().all(|r| r.version == want), "{want:?}");
        assert_eq!(
            seen[0].headers["authorization"],
            format!("Bearer {UPSTREAM_KEY}").as_str()
        );
        assert_eq!(mock.connections.load(Ordering::SeqCst), 1, "{want:?}");
        gate.stop().await;
    }
    // Without the CA the upstream's certificate is refused.
    let mock = start_mock_tls(
        vec![Reply::json(200, COMPLETION)],
        server_tls(&certs.0, both),
    )
    .await;
    let url = format!("https://localhost:{}/v1", mock.addr.port());
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    let a = post_chat(
        &gate,
        &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(mock.requests().is_empty());
    gate.stop().await;
}

/// hyper stops reading a body of known length at its last frame, before
/// the end is polled: the connection is kept all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_body_of_known_length_gives_its_connection_back() {
    let (url, conns, reqs) = raw_upstream(|_, _| Then::AnswerThenClose(u64::MAX)).await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    for _ in 0..3 {
        let models = format!("{}/v1/models", gate.url);
        let a = send("GET", &models, &[("authorization", "Bearer x")], "").await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.body, COMPLETION.as_bytes());
    }
    assert_eq!(reqs.load(Ordering::SeqCst), 3);
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    gate.stop().await;
}

/// A server may let one HTTP/2 connection carry no more than 100 streams at
/// once: 150 streams open at the same time go over more than one
/// connection, and none waits for another to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_open_streams_spread_over_several_h2_connections() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let ca = format!(
        "upstream.ca_file = \"{}\"\n",
        certs.0.join("ca.pem").display()
    );
    let body = one_call_stream("get_weather", "{}");
    let (head, rest) = body.split_at(body.find("\n\n").unwrap() + 2);
    let go = Arc::new(tokio::sync::Notify::new());
    const N: usize = 150;
    let paused = Reply::Paused {
        before: Bytes::copy_from_slice(head.as_bytes()),
        after: Bytes::copy_from_slice(rest.as_bytes()),
        go: go.clone(),
    };
    let both: &[&[u8]] = &[b"h2", b"http/1.1"];
    let mut replies = vec![paused; N];
    replies.push(Reply::sse(body.clone()));
    let mock = start_mock_tls(replies, server_tls(&certs.0, both)).await;
    let url = format!("https://localhost:{}/v1", mock.addr.port());
    let gate = start_gate(&url, ALLOW_ALL, &ca).await;
    let gate = Arc::new(gate);
    let mut streams = Vec::new();
    for _ in 0..N {
        let g = gate.clone();
        streams.push(tokio::spawn(async move {
            post_chat(&g, &chat_request(true, &["get_weather"])).await
        }));
    }
    // Every stream reached the provider while none has ended.
    for _ in 0..600 {
        if mock.requests().len() == N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mock.requests().len(), N, "all streams open at once");
    assert!(mock
        .requests()
        .iter()
        .all(|r| r.version == http::Version::HTTP_2));
    let conns = mock.connections.load(Ordering::SeqCst);
    assert!((2..=3).contains(&conns), "{conns} connections");
    // A paused reply waits once its first part is sent: those not waiting
    // yet are let go on a later round.
    let release = tokio::spawn(async move {
        loop {
            go.notify_waiters();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    for s in streams {
        let a = s.await.unwrap();
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(Acc::from_sse(&a.body).calls_of(0).len(), 1, "{}", a.text());
    }
    release.abort();
    // The next stream goes on a connection already open.
    let a = post_chat(&gate, &chat_request(true, &["get_weather"])).await;
    assert_eq!(a.status, 200);
    assert_eq!(mock.connections.load(Ordering::SeqCst), conns);
    if let Ok(g) = Arc::try_unwrap(gate) {
        g.stop().await;
    }
}

/// Connections to a TLS upstream open one at a time, but not behind a
/// failure: when the provider accepts TCP and never answers the handshake,
/// each waiting request fails on its own connect timeout (502), not on the
/// total timeout after queueing behind the others' (504).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_tls_upstream_fails_each_request_on_its_connect_timeout() {
    let certs = TempDir::new();
    toolgate::cli::certs::dev(&certs.0, false).unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            open.push(s);
        }
    });
    let extra = format!(
        "upstream.ca_file = \"{}\"\nupstream.connect_timeout_secs = 1\nupstream.timeout_secs = 3\n",
        certs.0.join("ca.pem").display()
    );
    let gate =
        Arc::new(start_gate(&format!("https://localhost:{port}/v1"), ALLOW_ALL, &extra).await);
    let asks: Vec<_> = (0..6)
        .map(|_| {
            let g = gate.clone();
            tokio::spawn(async move { post_chat(&g, &chat_request(true, &[])).await })
        })
        .collect();
    for a in asks {
        let a = a.await.unwrap();
        assert_eq!(a.status, 502, "{}", a.text());
    }
    held.abort();
    if let Ok(g) = Arc::try_unwrap(gate) {
        g.stop().await;
    }
}
