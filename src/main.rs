//! The `toolgate` binary: the allocator, then [`toolgate::cli::main`].

use std::process::ExitCode;

/// mimalloc: the proxy allocates many short-lived buffers per request, and
/// glibc's malloc costs more CPU on that pattern (see docs/PERFORMANCE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    toolgate::cli::main()
}
