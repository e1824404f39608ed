//! Unit tests of the SSE decoder: blocks, clean raw bytes, lines another
//! reader would split, sizes, and any split of the input.

use super::*;

fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new(1 << 20);
    let mut out = Vec::new();
    for c in chunks {
        d.push(c);
        while let Some(e) = d.next_event().unwrap() {
            out.push(e);
        }
    }
    out.extend(d.finish().unwrap());
    out
}

/// The first error decoding `input` gives, fed whole.
fn error_of(input: &[u8]) -> Option<SseError> {
    let mut d = SseDecoder::new(1 << 20);
    d.push(input);
    loop {
        match d.next_event() {
            Ok(Some(_)) => continue,
            Ok(None) => return d.finish().err(),
            Err(e) => return Some(e),
        }
    }
}

#[test]
fn one_data_line_is_a_slice_of_raw_and_more_are_joined() {
    let input: &[u8] =
        b"data: one\n\n: c\ndata:two\r\ndata: three\n\nevent: e\ndata\n\ndata: four\r\n\rdata: 5";
    for split in 0..input.len() {
        let ev = decode_all(&[&input[..split], &input[split..]]);
        let data: Vec<_> = ev.iter().map(|e| e.data.as_deref()).collect();
        assert_eq!(
            data,
            [
                Some(&b"one"[..]),
                Some(b"two\nthree"),
                Some(b""),
                Some(b"four"),
                Some(b"5"),
            ],
            "split at {split}"
        );
        // The one-line value points into the block's own bytes.
        let (raw, one) = (&ev[0].raw, ev[0].data.as_ref().unwrap());
        let at = one.as_ptr() as usize - raw.as_ptr() as usize;
        assert_eq!(&raw[at..at + one.len()], b"one");
    }
}

#[test]
fn a_line_another_reader_would_split_fails_the_stream() {
    let call = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}";
    for sep in [
        "\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2028}", "\u{2029}",
    ] {
        for line in [
            format!(": keep-alive{sep}{call}\n\n"),
            format!("id: 1{sep}{call}\n\n"),
            format!("event: x{sep}{call}\ndata: {{}}\n\n"),
            format!("retry: 5{sep}{call}\n\n"),
            format!("data: {{}}\nid{sep}x: 1\n\n"),
            // Unterminated: read by `finish`.
            format!(": tail{sep}{call}"),
        ] {
            assert_eq!(
                error_of(line.as_bytes()),
                Some(SseError::Foreign),
                "{line:?}"
            );
        }
    }
    for ctl in ["\u{0}", "\u{b}", "\u{1b}", "\u{1f}"] {
        let line = format!("data: [DONE]{ctl}{call}\n\n");
        assert_eq!(
            error_of(line.as_bytes()),
            Some(SseError::Foreign),
            "{line:?}"
        );
    }
    // Tabs, and separators inside data (a JSON string may hold them), pass.
    let ok = "data: {\"c\":\"a\u{2028}b\u{85}c\"}\t\n: tab\there\n\n";
    assert_eq!(error_of(ok.as_bytes()), None);
}

#[test]
fn separators_leave_as_json_escapes() {
    let out = escape_separators(Bytes::from(
        "data: {\"c\":\"a\u{2028}b\u{85}c\u{2029}\u{e9}\u{20ac}\"}\n\n",
    ));
    let want = "data: {\"c\":\"a\\u2028b\\u0085c\\u2029\u{e9}\u{20ac}\"}\n\n";
    assert_eq!(std::str::from_utf8(&out).unwrap(), want);
    let v: serde_json::Value = serde_json::from_slice(&out[6..]).unwrap();
    assert_eq!(v["c"], "a\u{2028}b\u{85}c\u{2029}\u{e9}\u{20ac}");
    let plain = Bytes::from_static(b"data: {}\n\n");
    assert_eq!(escape_separators(plain.clone()).as_ptr(), plain.as_ptr());
}

fn data(e: &SseEvent) -> Option<&str> {
    e.data.as_deref().map(|d| std::str::from_utf8(d).unwrap())
}

#[test]
fn lf_crlf_and_cr_line_ends() {
    for input in [
        &b"data: a\n\ndata: b\n\n"[..],
        b"data: a\r\n\r\ndata: b\r\n\r\n",
        b"data: a\r\rdata: b\r\r",
    ] {
        let ev = decode_all(&[input]);
        assert_eq!(ev.len(), 2, "{input:?}");
        assert_eq!(data(&ev[0]), Some("a"));
        assert_eq!(data(&ev[1]), Some("b"));
        let raw: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
        assert_eq!(raw, input);
    }
}

#[test]
fn comments_multiline_data_and_event_field() {
    let ev = decode_all(&[b": OPENROUTER PROCESSING\n\nevent: error\ndata: x\ndata:y\nid: 7\n\n"]);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].data, None, "a comment-only block dispatches no data");
    assert_eq!(ev[1].event.as_deref(), Some("error"));
    assert_eq!(data(&ev[1]), Some("x\ny"));
}

