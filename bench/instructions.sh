#!/usr/bin/env bash
# Instructions per request, counted by callgrind: user-space work only, and
# the same from run to run, so an A/B of two builds shows a 1% change that
# the shared bench's ±30% machine noise hides.
#
# Usage: bash bench/instructions.sh [stream|nonstream] [BINARY ...]
#   (default: stream, target/release/toolgate). Each binary serves the
#   repo's mock provider under valgrind, pinned to one CPU (so on tokio's
#   current-thread runtime, as in the shared bench); a keep-alive client
#   sends 100 requests, then, in a second run, 600: the difference over 500
#   is the figure, with start-up and shutdown taken out.
# Needs valgrind (Debian's package). Under valgrind SHA-256 runs in software
# (no SHA extensions): about 120k of each figure is the audit chain's
# hashing, which costs about 1 µs on the real CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-stream}
[[ $# -gt 0 ]] && shift
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=(target/release/toolgate)
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
MOCK=127.0.0.1:9911
GATE=127.0.0.1:9912

cargo build --release --quiet --bin toolgate
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cat > "$tmp/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "127.0.0.1:9913"
[upstream]
base_url = "http://$MOCK/v1"
api_key_env = "TOOLGATE_BENCH_KEY"
[audit]
path = "/dev/null"
CFG
target/release/toolgate mock --script bench/mock.toml --listen "$MOCK" >/dev/null 2>&1 &

cat > "$tmp/client.py" <<'PY'
import http.client, json, sys
stream, n, port = sys.argv[1] == "stream", int(sys.argv[2]), int(sys.argv[3])
body = json.dumps({
    "model": "mock", "stream": stream,
    "messages": [{"role": "user", "content": "What's the weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
})
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
PY

# Total instructions of one run of toolgate serving N requests.
count() {
  local bin=$1 n=$2 out="$tmp/cg.out" pid
  rm -f "$out"
  TOOLGATE_BENCH_KEY=sk-bench TOOLGATE_LOG=error taskset -c 0 \
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --config "$tmp/toolgate.toml" \
    >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 150); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', ${GATE##*:}))" 2>/dev/null && break
    sleep 0.2
  done
  python3 "$tmp/client.py" "$MODE" "$n" "${GATE##*:}"
  kill -INT "$pid"
  wait "$pid" || true
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

for bin in "${BINS[@]}"; do
  a=$(count "$bin" 100)
  b=$(count "$bin" 600)
  echo "$bin $MODE: $(((b - a) / 500)) instructions per request"
done
