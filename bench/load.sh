#!/usr/bin/env bash
# Load comparison: direct to a fast local mock provider vs. through toolgate
# (all gates on), non-streaming and streaming. Loopback only; bounded in time.
# Usage: bash bench/load.sh [CONNECTIONS=32] [SECONDS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${1:-32}
SECS=${2:-10}
MOCK=127.0.0.1:9901
GATE=127.0.0.1:9902
ADMIN=127.0.0.1:9903

# toolgate on its own: built with the examples, it would take the
# dev-dependencies' features, which the shipped binary does not have.
cargo build --release --quiet --bin toolgate
cargo build --release --quiet --bin toolgate --example loadgen
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

cat > "$tmp/toolgate.toml" <<CFG
[listen]
addr = "$GATE"
admin = "$ADMIN"
[upstream]
base_url = "http://$MOCK/v1"
api_key_env = "TOOLGATE_BENCH_KEY"
[audit]
path = "$tmp/audit.jsonl"
CFG

target/release/toolgate mock --script bench/mock.toml --listen "$MOCK" >/dev/null 2>&1 &
TOOLGATE_BENCH_KEY=sk-bench TOOLGATE_LOG=warn target/release/toolgate serve --config "$tmp/toolgate.toml" &
TG_PID=$!
# CPU seconds (user+system) a process has used so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$1/stat"; }
for _ in $(seq 50); do curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

for mode in json stream; do
  for target in "$MOCK" "$GATE"; do
    name=$([ "$target" = "$MOCK" ] && echo direct || echo toolgate)
    before=$(cpu "$TG_PID")
    out=$(target/release/examples/loadgen "http://$target/v1/chat/completions" "$CONNS" "$SECS" "$mode")
    after=$(cpu "$TG_PID")
    reqs=$(sed 's/.*"requests":\([0-9]*\).*/\1/' <<<"$out")
    us=$(awk -v a="$after" -v b="$before" -v n="$reqs" 'BEGIN{printf "%.1f", (a-b)*1e6/n}')
    extra=""; [ "$name" = toolgate ] && extra=" toolgate_cpu_us_per_request=$us"
    echo "$mode $name $out$extra"
  done
done
echo "audit records written: $(wc -l < "$tmp/audit.jsonl")"
