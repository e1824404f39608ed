//! Unit tests of calls released before their choice finishes ([`super::early`]).

use super::tests::{calls, chunk, finishes, opts, verdicts};
use super::*;
use crate::protocol::sync_driver::RunSync;

/// Feeds `parts` one at a time, gating every pending call (`deny` names
/// the tools withheld); per part, the output it produced. Each rewriter
/// reads the whole-tree way too, and both must write the same.
fn feed(parts: &[String], deny: &[&str]) -> Vec<String> {
    let mut outs = Vec::new();
    for whole_tree in [false, true] {
        let mut rw = StreamRewriter::new(&opts());
        if whole_tree {
            rw = rw.whole_tree_only();
        }
        // Each part, then the end of input (`None`): what it wrote.
        let each = parts
            .iter()
            .map(Some)
            .chain([None])
            .map(|part| {
                let mut out = BytesMut::new();
                if let Some(p) = part {
                    rw.push(p.as_bytes());
                }
                loop {
                    let step = match part {
                        Some(_) => rw.process(&mut out),
                        None => rw.end(&mut out),
                    };
                    match step {
                        Ok(Step::NeedMore) => break,
                        Ok(Step::Gate) => rw.resolve(&verdicts(&rw, deny), &mut out),
                        Err(e) => {
                            rw.fail(&e, false, &mut out);
                            break;
                        }
                    }
                }
                String::from_utf8(out.to_vec()).unwrap()
            })
            .collect();
        outs.push(each);
    }
    assert_eq!(outs[0], outs[1], "typed and whole-tree readings agree");
    outs.swap_remove(0)
}

fn header(index: u32, id: &str, name: &str, args: &str) -> String {
    chunk(
        &format!(
            r#"{{"tool_calls":[{{"index":{index},"id":"{id}","type":"function","function":{{"name":"{name}","arguments":{}}}}}]}}"#,
            serde_json::to_string(args).unwrap()
        ),
        "null",
    )
}

fn frag(index: u32, args: &str) -> String {
    chunk(
        &format!(
            r#"{{"tool_calls":[{{"index":{index},"function":{{"arguments":{}}}}}]}}"#,
            serde_json::to_string(args).unwrap()
        ),
        "null",
    )
}

fn finish() -> String {
    chunk("{}", "\"tool_calls\"")
}

const DONE: &str = "data: [DONE]\n\n";

#[test]
fn a_call_goes_out_at_the_fragment_that_completes_it() {
    let parts = [
        header(0, "a", "get", ""),
        frag(0, "{\"city\":"),
        frag(0, "\"Paris\"}"),
        finish(),
        DONE.to_string(),
    ];
    let outs = feed(&parts, &[]);
    assert!(calls(&outs[1]).is_empty(), "not complete yet: {}", outs[1]);
    assert_eq!(
        calls(&outs[2]),
        [(0, "a".into(), "get".into(), "{\"city\":\"Paris\"}".into())],
        "sent with its last fragment"
    );
    assert!(finishes(&outs[2]).is_empty());
    // The finish goes on as it came; nothing more of the call.
    assert_eq!(outs[3], finish());
    assert_eq!(outs[4], DONE);
}

#[test]
fn an_early_call_withheld_leaves_the_neutral_text_at_the_finish() {
    let parts = [
        header(0, "a", "rm", "{\"path\":\"/\"}"),
        finish(),
        DONE.to_string(),
    ];
    let outs = feed(&parts, &["rm"]);
    let all = outs.concat();
    assert!(calls(&all).is_empty(), "{all}");
    assert!(!all.contains("\"rm\""), "{all}");
    assert!(outs[0].is_empty(), "nothing goes out for a withheld call");
    assert!(all.contains("NEUTRAL"), "{all}");
    assert_eq!(finishes(&all), ["stop"]);
    assert!(all.ends_with(DONE));
}

#[test]
fn calls_decided_early_keep_their_order_and_indices_from_zero() {
    let parts = || {
        [
            header(0, "a", "first", "{}"),
            header(1, "b", "second", "{\"x\":1}"),
            finish(),
            DONE.to_string(),
        ]
    };
    let all = feed(&parts(), &[]).concat();
    assert_eq!(
        calls(&all),
        [
            (0, "a".into(), "first".into(), "{}".into()),
            (1, "b".into(), "second".into(), "{\"x\":1}".into())
        ]
    );
    assert_eq!(finishes(&all), ["tool_calls"]);
    // The first withheld: the second takes index 0, the finish stays.
    let all = feed(&parts(), &["first"]).concat();
    assert_eq!(
        calls(&all),
        [(0, "b".into(), "second".into(), "{\"x\":1}".into())]
    );
    assert_eq!(finishes(&all), ["tool_calls"]);
    assert!(!all.contains("NEUTRAL"));
}

