//! The HTTP/1.1 upstream client (hyper's connection, driven in the agent's
//! task, its head filtered) against an upstream written by hand: chunked framing written a byte at a time and in odd chunk sizes,
//! with extensions and trailers; an interim `100`; a body that ends when the
//! connection closes; a body cut short. Framing two readers could read
//! differently is a protocol fault: a generic 502 with nothing of it passed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::accumulate::Acc;
use crate::faults::{assert_generic, counted, faults};
use crate::support::*;
use crate::upstream::read_request;

const COMPLETION: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}"#;

/// What the upstream writes for a request: pieces, each written on its own
/// (a short pause between them puts them in separate reads), and whether
/// it closes the connection afterwards.
struct Script {
    pieces: Vec<Vec<u8>>,
    close: bool,
}

/// An upstream answering the n-th request (over all connections) with
/// `script(n)`; counts connections.
async fn scripted(script: fn(usize) -> Script) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let conns = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let c = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let served = served.clone();
            tokio::spawn(async move {
                while read_request(&mut s).await {
                    let Script { pieces, close } = script(served.fetch_add(1, Ordering::SeqCst));
                    let apart = pieces.len() > 1;
                    for p in pieces {
                        if s.write_all(&p).await.is_err() {
                            return;
                        }
                        if apart {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                    if close {
                        return;
                    }
                }
            });
        }
    });
    (url, conns)
}

/// `body` in chunks of 1 to 7 bytes, some with extensions, then trailers.
fn odd_chunks(body: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut at, mut size) = (0, 1);
    while at < body.len() {
        let n = size.min(body.len() - at);
        let ext = if size % 3 == 0 { ";name=\"v\"" } else { "" };
        out.extend_from_slice(format!("{n:X}{ext}\r\n").as_bytes());
        out.extend_from_slice(&body.as_bytes()[at..at + n]);
        out.extend_from_slice(b"\r\n");
        at += n;
        size = size % 7 + 1;
    }
    out.extend_from_slice(b"0\r\nx-checksum: abc\r\n\r\n");
    out
}

fn sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_stream_however_split_is_gated_and_its_connection_kept() {
    let (url, conns) = scripted(|n| {
        let body = one_call_stream("get_weather", r#"{"city":"Paris"}"#);
        let mut whole = sse_head();
        whole.extend_from_slice(&odd_chunks(&body));
        let pieces = match n {
            // A byte per write, head and body.
            0 => whole.iter().map(|&b| vec![b]).collect(),
            // All at once.
            _ => vec![whole],
        };
        Script {
            pieces,
            close: false,
        }
    })
    .await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    for _ in 0..2 {
        let a = post_chat(&gate, &chat_request(true, &["get_weather"])).await;
        assert_eq!(a.status, 200, "{}", a.text());
        let acc = Acc::from_sse(&a.body);
        let calls = acc.calls_of(0);
        assert_eq!(calls.len(), 1, "{}", a.text());
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, r#"{"city":"Paris"}"#);
        assert!(acc.done && !acc.error);
    }
    assert_eq!(conns.load(Ordering::SeqCst), 1, "the connection was kept");
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interim_answer_is_skipped_and_a_body_to_the_close_read_whole() {
    let (url, conns) = scripted(|_| Script {
        pieces: vec![
            b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n".to_vec(),
            COMPLETION.as_bytes()[..40].to_vec(),
            COMPLETION.as_bytes()[40..].to_vec(),
        ],
        close: true,
    })
    .await;
    let gate = start_gate(&url, ALLOW_ALL, "").await;
    for _ in 0..2 {
        let a = post_chat(&gate, &chat_request(false, &[])).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.json()["choices"][0]["message"]["content"], "hello");
    }
    assert_eq!(
        conns.load(Ordering::SeqCst),
        2,
        "a body to the close ends its connection"
    );
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_two_readers_could_read_differently_is_a_protocol_fault() {
    let json = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n";
    let cases: Vec<(String, String, &str)> = vec![
        (
            format!(
                "{json}content-length: {}\r\ntransfer-encoding: chunked\r\n\r\n",
                COMPLETION.len()
            ),
            COMPLETION.into(),
            "protocol",
        ),
        (
            format!(
                "{json}content-length: {}\r\ncontent-length: 5\r\n\r\n",
                COMPLETION.len()
            ),
            COMPLETION.into(),
            "protocol",
        ),
        (
            format!("{json}transfer-encoding: gzip, chunked\r\n\r\n"),
            String::from_utf8(odd_chunks(COMPLETION)).unwrap(),
            "protocol",
        ),
        (
            format!("{json}transfer-encoding: chunked\r\n\r\n"),
            format!("{:x}\n{COMPLETION}\r\n0\r\n\r\n", COMPLETION.len()),
            "protocol",
        ),
        (
            format!("{json}transfer-encoding: chunked\r\n\r\n"),
            format!("5\r\n{COMPLETION}\r\n0\r\n\r\n"),
            "protocol",
        ),
        // Cut short: the last chunk never comes.
        (
            format!("{json}transfer-encoding: chunked\r\n\r\n"),
            format!("{:x}\r\n{COMPLETION}\r\n", COMPLETION.len()),
            "reset",
        ),
        (
            format!("{json}content-length: {}\r\n\r\n", COMPLETION.len() + 10),
            COMPLETION.into(),
            "reset",
        ),
    ];
    for (head, body, kind) in cases {
        let (url, _) = one_answer([head.into_bytes(), body.into_bytes()].concat()).await;
        let gate = start_gate(&url, ALLOW_ALL, "").await;
        let a = post_chat(&gate, &chat_request(false, &[])).await;
        assert_generic(&a, 502);
        assert!(!a.text().contains("hello"), "{}", a.text());
        assert_eq!(faults(&gate).await, counted(kind));
        gate.stop().await;
    }
}

/// An upstream that answers every request with `answer` and closes.
async fn one_answer(answer: Vec<u8>) -> (String, tokio::task::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            if read_request(&mut s).await {
                let _ = s.write_all(&answer).await;
            }
        }
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_body_of_unknown_length_goes_up_chunked_and_whole() {
    let mock = start_mock(vec![
        Reply::json(200, r#"{"text":"ok"}"#),
        Reply::json(200, r#"{"text":"again"}"#),
    ])
    .await;
    let gate = start_gate(&mock.base_url(), ALLOW_ALL, "").await;
    // The agent sends its body chunked, in pieces: toolgate cannot know its
    // length, so it goes upstream chunked too.
    let addr = gate.url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = "POST /v1/audio/transcriptions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer agent-token\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    s.write_all(head.as_bytes()).await.unwrap();
    let audio: Vec<u8> = (0..70_000u32).map(|i| (i % 253) as u8).collect();
    for piece in audio.chunks(9_000) {
        s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
            .await
            .unwrap();
        s.write_all(piece).await.unwrap();
        s.write_all(b"\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    s.write_all(b"0\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains(r#""ok""#) {
        let n = tokio::io::AsyncReadExt::read(&mut s, &mut b).await.unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&b[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].body.as_ref(),
        audio.as_slice(),
        "the body arrived whole"
    );
    assert_eq!(seen[0].headers["transfer-encoding"], "chunked");
    // The connection is kept after the chunked request and its answer.
    let a = send(
        "POST",
        &format!("{}/v1/embeddings", gate.url),
        &[
            ("authorization", "Bearer agent-token"),
            ("content-type", "application/json"),
        ],
        r#"{"input":"x"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(mock.requests()[1].body.as_ref(), br#"{"input":"x"}"#);
    assert_eq!(mock.connections.load(Ordering::SeqCst), 1);
    gate.stop().await;
}
