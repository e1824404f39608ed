//! A whole `generateContent` body: its calls in order, and the body written
//! again without the withheld ones (see [`super::response`]).

use serde_json::Value;

use super::response::{self, Site};
use crate::call::{Call, Release};
use crate::error::Error;
use crate::json::{self, Sink, Spliced};
use crate::protocol::malformed;
use crate::protocol::usage::Usage;
use crate::protocol::{Complete, Resumption};

/// What goes out should a body fail to be written again.
pub(super) const EMPTY: &str = r#"{"candidates":[]}"#;

/// A parsed body, borrowed from its text.
pub struct Body<'a> {
    text: &'a str,
    calls: Vec<Call>,
    sites: Vec<Site>,
    hosted: Vec<Call>,
    usage: Usage,
}

impl<'a> Body<'a> {
    pub fn parse(text: &'a str, max_call_bytes: usize) -> Result<Body<'a>, Error> {
        let tree: Value = json::strict_value(text.as_bytes())
            .map_err(|_| malformed("response is not unambiguous JSON"))?;
        let read = response::read(&tree, text.as_bytes(), max_call_bytes, 0)?;
        let (calls, sites) = read.calls.into_iter().unzip();
        Ok(Body {
            text,
            calls,
            sites,
            hosted: read.hosted,
            usage: read.usage,
        })
    }
}

impl Complete for Body<'_> {
    fn usage(&self) -> Usage {
        self.usage.clone()
    }
    fn calls(&self) -> &[Call] {
        &self.calls
    }
    fn hosted(&self) -> &[Call] {
        &self.hosted
    }
    fn resumption(&self, _: &str, _: &[Release], _: &str) -> Option<Resumption> {
        None
    }
    fn forget_calls(&mut self) {
        for c in &mut self.calls {
            c.arguments = String::new();
        }
    }
    fn rewrite(
        &self,
        verdicts: &[Release],
        neutral: &str,
        _: &[u8; 32],
        out: &mut Spliced<'_>,
    ) -> bool {
        let drop: Vec<Site> = (self.sites.iter().enumerate())
            .filter(|(i, _)| !Release::at(verdicts, *i).allowed())
            .map(|(_, s)| *s)
            .collect();
        if drop.is_empty() {
            return false;
        }
        let sites = &self.sites;
        let calls_of = |c: usize| sites.iter().filter(|s| s.candidate == c).count();
        // Read once already, so writing it again does not fail on its
        // shape; if it did, an empty answer goes out, never the calls.
        let mut s = String::with_capacity(self.text.len());
        let written = response::write_without(self.text, &drop, &calls_of, neutral, &mut s);
        out.text(if written.is_ok() { &s } else { EMPTY });
        true
    }
}