#[test]
fn a_call_behind_one_not_complete_waits_for_it() {
    // Call 1 completes while call 0 is still open (interleaved fragments):
    // neither goes out before call 0 does, then both in order.
    let parts = [
        header(0, "a", "first", "{\"q\":"),
        header(1, "b", "second", "{}"),
        frag(0, "2}"),
        finish(),
        DONE.to_string(),
    ];
    let outs = feed(&parts, &[]);
    assert!(calls(&outs[1]).is_empty(), "{}", outs[1]);
    assert_eq!(
        calls(&outs[2]),
        [
            (0, "a".into(), "first".into(), "{\"q\":2}".into()),
            (1, "b".into(), "second".into(), "{}".into())
        ]
    );
}

#[test]
fn nested_arguments_that_end_in_a_brace_are_not_complete_until_they_are() {
    let parts = [
        header(0, "a", "get", "{\"a\":{\"b\":1}"),
        frag(0, "}"),
        finish(),
        DONE.to_string(),
    ];
    let outs = feed(&parts, &[]);
    assert!(calls(&outs[0]).is_empty(), "{}", outs[0]);
    assert_eq!(calls(&outs[1]).len(), 1);
}

#[test]
fn a_call_without_an_id_waits_for_its_finish() {
    let no_id = chunk(
        r#"{"tool_calls":[{"index":0,"type":"function","function":{"name":"get","arguments":"{}"}}]}"#,
        "null",
    );
    let outs = feed(&[no_id, finish(), DONE.to_string()], &[]);
    assert!(outs[0].is_empty(), "{}", outs[0]);
    assert_eq!(calls(&outs[1]).len(), 1);
    assert_eq!(finishes(&outs[1]), ["tool_calls"]);
}

#[test]
fn a_blank_fragment_after_an_early_call_is_dropped() {
    let parts = [
        header(0, "a", "get", "{}"),
        frag(0, " \n"),
        finish(),
        DONE.to_string(),
    ];
    let outs = feed(&parts, &[]);
    assert!(outs[1].is_empty(), "{}", outs[1]);
    let mut rw = StreamRewriter::new(&opts());
    let _ = rw.run_sync(&[parts.concat().as_bytes()], |_| true);
    assert_eq!(rw.totals().late_deltas, 1);
}

#[test]
fn more_of_a_call_after_it_went_out_fails_the_stream() {
    for more in [
        frag(0, ",\"b\":2}"),
        // Its name again, or another id at its index.
        header(0, "a", "get", ""),
        header(0, "z", "", ""),
    ] {
        let parts = [
            header(0, "a", "get", "{}"),
            more,
            finish(),
            DONE.to_string(),
        ];
        let all = feed(&parts, &[]).concat();
        assert_eq!(calls(&all).len(), 1, "{all}");
        assert!(finishes(&all).is_empty(), "{all}");
        assert!(all.contains("\"error\""), "{all}");
        assert!(all.ends_with(DONE));
    }
}

#[test]
fn done_without_a_finish_after_an_early_call_finishes_the_choice() {
    let parts = [header(0, "a", "get", "{}"), DONE.to_string()];
    let all = feed(&parts, &[]).concat();
    assert_eq!(calls(&all).len(), 1);
    assert_eq!(finishes(&all), ["tool_calls"]);
    assert!(all.ends_with(DONE));
}

#[test]
fn with_foresight_complete_calls_are_reported_once_and_still_gated_at_the_finish() {
    let mut o = opts();
    o.early = false;
    o.foresee = true;
    let mut rw = StreamRewriter::new(&o);
    let mut out = BytesMut::new();
    let step = |rw: &mut StreamRewriter, part: &str, out: &mut BytesMut| {
        rw.push(part.as_bytes());
        let step = rw.process(out).unwrap();
        let seen: Vec<String> = rw.foresee().into_iter().map(|c| c.id).collect();
        (step, seen)
    };
    let (s, seen) = step(&mut rw, &header(0, "a", "get", "{\"city\":"), &mut out);
    assert_eq!((s, seen.len()), (Step::NeedMore, 0), "not complete yet");
    let (s, seen) = step(&mut rw, &frag(0, "\"Paris\"}"), &mut out);
    assert_eq!((s, seen), (Step::NeedMore, vec!["a".to_string()]));
    let (s, seen) = step(&mut rw, &header(1, "b", "put", "{}"), &mut out);
    assert_eq!(
        (s, seen),
        (Step::NeedMore, vec!["b".to_string()]),
        "a is not told twice"
    );
    assert!(
        calls(&String::from_utf8_lossy(&out)).is_empty(),
        "nothing released ahead"
    );
    let (s, seen) = step(&mut rw, &finish(), &mut out);
    assert_eq!((s, seen.len()), (Step::Gate, 0));
    let pending: Vec<&str> = rw.pending().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(pending, ["a", "b"], "both are decided at the finish");
}

#[test]
fn without_foresight_nothing_is_reported() {
    let mut o = opts();
    o.early = false;
    let mut rw = StreamRewriter::new(&o);
    rw.push(header(0, "a", "get", "{}").as_bytes());
    assert_eq!(rw.process(&mut BytesMut::new()).unwrap(), Step::NeedMore);
    assert!(rw.foresee().is_empty());
}
