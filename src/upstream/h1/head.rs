//! The request head toolgate writes and the response head it reads, with
//! how the response body is framed (RFC 9112 §6.3). Framing another reader
//! could take differently (both `Content-Length` and `Transfer-Encoding`,
//! differing lengths, a transfer coding other than `chunked`) is refused.

use std::mem::MaybeUninit;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode, Uri, Version};

use super::Malformed;

/// Largest response head read.
pub const MAX_HEAD: usize = 64 * 1024;

/// Most response header lines.
const MAX_HEADERS: usize = 128;

/// How the request body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    None,
    Length(u64),
    Chunked,
}

impl Sent {
    /// The framing for a body of `exact` length (when known).
    pub fn of(method: &Method, exact: Option<u64>) -> Sent {
        match exact {
            Some(0)
                if matches!(
                    *method,
                    Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::TRACE
                ) =>
            {
                Sent::None
            }
            Some(n) => Sent::Length(n),
            None => Sent::Chunked,
        }
    }
}

/// Writes the request line and headers. The `Host` comes from the URI, and
/// the body's framing is toolgate's own: those headers from `headers` are
/// left out.
pub fn write_request(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    sent: Sent,
    out: &mut Vec<u8>,
) {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(if path.is_empty() {
        b"/"
    } else {
        path.as_bytes()
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if let Some(a) = uri.authority() {
        line(out, b"host", a.as_str().as_bytes());
    }
    for (name, value) in headers {
        if matches!(
            *name,
            header::HOST | header::CONTENT_LENGTH | header::TRANSFER_ENCODING
        ) {
            continue;
        }
        line(out, name.as_str().as_bytes(), value.as_bytes());
    }
    match sent {
        Sent::None => {}
        Sent::Length(n) => line(out, b"content-length", n.to_string().as_bytes()),
        Sent::Chunked => line(out, b"transfer-encoding", b"chunked"),
    }
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (a `HEAD` request, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Until the upstream closes the connection.
    Close,
}

/// A response head read whole.
#[derive(Debug)]
pub enum Parsed {
    /// A 1xx other than 101, to be skipped; the bytes it took.
    Interim(usize),
    Final {
        head: Response<()>,
        framing: Framing,
        /// Whether the connection can take another request afterwards.
        keep_alive: bool,
        /// The bytes the head took.
        used: usize,
    },
}

/// Reads a response head from `buf`: `None` until it is all there.
pub fn parse_response(buf: &[u8], method: &Method) -> Result<Option<Parsed>, Malformed> {
    // Left uninitialised: the parser writes the lines it finds (128 empty
    // ones cost more to write than a short head does to parse).
    let mut lines = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let used = match config.parse_response_with_uninit_headers(&mut r, buf, &mut lines) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(Malformed("response head too large"))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Malformed("too many response headers")),
        Err(_) => return Err(Malformed("malformed response head")),
    };
    if used > MAX_HEAD {
        return Err(Malformed("response head too large"));
    }
    let code = r.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| Malformed("bad status code"))?;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(Malformed("unasked protocol switch"));
    }
    if status.is_informational() {
        return Ok(Some(Parsed::Interim(used)));
    }
    let version = match r.version {
        Some(1) => Version::HTTP_11,
        _ => Version::HTTP_10,
    };
    let mut headers = HeaderMap::with_capacity(r.headers.len());
    for h in r.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| Malformed("bad response header name"))?;
        let value =
            HeaderValue::from_bytes(h.value).map_err(|_| Malformed("bad response header value"))?;
        headers.append(name, value);
    }
    let framing = framing(&headers, status, method, version)?;
    let keep_alive = version == Version::HTTP_11
        && framing != Framing::Close
        && !tokens(&headers, &header::CONNECTION).any(|t| t.eq_ignore_ascii_case("close"));
    let mut head = Response::new(());
    *head.status_mut() = status;
    *head.version_mut() = version;
    *head.headers_mut() = headers;
    Ok(Some(Parsed::Final {
        head,
        framing,
        keep_alive,
        used,
    }))
}

/// The comma-separated elements of every `name` header, trimmed.
fn tokens<'a>(h: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a str> {
    h.get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("\u{0}").split(','))
        .map(str::trim)
}

