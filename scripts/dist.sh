#!/usr/bin/env bash
# The optimised binary toolgate ships (the Dockerfile runs this), built in
# two steps and nothing committed:
#  1. toolgate built instrumented with the `dist` profile (fat LTO, one
#     codegen unit; its own target dir), and trained on the embedded default
#     policy, audit to a file:
#     - chat streams and whole answers from the local mock
#       (`toolgate mock --script bench/mock.toml`, examples/loadgen.rs), SECONDS_EACH each,
#       and an agent's long history with its tool results (bench/agent_request.py);
#     - every recorded provider exchange in FIXTURES (../shared/fixtures/sse,
#       chat, Responses and Messages; streamed and whole) replayed PASSES
#       times, when that folder is there;
#  2. the profile merged into target/pgo/toolgate.profdata, and toolgate built
#     again with the `dist` profile and that profile: target/dist/toolgate.
# llvm-profdata is LLVM_PROFDATA, else rustc's own (rustup component add
# llvm-tools), else one of rustc's LLVM major on PATH or under
# /usr/lib/llvm-N (Debian's llvm-N package). Without any, or with PGO=0,
# step 1 is skipped and the binary is the `dist` profile alone.
# Needs curl and python3 for the training.
#   scripts/dist.sh            # SECONDS_EACH=5 PASSES=20
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-5}
PASSES=${PASSES:-20}
FIXTURES=${FIXTURES:-../shared/fixtures/sse}
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ -n "${LLVM_PROFDATA:-}" ]; then
  profdata=$LLVM_PROFDATA
elif [ ! -x "$profdata" ]; then
  # A raw profile is read only by the LLVM major that wrote it.
  major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
  for candidate in "$(command -v "llvm-profdata-$major" || true)" "/usr/lib/llvm-$major/bin/llvm-profdata"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      profdata=$candidate
      break
    fi
  done
fi
if [ "${PGO:-1}" = 0 ] || [ ! -x "$profdata" ]; then
  echo "== no profile (PGO=0, or no llvm-profdata: rustup component add llvm-tools): the dist profile alone"
  cargo build --profile dist --locked --bin toolgate
  echo "== target/dist/toolgate"
  exit 0
fi

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
echo "== instrumented build (target/pgo-generate)"
# Build scripts and proc-macros are instrumented too, and run during the
# build: their counts go aside (a fixed path, so that a second run reuses
# this build); toolgate's go to $work/raw.
# Built as the final build builds it (the binary alone): with the examples
# (and so the dev-dependencies' features) in the same build, the symbols
# would differ and no function of the profile would match.
RUSTFLAGS="-Cprofile-generate=$PWD/target/pgo-generate/aside" CARGO_TARGET_DIR=target/pgo-generate \
  cargo build --profile dist --locked --quiet --bin toolgate
# The mock and the load generator: an ordinary build.
cargo build --release --locked --quiet --bin toolgate --example loadgen
bin=target/pgo-generate/dist

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
target/release/toolgate mock --script bench/mock.toml --listen "$MOCK" >/dev/null 2>&1 &
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
if [ -d "$FIXTURES" ]; then
  echo "== training: recorded provider exchanges replayed"
  run "http://127.0.0.1:$REPLAY/v1"
  python3 scripts/pgo_replay.py "$REPLAY" "${GATE##*:}" "$FIXTURES" "$PASSES" &
  wait $!
  stop
else
  echo "== no recorded exchanges at $FIXTURES: trained on the mock alone"
fi

mkdir -p target/pgo
"$profdata" merge --sparse -o target/pgo/toolgate.profdata "$work"/raw/*.profraw
echo "== optimised build with the profile ($(du -h target/pgo/toolgate.profdata | cut -f1))"
# A function the training never ran is compiled as without a profile.
RUSTFLAGS="-Cprofile-use=$PWD/target/pgo/toolgate.profdata -Cllvm-args=-no-pgo-warn-mismatch" \
  cargo build --profile dist --locked --bin toolgate
echo "== target/dist/toolgate"
