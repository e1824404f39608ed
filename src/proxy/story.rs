//! One call, one story: a call the model proposed and the same call the
//! agent then sends to an MCP server are joined in the audit trail. The
//! MCP call's record names the request and call that proposed it
//! (`proposed_in`, `proposed_call`), found by principal, the arguments as
//! JSON in one canonical form, and the name: the model's name for the tool
//! is the tool's own name, or ends with it after a separator and the
//! server's name (`mcp__crm__delete_contact`, `mcp_crm_delete_contact`,
//! `crm.delete_contact` and `delete_contact` are all `crm`'s
//! `delete_contact`; `github_delete_contact` is not). `toolgate explain
//! --trail` reads the join back: both decisions of one call.

use crate::digest::sha256;

/// Where a model call was proposed: its request, its call id, its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub request_id: String,
    pub call_id: String,
    pub tool: String,
}

/// The most proposals kept under one key (the same principal and
/// arguments: `{}` is common), newest last.
pub const KEPT: usize = 8;

/// The key proposals are remembered by: the principal and the arguments.
pub fn key(principal: &str, arguments: &str) -> [u8; 32] {
    let canonical = serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| serde_json::to_vec(&v).ok())
        .unwrap_or_else(|| arguments.as_bytes().to_vec());
    let mut text = format!("{principal}\n").into_bytes();
    text.extend_from_slice(&canonical);
    sha256(&text)
}

/// Whether the model's `name` for a tool names `server`'s `tool`.
pub fn names(name: &str, server: &str, tool: &str) -> bool {
    let sep = |c: char| matches!(c, '.' | '_' | '/' | '-' | ':');
    if name.eq_ignore_ascii_case(tool) {
        return true;
    }
    let Some(prefix) = lower_strip_suffix(name, tool) else {
        return false;
    };
    let Some(prefix) = prefix.strip_suffix(sep) else {
        return false;
    };
    let prefix = prefix.trim_end_matches(sep);
    lower_strip_suffix(prefix, server).is_some_and(|rest| rest.is_empty() || rest.ends_with(sep))
}

/// `s` without `suffix` at its end, compared without ASCII case.
fn lower_strip_suffix<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let at = s.len().checked_sub(suffix.len())?;
    let (head, tail) = (s.get(..at)?, s.get(at..)?);
    tail.eq_ignore_ascii_case(suffix).then_some(head)
}

/// The newest of `kept` that names `server`'s `tool`.
pub fn find<'a>(kept: &'a [Proposal], server: &str, tool: &str) -> Option<&'a Proposal> {
    kept.iter().rev().find(|p| names(&p.tool, server, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_arguments_in_any_spacing_have_one_key() {
        let k = key("a", r#"{"id": "c1", "x": [1, 2]}"#);
        assert_eq!(key("a", r#"{"x":[1,2],"id":"c1"}"#), k);
        assert_eq!(key("a", r#"{ "id":"c1","x":[1, 2] }"#), k);
        assert_ne!(key("b", r#"{"id":"c1","x":[1,2]}"#), k);
        assert_ne!(key("a", r#"{"id":"c2","x":[1,2]}"#), k);
    }

    #[test]
    fn each_clients_name_for_a_servers_tool_names_it() {
        for name in [
            "mcp__crm__delete_contact",
            "mcp_crm_delete_contact",
            "crm__delete_contact",
            "crm.delete_contact",
            "crm/delete_contact",
            "delete_contact",
            "MCP__CRM__delete_contact",
        ] {
            assert!(names(name, "crm", "delete_contact"), "{name}");
        }
        for name in [
            "github_delete_contact",
            "mcp__crm__delete_contacts",
            "mcp__crm__undelete_contact",
            "mcp__xcrm__delete_contact",
            "crmdelete_contact",
            "contact",
        ] {
            assert!(!names(name, "crm", "delete_contact"), "{name}");
        }
        assert!(names("mcp__my_crm__x", "my_crm", "x"));
        let kept = [
            Proposal {
                request_id: "r1".into(),
                call_id: "a".into(),
                tool: "mcp__crm__list".into(),
            },
            Proposal {
                request_id: "r2".into(),
                call_id: "b".into(),
                tool: "mcp__other__list".into(),
            },
        ];
        assert_eq!(find(&kept, "crm", "list").unwrap().call_id, "a");
        assert!(find(&kept, "crm", "delete").is_none());
    }
}
