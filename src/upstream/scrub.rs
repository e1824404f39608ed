//! What the agent receives carries nothing of toolgate's own upstream
//! credentials: response headers pass through an allow-list, and every
//! copy of an upstream key in a response body becomes
//! `[REDACTED:upstream_key]`.
//!
//! The key's characters are letters, digits, `-` and `_`, so in JSON it can
//! only sit inside a string, and the mask (also plain ASCII) keeps the
//! document valid. Limits, pinned by tests: a key the provider wrote with
//! JSON escapes, or spread over several stream events (a model writing it
//! token by token), is not found.

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName};
use memchr::memmem::Finder;

use crate::error::Error;

const MASK: &[u8] = b"[REDACTED:upstream_key]";

/// Response headers the agent is given (any other upstream header stays
/// here): the body's type and caching, when to retry, rate limits, and the
/// provider's request id (`x-request-id`, Anthropic's `request-id`) and
/// timing, which SDKs read. (toolgate's own id is `x-toolgate-request-id`.)
const KEEP: [&str; 10] = [
    "content-type",
    "cache-control",
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "request-id",
    "x-request-id",
    "openai-processing-ms",
    "openai-version",
    "anthropic-version",
];
const KEEP_PREFIX: [&str; 2] = ["x-ratelimit-", "anthropic-ratelimit-"];

/// Whether the upstream header `name` may reach the agent (`also`: more
/// names allowed here).
fn header_kept(name: &str, also: &[&str]) -> bool {
    KEEP.contains(&name) || also.contains(&name) || KEEP_PREFIX.iter().any(|p| name.starts_with(p))
}

/// The upstream keys to keep out of responses.
#[derive(Default)]
pub struct Scrub {
    keys: Vec<Finder<'static>>,
}

impl Scrub {
    /// Keys shorter than 8 bytes are not looked for (a short key would match
    /// ordinary text; the redactor has the same floor).
    pub fn new(keys: impl IntoIterator<Item = String>) -> Scrub {
        let mut keys: Vec<Finder<'static>> = keys
            .into_iter()
            .filter(|k| k.len() >= 8)
            .map(|k| Finder::new(k.as_bytes()).into_owned())
            .collect();
        keys.sort_by_key(|f| f.needle().to_vec());
        keys.dedup_by(|a, b| a.needle() == b.needle());
        Scrub { keys }
    }

    /// How many bytes of a body read piece by piece must wait for the next
    /// piece, so that a key split between two pieces is still found.
    pub fn overlap(&self) -> usize {
        self.keys
            .iter()
            .map(|k| k.needle().len().saturating_sub(1))
            .max()
            .unwrap_or(0)
    }

    /// Keeps only the allowed headers (and `also`), none holding a key.
    pub fn headers(&self, h: &mut HeaderMap, also: &[&str]) {
        let gone: Vec<HeaderName> = h
            .iter()
            .filter(|(k, v)| {
                !header_kept(k.as_str(), also)
                    || self.keys.iter().any(|f| f.find(v.as_bytes()).is_some())
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            h.remove(k);
        }
    }

    /// `e` with the upstream's own bytes it may show the agent (its error
    /// body, an error event) masked, and its passed-on headers filtered.
    pub fn error(&self, e: Error) -> Error {
        match e {
            Error::UpstreamStatus {
                status,
                mut limits,
                body,
            } => {
                self.headers(&mut limits, &[]);
                Error::UpstreamStatus {
                    status,
                    limits,
                    body: self.bytes(body),
                }
            }
            Error::UpstreamEvent(b) => Error::UpstreamEvent(self.bytes(b)),
            e => e,
        }
    }

    /// `b` with every key masked; the same bytes when none is in it.
    pub fn bytes(&self, b: Bytes) -> Bytes {
        if !self.keys.iter().any(|f| f.find(&b).is_some()) {
            return b;
        }
        let mut cur = b.to_vec();
        for f in &self.keys {
            if f.find(&cur).is_none() {
                continue;
            }
            let mut next = Vec::with_capacity(cur.len());
            let mut last = 0;
            for i in f.find_iter(&cur) {
                next.extend_from_slice(&cur[last..i]);
                next.extend_from_slice(MASK);
                last = i + f.needle().len();
            }
            next.extend_from_slice(&cur[last..]);
            cur = next;
        }
        Bytes::from(cur)
    }
}

/// A body read piece by piece with the keys masked: each piece is held
/// back by [`Scrub::overlap`] bytes until the next (or the end) comes.
#[derive(Default)]
pub struct Carry {
    held: BytesMut,
}

impl Carry {
    /// The next piece that may go out, given the body's next `piece`
    /// (`None` at its end, which lets everything held go).
    pub fn next(&mut self, scrub: &Scrub, piece: Option<Bytes>) -> Bytes {
        let overlap = scrub.overlap();
        let all = match piece {
            Some(p) if overlap == 0 => return p,
            Some(p) if self.held.is_empty() && p.len() > overlap => {
                let masked = scrub.bytes(p);
                return self.keep_tail(masked, overlap);
            }
            Some(p) => {
                self.held.extend_from_slice(&p);
                scrub.bytes(self.held.split().freeze())
            }
            None => return scrub.bytes(self.held.split().freeze()),
        };
        self.keep_tail(all, overlap)
    }

