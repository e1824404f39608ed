//! The declaration gate: the tool is declared in the request and its arguments are a JSON object.

use super::{BoxFuture, Gate, Outcome};
use crate::request::Context;
use crate::wire::ToolCall;

pub struct Declaration;

impl Declaration {
    pub fn judge(call: &ToolCall, ctx: &Context) -> Outcome {
        if call.oversized {
            return Outcome::reject("args_too_large");
        }
        if call.kind.as_deref().is_some_and(|k| k != "function") {
            return Outcome::reject("unsupported_call_type");
        }
        if call.name.is_empty() || !ctx.declared.contains_key(&call.name) {
            return Outcome::reject("undeclared_tool");
        }
        // An empty string is how providers send a parameterless call.
        if call.arguments.trim().is_empty() {
            return Outcome::allow("declared");
        }
        match serde_json::from_str::<serde_json::Value>(&call.arguments) {
            Ok(serde_json::Value::Object(_)) => Outcome::allow("declared"),
            Ok(_) => Outcome::reject("args_not_object"),
            Err(_) => Outcome::reject("args_not_json"),
        }
    }
}

impl Gate for Declaration {
    fn name(&self) -> &'static str {
        "declaration"
    }

    fn check<'a>(&'a self, call: &'a ToolCall, ctx: &'a Context) -> BoxFuture<'a, Outcome> {
        let o = Declaration::judge(call, ctx);
        Box::pin(async move { o })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Verdict;
    use crate::request::Declared;

    #[test]
    fn each_failure_has_its_reason() {
        let mut ctx = Context::default();
        ctx.declared
            .insert("t".into(), Declared { parameters: None });
        let c = |name: &str, args: &str| ToolCall {
            name: name.into(),
            arguments: args.into(),
            ..ToolCall::default()
        };
        let cases = [
            (c("t", "{\"a\":1}"), Verdict::Allow, "declared"),
            (c("t", ""), Verdict::Allow, "declared"),
            (c("u", "{}"), Verdict::Reject, "undeclared_tool"),
            (c("", "{}"), Verdict::Reject, "undeclared_tool"),
            (c("t", "{\"a\":"), Verdict::Reject, "args_not_json"),
            (c("t", "[1]"), Verdict::Reject, "args_not_object"),
            (
                ToolCall {
                    oversized: true,
                    ..c("t", "")
                },
                Verdict::Reject,
                "args_too_large",
            ),
            (
                ToolCall {
                    kind: Some("custom".into()),
                    ..c("t", "{}")
                },
                Verdict::Reject,
                "unsupported_call_type",
            ),
        ];
        for (call, v, reason) in cases {
            let o = Declaration::judge(&call, &ctx);
            assert_eq!((o.verdict, o.reason.as_ref()), (v, reason), "{call:?}");
        }
    }
}
