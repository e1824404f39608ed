//! A synchronous driver of the stream rewriter (tests, benches and tools; the
//! proxy drives it asynchronously in `body.rs`).

use bytes::BytesMut;

use super::stream::{Step, StreamRewriter};
use super::ToolCall;

impl StreamRewriter {
    /// Drives the rewriter over `chunks` with a synchronous decision per call
    /// (tests, benches and tools; the proxy drives it asynchronously).
    pub fn run_sync(
        &mut self,
        chunks: &[&[u8]],
        mut decide: impl FnMut(&ToolCall) -> bool,
    ) -> BytesMut {
        let mut out = BytesMut::new();
        let mut gate = |rw: &mut StreamRewriter, out: &mut BytesMut| {
            let allowed: Vec<bool> = rw.pending_calls().iter().map(&mut decide).collect();
            rw.resolve(&allowed, out);
        };
        for c in chunks {
            self.push(c);
            loop {
                match self.process(&mut out) {
                    Ok(Step::NeedMore) => break,
                    Ok(Step::Gate) => gate(self, &mut out),
                    Err(e) => {
                        self.fail(&e, false, &mut out);
                        return out;
                    }
                }
            }
        }
        loop {
            match self.end(&mut out) {
                Ok(Step::NeedMore) => return out,
                Ok(Step::Gate) => gate(self, &mut out),
                Err(e) => {
                    self.fail(&e, false, &mut out);
                    return out;
                }
            }
        }
    }
}
