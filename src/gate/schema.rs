//! Argument schemas: the request's declared `parameters` compiled once per
//! distinct schema (cached by hash), plus the catalog's stricter schema.
//! Remote and file `$ref`s are never fetched (jsonschema without resolvers).

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::kept::Kept;

const CACHE_MAX: usize = 1024;

pub struct SchemaCache {
    compiled: Kept<[u8; 32], Option<Arc<jsonschema::Validator>>>,
}

impl Default for SchemaCache {
    fn default() -> SchemaCache {
        SchemaCache {
            compiled: Kept::new(CACHE_MAX),
        }
    }
}

impl SchemaCache {
    /// The compiled validator of a declared schema (its JSON text); `None`
    /// when it is not a valid schema.
    pub fn get(&self, schema: &str) -> Option<Arc<jsonschema::Validator>> {
        let key: [u8; 32] = Sha256::digest(schema).into();
        if let Some(v) = self.compiled.get(&key) {
            return v;
        }
        let v = serde_json::from_str::<Value>(schema)
            .ok()
            .and_then(|s| jsonschema::validator_for(&s).ok())
            .map(Arc::new);
        self.compiled.insert(key, v.clone());
        v
    }

    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Validation errors of `args` against `v`, as `pointer: message` lines.
pub fn errors(v: &jsonschema::Validator, args: &Value) -> Vec<String> {
    // Most calls are valid: a yes/no check is cheaper than collecting errors.
    if v.is_valid(args) {
        return Vec::new();
    }
    v.iter_errors(args)
        .take(8)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!("{}: {}", if at.is_empty() { "/" } else { &at }, e)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_once_per_schema_and_validates() {
        let c = SchemaCache::default();
        let s =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
                .to_string();
        let v = c.get(&s).unwrap();
        assert!(Arc::ptr_eq(&v, &c.get(&s).unwrap()));
        assert_eq!(c.len(), 1);
        assert!(errors(&v, &json!({"n": 1})).is_empty());
        assert_eq!(errors(&v, &json!({"n": "x"})).len(), 1);
        assert!(!errors(&v, &json!({})).is_empty());
    }

    #[test]
    fn remote_refs_are_not_fetched_and_make_the_schema_invalid() {
        let c = SchemaCache::default();
        assert!(c.get(r#"{"$ref":"http://127.0.0.1:9/x.json"}"#).is_none());
        assert!(c.get(r#"{"$ref":"file:///etc/passwd"}"#).is_none());
        assert!(c.get(r#"{"type":5}"#).is_none());
        assert!(c.get("{not json").is_none());
    }
}
