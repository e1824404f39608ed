//! Upstream `Content-Encoding`: identity, gzip and deflate are decoded; anything
//! else is unreadable, so it is refused rather than forwarded ungated.

use std::borrow::Cow;
use std::io::Write;

use flate2::write::{GzDecoder, ZlibDecoder};
use http::HeaderMap;

use crate::error::Error;

/// The decoders are boxed: most bodies are identity, and every open stream
/// holds one of these (a decoder inline is about 240 bytes).
pub enum ContentDecoder {
    Identity,
    Gzip(Box<GzDecoder<Vec<u8>>>),
    Deflate(Box<ZlibDecoder<Vec<u8>>>),
}

const UNREADABLE: Error = Error::UpstreamUnreadable("unsupported or corrupt content-encoding");

impl ContentDecoder {
    pub fn for_headers(h: &HeaderMap) -> Result<ContentDecoder, Error> {
        let mut codings = h
            .get_all(http::header::CONTENT_ENCODING)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("?").split(','))
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty() && s != "identity");
        let first = codings.next();
        if codings.next().is_some() {
            return Err(UNREADABLE);
        }
        match first.as_deref() {
            None => Ok(ContentDecoder::Identity),
            Some("gzip") | Some("x-gzip") => {
                Ok(ContentDecoder::Gzip(Box::new(GzDecoder::new(Vec::new()))))
            }
            Some("deflate") => Ok(ContentDecoder::Deflate(Box::new(ZlibDecoder::new(
                Vec::new(),
            )))),
            Some(_) => Err(UNREADABLE),
        }
    }

    /// Decodes the next piece of the body.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Cow<'a, [u8]>, Error> {
        match self {
            ContentDecoder::Identity => Ok(Cow::Borrowed(input)),
            ContentDecoder::Gzip(d) => {
                d.write_all(input).map_err(|_| UNREADABLE)?;
                Ok(Cow::Owned(std::mem::take(d.get_mut())))
            }
            ContentDecoder::Deflate(d) => {
                d.write_all(input).map_err(|_| UNREADABLE)?;
                Ok(Cow::Owned(std::mem::take(d.get_mut())))
            }
        }
    }

    /// At end of body: what is left, or an error for a truncated encoding.
    pub fn finish(&mut self) -> Result<Vec<u8>, Error> {
        match self {
            ContentDecoder::Identity => Ok(Vec::new()),
            ContentDecoder::Gzip(d) => {
                d.try_finish().map_err(|_| UNREADABLE)?;
                Ok(std::mem::take(d.get_mut()))
            }
            ContentDecoder::Deflate(d) => {
                d.try_finish().map_err(|_| UNREADABLE)?;
                Ok(std::mem::take(d.get_mut()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::GzEncoder, Compression};

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::CONTENT_ENCODING, v.parse().unwrap());
        h
    }

    #[test]
    fn gzip_is_decoded_across_pieces() {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(b"data: hello\n\n").unwrap();
        let gz = e.finish().unwrap();
        let mut d = ContentDecoder::for_headers(&headers("gzip")).unwrap();
        let mut out = Vec::new();
        for b in gz.chunks(3) {
            out.extend_from_slice(&d.decode(b).unwrap());
        }
        out.extend(d.finish().unwrap());
        assert_eq!(out, b"data: hello\n\n");
    }

    #[test]
    fn truncated_gzip_and_unknown_codings_are_errors() {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(&[7u8; 1000]).unwrap();
        let gz = e.finish().unwrap();
        let mut d = ContentDecoder::for_headers(&headers("gzip")).unwrap();
        let _ = d.decode(&gz[..gz.len() / 2]);
        assert!(d.finish().is_err());
        assert!(ContentDecoder::for_headers(&headers("br")).is_err());
        assert!(ContentDecoder::for_headers(&headers("gzip, br")).is_err());
        assert!(matches!(
            ContentDecoder::for_headers(&HeaderMap::new()),
            Ok(ContentDecoder::Identity)
        ));
    }
}
