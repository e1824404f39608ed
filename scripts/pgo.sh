#!/usr/bin/env bash
# Regenerates pgo/toolgate.profdata, the profile release builds are optimised
# with (scripts/rustc-pgo; docs/PERFORMANCE.md, "a profile-guided build"):
#  1. toolgate built instrumented (its own target dir, the old profile unused);
#  2. trained on the embedded default policy, audit to a file:
#     - chat streams and whole answers from the local mock
#       (examples/mock_upstream.rs, examples/loadgen.rs), SECONDS_EACH each,
#       and an agent's long history with its tool results (bench/agent_request.py);
#     - every recorded provider exchange in ../shared/fixtures/sse (chat,
#       Responses and Messages; streamed and whole) replayed PASSES times;
#  3. merged (sparse: code the training never ran keeps no profile and is
#     compiled as without one), with the LLVM major version that wrote it
#     (pgo/toolgate.llvm), and its id put in .cargo/config.toml so cargo
#     rebuilds everything with it (cargo does not look at the wrapper).
# Needs llvm-profdata of the toolchain's LLVM: rustup component add llvm-tools.
#   scripts/pgo.sh            # SECONDS_EACH=5 PASSES=20
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-5}
PASSES=${PASSES:-20}
FIXTURES=${FIXTURES:-../shared/fixtures/sse}
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
[ -x "$profdata" ] || { echo "llvm-profdata missing: rustup component add llvm-tools" >&2; exit 1; }
[ -d "$FIXTURES" ] || { echo "recorded exchanges missing: $FIXTURES" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
echo "== instrumented build (target/pgo-generate)"
# Build scripts and proc-macros are instrumented too, and run during the
# build: their counts go aside (a fixed path, so that a second run reuses
# this build); toolgate's go to $work/raw.
# Built as `cargo build --release` builds it: with the examples (and so
# the dev-dependencies' features) in the same build, the symbols would differ
# and no function of the profile would match the release build's.
RUSTFLAGS="-Cprofile-generate=$PWD/target/pgo-generate/aside" CARGO_TARGET_DIR=target/pgo-generate \
  cargo build --release --locked --quiet --bin toolgate
# The mock and the load generator: an ordinary build.
cargo build --release --locked --quiet --example mock_upstream --example loadgen
bin=target/pgo-generate/release

MOCK=127.0.0.1:9911 REPLAY=9912 GATE=127.0.0.1:9913 ADMIN=127.0.0.1:9914
run() { # run UPSTREAM_BASE: the instrumented toolgate in front of it
  cat > "$work/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "$ADMIN"
[upstream]
base_url = "$1"
api_key_env = "TOOLGATE_PGO_KEY"
[upstream.messages]
base_url = "$1"
api_key_env = "TOOLGATE_PGO_KEY"
[audit]
path = "$work/audit.jsonl"
CFG
  LLVM_PROFILE_FILE="$work/raw/toolgate-%m.profraw" TOOLGATE_PGO_KEY=sk-train TOOLGATE_LOG=error \
    "$bin/toolgate" serve --config "$work/toolgate.toml" &
  gate=$!
  for _ in $(seq 100); do
    # Ready, and this one (not a leftover on the same port).
    curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 && kill -0 "$gate" && return
    sleep 0.1
  done
  echo "toolgate did not start" >&2
  exit 1
}
stop() { # the profile is written when toolgate exits
  kill -INT "$gate"
  wait "$gate"
}

echo "== training: the local mock's chat streams and whole answers"
target/release/examples/mock_upstream "$MOCK" 2>/dev/null &
sleep 0.3
kill -0 $! || { echo "the mock did not start (is $MOCK taken?)" >&2; exit 1; }
run "http://$MOCK/v1"
for mode in stream json; do
  target/release/examples/loadgen "http://$GATE/v1/chat/completions" 8 "$SECONDS_EACH" "$mode"
done
echo "== training: an agent's long history (tool results fenced), $PASSES times"
python3 bench/agent_request.py 15 3000 > "$work/agent.json"
python3 - "${GATE##*:}" "$work/agent.json" "$PASSES" <<'PY'
import http.client, sys
port, body, n = int(sys.argv[1]), open(sys.argv[2], "rb").read(), int(sys.argv[3])
conn = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    if resp.status != 200:
        sys.exit(f"agent history: status {resp.status}")
PY
stop
echo "== training: recorded provider exchanges replayed"
run "http://127.0.0.1:$REPLAY/v1"
python3 scripts/pgo_replay.py "$REPLAY" "${GATE##*:}" "$FIXTURES" "$PASSES" &
wait $!
stop

"$profdata" merge --sparse -o pgo/toolgate.profdata "$work"/raw/*.profraw
# The LLVM that wrote it: an older one may not read it (scripts/rustc-pgo).
rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p' > pgo/toolgate.llvm
id=$(sha256sum pgo/toolgate.profdata | cut -c1-12)
sed -i "s/toolgate_pgo=\\\\\"[0-9a-f]*\\\\\"/toolgate_pgo=\\\\\"$id\\\\\"/" .cargo/config.toml
grep -q "$id" .cargo/config.toml || { echo "could not put the profile's id in .cargo/config.toml" >&2; exit 1; }
echo "== pgo/toolgate.profdata: $(du -h pgo/toolgate.profdata | cut -f1), id $id"
