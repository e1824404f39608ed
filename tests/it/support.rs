//! Test support: a mock provider on 127.0.0.1:0 that replays recorded bodies,
//! a launcher for a real toolgate on real ports, and a small HTTP client.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::accumulate::Acc;

pub const UPSTREAM_KEY: &str = "sk-or-v1-test-upstream-key-0123456789abcdef";
pub const KEY_ENV: &str = "TOOLGATE_IT_UPSTREAM_KEY";

/// `../shared/fixtures/sse`, if present.
pub fn fixtures_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/sse");
    d.is_dir().then_some(d)
}

/// This repository's own fixtures.
pub fn own_fixture(name: &str) -> Bytes {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    Bytes::from(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// The shared fixtures whose file name `keep` accepts, sorted.
fn shared_fixtures(keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Some(dir) = fixtures_dir() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| keep(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// Every chat-completions fixture (SSE and non-streaming JSON) in the shared set.
pub fn chat_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| {
        let other_api = [
            "anthropic-messages",
            "openai-responses",
            "deepseek-responses",
            "bedrock-mantle",
        ]
        .iter()
        .any(|x| n.starts_with(x));
        !other_api && !n.ends_with(".request.json") && (n.ends_with(".sse") || n.ends_with(".json"))
    })
}

/// Every Responses-API stream in the shared set.
pub fn responses_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| {
        n.ends_with(".sse") && (n.contains("-responses-") || n.starts_with("bedrock-mantle"))
    })
}

/// Every Anthropic Messages stream in the shared set.
pub fn messages_fixtures() -> Vec<PathBuf> {
    shared_fixtures(|n| n.starts_with("anthropic-messages") && n.ends_with(".sse"))
}

/// Config lines that send `/v1/messages` to `upstream` with the test key.
pub fn messages_upstream(upstream: &str) -> String {
    format!("[upstream.messages]\nbase_url = \"{upstream}\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_secs = 20\n")
}

/// The `response` of a Responses stream's `response.completed` event.
pub fn responses_final(sse: &[u8]) -> Value {
    String::from_utf8_lossy(sse)
        .split("\n")
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == "response.completed")
        .map(|v| v["response"].clone())
        .unwrap_or(Value::Null)
}

/// Skips a test with a clear message when `../shared` is absent, unless
/// `TOOLGATE_REQUIRE_FIXTURES=1` (set by CI), where a missing set fails.
#[macro_export]
macro_rules! need_fixtures {
    () => {
        if $crate::support::fixtures_dir().is_none() {
            assert!(
                std::env::var("TOOLGATE_REQUIRE_FIXTURES").as_deref() != Ok("1"),
                "../shared/fixtures/sse is absent and TOOLGATE_REQUIRE_FIXTURES=1"
            );
            eprintln!("SKIPPED: ../shared/fixtures/sse is absent (clone with ../shared beside the repository)");
            return;
        }
    };
}

/// Computes a mock answer (status, JSON body) from the request body.
pub type Responder = Arc<dyn Fn(&Value) -> (u16, String) + Send + Sync>;

/// What the mock provider answers.
#[derive(Clone)]
pub enum Reply {
    /// An SSE body sent in pieces of `chunk` bytes, `delay` apart; `reset` ends it with a broken connection.
    Sse {
        body: Bytes,
        chunk: usize,
        delay: Duration,
        reset: bool,
        gzip: bool,
    },
    /// A body with a status and content type.
    Body {
        status: u16,
        content_type: &'static str,
        body: Bytes,
        gzip: bool,
        encoding: Option<&'static str>,
    },
    /// The fixture named by the last user message `fixture:NAME` (SSE or JSON by the request's `stream`).
    Fixture { chunk: usize },
    /// Computed from the request body: (status, JSON body, or an SSE body
    /// when it starts with `data:` or `event:`), after a delay.
    Func(Responder, Duration),
    /// An SSE body sent in two parts: `after` only once `go` is notified.
    Paused {
        before: Bytes,
        after: Bytes,
        go: Arc<tokio::sync::Notify>,
    },
    /// Another reply with these response headers added.
    Headed(Vec<(&'static str, String)>, Box<Reply>),
}

impl Reply {
    pub fn sse(body: impl Into<Bytes>) -> Reply {
        Reply::Sse {
            body: body.into(),
            chunk: 64,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        }
    }
    pub fn json(status: u16, body: impl Into<Bytes>) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json",
            body: body.into(),
            gzip: false,
            encoding: None,
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub version: http::Version,
    pub headers: HeaderMap,
    pub body: Bytes,
}

pub struct Mock {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Set when a streamed body noticed its client had gone.
    pub cancelled: Arc<AtomicBool>,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
}

struct ChanBody(mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);

impl Body for ChanBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx)
    }
}

