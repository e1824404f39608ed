//! `toolgate explain --trail`: the decisions an audit trail recorded for a
//! request's calls, each with the other half of its story: the model's
//! proposal of an MCP call (`proposed_in`, `proposed_call`), or the MCP
//! calls that carried a proposal out.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::error::Error;

/// What is asked of the trail.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    /// The trail's files, a rotated set oldest first.
    pub files: Vec<PathBuf>,
    /// The request whose decisions are shown.
    pub request_id: String,
    /// Only this call of it.
    pub call_id: Option<String>,
}

/// The fields of a decision record `explain` shows.
const SHOWN: [&str; 12] = [
    "ts",
    "request_id",
    "call_id",
    "tool",
    "protocol",
    "principal",
    "verdict",
    "gate",
    "reason",
    "rule",
    "policy",
    "mode",
];

/// `{"decisions": [{"decision", "proposed_by"?, "carried_out"}]}` for the
/// request's calls; an error when the trail holds none of them.
pub fn explain(q: &Lookup) -> Result<Value, Error> {
    let records = read(&q.files)?;
    let decisions: Vec<&Map<String, Value>> = records
        .iter()
        .filter(|r| r.get("verdict").is_some_and(Value::is_string))
        .collect();
    let asked = decisions.iter().filter(|r| {
        text(r, "request_id") == Some(&q.request_id)
            && q.call_id
                .as_deref()
                .is_none_or(|c| text(r, "call_id") == Some(c))
    });
    let mut out = Vec::new();
    for r in asked {
        let proposed_by = text(r, "proposed_in").and_then(|request| {
            decisions
                .iter()
                .find(|m| is_proposal_of(m, r, request))
                .map(|m| shown(m))
        });
        let carried_out: Vec<Value> = decisions
            .iter()
            .filter(|m| text(m, "proposed_in") == text(r, "request_id"))
            .filter(|m| is_proposal_of(r, m, &q.request_id))
            .map(|m| shown(m))
            .collect();
        out.push(json!({
            "decision": shown(r),
            "proposed_by": proposed_by,
            "carried_out": carried_out,
            "tool_changed": tool_changed(&records, r),
        }));
    }
    if out.is_empty() {
        let call = q
            .call_id
            .as_deref()
            .map(|c| format!(", call {c},"))
            .unwrap_or_default();
        return Err(Error::BadRequest(format!(
            "no decision of request {}{call} in the trail",
            q.request_id
        )));
    }
    Ok(json!({"decisions": out}))
}

/// For a call rejected because its tool changed under its pin: the last
/// change of that tool the trail recorded before it (both digests).
fn tool_changed(records: &[Map<String, Value>], r: &Map<String, Value>) -> Option<Value> {
    if text(r, "reason") != Some("tool_definition_changed") {
        return None;
    }
    let at = records.iter().position(|m| std::ptr::eq(m, r))?;
    records[..at]
        .iter()
        .rev()
        .find(|m| {
            CHANGES.contains(&text(m, "event").unwrap_or("")) && m.get("tool") == r.get("tool")
        })
        .map(|m| shown_of(m, &["ts", "event", "tool", "pinned_sha256", "seen_sha256"]))
}

/// Whether `model` (a record of `request`) is the proposal `mcp` carried
/// out: the call its record names.
fn is_proposal_of(model: &Map<String, Value>, mcp: &Map<String, Value>, request: &str) -> bool {
    text(model, "request_id") == Some(request)
        && text(model, "protocol") != Some("mcp")
        && text(mcp, "proposed_call").is_some_and(|c| text(model, "call_id") == Some(c))
}

fn text<'a>(r: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    r.get(key).and_then(Value::as_str)
}

fn shown(r: &Map<String, Value>) -> Value {
    shown_of(r, &SHOWN)
}

fn shown_of(r: &Map<String, Value>, keys: &[&str]) -> Value {
    let m: Map<String, Value> = keys
        .iter()
        .filter_map(|k| {
            r.get(*k)
                .filter(|v| !v.is_null())
                .map(|v| (k.to_string(), v.clone()))
        })
        .collect();
    Value::Object(m)
}

