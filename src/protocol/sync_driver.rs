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