fn gzip(b: &[u8]) -> Bytes {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    Bytes::from(e.finish().unwrap())
}

fn fixture_reply(req: &Value, chunk: usize) -> Reply {
    let msgs = req["messages"]
        .as_array()
        .or(req["input"].as_array())
        .cloned()
        .unwrap_or_default();
    let name = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .or(req["input"].as_str())
        .and_then(|c| c.strip_prefix("fixture:"))
        .unwrap_or("missing")
        .to_string();
    let path = fixtures_dir().unwrap().join(&name);
    let body = Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: {e}")));
    let stream = req["stream"].as_bool().unwrap_or(false);
    if name.ends_with(".json") {
        return Reply::json(200, body);
    }
    if stream {
        return Reply::Sse {
            body,
            chunk,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        };
    }
    if req.get("input").is_some() {
        // A Responses stream's non-streamed equivalent: its final response.
        return Reply::json(200, responses_final(&body).to_string());
    }
    if name.starts_with("anthropic-messages") {
        // A Messages stream's non-streamed equivalent: the message it builds.
        let r =
            crate::messages_reader::Reader::read(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        return Reply::json(200, r.message().to_string());
    }
    let acc = Acc::from_sse(&body);
    if acc.error {
        // A provider that fails mid-stream fails a non-streaming call with a status.
        return Reply::json(
            400,
            r#"{"error":{"message":"tool_use_failed: get_something_by_name","code":"tool_use_failed"}}"#,
        );
    }
    Reply::json(200, acc.to_completion().to_string())
}

impl Mock {
    /// Starts a mock that answers every request with `reply` (or the queued replies in turn).
    pub async fn start(replies: Vec<Reply>) -> Mock {
        Mock::start_on(replies, None).await
    }

    /// The same over TLS (HTTP/1.1 or h2, as the handshake agreed).
    pub async fn start_tls(replies: Vec<Reply>, tls: Arc<rustls::ServerConfig>) -> Mock {
        Mock::start_on(replies, Some(tokio_rustls::TlsAcceptor::from(tls))).await
    }

    async fn start_on(replies: Vec<Reply>, tls: Option<tokio_rustls::TlsAcceptor>) -> Mock {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let cancelled = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(AtomicUsize::new(0));
        let (s, r, c, n) = (
            seen.clone(),
            replies.clone(),
            cancelled.clone(),
            connections.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = l.accept().await else {
                    return;
                };
                n.fetch_add(1, Ordering::SeqCst);
                let (s, r, c) = (s.clone(), r.clone(), c.clone());
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (s, r, c) = (s.clone(), r.clone(), c.clone());
                    async move { Ok::<_, Infallible>(Mock::answer(req, s, r, c).await) }
                });
                let tls = tls.clone();
                tokio::spawn(async move {
                    let Some(tls) = tls else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                        return;
                    };
                    let Ok(stream) = tls.accept(stream).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                });
            }
        });
        Mock {
            addr,
            seen,
            cancelled,
            connections,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    async fn answer(
        req: Request<Incoming>,
        seen: Arc<Mutex<Vec<Seen>>>,
        replies: Arc<Mutex<VecDeque<Reply>>>,
        cancelled: Arc<AtomicBool>,
    ) -> Response<ChanBody> {
        let (parts, body) = req.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        seen.lock().unwrap().push(Seen {
            path: parts.uri.to_string(),
            version: parts.version,
            headers: parts.headers,
            body: body.clone(),
        });
        let reply = {
            let mut q = replies.lock().unwrap();
            if q.len() > 1 {
                q.pop_front().unwrap()
            } else {
                q.front().cloned().unwrap()
            }
        };
        let (reply, extra) = match reply {
            Reply::Headed(h, r) => (*r, h),
            r => (r, Vec::new()),
        };
        let reply = match reply {
            Reply::Fixture { chunk } => {
                fixture_reply(&serde_json::from_slice(&body).unwrap_or(Value::Null), chunk)
            }
            Reply::Func(f, delay) => {
                tokio::time::sleep(delay).await;
                let (status, b) = f(&serde_json::from_slice(&body).unwrap_or(Value::Null));
                // A computed event stream goes out as one.
                match b.starts_with("data:") || b.starts_with("event:") {
                    true => Reply::sse(b),
                    false => Reply::json(status, b),
                }
            }
            r => r,
        };
        let (tx, rx) = mpsc::channel(16);
        let mut resp = Response::new(ChanBody(rx));
        match reply {
            Reply::Sse {
                body,
                chunk,
                delay,
                reset,
                gzip: gz,
            } => {
                resp.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                let body = if gz {
                    resp.headers_mut()
                        .insert("content-encoding", "gzip".parse().unwrap());
                    gzip(&body)
                } else {
                    body
                };
                tokio::spawn(async move {
                    for piece in body.chunks(chunk.max(1)) {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        if tx
                            .send(Ok(Frame::data(Bytes::copy_from_slice(piece))))
                            .await
                            .is_err()
                        {
                            cancelled.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                    if reset {
                        // Let what was sent reach the wire before the connection breaks.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        let _ = tx.send(Err(std::io::Error::other("reset"))).await;
                    }
                });
            }
            Reply::Body {
                status,
                content_type,
                body,
                gzip: gz,
                encoding,
            } => {
                *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                resp.headers_mut()
                    .insert("content-type", content_type.parse().unwrap());
                let body = if gz { gzip(&body) } else { body };
                if gz {
                    resp.headers_mut()
                        .insert("content-encoding", "gzip".parse().unwrap());
                }
                if let Some(e) = encoding {
                    resp.headers_mut()
                        .insert("content-encoding", e.parse().unwrap());
                }
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(body))).await;
                });
            }
            Reply::Paused { before, after, go } => {
                resp.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                tokio::spawn(async move {
                    let _ = tx.send(Ok(Frame::data(before))).await;
                    go.notified().await;
                    let _ = tx.send(Ok(Frame::data(after))).await;
                });
            }
            Reply::Fixture { .. } | Reply::Func(..) | Reply::Headed(..) => unreachable!(),
        }
        for (k, v) in extra {
            resp.headers_mut().append(k, v.parse().unwrap());
        }
        resp
    }
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "toolgate-it-{}-{}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running toolgate with its scratch dir.
pub struct Gate {
    pub running: Option<toolgate::server::Running>,
    pub url: String,
    pub admin: String,
    pub dir: TempDir,
}

