//! Pin files: the tools an operator vouched for, by digest, as
//! `toolgate mcp pin` writes them (`{"server": NAME, "tools": {TOOL: SHA-256}}`).
//! The digest of a tool is that of its definition as the server lists it
//! (name, description, schemas, annotations), written as compact JSON with
//! its keys in order.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::sha256_hex;
use crate::error::Error;

/// A pin file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinFile {
    pub server: String,
    pub tools: BTreeMap<String, String>,
}

/// The digest a tool's definition is pinned by.
pub fn digest(tool: &Value) -> String {
    sha256_hex(&serde_json::to_vec(tool).unwrap_or_default())
}

impl PinFile {
    /// The pins of a server's listed tools.
    pub fn of(server: &str, tools: &[Value]) -> PinFile {
        let tools = tools
            .iter()
            .filter_map(|t| Some((t.get("name")?.as_str()?.to_string(), digest(t))))
            .collect();
        PinFile {
            server: server.to_string(),
            tools,
        }
    }

    /// Reads a pin file for `server`; an error names the file.
    pub fn read(path: &Path, server: &str) -> Result<PinFile, Error> {
        let at = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::config(&at, 1, format!("cannot read the pin file: {e}")))?;
        let f: PinFile = serde_json::from_str(&text)
            .map_err(|e| Error::config(&at, e.line(), format!("not a pin file: {e}")))?;
        if f.server != server {
            return Err(Error::config(
                &at,
                1,
                format!("pins server '{}', not '{server}'", f.server),
            ));
        }
        let hex = |d: &String| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some((t, _)) = f.tools.iter().find(|(_, d)| !hex(d)) {
            return Err(Error::config(
                &at,
                1,
                format!("the digest of '{t}' is not SHA-256 hex"),
            ));
        }
        Ok(f)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}
