//! The chunked transfer coding (RFC 9112 §7.1), decoded from whatever part
//! of it has arrived: every chunk's data in the input comes out joined in
//! one piece. Strict: CRLF line ends only, hex sizes that fit, no control
//! characters in extensions or trailers; anything else is broken framing.

use super::Malformed;

/// Longest size line (with its extensions) or trailer line.
const MAX_LINE: usize = 4096;

/// Most trailer bytes taken (and dropped) after the last chunk.
const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a size line.
    Size,
    /// This many data bytes of the current chunk are still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk; the bytes taken so far.
    Trailers(usize),
    Done,
}

#[derive(Debug)]
pub struct Chunked {
    state: State,
}

impl Chunked {
    pub fn new() -> Chunked {
        Chunked { state: State::Size }
    }

    /// Whether the last chunk and the trailers' end have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, appending data to `out`; returns how many input
    /// bytes it used. It stops where it needs more input, or at the end.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Malformed> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match self.state {
                State::Done => return Ok(at),
                State::Data(left) => {
                    if rest.is_empty() {
                        return Ok(at);
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(rest.len());
                    out.extend_from_slice(&rest[..take]);
                    at += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                }
                State::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(at);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(Malformed("chunk data longer than its size"));
                    }
                    at += 2;
                    self.state = State::Size;
                }
                State::Size => {
                    let Some(line) = line(rest)? else {
                        return Ok(at);
                    };
                    at += line.len() + 2;
                    let size = size(line)?;
                    self.state = match size {
                        0 => State::Trailers(0),
                        n => State::Data(n),
                    };
                }
                State::Trailers(taken) => {
                    let Some(line) = line(rest)? else {
                        return Ok(at);
                    };
                    at += line.len() + 2;
                    if line.is_empty() {
                        self.state = State::Done;
                        continue;
                    }
                    if line.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
                        return Err(Malformed("control character in a trailer"));
                    }
                    let taken = taken + line.len() + 2;
                    if taken > MAX_TRAILERS {
                        return Err(Malformed("trailers too large"));
                    }
                    self.state = State::Trailers(taken);
                }
            }
        }
    }
}

/// The next line without its CRLF, `None` until it is all there.
fn line(rest: &[u8]) -> Result<Option<&[u8]>, Malformed> {
    let window = &rest[..rest.len().min(MAX_LINE + 2)];
    match memchr::memchr(b'\n', window) {
        Some(0) => Err(Malformed("bare LF in chunked framing")),
        Some(n) if window[n - 1] == b'\r' => Ok(Some(&window[..n - 1])),
        Some(_) => Err(Malformed("bare LF in chunked framing")),
        None if window.len() > MAX_LINE => Err(Malformed("chunk line too long")),
        None => Ok(None),
    }
}

/// A size line: hex digits, then optional extensions after `;`.
fn size(line: &[u8]) -> Result<u64, Malformed> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(Malformed("chunk size is not hex"));
    }
    if digits > 15 {
        return Err(Malformed("chunk size too large"));
    }
    let mut n: u64 = 0;
    for &b in &line[..digits] {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        n = n * 16 + u64::from(d);
    }
    let ext = &line[digits..];
    let ext = &ext[ext.iter().take_while(|&&b| b == b' ' || b == b'\t').count()..];
    if !ext.is_empty() && ext[0] != b';' {
        return Err(Malformed("junk after a chunk size"));
    }
    if ext.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
        return Err(Malformed("control character in a chunk extension"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes, as a socket might.
    fn fed(input: &[u8], step: usize) -> Result<(Vec<u8>, bool, usize), Malformed> {
        let mut c = Chunked::new();
        let mut out = Vec::new();
        let mut buf = Vec::new();
        for piece in input.chunks(step.max(1)) {
            buf.extend_from_slice(piece);
            let used = c.decode(&buf, &mut out)?;
            buf.drain(..used);
            if c.is_done() {
                break;
            }
        }
        Ok((out, c.is_done(), buf.len()))
    }

    const BODY: &[u8] =
        b"5\r\nhello\r\n1;name=\"v\"\r\n \r\nA\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n";

    #[test]
    fn decodes_whatever_way_the_bytes_arrive() {
        for step in 1..=BODY.len() {
            let (out, done, left) = fed(BODY, step).unwrap();
            assert_eq!(out, b"hello 0123456789", "step {step}");
            assert!(done && left == 0, "step {step}");
        }
    }

    #[test]
    fn stops_at_the_end_and_leaves_what_follows() {
        let mut c = Chunked::new();
        let mut out = Vec::new();
        let used = c
            .decode(b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1", &mut out)
            .unwrap();
        assert!(c.is_done());
        assert_eq!(used, 13);
        assert_eq!(out, b"abc");
    }

    #[test]
    fn a_partial_size_line_waits_for_more() {
        let mut c = Chunked::new();
        let mut out = Vec::new();
        assert_eq!(c.decode(b"1f", &mut out).unwrap(), 0);
        assert_eq!(c.decode(b"1f\r", &mut out).unwrap(), 0);
        assert!(!c.is_done() && out.is_empty());
    }

    #[test]
    fn broken_framing_is_refused() {
        for bad in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5\r\nhello\n0\r\n\r\n",
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"-5\r\nhello\r\n",
            b"0x5\r\nhello\r\n",
            b"\r\n",
            b"5 junk\r\nhello\r\n",
            b"5;a\x00b\r\nhello\r\n",
            b"1000000000000000\r\n",
            b"0\r\nbad\x01trailer\r\n\r\n",
            b"0\r\nx: 1\n\r\n",
        ] {
            assert!(
                fed(bad, bad.len()).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = [b'a'; MAX_LINE + 8];
        assert!(fed(&long, long.len()).is_err());
        let mut trailers = b"0\r\n".to_vec();
        for _ in 0..2000 {
            trailers.extend_from_slice(b"x-t: 0123456789\r\n");
        }
        assert!(fed(&trailers, 512).is_err());
    }

    #[test]
    fn sizes_are_hex_either_case() {
        let (out, done, _) = fed(b"a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\n", 7).unwrap();
        assert_eq!(out.len(), 20);
        assert!(done);
    }

    proptest::proptest! {
        /// Any bytes, fed in any pieces, decode to the same outcome as fed
        /// whole: the same data and end, or an error either way.
        #[test]
        fn any_split_reads_the_same(
            input in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"0123456789abcdefABCDEF;= \t\r\nx:".to_vec()),
                    proptest::num::u8::ANY,
                ],
                0..200,
            ),
            step in 1usize..16,
        ) {
            let whole = fed(&input, input.len().max(1));
            let split = fed(&input, step);
            match (whole, split) {
                (Ok((a, done_a, _)), Ok((b, done_b, _))) => {
                    proptest::prop_assert_eq!(done_a, done_b);
                    if done_a {
                        proptest::prop_assert_eq!(a, b);
                    } else {
                        // Cut short: the pieces read so far agree.
                        let n = a.len().min(b.len());
                        proptest::prop_assert_eq!(&a[..n], &b[..n]);
                    }
                }
                (Err(_), Err(_)) => {}
                (w, s) => proptest::prop_assert!(false, "whole {w:?} split {s:?}"),
            }
        }
    }

    #[test]
    fn a_body_cut_short_is_not_done() {
        let (out, done, _) = fed(b"5\r\nhel", 3).unwrap();
        assert_eq!(out, b"hel");
        assert!(!done);
    }
}
