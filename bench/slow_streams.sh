#!/usr/bin/env bash
# Memory under many slow streams: STREAMS concurrent streaming requests through
# toolgate (all gates on) to a mock provider that sends one event every
# DELAY_MS (17 events: text, a call in fragments, finish, usage, [DONE]).
# Prints toolgate's peak resident memory (VmHWM) and its upstream connections.
# The agent side is multiplexed over h2c (PER_CONN streams a connection) so
# that the load fits a 20,000-descriptor limit per process; toolgate opens
# one upstream HTTP/1.1 connection per stream.
# Usage: bash bench/slow_streams.sh [STREAMS=10000] [DELAY_MS=1000] [PER_CONN=100]
set -euo pipefail
cd "$(dirname "$0")/.."
STREAMS=${1:-10000}
DELAY_MS=${2:-1000}
PER_CONN=${3:-100}
MOCK=127.0.0.1:9911
GATE=127.0.0.1:9912
ADMIN=127.0.0.1:9913

# toolgate on its own: built with the examples, it would take the
# dev-dependencies' features, which the shipped binary does not have.
cargo build --release --quiet --bin toolgate
cargo build --release --quiet --bin toolgate --example slowload
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

cat > "$tmp/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "$ADMIN"
[upstream]
base_url = "http://$MOCK/v1"
api_key_env = "TOOLGATE_BENCH_KEY"
timeout_secs = 600
[limits]
# The default (1,024) would turn the rest away with a 503.
max_streams = $STREAMS
[audit]
path = "$tmp/audit.jsonl"
CFG

target/release/toolgate mock --script bench/mock.toml --event-delay-ms "$DELAY_MS" --listen "$MOCK" >/dev/null 2>&1 &
TOOLGATE_BENCH_KEY=sk-bench TOOLGATE_LOG=warn target/release/toolgate serve --config "$tmp/toolgate.toml" &
TG_PID=$!
for _ in $(seq 50); do curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$TG_PID/status"; }
echo "toolgate at rest: $(( $(kib VmRSS) / 1024 )) MiB resident"

peak_fds=0
target/release/examples/slowload "http://$GATE/v1/chat/completions" "$STREAMS" "$PER_CONN" > "$tmp/load.txt" &
LOAD=$!
while kill -0 "$LOAD" 2>/dev/null; do
  fds=$(ls "/proc/$TG_PID/fd" | wc -l)
  (( fds > peak_fds )) && peak_fds=$fds
  sleep 1
done
wait "$LOAD"
cat "$tmp/load.txt"
hwm=$(kib VmHWM)
echo "toolgate: peak resident $(( hwm / 1024 )) MiB ($(( hwm * 1024 / STREAMS )) bytes a stream); at most $peak_fds descriptors open"
echo "audit records: $(wc -l < "$tmp/audit.jsonl")"
