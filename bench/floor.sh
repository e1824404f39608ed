#!/usr/bin/env bash
# The shared bench (../shared/bench/run.sh) with one more proxy beside
# nginx and toolgate: `floor` (examples/floor.rs), hyper's server and client
# carrying the bytes and reading none of them. What it costs is what any
# hyper-based proxy costs at the least, so toolgate's own share is the
# difference between its row and the floor's.
#
# usage: bash bench/floor.sh [nonstream|stream|all]     (run.sh's env applies:
#        ROUNDS, DURATION, CONNS, MOCK_CHUNK_DELAY_US, SKIP_INSTALL, ...)
# Needs the shared bench beside the project (../shared/bench).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED_BENCH:-../shared/bench}
[[ -x "$SHARED/run.sh" ]] || { echo "the shared bench is not at $SHARED (set SHARED_BENCH)" >&2; exit 2; }
# Two builds: an example turns on the dev-dependencies' features (tokio's
# test-util, whose clock takes a lock on every read), and a binary built in
# the same invocation would get them too.
cargo build --release --quiet --example floor
cargo build --release --quiet --bin toolgate
mkdir -p target/bench
conf=$PWD/target/bench/proxies-floor.conf
grep -v '^#' "$SHARED/proxies.conf" >"$conf"
echo "floor | /v1/chat/completions | Authorization: Bearer {key} | $PWD/target/release/examples/floor 127.0.0.1:{port} {upstream_hostport} | echo floor" >>"$conf"
TOOLGATE_BIN=${TOOLGATE_BIN:-$PWD/target/release/toolgate} PROXIES_FILE=$conf exec "$SHARED/run.sh" "$@"