/// The decision records of the files, in order, each with only the fields
/// shown and joined on (a trail's signals are most of its bytes): read line
/// by line, so a long trail is never held whole.
fn read(files: &[PathBuf]) -> Result<Vec<Map<String, Value>>, Error> {
    use std::io::BufRead;
    let mut out = Vec::new();
    for path in files {
        let io = |e| Error::io(path.display().to_string(), e);
        let file = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
        for (n, line) in file.lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(&line) else {
                return Err(Error::BadRequest(format!(
                    "{}:{}: not an audit record (a JSON object)",
                    path.display(),
                    n + 1
                )));
            };
            let changed = m
                .get("event")
                .and_then(Value::as_str)
                .is_some_and(|e| CHANGES.contains(&e));
            if changed || m.get("verdict").is_some_and(Value::is_string) {
                m.retain(|k, _| {
                    let k = k.as_str();
                    SHOWN.contains(&k) || JOINED.contains(&k) || CHANGED.contains(&k)
                });
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// The fields the join reads.
const JOINED: [&str; 2] = ["proposed_in", "proposed_call"];
/// The events that record a tool's definition changing under its pin.
const CHANGES: [&str; 2] = ["mcp_tool_changed", "tool_definition_changed"];
/// The fields of such an event shown.
const CHANGED: [&str; 3] = ["event", "pinned_sha256", "seen_sha256"];

/// The human-readable form of [`explain`]'s answer.
pub fn render(v: &Value) -> String {
    let mut out = String::new();
    for d in v["decisions"].as_array().into_iter().flatten() {
        out.push_str(&line("", &d["decision"]));
        if d["proposed_by"].is_object() {
            out.push_str(&line("  proposed by the model in: ", &d["proposed_by"]));
        } else if d["decision"]["protocol"] == "mcp" {
            out.push_str("  proposed by the model in: no request in this trail\n");
        }
        for m in d["carried_out"].as_array().into_iter().flatten() {
            out.push_str(&line("  carried out on the MCP route in: ", m));
        }
        if let Some(c) = d["tool_changed"].as_object() {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("-");
            out.push_str(&format!(
                "  the tool changed under its pin at {}: pinned {}, seen {} (re-pin it after review: toolgate mcp pin)\n",
                s("ts"),
                s("pinned_sha256"),
                s("seen_sha256")
            ));
        }
    }
    out
}

fn line(lead: &str, r: &Value) -> String {
    let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
    let rule = r["rule"]
        .as_str()
        .map(|n| format!(", rule {n}"))
        .unwrap_or_default();
    let mode = r["mode"]
        .as_str()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    format!(
        "{lead}request {}, call {}: {} ({}, principal {}) at {}\n{}    verdict: {}{mode} by {} (reason: {}{rule}; policy {})\n",
        s("request_id"),
        s("call_id"),
        s("tool"),
        s("protocol"),
        s("principal"),
        s("ts"),
        " ".repeat(lead.len().min(2)),
        s("verdict"),
        s("gate"),
        s("reason"),
        s("policy"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str, lines: &[Value], request: &str, call: Option<&str>) -> Lookup {
        let p =
            std::env::temp_dir().join(format!("tg-recorded-{}-{name}.jsonl", std::process::id()));
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&p, text.join("\n")).unwrap();
        Lookup {
            files: vec![p],
            request_id: request.into(),
            call_id: call.map(str::to_string),
        }
    }

    fn decision(request: &str, call: &str, tool: &str, protocol: &str, verdict: &str) -> Value {
        json!({"request_id": request, "call_id": call, "tool": tool, "protocol": protocol,
               "verdict": verdict, "gate": "policy", "reason": "rule", "args_sha256": "ab"})
    }

    #[test]
    fn an_mcp_call_shows_the_models_proposal_and_the_proposal_its_carrying_out() {
        let model = decision(
            "r1",
            "call_1",
            "mcp__crm__delete_contact",
            "chat_completions",
            "allow",
        );
        let other = decision(
            "r1",
            "call_2",
            "mcp__crm__delete_contact",
            "chat_completions",
            "reject",
        );
        let mut mcp = decision("r2", "7", "crm.delete_contact", "mcp", "deny");
        mcp["proposed_in"] = json!("r1");
        mcp["proposed_call"] = json!("call_1");
        let lines = [
            json!({"event": "opened"}),
            model,
            other,
            mcp,
            decision("r3", "8", "crm.x", "mcp", "allow"),
        ];
        let v = explain(&lookup("mcp", &lines, "r2", None)).unwrap();
        let d = &v["decisions"][0];
        assert_eq!(d["decision"]["verdict"], "deny");
        assert_eq!(d["proposed_by"]["call_id"], "call_1", "{v:#}");
        assert_eq!(d["proposed_by"]["verdict"], "allow");
        assert!(d["decision"].get("args_sha256").is_none());
        // From the model's side: its call 1 was carried out, its call 2 was not.
        let v = explain(&lookup("model", &lines, "r1", None)).unwrap();
        let ds = v["decisions"].as_array().unwrap();
        assert_eq!(ds.len(), 2);
        assert_eq!(ds[0]["carried_out"][0]["request_id"], "r2", "{v:#}");
        assert_eq!(ds[1]["carried_out"], json!([]));
        let text = render(&v);
        assert!(
            text.contains("carried out on the MCP route in: request r2, call 7"),
            "{text}"
        );
        // A call rejected because its tool changed: the change is shown.
        let change = json!({"event": "mcp_tool_changed", "tool": "crm.x", "ts": "t1",
                            "pinned_sha256": "aa", "seen_sha256": "bb", "principal": "p"});
        let mut refused = decision("r4", "9", "crm.x", "mcp", "reject");
        refused["reason"] = json!("tool_definition_changed");
        let later = json!({"event": "mcp_tool_changed", "tool": "crm.x", "ts": "t9",
                           "pinned_sha256": "aa", "seen_sha256": "cc"});
        let with_change = [change, refused, later];
        let v = explain(&lookup("changed", &with_change, "r4", None)).unwrap();
        let c = &v["decisions"][0]["tool_changed"];
        assert_eq!(
            (c["ts"].as_str(), c["seen_sha256"].as_str()),
            (Some("t1"), Some("bb")),
            "{v:#}"
        );
        assert!(c.get("principal").is_none());
        assert!(render(&v).contains("pinned aa, seen bb"), "{}", render(&v));
        // A call the trail does not hold, and a line that is not a record.
        assert!(explain(&lookup("none", &lines, "r1", Some("call_9"))).is_err());
        let mut bad = lines.to_vec();
        bad.push(json!([1]));
        let e = explain(&lookup("bad", &bad, "r1", None))
            .unwrap_err()
            .to_string();
        assert!(e.contains(":6:"), "{e}");
    }
}