#[test]
fn bom_is_skipped_but_kept_in_raw() {
    let ev = decode_all(&[b"\xEF\xBB", b"\xBFdata: 1\n\n"]);
    assert_eq!(data(&ev[0]), Some("1"));
    assert_eq!(&ev[0].raw[..], b"\xEF\xBB\xBFdata: 1\n\n");
}

#[test]
fn every_split_point_gives_the_same_events() {
    let input = b"data: {\"a\":1}\r\n\r\n: c\r\ndata: two\r\ndata: lines\r\r\ndata: [DONE]\n\n";
    let whole = decode_all(&[input]);
    for i in 0..input.len() {
        for j in i..input.len() {
            let parts = decode_all(&[&input[..i], &input[i..j], &input[j..]]);
            let d1: Vec<_> = whole.iter().map(|e| e.data.clone()).collect();
            let d2: Vec<_> = parts.iter().map(|e| e.data.clone()).collect();
            assert_eq!(d1, d2, "split at {i},{j}");
            let raw: Vec<u8> = parts.iter().flat_map(|e| e.raw.to_vec()).collect();
            assert_eq!(raw, input, "split at {i},{j}");
        }
    }
}

#[test]
fn field_without_colon_and_space_handling() {
    let ev = decode_all(&[b"data\n\ndata:  two spaces\n\n"]);
    assert_eq!(data(&ev[0]), Some(""));
    assert_eq!(data(&ev[1]), Some(" two spaces"));
}

#[test]
fn unterminated_last_block_is_returned_by_finish() {
    let ev = decode_all(&[b"data: a\n\ndata: tail"]);
    assert_eq!(ev.len(), 2);
    assert_eq!(data(&ev[1]), Some("tail"));
}

#[test]
fn only_understood_lines_are_clean() {
    let ev = decode_all(&[
        b"data: a\n\n: c\nid: 1\nretry: 5\nevent: x\ndata: b\r\n\r\n{\"choices\":[]}\n\ndata: c\r\rdata: d\n\n",
    ]);
    let clean: Vec<bool> = ev.iter().map(|e| e.clean).collect();
    assert_eq!(clean, [true, true, false, false, true]);
    assert_eq!(ev[2].data, None, "an unknown field is no data");
    let ev = decode_all(&[b"data: tail"]);
    assert!(!ev[0].clean, "an unterminated block is never clean");
}

#[test]
fn oversized_event_is_an_error() {
    let mut d = SseDecoder::new(16);
    d.push(b"data: 0123456789abcdef0123");
    assert_eq!(d.next_event(), Err(SseError::TooLarge));
    let mut d = SseDecoder::new(16);
    d.push(b"data: 0123456789\ndata: abcdef\n");
    assert_eq!(d.next_event(), Err(SseError::TooLarge));
}

#[test]
fn a_block_read_where_it_lies_is_its_event_and_skipping_it_moves_on() {
    let input: &[u8] = b"\xEF\xBB\xBFdata: one\n\n: c\ndata:two\r\ndata: three\n\nevent: e\ndata\n\nx: 1\ndata: four\r\n\rdata: 5\n\n: only\n\n";
    for split in 0..=input.len() {
        let parts = [&input[..split], &input[split..]];
        let taken = decode_all(&parts);
        let mut d = SseDecoder::new(1 << 20);
        let mut seen = Vec::new();
        for part in parts {
            d.push(part);
            while let Some(block) = d.next_ready().unwrap() {
                let looked = SseEvent {
                    raw: Bytes::copy_from_slice(block.raw()),
                    event: block.event().map(str::to_string),
                    data: block.data().map(Bytes::copy_from_slice),
                    clean: block.clean(),
                };
                // Skipped and taken in turn: either way the next block follows.
                if seen.len() % 2 == 0 {
                    block.skip();
                } else {
                    assert_eq!(block.take(), looked, "split at {split}");
                }
                seen.push(looked);
            }
        }
        assert_eq!(d.finish().unwrap(), None, "split at {split}");
        assert_eq!(seen, taken, "split at {split}");
    }
}

#[test]
fn a_block_left_ready_is_given_again_and_finish_gives_it_first() {
    let mut d = SseDecoder::new(1 << 20);
    d.push(b"data: a\n\ndata: b");
    let raw = d.next_ready().unwrap().map(|b| b.raw().to_vec());
    assert_eq!(raw.as_deref(), Some(&b"data: a\n\n"[..]));
    // Looked at, neither taken nor skipped: the same block again.
    let again = d
        .next_ready()
        .unwrap()
        .map(|b| b.data().map(<[u8]>::to_vec));
    assert_eq!(again, Some(Some(b"a".to_vec())));
    let first = d.finish().unwrap().and_then(|e| e.data);
    assert_eq!(first.as_deref(), Some(&b"a"[..]));
    let rest = d.finish().unwrap().and_then(|e| e.data);
    assert_eq!(rest.as_deref(), Some(&b"b"[..]));
}