impl Gate {
    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.0.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub async fn audit_flushed(&self) -> Vec<Value> {
        self.running
            .as_ref()
            .unwrap()
            .state
            .audit
            .flush()
            .await
            .unwrap();
        self.audit()
    }

    /// Stops toolgate (draining and flushing the audit trail); the scratch dir outlives it.
    pub async fn stop(self) -> TempDir {
        let Gate { running, dir, .. } = self;
        if let Some(r) = running {
            r.stop().await;
        }
        dir
    }
}

/// Starts toolgate in front of `upstream` with the given policy file text and extra config.
pub async fn start_gate(upstream: &str, policy: &str, extra: &str) -> Gate {
    start_gate_with(upstream, policy, extra, Vec::new()).await
}

/// The same, with extra gates appended to the pipeline.
pub async fn start_gate_with(
    upstream: &str,
    policy: &str,
    extra: &str,
    gates: Vec<Arc<dyn toolgate::gate::Gate>>,
) -> Gate {
    let files = [
        (
            "00-default.toml".to_string(),
            toolgate::policy::DEFAULT_POLICY.to_string(),
        ),
        ("50-test.toml".to_string(), policy.to_string()),
    ];
    launch(upstream, &files, extra, gates).await
}

/// Writes the policy files and a config in a scratch dir, then starts toolgate on port 0.
async fn launch(
    upstream: &str,
    files: &[(String, String)],
    extra: &str,
    gates: Vec<Arc<dyn toolgate::gate::Gate>>,
) -> Gate {
    // The same value every time, so tests running in parallel agree.
    std::env::set_var(KEY_ENV, UPSTREAM_KEY);
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("policies")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.0.join("policies").join(name), text).unwrap();
    }
    let (mut upstream_extra, rest) = split_upstream(extra);
    if !upstream_extra
        .lines()
        .any(|l| l.trim_start().starts_with("timeout_secs"))
    {
        upstream_extra.push_str("timeout_secs = 20\n");
    }
    let cfg = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\ndrain_secs = 5\n\n[upstream]\nbase_url = \"{upstream}\"\napi_key_env = \"{KEY_ENV}\"\n{upstream_extra}\n[audit]\npath = \"audit.jsonl\"\n\n{rest}\n"
    );
    let cfg = if cfg.contains("[policy]") {
        cfg.replacen("[policy]", "[policy]\ndir = \"policies\"", 1)
    } else {
        format!("{cfg}\n[policy]\ndir = \"policies\"\n")
    };
    std::fs::write(dir.0.join("toolgate.toml"), &cfg).unwrap();
    let config = toolgate::Config::load(&dir.0.join("toolgate.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{cfg}"));
    let mut state = toolgate::app::build(config).await.unwrap();
    for g in gates {
        state.add_gate(g);
    }
    let running = toolgate::server::start(state).await.unwrap();
    Gate {
        url: format!("http://{}", running.addr),
        admin: format!("http://{}", running.admin_addr),
        running: Some(running),
        dir,
    }
}

