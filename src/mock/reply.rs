//! What the provider answers one request with.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::server::Seen;

/// Computes a reply from the request, when it arrives.
pub type Compute = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// One answer of the provider.
#[derive(Clone)]
pub enum Reply {
    /// An event stream (`200`, `text/event-stream`) sent in pieces of
    /// `chunk` bytes, `delay` apart; `reset` breaks the connection after it,
    /// `gzip` compresses it (`content-encoding: gzip`).
    Sse {
        body: Bytes,
        chunk: usize,
        delay: Duration,
        reset: bool,
        gzip: bool,
    },
    /// A body with a status and a content type; `gzip` compresses it,
    /// `encoding` names a content encoding without applying it.
    Body {
        status: u16,
        content_type: &'static str,
        body: Bytes,
        gzip: bool,
        encoding: Option<&'static str>,
    },
    /// An event stream sent in two parts: `after` once `go` is notified.
    Paused {
        before: Bytes,
        after: Bytes,
        go: Arc<tokio::sync::Notify>,
    },
    /// An event stream sent event by event (blank-line separated), `delay`
    /// apart: a model that is thinking between events.
    Paced { body: Bytes, delay: Duration },
    /// Another reply with these response headers added.
    Headed(Vec<(&'static str, String)>, Box<Reply>),
    /// Another reply, after a wait.
    After(Duration, Box<Reply>),
    /// A reply computed from the request.
    Computed(Compute),
}

impl Reply {
    /// An event stream in 64-byte pieces.
    pub fn sse(body: impl Into<Bytes>) -> Reply {
        Reply::Sse {
            body: body.into(),
            chunk: 64,
            delay: Duration::ZERO,
            reset: false,
            gzip: false,
        }
    }

    /// A JSON body with a status.
    pub fn json(status: u16, body: impl Into<Bytes>) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json",
            body: body.into(),
            gzip: false,
            encoding: None,
        }
    }

    /// A reply computed from each request.
    pub fn computed(f: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::Computed(Arc::new(f))
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reply::Sse { .. } => "Reply::Sse",
            Reply::Body { .. } => "Reply::Body",
            Reply::Paused { .. } => "Reply::Paused",
            Reply::Paced { .. } => "Reply::Paced",
            Reply::Headed(..) => "Reply::Headed",
            Reply::After(..) => "Reply::After",
            Reply::Computed(_) => "Reply::Computed",
        })
    }
}
