//! A synchronous driver of any [`Rewriter`] (tests, benches and tools; the
//! proxy drives rewriters asynchronously in `body.rs`).

use bytes::BytesMut;

use super::{Rewriter, Step};
use crate::call::{Call, Release};

/// Drives `rw` over `chunks` with a synchronous decision per call.
pub fn run_sync(
    rw: &mut dyn Rewriter,
    chunks: &[&[u8]],
    mut decide: impl FnMut(&Call) -> bool,
) -> BytesMut {
    let mut out = BytesMut::new();
    let mut gate = |rw: &mut dyn Rewriter, out: &mut BytesMut| {
        let verdicts: Vec<Release> = rw
            .pending()
            .iter()
            .map(|c| {
                if decide(c) {
                    Release::Allow
                } else {
                    Release::Withhold
                }
            })
            .collect();
        rw.resolve(&verdicts, out);
    };
    for c in chunks {
        rw.push(c);
        loop {
            match rw.process(&mut out) {
                Ok(Step::NeedMore) => break,
                Ok(Step::Gate) => gate(rw, &mut out),
                Err(e) => {
                    rw.fail(&e, false, &mut out);
                    return out;
                }
            }
        }
    }
    loop {
        match rw.end(&mut out) {
            Ok(Step::NeedMore) => return out,
            Ok(Step::Gate) => gate(rw, &mut out),
            Err(e) => {
                rw.fail(&e, false, &mut out);
                return out;
            }
        }
    }
}

/// [`run_sync`] as a method of every rewriter.
pub trait RunSync {
    fn run_sync(&mut self, chunks: &[&[u8]], decide: impl FnMut(&Call) -> bool) -> BytesMut;
}

impl<T: Rewriter> RunSync for T {
    fn run_sync(&mut self, chunks: &[&[u8]], decide: impl FnMut(&Call) -> bool) -> BytesMut {
        run_sync(self, chunks, decide)
    }
}

/// Helpers shared by the rewriters' unit tests.
#[cfg(test)]
pub mod testing {
    use serde_json::Value;

    use crate::protocol::{Options, Rewriter};

    /// Small limits and the neutral text `NEUTRAL`.
    pub fn options() -> Options {
        Options {
            neutral_message: "NEUTRAL".into(),
            max_event_bytes: 1 << 20,
            max_call_bytes: 1 << 16,
            max_held_bytes: 1 << 20,
            id_key: [1; 32],
            resume: false,
            neutral_result: "R".into(),
            refusal: false,
            text_calls: false,
            early: true,
            foresee: false,
        }
    }

    /// Drives `rw` over `input` in one piece, withholding calls named in `deny`.
    pub fn run_denying(rw: &mut dyn Rewriter, input: &str, deny: &[&str]) -> String {
        let out = super::run_sync(rw, &[input.as_bytes()], |c| {
            !deny.contains(&c.name.as_str())
        });
        String::from_utf8_lossy(&out).into_owned()
    }

    /// `(event name, data)` of every block of an output (data lines joined).
    pub fn named_events(out: &str) -> Vec<(String, Value)> {
        out.split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .map(|b| {
                let mut name = String::new();
                let mut data = String::new();
                for line in b.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = n.to_string();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data.push_str(d);
                    }
                }
                (name, serde_json::from_str(&data).unwrap_or(Value::Null))
            })
            .collect()
    }
}