    /// Sends all of `masked` but its last `overlap` bytes, which are held.
    fn keep_tail(&mut self, masked: Bytes, overlap: usize) -> Bytes {
        let cut = masked.len().saturating_sub(overlap);
        self.held.extend_from_slice(&masked[cut..]);
        masked.slice(..cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-or-v1-0123456789abcdef";

    fn scrub() -> Scrub {
        Scrub::new([KEY.to_string(), "short".into(), KEY.to_string()])
    }

    #[test]
    fn keys_are_masked_and_json_stays_valid() {
        let body = format!(r#"{{"error":{{"message":"bad key {KEY}","echo":"{KEY}{KEY}"}}}}"#);
        let out = scrub().bytes(Bytes::from(body));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["error"]["message"], "bad key [REDACTED:upstream_key]");
        assert_eq!(
            v["error"]["echo"],
            "[REDACTED:upstream_key][REDACTED:upstream_key]"
        );
        let plain = Bytes::from_static(b"short and sweet");
        assert_eq!(scrub().bytes(plain.clone()).as_ptr(), plain.as_ptr());
    }

    #[test]
    fn a_key_split_between_pieces_is_found_at_every_split() {
        let body = format!("before {KEY} middle {KEY} after");
        for i in 0..body.len() {
            for j in i..body.len() {
                let s = scrub();
                let mut c = Carry::default();
                let mut out = Vec::new();
                for p in [&body[..i], &body[i..j], &body[j..]] {
                    out.extend_from_slice(&c.next(&s, Some(Bytes::copy_from_slice(p.as_bytes()))));
                }
                out.extend_from_slice(&c.next(&s, None));
                let out = String::from_utf8(out).unwrap();
                assert_eq!(
                    out, "before [REDACTED:upstream_key] middle [REDACTED:upstream_key] after",
                    "split at {i},{j}"
                );
            }
        }
    }

    #[test]
    fn only_allowed_headers_without_keys_pass() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "application/json".parse().unwrap());
        h.insert("x-ratelimit-remaining-requests", "99".parse().unwrap());
        h.insert("retry-after", "3".parse().unwrap());
        h.insert("set-cookie", "session=abc".parse().unwrap());
        h.insert(
            "x-echo-authorization",
            format!("Bearer {KEY}").parse().unwrap(),
        );
        h.insert("x-request-id", format!("req-{KEY}").parse().unwrap());
        h.insert("server", "provider/1.0".parse().unwrap());
        scrub().headers(&mut h, &[]);
        let mut names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "content-type",
                "retry-after",
                "x-ratelimit-remaining-requests"
            ]
        );
    }

    #[test]
    fn nothing_to_look_for_passes_everything() {
        let s = Scrub::new([]);
        assert_eq!(s.overlap(), 0);
        let mut c = Carry::default();
        assert_eq!(&c.next(&s, Some(Bytes::from_static(b"abc")))[..], b"abc");
        assert!(c.next(&s, None).is_empty());
    }
}
