//! The floor under any hyper-based proxy: an HTTP/1.1 proxy that reads
//! nothing of what it carries. Each agent connection gets one upstream
//! connection of its own (as nginx's keep-alive pool gives a busy worker),
//! every request is sent on as it came (its path under the upstream's, its
//! `Host` rewritten) and the answer's body is handed back frame by frame.
//! The upstream connection is driven by the agent's task (by the request
//! while its head is awaited, then by the response body), as toolgate's
//! is: no task of its own, so no hop between tasks per event.
//! No parse, no gate, no audit: what hyper's server and client and tokio
//! cost on a benchmark's shape, to set beside nginx and toolgate in the same
//! run (`bench/floor.sh`).
//!
//! Usage: floor LISTEN UPSTREAM     e.g. floor 127.0.0.1:18200 127.0.0.1:18000
//! It runs on one thread (tokio's current-thread runtime), as toolgate does
//! on one core.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::{combinators::BoxBody, BodyExt, Empty};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::client::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

type Body = BoxBody<Bytes, hyper::Error>;

/// An upstream connection: the handle requests go on, and the connection
/// itself, polled by whoever holds it.
struct Conn {
    tx: http1::SendRequest<Incoming>,
    driver: Pin<Box<http1::Connection<TokioIo<TcpStream>, Incoming>>>,
}

/// Where an agent connection keeps its upstream connection between requests.
type Slot = Arc<Mutex<Option<Conn>>>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, upstream] = args.as_slice() else {
        eprintln!("usage: floor LISTEN UPSTREAM");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(serve(listen.clone(), Arc::from(upstream.as_str())));
}

async fn serve(listen: String, upstream: Arc<str>) {
    let listener = TcpListener::bind(&listen).await.expect("bind");
    loop {
        let Ok((agent, _)) = listener.accept().await else {
            continue;
        };
        let _ = agent.set_nodelay(true);
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let slot: Slot = Arc::default();
            let service =
                hyper::service::service_fn(move |req| forward(req, upstream.clone(), slot.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(agent), service)
                .await;
        });
    }
}

async fn forward(
    req: Request<Incoming>,
    upstream: Arc<str>,
    slot: Slot,
) -> Result<Response<Body>, Infallible> {
    let kept = slot.lock().map(|mut s| s.take()).unwrap_or(None);
    let conn = match kept {
        Some(mut c) => match ready(&mut c).await {
            true => Some(c),
            false => connect(&upstream).await,
        },
        None => connect(&upstream).await,
    };
    let Some(mut conn) = conn else {
        return Ok(status(StatusCode::BAD_GATEWAY));
    };
    let (mut parts, body) = req.into_parts();
    parts.uri = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_default();
    if let Ok(host) = upstream.parse() {
        parts.headers.insert(hyper::header::HOST, host);
    }
    let mut answer = std::pin::pin!(conn.tx.send_request(Request::from_parts(parts, body)));
    let mut ended = false;
    let head = poll_fn(|cx| {
        if !ended && conn.driver.as_mut().poll(cx).is_ready() {
            ended = true;
        }
        match answer.as_mut().poll(cx) {
            Poll::Pending if ended => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => Poll::Ready(r.ok()),
        }
    })
    .await;
    let Some(res) = head else {
        return Ok(status(StatusCode::BAD_GATEWAY));
    };
    let conn = (!ended).then_some(conn);
    Ok(res.map(|body| Driven { body, conn, slot }.boxed()))
}

/// A response body that drives its connection, and gives it back to the
/// agent connection's slot when it has ended.
struct Driven {
    body: Incoming,
    conn: Option<Conn>,
    slot: Slot,
}

impl hyper::body::Body for Driven {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if let Some(c) = this.conn.as_mut() {
            if c.driver.as_mut().poll(cx).is_ready() {
                this.conn = None;
            }
        }
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) || this.body.is_end_stream() {
            if let (Some(c), Ok(mut s)) = (this.conn.take(), this.slot.lock()) {
                *s = Some(c);
            }
        }
        frame
    }
}

/// Whether a kept connection takes the next request (polling it on to
/// there): the upstream has not closed it.
async fn ready(c: &mut Conn) -> bool {
    poll_fn(|cx| {
        if c.driver.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        c.tx.poll_ready(cx).map(|r| r.is_ok())
    })
    .await
}

async fn connect(upstream: &str) -> Option<Conn> {
    let tcp = TcpStream::connect(upstream).await.ok()?;
    let _ = tcp.set_nodelay(true);
    let (tx, driver) = http1::handshake(TokioIo::new(tcp)).await.ok()?;
    Some(Conn {
        tx,
        driver: Box::pin(driver),
    })
}

fn status(code: StatusCode) -> Response<Body> {
    let mut res = Response::new(Empty::new().map_err(|never| match never {}).boxed());
    *res.status_mut() = code;
    res
}