/// Lines of `extra` starting with `upstream.` go into `[upstream]`; the rest stays as written.
fn split_upstream(extra: &str) -> (String, String) {
    let mut up = String::new();
    let mut rest = String::new();
    for line in extra.lines() {
        match line.strip_prefix("upstream.") {
            Some(l) => {
                up.push_str(l);
                up.push('\n');
            }
            None => {
                rest.push_str(line);
                rest.push('\n');
            }
        }
    }
    (up, rest)
}

/// Nothing beyond the default policy (which allows declared, valid calls).
pub const ALLOW_ALL: &str = "rule = []\n";

pub fn deny(tools: &[&str]) -> String {
    if tools.is_empty() {
        return ALLOW_ALL.to_string();
    }
    let list: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        "[[rule]]\nname = \"test-deny\"\ntools = [{}]\nverdict = \"deny\"\n",
        list.join(", ")
    )
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Answer {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), client.request(req))
        .await
        .expect("timed out")
        .unwrap();
    let (parts, body) = resp.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(30), body.collect())
        .await
        .expect("body timed out")
        .unwrap()
        .to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn post_chat(gate: &Gate, body: &Value) -> Answer {
    send(
        "POST",
        &format!("{}/v1/chat/completions", gate.url),
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer agent-token"),
        ],
        body.to_string(),
    )
    .await
}

/// A chat request declaring `tools` (plain function tools with an open schema).
pub fn chat_request(stream: bool, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t, "parameters": {"type": "object"}}}))
        .collect();
    json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}], "tools": tools})
}

