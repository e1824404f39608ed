//! The MCP servers toolgate fronts: a client for each, the sessions each
//! principal opened on them, and the tool definitions pinned by digest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::pins::{digest, PinFile};
use crate::config::{Config, Mcp};
use crate::error::Error;
use crate::upstream::Upstream;

/// One server: its settings and its client.
pub struct Server {
    pub config: Mcp,
    pub client: Upstream,
}

/// What a server's tool list was checked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// Pinned now, on first sight, or the same as its pin.
    Kept,
    /// Its definition differs from its pin: (pinned, seen) digests.
    Changed(String, String),
    /// Its server's pin file does not name it: the digest seen.
    Unpinned(String),
}

/// A tool as pinned: its digest and its input schema.
#[derive(Debug, Clone)]
struct Pinned {
    digest: String,
    schema: Option<Value>,
    /// The definition seen last matches the pin.
    current: bool,
    /// The definition seen last differs from the pin.
    changed: bool,
}

/// Where a tool stands against its pin, for a call to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Listed last as pinned (and usable): declared, with its input schema.
    Current(Option<Value>),
    /// Listed last with another definition than its pin: its calls are
    /// rejected unless a rule that reads `tool.definition_changed` decides
    /// them; the schema is the pinned one.
    Changed(Option<Value>),
}

/// The most sessions one principal may hold open at once (idle ones
/// expire after an hour).
pub const MAX_SESSIONS: usize = 64;

/// Every server, with sessions and pins.
pub struct Servers {
    servers: HashMap<String, Server>,
    /// Session id → (server, principal) that opened it.
    sessions: moka::sync::Cache<String, Arc<(String, String)>>,
    /// Sessions open, by principal.
    open: Arc<Mutex<HashMap<String, usize>>>,
    /// (server, tool) → its pin.
    pins: Mutex<HashMap<(String, String), Pinned>>,
    /// Servers pinned by a file: a tool it does not name is not served.
    fixed: std::collections::HashSet<String>,
}

