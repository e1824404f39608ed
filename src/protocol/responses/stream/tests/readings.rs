//! One reading for every client: a call read from its first event and
//! deltas, its last event, or a response's `output` is the call that was
//! gated, or the stream fails; and what a stream keeps is bounded.

use super::*;

/// A change to one event's JSON data.
type Edit = Box<dyn Fn(&mut Value)>;

/// The stream with the event at `i` (or the final output) changed by `f`
/// on its JSON data.
fn edited(i: usize, f: impl Fn(&mut Value)) -> String {
    let s = stream();
    s.split_inclusive("\n\n")
        .enumerate()
        .map(|(j, b)| {
            if j != i {
                return b.to_string();
            }
            let data = b.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let mut v: Value = serde_json::from_str(data).unwrap();
            f(&mut v);
            ev(v)
        })
        .collect()
}

/// Runs `s` with the `shell` call denied and `get` allowed: what the
/// client receives must carry neither a denied call nor a call that differs
/// from the one allowed.
fn only_gated(s: &str, why: &str) {
    let mut seen = Vec::new();
    let mut rw = StreamRewriter::new(&opts());
    let out = rw.run_sync(&[s.as_bytes()], |c| {
        seen.push((c.name.clone(), c.arguments.clone()));
        c.name == "get"
    });
    let out = String::from_utf8(out.to_vec()).unwrap();
    for bad in ["rm -rf", "shell", "delete", "evil"] {
        assert!(!out.contains(bad), "{why}: {bad} reached the client: {out}");
    }
    assert_eq!(
        events(&out).last().unwrap().0,
        "response.failed",
        "{why}: {out}"
    );
}

#[test]
fn every_reading_of_a_call_is_the_gated_one() {
    // The final output names a released call with another name, type or
    // call id, or other arguments.
    let last = 14;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "final name",
            Box::new(|v| v["response"]["output"][3]["name"] = json!("delete")),
        ),
        (
            "final namespace",
            Box::new(|v| v["response"]["output"][3]["namespace"] = json!("evil")),
        ),
        (
            "final call id",
            Box::new(|v| v["response"]["output"][3]["call_id"] = json!("call_evil")),
        ),
        (
            "final type",
            Box::new(|v| v["response"]["output"][3]["type"] = json!("custom_tool_call")),
        ),
        (
            "final arguments",
            Box::new(|v| v["response"]["output"][3]["arguments"] = json!("{\"evil\":1}")),
        ),
        (
            "released twice",
            Box::new(|v| {
                let again = v["response"]["output"][3].clone();
                v["response"]["output"].as_array_mut().unwrap().push(again);
            }),
        ),
        (
            "id-less call",
            Box::new(|v| {
                let mut c = v["response"]["output"][3].clone();
                c.as_object_mut().unwrap().remove("id");
                c["name"] = json!("delete");
                v["response"]["output"].as_array_mut().unwrap().push(c);
            }),
        ),
        (
            "Output beside output",
            Box::new(|v| {
                let mut evil = v["response"]["output"].clone();
                evil[3]["name"] = json!("delete");
                v["response"]["Output"] = evil;
            }),
        ),
    ];
    for (why, f) in cases {
        only_gated(&edited(last, f), why);
    }
    // The item as added says another call than the item as done.
    let added = 11;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "added name",
            Box::new(|v| v["item"]["name"] = json!("delete")),
        ),
        (
            "added call id",
            Box::new(|v| v["item"]["call_id"] = json!("call_evil")),
        ),
        (
            "added namespace",
            Box::new(|v| v["item"]["namespace"] = json!("evil")),
        ),
        (
            "added arguments",
            Box::new(|v| v["item"]["arguments"] = json!("{\"evil\":1}")),
        ),
        (
            "added id-less",
            Box::new(|v| {
                v["item"].as_object_mut().unwrap().remove("id");
                v["item"]["name"] = json!("delete");
            }),
        ),
    ];
    for (why, f) in cases {
        only_gated(&edited(added, f), why);
    }
    // Arguments that only a reader of the deltas sees.
    only_gated(
        &edited(12, |v| v["delta"] = json!("{\"evil\":1}")),
        "deltas",
    );
}

