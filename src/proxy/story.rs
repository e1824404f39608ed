//! One call, one story: a call the model proposed and the same call the
//! agent then sends to an MCP server are joined in the audit trail. The
//! MCP call's record names the request whose answer proposed it
//! (`proposed_in`), found by principal, the tool's own name (what follows
//! the last `.`, `__` or `/`: `mcp__crm__delete_contact` and
//! `crm.delete_contact` are both `delete_contact`) and the arguments as
//! JSON in one canonical form. `toolgate explain --trail` reads the join
//! back: both decisions of one call.

use crate::digest::sha256;

/// Where a model call was proposed: its request and its call id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub request_id: String,
    pub call_id: String,
}

/// The key a call is remembered by.
pub fn key(principal: &str, tool: &str, arguments: &str) -> [u8; 32] {
    let bare = tool
        .rsplit(['.', '/'])
        .next()
        .and_then(|t| t.rsplit("__").next())
        .unwrap_or(tool);
    let canonical = serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| serde_json::to_vec(&v).ok())
        .unwrap_or_else(|| arguments.as_bytes().to_vec());
    let mut text = format!("{principal}\n{bare}\n").into_bytes();
    text.extend_from_slice(&canonical);
    sha256(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_call_named_by_a_client_or_by_its_server_has_one_key() {
        let k = key("a", "crm.delete_contact", r#"{"id": "c1", "x": [1, 2]}"#);
        for (tool, args) in [
            ("mcp__crm__delete_contact", r#"{"x":[1,2],"id":"c1"}"#),
            ("crm__delete_contact", r#"{ "id":"c1","x":[1, 2] }"#),
            ("delete_contact", r#"{"id":"c1","x":[1,2]}"#),
        ] {
            assert_eq!(key("a", tool, args), k, "{tool}");
        }
        assert_ne!(
            key("b", "crm.delete_contact", r#"{"id":"c1","x":[1,2]}"#),
            k
        );
        assert_ne!(
            key("a", "crm.delete_contact", r#"{"id":"c2","x":[1,2]}"#),
            k
        );
        assert_ne!(
            key("a", "crm.delete_contacts", r#"{"id":"c1","x":[1,2]}"#),
            k
        );
    }
}
