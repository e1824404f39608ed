#!/usr/bin/env bash
# CPU per request as an agent's conversation grows: each request carries
# TURNS earlier turns (a call, its ~1 KB tool result, a user message), as an
# agent loop sends its whole history every turn. toolgate (all gates on,
# the embedded policy) in front of the repo's mock, pinned to one CPU; a
# keep-alive client sends the requests one after another and the figure is
# toolgate's CPU time (user + system, from /proc) over the requests.
#
# Usage: bash bench/history.sh [BINARY ...]   (default target/release/toolgate)
#   TURNS="0 10 20 40" N=600 MODE=stream|nonstream
# Several binaries are measured in turn at each length, for an A/B.
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=(target/release/toolgate)
TURNS=${TURNS:-"0 10 20 40"}
N=${N:-600}
MODE=${MODE:-stream}
MOCK=127.0.0.1:9931
GATE=127.0.0.1:9932

[[ $# -gt 0 ]] || cargo build --release --quiet --bin toolgate
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cat > "$tmp/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "127.0.0.1:9933"
[upstream]
base_url = "http://$MOCK/v1"
api_key_env = "TOOLGATE_BENCH_KEY"
[audit]
path = "$tmp/audit.jsonl"
CFG
"${BINS[0]}" mock --script bench/mock.toml --listen "$MOCK" >/dev/null 2>&1 &

cat > "$tmp/client.py" <<'PY'
import http.client, json, os, socket, sys, time
pid, turns, n, stream, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "stream", int(sys.argv[5])
msgs = [{"role": "user", "content": "What's the weather in Paris?"}]
for i in range(turns):
    msgs += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "day": i})}}]},
        {"role": "tool", "tool_call_id": f"call_{i}",
            "content": f"Day {i}: " + "Sunny, 21 C, light wind from the west. " * 25},
        {"role": "user", "content": "And the day after? " + "Please consider the forecast carefully. " * 10},
    ]
body = json.dumps({"model": "mock", "stream": stream, "messages": msgs,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "day": {"type": "integer"}}}}}]})
for _ in range(150):
    try:
        socket.create_connection(("127.0.0.1", port)).close()
        break
    except OSError:
        time.sleep(0.1)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
def one():
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
for _ in range(50):
    one()
t0 = cpu()
for _ in range(n):
    one()
print(f"{len(body) / 1024:8.1f} {(cpu() - t0) / n * 1e6:10.0f}")
PY

printf '%-40s %6s %8s %10s\n' binary turns "KiB" "CPU µs/req"
for t in $TURNS; do
  for bin in "${BINS[@]}"; do
    TOOLGATE_BENCH_KEY=sk-bench TOOLGATE_LOG=error taskset -c 0 \
      "$bin" serve --config "$tmp/toolgate.toml" >/dev/null 2>&1 &
    pid=$!
    out=$(python3 "$tmp/client.py" "$pid" "$t" "$N" "$MODE" "${GATE##*:}")
    kill -INT "$pid"
    wait "$pid" || true
    printf '%-40s %6s %s\n' "$bin" "$t" "$out"
  done
done