#[test]
fn events_of_a_decided_call_fail_closed() {
    let s = stream();
    let blocks: Vec<&str> = s.split_inclusive("\n\n").collect();
    // After the `get` call was decided, a delta names its place only, or its id.
    for late in [
        json!({"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "x", "sequence_number": 40}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_2", "delta": "x", "sequence_number": 40}),
        json!({"type": "response.function_call_arguments.delta", "delta": "x", "sequence_number": 40}),
        json!({"type": "response.output_text.delta", "output_index": 2, "content_index": 0, "delta": "x", "sequence_number": 40}),
    ] {
        let mut s = blocks[..14].concat();
        s.push_str(&ev(late.clone()));
        s.push_str(blocks[14]);
        only_gated(&s, &late.to_string());
    }
}

#[test]
fn what_a_stream_keeps_is_charged_and_bounded() {
    // Sixty calls whose final items are far over the call limit: none of
    // their arguments are kept, and what is held stays within the budget.
    let big = "x".repeat(64 * 1024);
    let mut s = ev(
        json!({"type": "response.created", "sequence_number": 0, "response": resp("in_progress", json!([]))}),
    );
    for i in 0..60u64 {
        let item = |args: &str, status: &str| json!({"id": format!("fc_{i}"), "type": "function_call", "status": status, "arguments": args, "call_id": format!("c{i}"), "name": "get"});
        s.push_str(&ev(json!({"type": "response.output_item.added", "output_index": i, "item": item("", "in_progress")})));
        s.push_str(&ev(json!({"type": "response.output_item.done", "output_index": i, "item": item(&big, "completed")})));
    }
    let mut o = opts();
    o.max_call_bytes = 1024;
    o.max_held_bytes = 16 * 1024;
    let mut rw = StreamRewriter::new(&o);
    let mut out = BytesMut::new();
    rw.push(s.as_bytes());
    let mut peak = 0;
    loop {
        let step = rw.process(&mut out);
        peak = peak.max(rw.held_bytes());
        match step {
            Ok(Step::Gate) => {
                let n = rw.pending().len();
                rw.resolve(&vec![Release::Allow; n], &mut out);
            }
            _ => break,
        }
    }
    assert!(peak < 64 * 1024, "held {peak} bytes");
    assert!(rw.batch.iter().all(|s| s.oversized && s.text.is_empty()));
}

/// The calls each kind of client reads from a stream: openai-python's
/// snapshot (an item's first event plus its deltas, by `output_index`), the
/// items of `response.output_item.done`, and every envelope's `output`
/// (the Agents SDK's reading). Each as `(name with namespace, call id,
/// arguments)`.
fn readings(out: &str) -> Vec<(String, String, String)> {
    let key = |i: &Value| {
        let name = i["name"].as_str().unwrap_or("").to_string();
        let name = match i["namespace"].as_str() {
            Some(ns) => format!("{ns}.{name}"),
            None => name,
        };
        (
            name,
            i["call_id"].as_str().unwrap_or("").to_string(),
            i["arguments"].as_str().unwrap_or("").to_string(),
        )
    };
    let mut snapshot: Vec<Value> = Vec::new();
    let mut read = Vec::new();
    for (_, e) in events(out) {
        let ty = e["type"].as_str().unwrap_or("");
        match ty {
            "response.output_item.added" => snapshot.push(e["item"].clone()),
            "response.function_call_arguments.delta" => {
                let at = e["output_index"].as_u64().unwrap_or(u64::MAX) as usize;
                if let Some(i) = snapshot
                    .get_mut(at)
                    .filter(|i| i["type"] == "function_call")
                {
                    let args = format!(
                        "{}{}",
                        i["arguments"].as_str().unwrap_or(""),
                        e["delta"].as_str().unwrap_or("")
                    );
                    i["arguments"] = json!(args);
                }
            }
            "response.output_item.done" if e["item"]["type"] == "function_call" => {
                read.push(key(&e["item"]))
            }
            _ => {}
        }
        for i in e["response"]["output"].as_array().into_iter().flatten() {
            if i["type"] == "function_call" {
                read.push(key(i));
            }
        }
    }
    // The snapshot at the end (arguments complete), and the names it ever showed.
    read.extend(
        snapshot
            .iter()
            .filter(|i| i["type"] == "function_call")
            .map(key),
    );
    read
}

/// One generated call and what a hostile provider changes about it.
#[derive(Debug, Clone)]
struct GenCall {
    allowed: bool,
    args: String,
    /// 0: consistent; 1..=9: one reading doctored.
    twist: u8,
}