/// One SSE chunk of a chat-completions stream.
pub fn chunk(choice: u32, delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// A Responses stream of `events`, named by their type and numbered from 0.
pub fn numbered_events(events: impl IntoIterator<Item = Value>) -> String {
    events
        .into_iter()
        .enumerate()
        .map(|(n, mut e)| {
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect()
}

/// A whole tool call in one delta entry.
pub fn call_delta(index: u32, id: &str, name: &str, args: &str) -> Value {
    json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
}

/// Posts a streaming chat request and returns the response body unread, for
/// tests that watch frames arrive (or stop reading).
pub async fn open_stream(gate: &Gate, body: &Value, http2: bool) -> (http::Version, Incoming) {
    open_stream_at(gate, "/v1/chat/completions", body, http2).await
}

/// The same at `path`.
pub async fn open_stream_at(
    gate: &Gate,
    path: &str,
    body: &Value,
    http2: bool,
) -> (http::Version, Incoming) {
    let mut b = Client::builder(TokioExecutor::new());
    b.http2_only(http2);
    let client: Client<_, Full<Bytes>> = b.build_http();
    let req = Request::post(format!("{}{path}", gate.url))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    (resp.version(), resp.into_body())
}

/// Posts a chat request to `path` (e.g. `/v1/chat/completions`) with extra headers.
pub async fn post_chat_at(
    gate: &Gate,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> Answer {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    send("POST", &format!("{}{path}", gate.url), &h, body.to_string()).await
}

/// The shipped policy files (relative to `policies/`) as one policy text each, for a test dir.
pub fn shipped(files: &[&str]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|f| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("policies")
                .join(f);
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

/// Starts toolgate with exactly these policy files (name, text) in its policy dir.
pub async fn start_gate_files(upstream: &str, files: &[(String, String)], extra: &str) -> Gate {
    launch(upstream, files, extra, Vec::new()).await
}

/// A stream whose only event is one complete call, then the finish.
pub fn one_call_stream(name: &str, args: &str) -> String {
    [
        chunk(0, call_delta(0, "call_1", name, args), None),
        chunk(0, serde_json::json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".into(),
    ]
    .concat()
}

/// The Python with `openai` (and `kubernetes-validate`) installed:
/// `TOOLGATE_PYTHON`, else `.venv/bin/python`.
pub fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TOOLGATE_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    venv.exists().then_some(venv)
}

/// Twenty text deltas, one call `t`, finish and `[DONE]`, sent 200 bytes at a
/// time `delay` apart: a stream still in flight for a while.
pub fn slow_text_then_call(delay: Duration) -> Reply {
    let mut body = String::new();
    for i in 0..20 {
        body.push_str(&chunk(0, json!({"content": format!("{i} ")}), None));
    }
    body.push_str(&chunk(0, call_delta(0, "c", "t", "{}"), None));
    body.push_str(&chunk(0, json!({}), Some("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    Reply::Sse {
        body: body.into(),
        chunk: 200,
        delay,
        reset: false,
        gzip: false,
    }
}

/// The status of a GET, or `None` when nothing answers (yet).
pub async fn try_get(url: &str) -> Option<u16> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let req = client.get(url.parse().ok()?);
    match tokio::time::timeout(Duration::from_secs(2), req).await {
        Ok(Ok(r)) => Some(r.status().as_u16()),
        _ => None,
    }
}

/// [`run_python`] from async code (off the runtime's threads).
pub async fn run_sdk(script: &'static str, args: Vec<String>) -> Option<Value> {
    tokio::task::spawn_blocking(move || run_python(script, args))
        .await
        .unwrap()
}

/// Runs `tests/sdk/<script>` with `args` under [`python`] and reads its JSON
/// answer; `None` (a skip, never in CI) when no Python with the SDKs is set up.
pub fn run_python(script: &str, args: Vec<String>) -> Option<Value> {
    let Some(py) = python() else {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide the Python SDKs (TOOLGATE_PYTHON or .venv)"
        );
        eprintln!("SKIPPED: no Python with the SDKs (run `bash .ci/test`, which creates .venv)");
        return None;
    };
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(script);
    let out = std::process::Command::new(py)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))),
    )
}

/// `input` cut at `cuts` (each taken modulo its length, in order).
pub fn cut_at<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.sort();
    let mut out = Vec::new();
    let mut last = 0;
    for p in points {
        out.push(&input[last..p]);
        last = p;
    }
    out.push(&input[last..]);
    out
}
