//! The integrity gate: a call toolgate can evaluate at all — a `function` call
//! with a name (within its cap), arguments that are a JSON object (or empty),
//! within limits, and that every JSON reader reads the same way: no object
//! whose keys repeat or collide under case folding, at any depth
//! (`{"path": …, "PATH": …}` is one key to Go's or .NET's decoders).
//! Whether the tool is declared, and its schema, are signals for the policy.

use super::{BoxFuture, Gate, Outcome};
use crate::call::{Call, Kind};
use crate::context::Context;

pub struct Integrity;

impl Integrity {
    pub fn check(call: &Call) -> Outcome {
        if call.oversized {
            return Outcome::reject("args_too_large");
        }
        if matches!(call.kind, Kind::Other(_)) {
            return Outcome::reject("unsupported_call_type");
        }
        if call.name_too_long {
            return Outcome::reject("name_too_long");
        }
        if call.name.is_empty() {
            return Outcome::reject("no_tool_name");
        }
        // An empty string is how providers send a parameterless call.
        if call.arguments.trim().is_empty() {
            return Outcome::allow("well_formed");
        }
        match crate::json::ambiguous_keys(&call.arguments) {
            None => Outcome::reject("args_not_json"),
            Some(_) if !call.arguments.trim_start().starts_with('{') => {
                Outcome::reject("args_not_object")
            }
            Some(true) => Outcome::reject("args_ambiguous_keys"),
            Some(false) => Outcome::allow("well_formed"),
        }
    }
}

impl Gate for Integrity {
    fn name(&self) -> &'static str {
        "integrity"
    }

    fn check<'a>(&'a self, call: &'a Call, _ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        let o = Integrity::check(call);
        Box::pin(async move { o })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Verdict;

    #[test]
    fn each_failure_has_its_reason() {
        let c = |name: &str, args: &str| Call {
            name: name.into(),
            arguments: args.into(),
            ..Call::default()
        };
        let cases = [
            (c("t", "{\"a\":1}"), Verdict::Allow, "well_formed"),
            (c("t", ""), Verdict::Allow, "well_formed"),
            (c("", "{}"), Verdict::Reject, "no_tool_name"),
            (c("t", "{\"a\":"), Verdict::Reject, "args_not_json"),
            (c("t", "[1]"), Verdict::Reject, "args_not_object"),
            (
                c("t", "{\"path\":\"/tmp/a\",\"PATH\":\"/etc/shadow\"}"),
                Verdict::Reject,
                "args_ambiguous_keys",
            ),
            (
                c("t", "{\"a\":{\"amount\":5,\"Amount\":5000}}"),
                Verdict::Reject,
                "args_ambiguous_keys",
            ),
            (
                Call {
                    name_too_long: true,
                    ..c("", "{}")
                },
                Verdict::Reject,
                "name_too_long",
            ),
            (
                Call {
                    oversized: true,
                    ..c("t", "")
                },
                Verdict::Reject,
                "args_too_large",
            ),
            (
                Call {
                    kind: Kind::Other("custom".into()),
                    ..c("t", "{}")
                },
                Verdict::Reject,
                "unsupported_call_type",
            ),
        ];
        for (call, v, reason) in cases {
            let o = Integrity::check(&call);
            assert_eq!((o.verdict, o.reason.as_ref()), (v, reason), "{call:?}");
        }
    }
}