fn gen_stream(calls: &[GenCall]) -> String {
    let mut evs =
        vec![json!({"type": "response.created", "response": resp("in_progress", json!([]))})];
    let mut fin = Vec::new();
    for (n, c) in calls.iter().enumerate() {
        let oi = n as u64;
        let (id, call_id) = (format!("fc_{n}"), format!("call_{n}"));
        let name = if c.allowed { "ok" } else { "bad" };
        let item = |name: &str, args: &str, status: &str| json!({"id": id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": args});
        let mut added = item(name, "", "in_progress");
        let mut deltas = vec![
            c.args[..c.args.len() / 2].to_string(),
            c.args[c.args.len() / 2..].to_string(),
        ];
        let done = item(name, &c.args, "completed");
        let mut last = done.clone();
        match c.twist {
            1 => added["name"] = json!("bad"),
            2 => added["arguments"] = json!("{\"x\":"),
            3 => deltas[0] = "{\"evil\":1,".to_string() + &deltas[0],
            4 => last["name"] = json!("bad"),
            5 => last["arguments"] = json!("{\"evil\":1}"),
            6 => last["call_id"] = json!("call_evil"),
            7 => last["namespace"] = json!("ns"),
            _ => {}
        }
        evs.push(json!({"type": "response.output_item.added", "output_index": oi, "item": added}));
        for d in &deltas {
            evs.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "item_id": id, "delta": d}));
        }
        evs.push(json!({"type": "response.function_call_arguments.done", "output_index": oi, "item_id": id, "arguments": c.args}));
        evs.push(json!({"type": "response.output_item.done", "output_index": oi, "item": done}));
        fin.push(last.clone());
        match c.twist {
            // Shown twice, or once more without an id, in the summary.
            8 => fin.push(last),
            9 => {
                let mut idless = last;
                idless.as_object_mut().unwrap().remove("id");
                idless["name"] = json!("bad");
                fin.push(idless);
            }
            // An argument delta after the call was decided, by place only.
            10 => evs.push(json!({"type": "response.function_call_arguments.delta", "output_index": oi, "delta": "x"})),
            _ => {}
        }
    }
    evs.push(json!({"type": "response.completed", "response": resp("completed", json!(fin))}));
    evs.into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["sequence_number"] = json!(i);
            ev(e)
        })
        .collect()
}

impl GenCall {
    /// Whether a client could read this call two ways: the stream must fail.
    /// A doctored name or summary of a withheld call changes nothing a
    /// client sees (the call is replaced wherever it shows).
    fn must_fail(&self) -> bool {
        match self.twist {
            2 | 3 | 8 | 9 | 10 => true,
            1 | 4..=7 => self.allowed,
            _ => false,
        }
    }
}

use proptest::prelude::*;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        std::env::var("TOOLGATE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128)
    ))]

    /// Any mix of consistent and doctored calls, split anywhere: every
    /// reader sees only calls the gate allowed, exactly as allowed, and a
    /// stream with nothing doctored goes through whole.
    #[test]
    fn every_reader_sees_only_gated_calls(
        calls in proptest::collection::vec(
            (proptest::bool::ANY, "[a-z]{0,6}", 0u8..14).prop_map(|(allowed, v, twist)| GenCall {
                allowed,
                args: format!("{{\"v\":\"{v}\"}}"),
                // Half of the draws leave the call as it is.
                twist: if twist > 10 { 0 } else { twist },
            }),
            1..4,
        ),
        cuts in proptest::collection::vec(0usize..100_000, 0..8),
    ) {
        let s = gen_stream(&calls);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut at = 0;
        for p in points {
            chunks.push(&s.as_bytes()[at..p]);
            at = p;
        }
        chunks.push(&s.as_bytes()[at..]);
        let mut allowed = Vec::new();
        let mut rw = StreamRewriter::new(&opts());
        let out = rw.run_sync(&chunks, |c| {
            let ok = c.name == "ok";
            if ok {
                allowed.push((c.name.clone(), c.id.clone(), c.arguments.clone()));
            }
            ok
        });
        let out = String::from_utf8(out.to_vec()).unwrap();
        for r in readings(&out) {
            prop_assert!(allowed.contains(&r), "{:?} read but not allowed ({:?}): {}", r, allowed, out);
        }
        let failed = events(&out).iter().any(|(n, _)| n == "error");
        // Every second reading is caught, and nothing else fails.
        prop_assert_eq!(failed, calls.iter().any(GenCall::must_fail), "{}", out);
        if !failed {
            let want = calls.iter().filter(|c| c.allowed).count();
            prop_assert_eq!(allowed.len(), want);
        }
    }
}
