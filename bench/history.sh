#!/usr/bin/env bash
# CPU per request as an agent's conversation grows: each request carries
# TURNS earlier turns (a call, its ~1 KB tool result, a user message), as an
# agent loop sends its whole history every turn. toolgate (all gates on,
# the embedded policy) in front of the repo's mock, pinned to one CPU; a
# keep-alive client sends the requests one after another and the figure is
# toolgate's CPU time (user + system, from /proc) over the requests.
#
# Usage: bash bench/history.sh [BINARY|nginx ...]   (default: target/release/toolgate nginx)
#   TURNS="0 10 20 40" N=600 MODE=stream|nonstream
# Several binaries are measured in turn at each length, for an A/B; `nginx`
# (no gating, proxy_buffering off, when installed) is the baseline of
# forwarding the same bytes, its CPU that of its master and worker.
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=(target/release/toolgate nginx)
TOOLGATE=target/release/toolgate
for b in "${BINS[@]}"; do [[ "$b" == nginx ]] || { TOOLGATE=$b; break; }; done
TURNS=${TURNS:-"0 10 20 40"}
N=${N:-600}
MODE=${MODE:-stream}
MOCK=127.0.0.1:9931
GATE=127.0.0.1:9932

[[ $# -gt 0 ]] || cargo build --release --quiet --bin toolgate
if [[ " ${BINS[*]} " == *" nginx "* ]] && ! command -v nginx >/dev/null; then
  echo "nginx is not installed: left out (apt-get install nginx-light)" >&2
  kept=()
  for b in "${BINS[@]}"; do [[ "$b" == nginx ]] || kept+=("$b"); done
  BINS=("${kept[@]}")
fi
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
"$TOOLGATE" mock --script bench/mock.toml --listen "$MOCK" >/dev/null 2>&1 &
mkdir -p "$tmp/nginx"
cat > "$tmp/nginx.conf" <<CONF
worker_processes 1;
error_log $tmp/nginx/error.log warn;
pid $tmp/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  client_max_body_size 16m;
  upstream mock { server $MOCK; keepalive 16; }
  server {
    listen $GATE;
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
CONF

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
def pids():
    # The process and its children (nginx's worker).
    kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    return [pid] + [int(k) for k in kids]
def cpu():
    t = 0
    for p in pids():
        f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        t += int(f[11]) + int(f[12])
    return t / os.sysconf("SC_CLK_TCK")
for _ in range(50):
    one()
time.sleep(0.2)
t0 = cpu()
for _ in range(n):
    one()
print(f"{len(body) / 1024:8.1f} {(cpu() - t0) / n * 1e6:10.0f}")
PY

printf '%-40s %6s %8s %10s\n' binary turns "KiB" "CPU µs/req"
for t in $TURNS; do
  for bin in "${BINS[@]}"; do
    if [[ "$bin" == nginx ]]; then
      taskset -c 0 nginx -p "$tmp/nginx" -c "$tmp/nginx.conf" -g 'daemon off;' >/dev/null 2>&1 &
    else
      TOOLGATE_BENCH_KEY=sk-bench TOOLGATE_LOG=error taskset -c 0 \
        "$bin" serve --config "$tmp/toolgate.toml" >/dev/null 2>&1 &
    fi
    pid=$!
    out=$(python3 "$tmp/client.py" "$pid" "$t" "$N" "$MODE" "${GATE##*:}")
    kill -INT "$pid" 2>/dev/null || true
    [[ "$bin" == nginx ]] && kill -QUIT "$pid" 2>/dev/null
    wait "$pid" || true
    printf '%-40s %6s %s\n' "$bin" "$t" "$out"
  done
done
