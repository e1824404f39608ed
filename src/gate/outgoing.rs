//! Stages 1 and 2 of output validation for external communications:
//! whether a call sends text outside (the catalog's `external_comm`), its
//! outgoing text, the claims in it, and its contradictions of registered facts.

use serde_json::{json, Value};

use super::detect;
use super::signals::Signals;
use crate::policy::expr::Bindings;
use crate::policy::PolicySet;

/// The outgoing text: the strings at the entry's pointers (every string under
/// a pointer that names an object or array), or every string leaf of the arguments.
pub fn text(args: &Value, pointers: &[String]) -> String {
    let mut strings = Vec::new();
    if pointers.is_empty() {
        detect::strings(args, String::new(), &mut strings);
    } else {
        for p in pointers {
            if let Some(v) = args.pointer(p) {
                detect::strings(v, p.clone(), &mut strings);
            }
        }
    }
    let mut out = String::new();
    for (_, s) in strings {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(s);
    }
    out
}

/// Sets `output.*`. `s` must already hold the call's other signals and `args`
/// (read only for external communications, so other calls copy nothing).
pub fn signals(s: &mut Signals, policy: &PolicySet, tool: &str) {
    let external = policy.tool_entry(tool).and_then(|e| e.external.as_ref());
    let is_external = match external {
        None => false,
        Some(x) => match &x.when {
            None => true,
            Some(c) => {
                let only: Vec<&str> = c.variables.iter().map(String::as_str).collect();
                c.eval(&Bindings::new(s.vars_only(Some(&only))))
            }
            .unwrap_or_else(|e| {
                // Unsure whether it leaves: treat it as leaving, so it is checked.
                tracing::warn!(tool = %tool, error = %e, "external_comm.when failed; treated as external");
                true
            }),
        },
    };
    s.set("output.external", json!(is_external));
    let (Some(x), true) = (external, is_external) else {
        s.set("output.claims", json!([]));
        s.set("output.contradictions", json!([]));
        return;
    };
    let text = match s.get("args") {
        Some(a) => text(&a.value, &x.text),
        None => String::new(),
    };
    let found = policy.facts.check(&text);
    s.set(
        "output.claims",
        Value::Array(crate::facts::claims::claims(&text)),
    );
    s.set(
        "output.contradictions",
        Value::Array(found.contradictions.iter().map(|c| c.to_json()).collect()),
    );
    s.set("output.facts", json!(found.relevant));
    s.set("output.registry", json!(policy.facts.version));
    s.set("output.text", json!(text));
}
