#!/usr/bin/env bash
# One core or two: what a second worker thread buys. toolgate (all gates on,
# the embedded default policy, audit to a file) serves streamed chat
# requests that carry an agent's history (TURNS turns, each a call and a
# tool result of SIZE bytes), every event at once, on CONNS busy
# connections: first on CPU 0 alone (one thread: tokio's current-thread
# runtime), then on CPUs 0 and 1 (two worker threads), in alternating
# rounds. The repo's mock and the load generator run on CPU 1 both times.
#
# On a machine with two CPUs the second worker shares its CPU with the load
# side, so the figure to read is requests per CPU-second toolgate used:
# "scale" is two CPUs' worth at the two-thread rate over one CPU at the
# one-thread rate, what two whole cores would serve if nothing but CPU
# held it back (sharing a CPU costs the two-thread run context switches,
# so the estimate errs low). With four CPUs or more set LOAD_CPUS to CPUs
# of their own and the requests per second compare directly.
#
# usage: bash bench/cores.sh
# env:   TURNS=40 SIZE=2000 CONNS=64 DURATION=8 WARMUP=2 ROUNDS=5
#        ONE=0 TWO=0,1 LOAD_CPUS=1 TOOLGATE_BIN=target/release/toolgate
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TURNS:=40}" "${SIZE:=2000}" "${CONNS:=64}" "${DURATION:=8}" "${WARMUP:=2}" "${ROUNDS:=5}"
: "${ONE:=0}" "${TWO:=0,1}" "${LOAD_CPUS:=1}"
MOCK=127.0.0.1:18901 GATE=127.0.0.1:18902

cargo build --release --quiet --bin toolgate --example sseload
TOOLGATE=${TOOLGATE_BIN:-$PWD/target/release/toolgate}
LOAD=$PWD/target/release/examples/sseload
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# The agent's request, streamed, declaring the tool the mock calls too.
python3 bench/agent_request.py "$TURNS" "$SIZE" | python3 -c '
import json, sys
b = json.load(sys.stdin)
b["stream"] = True
b["tools"].append({"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"},
    "unit": {"type": "string"}, "days": {"type": "integer"},
    "include_hourly": {"type": "boolean"}}, "required": ["location"]}}})
json.dump(b, sys.stdout)' >"$tmp/body.json"
cat >"$tmp/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "127.0.0.1:18903"
[upstream]
base_url = "http://$MOCK/v1"
api_key_env = "BENCH_UPSTREAM_KEY"
[audit]
path = "$tmp/audit.jsonl"
CFG

taskset -c "$LOAD_CPUS" "$TOOLGATE" mock --listen "$MOCK" --script bench/paced.toml \
  --event-delay-ms 0 >"$tmp/mock.log" 2>&1 &
for _ in $(seq 50); do grep -q listening "$tmp/mock.log" 2>/dev/null && break; sleep 0.1; done

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }

run() { # cpus -> "rps cpu_seconds threads"
  BENCH_UPSTREAM_KEY=sk-bench RUST_LOG=error taskset -c "$1" "$TOOLGATE" serve \
    --config "$tmp/toolgate.toml" >"$tmp/proxy.log" 2>&1 &
  local pid=$! c0 c1 out threads
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:18903/healthz" && break; sleep 0.1; done
  # The CPU counted is the measured seconds' (after the load's warm-up).
  (sleep "$WARMUP"; cpu_of "$pid" >"$tmp/c0") &
  out=$(taskset -c "$LOAD_CPUS" "$LOAD" "http://$GATE/v1/chat/completions" "$CONNS" "$DURATION" \
    --warmup "$WARMUP" --body "$tmp/body.json" --header "authorization: Bearer sk-client")
  c1=$(cpu_of "$pid")
  c0=$(cat "$tmp/c0")
  threads=$(ls "/proc/$pid/task" | wc -l)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c "import json,sys; o=json.loads(sys.argv[1]); assert o['errors']==0, o; print(o['rps'], $c1-$c0, $threads)" "$out"
}

echo "body: $(wc -c <"$tmp/body.json") bytes ($TURNS turns of history); $CONNS connections, ${DURATION}s each, $ROUNDS rounds"
printf '%-6s %-5s %9s %9s %10s %12s\n' round cpus req/s "CPU used" "µs/req" "req/CPU-s"
: >"$tmp/rows"
for r in $(seq "$ROUNDS"); do
  for cpus in "$ONE" "$TWO"; do
    read -r rps cpu threads < <(run "$cpus")
    python3 - "$r" "$cpus" "$rps" "$cpu" "$DURATION" <<'PY' | tee -a "$tmp/rows"
import sys
r, cpus, rps, cpu, secs = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
used = cpu / secs
print(f"{r:<6} {cpus:<5} {rps:9.0f} {used:9.2f} {cpu / (rps * secs) * 1e6:10.1f} {rps / used:12.0f}")
PY
  done
done
python3 - "$ONE" "$TWO" "$tmp/rows" <<'PY'
import statistics, sys
one, two, rows = sys.argv[1], sys.argv[2], [l.split() for l in open(sys.argv[3])]
per = {c: statistics.median(float(x[5]) for x in rows if x[1] == c) for c in (one, two)}
n = len(two.split(","))
print(f"median req/CPU-s: {per[one]:.0f} on one thread, {per[two]:.0f} on {n}; "
      f"{n} whole cores would serve {n * per[two] / per[one]:.2f}x one")
PY
