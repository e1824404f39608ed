//! The audit form of [`Signals`]: serialised directly (no intermediate
//! JSON tree), without the signals that carry argument text, detector lists
//! as counts.

use serde::Serialize;
use serde_json::Value;

use super::Signals;

/// Signals that carry argument text (or bulk registry data): never audited;
/// and `policy.cel_errors`, audited beside them as `cel_errors`.
const NOT_AUDITED: [&str; 5] = [
    "args",
    "schema.errors",
    "output.text",
    "output.facts",
    "policy.cel_errors",
];

impl Signals {
    /// The audit form, serialised directly (no intermediate JSON tree).
    pub fn audit_view(&self) -> AuditView<'_> {
        AuditView(self)
    }
}

/// The audit form of [`Signals`]; see [`Signals::audit_view`].
pub struct AuditView<'a>(&'a Signals);

#[derive(Serialize)]
#[serde(untagged)]
enum AuditValue<'a> {
    Count(usize),
    Value(&'a Value),
}

#[derive(Serialize)]
struct AuditEntry<'a> {
    value: AuditValue<'a>,
    method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<f64>,
}

impl Serialize for AuditView<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = ser.serialize_map(None)?;
        for (k, s) in self
            .0
            .map
            .iter()
            .filter(|(k, _)| !NOT_AUDITED.contains(&k.as_ref()))
        {
            let counted = k.starts_with("detect.") || k == "output.claims";
            let value = match (&s.value, counted) {
                (Value::Array(a), true) => AuditValue::Count(a.len()),
                (v, _) => AuditValue::Value(v),
            };
            m.serialize_entry(
                k,
                &AuditEntry {
                    value,
                    method: s.method.as_str(),
                    confidence: s.confidence,
                },
            )?;
        }
        m.end()
    }
}
