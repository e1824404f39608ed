//! The integrity gate: a call toolgate can evaluate at all — a `function` call
//! with a name (within its cap), arguments that are a JSON object (or empty),
//! within limits, and that every JSON reader reads the same way: no object
//! whose keys repeat or collide under case folding, at any depth
//! (`{"path": …, "PATH": …}` is one key to Go's or .NET's decoders).
//! A call inside a namespace is evaluated only when the request declared
//! that namespace tool: a client that reads no namespace runs the bare
//! name, which no rule written for the namespaced one would match.
//! Whether the tool is declared, and its schema, are otherwise signals for
//! the policy.

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

    fn check<'a>(&'a self, call: &'a Call, ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        let o = match Integrity::check(call) {
            o if o.verdict > crate::policy::Verdict::Ask => o,
            _ if call.namespaced && !ctx.declared.contains_key(&call.name) => {
                Outcome::reject("undeclared_namespace")
            }
            o => o,
        };
        Box::pin(async move { o })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Verdict;

    #[tokio::test]
    async fn a_namespace_counts_only_when_the_request_declared_it() {
        let mut ctx = Context::default();
        ctx.declared
            .insert("crm.find".into(), crate::context::Declared::default());
        let call = |name: &str, namespaced: bool| Call {
            name: name.into(),
            arguments: "{}".into(),
            namespaced,
            ..Call::default()
        };
        let reason = |c: Call| {
            let ctx = &ctx;
            async move { Gate::check(&Integrity, &c, ctx).await.reason }
        };
        assert_eq!(reason(call("crm.find", true)).await, "well_formed");
        assert_eq!(reason(call("x.find", true)).await, "undeclared_namespace");
        // A bare name is the policy's to judge (declared or not).
        assert_eq!(reason(call("x.find", false)).await, "well_formed");
        // A call refused for its form keeps that reason.
        assert_eq!(reason(call("", true)).await, "no_tool_name");
    }

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
