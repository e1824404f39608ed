//! `[[limit]]`s on a call: a token from each, counted on this replica or in
//! the buckets replicas share (`[state]`), and what happens when those
//! cannot be read.

use super::PolicyGate;
use crate::call::Call;
use crate::config::OnError;
use crate::context::Context;
use crate::policy::limits::LimitKey;

/// What the `[[limit]]`s on a call said: the first over its limit, the
/// first whose shared count could not be read (fail closed), and why.
#[derive(Default)]
pub(super) struct Rated {
    pub(super) over: Option<String>,
    pub(super) unavailable: Option<String>,
    pub(super) error: Option<String>,
}

impl PolicyGate {
    /// Takes a token from every limit on this tool: the first one over its
    /// limit, if any, and why shared buckets could not be read, if they could not.
    pub(super) async fn rate(&self, call: &Call, ctx: &Context) -> Rated {
        let mut rated = Rated::default();
        for l in self
            .policy
            .limits
            .iter()
            .filter(|l| l.applies_to(&call.name))
        {
            let key = match l.key {
                LimitKey::Session => ctx.session.as_str(),
                LimitKey::Principal => ctx.principal.as_str(),
                LimitKey::Global => "global",
            };
            let within = match &self.shared {
                None => l.take(key),
                Some(s) => match s.take(l.spec(), key, l.interval, l.burst).await {
                    Ok(within) => within,
                    Err(e) => {
                        self.metrics.state_failed("limit", s.on_error.as_str());
                        rated.error.get_or_insert_with(|| e.to_string());
                        match s.on_error {
                            OnError::Local => l.take(key),
                            OnError::FailClosed => {
                                rated.unavailable.get_or_insert_with(|| {
                                    format!("limit {} at {}", l.rate, l.origin)
                                });
                                continue;
                            }
                        }
                    }
                },
            };
            if !within && rated.over.is_none() {
                rated.over = Some(format!("limit {} at {}", l.rate, l.origin));
            }
        }
        rated
    }
}