fn framing(
    h: &HeaderMap,
    status: StatusCode,
    method: &Method,
    version: Version,
) -> Result<Framing, Malformed> {
    if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Empty);
    }
    let te = h.contains_key(header::TRANSFER_ENCODING);
    let cl = h.contains_key(header::CONTENT_LENGTH);
    if te {
        if cl {
            return Err(Malformed("both Content-Length and Transfer-Encoding"));
        }
        if version != Version::HTTP_11 {
            return Err(Malformed("Transfer-Encoding in an HTTP/1.0 response"));
        }
        let mut codings = tokens(h, &header::TRANSFER_ENCODING);
        return match (codings.next(), codings.next()) {
            (Some(c), None) if c.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(Malformed("a transfer coding other than chunked")),
        };
    }
    if cl {
        let mut length = None;
        for t in tokens(h, &header::CONTENT_LENGTH) {
            if t.is_empty() || t.len() > 18 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Malformed("bad Content-Length"));
            }
            let n: u64 = t.parse().map_err(|_| Malformed("bad Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(Malformed("differing Content-Length values"));
            }
            length = Some(n);
        }
        return length
            .map(Framing::Length)
            .ok_or(Malformed("bad Content-Length"));
    }
    Ok(Framing::Close)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Option<Parsed>, Malformed> {
        parse_response(raw.as_bytes(), &Method::POST)
    }

    fn framed(raw: &str) -> Result<(Framing, bool), Malformed> {
        match parse(raw)? {
            Some(Parsed::Final {
                framing,
                keep_alive,
                ..
            }) => Ok((framing, keep_alive)),
            other => panic!("not a final head: {other:?}"),
        }
    }

    #[test]
    fn writes_an_origin_form_request_with_its_own_framing() {
        let uri: Uri = "http://up.example:8080/v1/chat?x=1".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("agent.example"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("999"));
        h.insert("x-a", HeaderValue::from_static("1"));
        let mut out = Vec::new();
        write_request(&Method::POST, &uri, &h, Sent::Length(12), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /v1/chat?x=1 HTTP/1.1\r\nhost: up.example:8080\r\nx-a: 1\r\ncontent-length: 12\r\n\r\n"
        );
        let mut out = Vec::new();
        write_request(
            &Method::GET,
            &uri,
            &HeaderMap::new(),
            Sent::of(&Method::GET, Some(0)),
            &mut out,
        );
        assert!(!String::from_utf8_lossy(&out).contains("content-length"));
        assert_eq!(Sent::of(&Method::POST, Some(0)), Sent::Length(0));
        assert_eq!(Sent::of(&Method::POST, None), Sent::Chunked);
    }

    #[test]
    fn reads_the_framing_a_response_declares() {
        let ok = "HTTP/1.1 200 OK\r\n";
        assert_eq!(
            framed(&format!("{ok}content-length: 5\r\n\r\n")).unwrap(),
            (Framing::Length(5), true)
        );
        assert_eq!(
            framed(&format!(
                "{ok}Content-Length: 5\r\ncontent-length: 5, 5\r\n\r\n"
            ))
            .unwrap(),
            (Framing::Length(5), true)
        );
        assert_eq!(
            framed(&format!("{ok}transfer-encoding: Chunked\r\n\r\n")).unwrap(),
            (Framing::Chunked, true)
        );
        assert_eq!(
            framed(&format!("{ok}\r\n")).unwrap(),
            (Framing::Close, false)
        );
        assert_eq!(
            framed(&format!(
                "{ok}content-length: 5\r\nconnection: keep-alive, close\r\n\r\n"
            ))
            .unwrap(),
            (Framing::Length(5), false)
        );
        assert_eq!(
            framed("HTTP/1.0 200 OK\r\ncontent-length: 5\r\n\r\n").unwrap(),
            (Framing::Length(5), false)
        );
        assert_eq!(
            framed("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n")
                .unwrap()
                .0,
            Framing::Empty
        );
        let head = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n",
            &Method::HEAD,
        )
        .unwrap();
        assert!(matches!(
            head,
            Some(Parsed::Final {
                framing: Framing::Empty,
                ..
            })
        ));
    }

    #[test]
    fn framing_two_readers_could_differ_on_is_refused() {
        for bad in [
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: +5\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0x5\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: \r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n",
            "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nx-folded: a\r\n b\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "SMTP ready\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_interim_response_is_skipped_and_a_partial_head_waits() {
        assert!(matches!(
            parse("HTTP/1.1 100 Continue\r\n\r\n").unwrap(),
            Some(Parsed::Interim(25))
        ));
        assert!(parse("HTTP/1.1 200 OK\r\ncontent-le").unwrap().is_none());
        let huge = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD));
        assert!(parse(&huge).is_err());
    }

    #[test]
    fn up_to_the_most_header_lines_are_read_and_every_prefix_waits() {
        let head = |n: usize| {
            let lines: String = (0..n).map(|i| format!("x-{i}: {i}\r\n")).collect();
            format!("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n{lines}\r\n")
        };
        let full = head(MAX_HEADERS - 1);
        match parse(&full).unwrap() {
            Some(Parsed::Final { head, used, .. }) => {
                assert_eq!(used, full.len());
                assert_eq!(head.headers().len(), MAX_HEADERS);
                assert_eq!(head.headers()["x-126"], "126");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&head(MAX_HEADERS)).is_err());
        let short = head(3);
        for cut in 0..short.len() {
            assert!(parse(&short[..cut]).unwrap().is_none(), "{cut}");
        }
        assert!(parse(&short).unwrap().is_some());
    }
}