impl Servers {
    /// A client for each `[[mcp]]` entry.
    pub fn new(config: &Config) -> Result<Servers, Error> {
        let mut servers = HashMap::new();
        let mut pins = HashMap::new();
        let mut fixed = std::collections::HashSet::new();
        for m in &config.mcp {
            if let Some(path) = &m.pins {
                for (tool, digest) in PinFile::read(path, &m.name)?.tools {
                    let p = Pinned {
                        digest,
                        schema: None,
                        current: false,
                        changed: false,
                    };
                    pins.insert((m.name.clone(), tool), p);
                }
                fixed.insert(m.name.clone());
            }
            let Some(url) = &m.url else {
                continue;
            };
            let client = Upstream::to_url(url, ("mcp", "mcp.url"), None, m.timeout)?;
            servers.insert(
                m.name.clone(),
                Server {
                    config: m.clone(),
                    client,
                },
            );
        }
        let open: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let counts = open.clone();
        Ok(Servers {
            servers,
            sessions: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(std::time::Duration::from_secs(3600))
                .eviction_listener(move |_, s: Arc<(String, String)>, _| {
                    let mut c = counts.lock().unwrap_or_else(PoisonError::into_inner);
                    if let Some(n) = c.get_mut(&s.1) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            c.remove(&s.1);
                        }
                    }
                })
                .build(),
            open,
            pins: Mutex::new(pins),
            fixed,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Server> {
        self.servers.get(name)
    }

    /// Whether the principal may open another session.
    pub fn may_open(&self, principal: &str) -> bool {
        let c = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        c.get(principal).copied().unwrap_or(0) < MAX_SESSIONS
    }

    /// Binds a session the server opened to the principal who opened it.
    pub fn open(&self, id: &str, server: &str, principal: &str) {
        if self.sessions.contains_key(id) {
            return;
        }
        *(self.open.lock().unwrap_or_else(PoisonError::into_inner))
            .entry(principal.to_string())
            .or_insert(0) += 1;
        self.sessions
            .insert(id.to_string(), Arc::new((server.into(), principal.into())));
    }

    /// Whether `id` is a session this principal opened on this server.
    pub fn owns(&self, id: &str, server: &str, principal: &str) -> bool {
        self.sessions
            .get(id)
            .is_some_and(|s| s.0 == server && s.1 == principal)
    }

    pub fn close(&self, id: &str) {
        self.sessions.invalidate(id);
    }

    /// Checks a listed tool against its pin, pinning it on first sight.
    /// A tool that is not `usable` (its description was flagged) is pinned
    /// but does not count as declared until a listing finds it usable.
    pub fn check(&self, server: &str, tool: &Value, usable: bool) -> Option<(String, Pin)> {
        let name = tool.get("name")?.as_str()?.to_string();
        let digest = digest(tool);
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (server.to_string(), name.clone());
        let pin = match pins.get_mut(&key) {
            Some(p) if p.digest == digest => {
                p.current = usable;
                p.changed = false;
                // A pin from a file learns the schema it vouched for.
                p.schema = tool.get("inputSchema").cloned();
                Pin::Kept
            }
            Some(p) => {
                p.current = false;
                p.changed = true;
                Pin::Changed(p.digest.clone(), digest)
            }
            None if self.fixed.contains(server) => Pin::Unpinned(digest),
            None => {
                pins.insert(
                    key,
                    Pinned {
                        digest,
                        schema: tool.get("inputSchema").cloned(),
                        current: usable,
                        changed: false,
                    },
                );
                Pin::Kept
            }
        };
        Some((name, pin))
    }

    /// Where a tool stands against its pin; `None` when it is unknown,
    /// unpinned, or pinned but flagged (not declared).
    pub fn standing(&self, server: &str, tool: &str) -> Option<Standing> {
        let pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        let p = pins.get(&(server.to_string(), tool.to_string()))?;
        if p.current {
            Some(Standing::Current(p.schema.clone()))
        } else {
            p.changed.then(|| Standing::Changed(p.schema.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn servers() -> Servers {
        Servers::new(&Config::embedded().unwrap()).unwrap()
    }

    #[test]
    fn a_principal_holds_a_bounded_number_of_sessions() {
        let s = servers();
        for i in 0..MAX_SESSIONS {
            assert!(s.may_open("a"));
            s.open(&format!("s{i}"), "crm", "a");
        }
        assert!(!s.may_open("a") && s.may_open("b"));
        // The same id again counts once; a closed one frees its place.
        s.open("s0", "crm", "a");
        s.close("s0");
        s.sessions.run_pending_tasks();
        assert!(s.may_open("a"));
        assert!(
            s.owns("s1", "crm", "a") && !s.owns("s1", "crm", "b") && !s.owns("s1", "other", "a")
        );
    }

    #[test]
    fn a_tool_is_pinned_on_first_sight_and_a_change_is_caught() {
        let s = servers();
        let t = json!({"name": "x", "description": "d", "inputSchema": {"type": "object"}});
        assert_eq!(s.check("crm", &t, true).unwrap().1, Pin::Kept);
        let pinned = Some(json!({"type": "object"}));
        assert_eq!(
            s.standing("crm", "x"),
            Some(Standing::Current(pinned.clone()))
        );
        let changed = json!({"name": "x", "description": "d2", "inputSchema": {"type": "string"}});
        assert!(matches!(
            s.check("crm", &changed, true).unwrap().1,
            Pin::Changed(..)
        ));
        // Changed: its calls carry the pinned schema, never the new one.
        assert_eq!(s.standing("crm", "x"), Some(Standing::Changed(pinned)));
        // Seen as pinned again: served again.
        assert_eq!(s.check("crm", &t, true).unwrap().1, Pin::Kept);
        assert!(matches!(s.standing("crm", "x"), Some(Standing::Current(_))));
        // Not usable (a flagged description): pinned, not declared.
        let y = json!({"name": "y"});
        s.check("crm", &y, false);
        assert_eq!(s.standing("crm", "y"), None);
        assert_eq!(s.standing("crm", "unknown"), None);
    }
}
