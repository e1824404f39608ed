#!/usr/bin/env bash
# The production-shaped benchmark: many long-lived streams, an event every
# DELAY_MS, as a provider streams tokens; toolgate (all gates on, the
# embedded default policy, audit to a file) and nginx (no gating, no
# buffering) side by side in one run, in front of the same paced mock, over
# plain HTTP and over TLS (the mock offers HTTP/2 and HTTP/1.1 by ALPN;
# toolgate takes HTTP/2, nginx and the direct baseline speak HTTP/1.1).
#
# usage: bash bench/paced.sh [STREAMS ...]        (default: 250 1000 2000)
# PROXIES may add toolgate-sentinel: toolgate with every call judged by
# the sentinel, the mock answering the judge after 150 ms (bench/paced.toml),
# each request asking a question of its own; and the peers litellm
# (LiteLLM's proxy from PyPI, one worker) and portkey (Portkey's gateway
# from npm, on Node), installed under PEERS=target/bench/peers when missing.
# toolgate-h1 offers a TLS upstream HTTP/1.1 alone ([upstream] http2 = false).
# `floor` is examples/floor.rs: hyper's server and client carrying the
# bytes and reading none of them, what any hyper-based proxy costs at the
# least (plain HTTP upstreams only).
# DELAY_MS=0 is the unpaced shape (every event at once). toolgate-limit and
# toolgate-redis take a token from a [[limit]] on every call, counted in
# memory or in a local redis-server ([state] backend = "redis").
# env:   DELAY_MS=20 DURATION=10 WARMUP=3 PROXIES="direct nginx toolgate"
#        UPSTREAMS="http https" RAMP_MS=0 PIN=auto PROXY_CPUS=0 LOAD_CPUS=1 ROUNDS=1
#        OUT=target/bench/paced-<time> TOOLGATE_BIN=target/release/toolgate (another build, for an A/B)
# Needs: cargo, python3, curl; nginx (installed with apt-get when missing;
# left out when it cannot be). Prints a table and writes table.md,
# results.jsonl and plot.svg (p99 added latency against concurrent streams,
# one line per proxy and upstream) to OUT.
#
# The load generator (examples/sseload.rs) opens every connection at once
# (RAMP_MS spreads them), posts a streamed chat request on each, reads the
# events as they come and posts again at [DONE]; it reports first-byte and
# last-byte latency of the requests sent after its first WARMUP seconds
# (the connections stay open: the steady state is measured). "Added"
# is a proxy's p99 minus the direct p99 at the same streams and upstream.
# A run's p99 is mostly its worst moment (one cohort of starts, a neighbour
# on the core): ROUNDS=N measures every proxy N times, in turn, and the
# report gives the medians, with each p99's range.
set -euo pipefail
cd "$(dirname "$0")/.."
LEVELS=("$@")
[[ ${#LEVELS[@]} -gt 0 ]] || LEVELS=(250 1000 2000)
: "${DELAY_MS:=20}" "${DURATION:=10}" "${WARMUP:=3}" "${RAMP_MS:=0}"
: "${PROXIES:=direct nginx toolgate}" "${UPSTREAMS:=http https}"
: "${PIN:=auto}" "${PROXY_CPUS:=0}" "${LOAD_CPUS:=1}" "${ROUNDS:=1}"
: "${OUT:=target/bench/paced-$(date +%Y%m%d-%H%M%S)}"
MOCK_PORT=18800 PROXY_PORT=18801 ADMIN_PORT=18802 REDIS_PORT=18803 REDIS_PID=""

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
if [[ "$PIN" == auto ]]; then PIN=$(($(nproc) >= 2 ? 1 : 0)); fi
# Prefixes that pin a command (taskset execs it: $! is the command's PID).
ON_PROXY=() ON_LOAD=()
if [[ "$PIN" == 1 ]]; then ON_PROXY=(taskset -c "$PROXY_CPUS") ON_LOAD=(taskset -c "$LOAD_CPUS"); fi

# ------------------------------------------------------------------ tools
if [[ " $PROXIES " == *" toolgate-redis "* ]] && ! command -v redis-server >/dev/null; then
  log "installing redis-server"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null 2>&1) ||
    { log "redis-server could not be installed: toolgate-redis left out"; PROXIES=${PROXIES//toolgate-redis/}; }
fi
if [[ " $PROXIES " == *" nginx "* ]] && ! command -v nginx >/dev/null; then
  log "installing nginx-light"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null 2>&1) ||
    { log "nginx could not be installed: left out"; PROXIES=${PROXIES//nginx/}; }
fi
# Peers from their registries: LiteLLM's proxy (PyPI), Portkey's gateway (npm).
: "${PEERS:=$PWD/target/bench/peers}"
mkdir -p "$PEERS"
if [[ " $PROXIES " == *" litellm "* && ! -x "$PEERS/litellm/bin/litellm" ]]; then
  log "installing LiteLLM's proxy into $PEERS/litellm"
  { python3 -m venv "$PEERS/litellm" && "$PEERS/litellm/bin/pip" install -q 'litellm[proxy]'; } >"$PEERS.litellm.log" 2>&1 ||
    { log "LiteLLM could not be installed (see $PEERS.litellm.log): left out"; PROXIES=${PROXIES//litellm/}; }
fi
if [[ " $PROXIES " == *" portkey "* && ! -d "$PEERS/portkey/node_modules/@portkey-ai/gateway" ]]; then
  log "installing Portkey's gateway into $PEERS/portkey"
  # 1.15.2 as released fails every streamed request on Node 20 (it appends
  # headers to the provider's immutable response: Portkey-AI/gateway#1550);
  # the change of its pull request #1551 is applied to the built file.
  (mkdir -p "$PEERS/portkey" && cd "$PEERS/portkey" && npm init -y && npm install @portkey-ai/gateway@1.15.2 &&
    sed -i 's/this.updateHeaders(i,n.cacheStatus,o),{response:i,/(r\&\&(i=new Response(i.body,{status:i.status,statusText:i.statusText,headers:new Headers(i.headers)}))),this.updateHeaders(i,n.cacheStatus,o),{response:i,/' \
      node_modules/@portkey-ai/gateway/build/start-server.js &&
    grep -q 'i=new Response(i.body' node_modules/@portkey-ai/gateway/build/start-server.js) >"$PEERS.portkey.log" 2>&1 ||
    { log "Portkey's gateway could not be installed (see $PEERS.portkey.log): left out"; PROXIES=${PROXIES//portkey/}; }
fi
log "building toolgate and the load generator"
cargo build --release --quiet --bin toolgate --example sseload --example floor
TOOLGATE=${TOOLGATE_BIN:-$PWD/target/release/toolgate}
LOAD=$PWD/target/release/examples/sseload
FLOOR=$PWD/target/release/examples/floor
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
"$TOOLGATE" certs dev --out "$OUT/certs" --force >/dev/null
# Each request asks a question of its own ({seq}: its number), so a judge's
# cache never answers it.
cat >"$OUT/body.json" <<'JSON'
{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"What is the weather in San Francisco? (request {seq})"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string"},"days":{"type":"integer"},"include_hourly":{"type":"boolean"}},"required":["location"]}}}]}
JSON
RESULTS=$OUT/results.jsonl
: >"$RESULTS"
MOCK_PID="" PROXY_PID=""
stop() { # pid
  [[ -n "$1" ]] || return 0
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() { stop "$PROXY_PID"; stop "$MOCK_PID"; stop "$REDIS_PID"; }
trap cleanup EXIT

# CPU seconds (user + system) and resident KiB of a process and its
# children (nginx's worker).
tree() { echo "$1"; pgrep -P "$1" || true; }
cpu_of() { for p in $(tree "$1"); do cat "/proc/$p/stat"; done | awk '{s += $14 + $15} END {print s / 100}'; }
rss_of() { for p in $(tree "$1"); do cat "/proc/$p/status" 2>/dev/null || true; done | awk '/^VmRSS/ {s += $2} END {print s}'; }
# Milliseconds its threads were ready to run but waited for the CPU (other
# work on the proxy's core takes it: a run where that is large says so).
waited_of() { for p in $(tree "$1"); do cat /proc/"$p"/task/*/schedstat; done 2>/dev/null | awk '{s += $2} END {print s / 1e6}'; }

start_mock() { # scheme
  local tls=()
  [[ "$1" == https ]] && tls=(--tls-cert "$OUT/certs/server.pem" --tls-key "$OUT/certs/server-key.pem")
  "${ON_LOAD[@]}" "$TOOLGATE" mock --listen "127.0.0.1:$MOCK_PORT" --script bench/paced.toml \
    --event-delay-ms "$DELAY_MS" "${tls[@]}" >"$OUT/mock-$1.log" 2>&1 &
  MOCK_PID=$!
  for _ in $(seq 50); do grep -q listening "$OUT/mock-$1.log" 2>/dev/null && return 0; sleep 0.1; done
  log "the mock did not start (see $OUT/mock-$1.log)"; exit 1
}

start_proxy() { # name scheme streams -> sets PROXY_PID, URL and HDRS
  local name=$1 scheme=$2 streams=$3 dir=$OUT/$1-$2-$3${ROUND_DIR:-}
  mkdir -p "$dir"
  HDRS=()
  local host=127.0.0.1
  [[ "$scheme" == https ]] && host=localhost
  case $name in
    direct)
      PROXY_PID=""
      URL=$scheme://$host:$MOCK_PORT/v1/chat/completions
      return 0 ;;
    toolgate|toolgate-h1|toolgate-sentinel|toolgate-limit|toolgate-redis)
      local judge=""
      if [[ "$name" == toolgate-limit || "$name" == toolgate-redis ]]; then
        # Every call takes a token from one [[limit]] (never exceeded): in
        # this process's buckets, or in a local Redis shared by replicas.
        mkdir -p "$dir/policy"
        cp policies/default.toml "$dir/policy/00-default.toml"
        printf '[[limit]]\nmatch = "get_weather"\nkey = "global"\nrate = "1000000/second"\n' \
          >"$dir/policy/10-limit.toml"
        judge="[policy]
dir = \"$dir/policy\""
        if [[ "$name" == toolgate-redis ]]; then
          "${ON_LOAD[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            >"$dir/redis.log" 2>&1 &
          REDIS_PID=$!
          judge="$judge

[state]
backend = \"redis\"
url = \"redis://127.0.0.1:$REDIS_PORT\""
        fi
      fi
      if [[ "$name" == toolgate-sentinel ]]; then
        # The call is judged: the mock answers the judge after JUDGE_MS.
        mkdir -p "$dir/policy"
        cp policies/default.toml "$dir/policy/00-default.toml"
        printf '[[rule]]\nname = "judge-weather"\ntools = "get_weather"\nverdict = "allow"\nrequire = ["sentinel"]\nfail = "closed"\n' \
          >"$dir/policy/10-sentinel.toml"
        judge="[policy]
dir = \"$dir/policy\"

[judge]
base_url = \"$scheme://$host:$MOCK_PORT/v1\"
api_key_env = \"BENCH_UPSTREAM_KEY\"
timeout_ms = 5000
max_concurrent = $((streams * 2 + 64))"
      fi
      cat >"$dir/toolgate.toml" <<CFG
[listen]
addr = "127.0.0.1:$PROXY_PORT"
admin = "127.0.0.1:$ADMIN_PORT"

[upstream]
base_url = "$scheme://$host:$MOCK_PORT/v1"
api_key_env = "BENCH_UPSTREAM_KEY"
$([[ "$scheme" == https ]] && echo "ca_file = \"$OUT/certs/ca.pem\"")
$([[ "$name" == toolgate-h1 ]] && echo "http2 = false")

[limits]
max_streams = $((streams * 2 + 64))
max_connections = $((streams * 2 + 64))

[audit]
path = "$dir/audit.jsonl"

$judge
CFG
      BENCH_UPSTREAM_KEY=sk-bench RUST_LOG=error "${ON_PROXY[@]}" "$TOOLGATE" serve \
        --config "$dir/toolgate.toml" >"$dir/proxy.log" 2>&1 &
      PROXY_PID=$! ;;
    floor)
      "${ON_PROXY[@]}" "$FLOOR" "127.0.0.1:$PROXY_PORT" "127.0.0.1:$MOCK_PORT" >"$dir/proxy.log" 2>&1 &
      PROXY_PID=$! ;;
    nginx)
      mkdir -p "$dir/tmp"
      local up="proxy_pass http://mock;"
      [[ "$scheme" == https ]] && up="proxy_pass https://mock;
      proxy_ssl_trusted_certificate $OUT/certs/ca.pem; proxy_ssl_verify on;
      proxy_ssl_name localhost; proxy_ssl_server_name on; proxy_ssl_session_reuse on;"
      cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile 65536;
error_log $dir/error.log warn;
pid $dir/nginx.pid;
events { worker_connections 65536; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_requests 1000000;
  upstream mock { server 127.0.0.1:$MOCK_PORT; keepalive $((streams + 64)); keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$PROXY_PORT backlog=4096;
    location / {
      $up
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
CONF
      "${ON_PROXY[@]}" nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/proxy.log" 2>&1 &
      PROXY_PID=$! ;;
    litellm)
      # LiteLLM's proxy, one worker, the mock as an OpenAI-compatible model.
      cat >"$dir/litellm.yaml" <<YAML
model_list:
  - model_name: mock-model
    litellm_params:
      model: openai/mock-model
      api_base: $scheme://$host:$MOCK_PORT/v1
      api_key: sk-bench
litellm_settings:
  drop_params: true
general_settings:
  master_key: sk-bench-master-key-0123456789
YAML
      HDRS=(--header "authorization: Bearer sk-bench-master-key-0123456789")
      LITELLM_LOCAL_MODEL_COST_MAP=True SSL_CERT_FILE=$OUT/certs/ca.pem REQUESTS_CA_BUNDLE=$OUT/certs/ca.pem \
        "${ON_PROXY[@]}" "$PEERS/litellm/bin/litellm" --config "$dir/litellm.yaml" \
        --host 127.0.0.1 --port "$PROXY_PORT" --num_workers 1 >"$dir/proxy.log" 2>&1 &
      PROXY_PID=$! ;;
    portkey)
      # Portkey's gateway (Node), told per request where the provider is.
      HDRS=(--header "x-portkey-provider: openai" --header "x-portkey-custom-host: $scheme://$host:$MOCK_PORT/v1"
            --header "authorization: Bearer sk-bench")
      NODE_ENV=production NODE_EXTRA_CA_CERTS=$OUT/certs/ca.pem "${ON_PROXY[@]}" node \
        "$PEERS/portkey/node_modules/@portkey-ai/gateway/build/start-server.js" \
        --port="$PROXY_PORT" --headless >"$dir/proxy.log" 2>&1 &
      PROXY_PID=$! ;;
    *) log "unknown proxy $name"; exit 2 ;;
  esac
  URL=http://127.0.0.1:$PROXY_PORT/v1/chat/completions
  local h curl_h=()
  for h in "${HDRS[@]}"; do [[ "$h" == --header ]] || curl_h+=(-H "$h"); done
  for _ in $(seq 300); do
    curl -s -f -o /dev/null -m 5 "$URL" -H 'content-type: application/json' "${curl_h[@]}" \
      --data '{"model":"mock-model","stream":true,"messages":[{"role":"user","content":"hi"}]}' && return 0
    sleep 0.1
  done
  log "$name did not start (see $dir/proxy.log)"; exit 1
}

load() { # url streams -> JSON line; runs WARMUP seconds, then DURATION measured
  "${ON_LOAD[@]}" "$LOAD" "$1" "$2" "$DURATION" --warmup "$WARMUP" --ramp-ms "$RAMP_MS" \
    --ca "$OUT/certs/ca.pem" --body "$OUT/body.json" "${HDRS[@]}"
}

for scheme in $UPSTREAMS; do
  start_mock "$scheme"
  for n in "${LEVELS[@]}"; do
    for round in $(seq "$ROUNDS"); do
    ROUND_DIR=""; [[ "$ROUNDS" -gt 1 ]] && ROUND_DIR=-r$round
    for name in $PROXIES; do
      [[ "$name" == floor && "$scheme" == https ]] && continue
      start_proxy "$name" "$scheme" "$n"
      idle=0; [[ -n "$PROXY_PID" ]] && idle=$(rss_of "$PROXY_PID")
      # One load generator: its connections stay open from the warm-up into
      # the measured run, so the measured streams are the steady state, not
      # a thousand new connections at once (a second generator would open
      # them all again, and that one burst would set the p99).
      load "$URL" "$n" >"$OUT/load.json" &
      LOAD_PID=$!
      sleep "$WARMUP"
      c0=0 w0=0; [[ -n "$PROXY_PID" ]] && { c0=$(cpu_of "$PROXY_PID"); w0=$(waited_of "$PROXY_PID"); }
      # Resident memory while the streams are open: the most of samples
      # taken every half second through the measured run (read after the
      # run, the streams have closed and the allocator is giving back).
      rss=0
      while kill -0 "$LOAD_PID" 2>/dev/null; do
        if [[ -n "$PROXY_PID" ]]; then
          r=$(rss_of "$PROXY_PID")
          if ((r > rss)); then rss=$r; fi
        fi
        sleep 0.5
      done
      wait "$LOAD_PID"
      line=$(cat "$OUT/load.json")
      c1=0 w1=0
      [[ -n "$PROXY_PID" ]] && { c1=$(cpu_of "$PROXY_PID"); w1=$(waited_of "$PROXY_PID"); }
      [[ "$name" == toolgate* ]] && curl -s -m 5 "http://127.0.0.1:$ADMIN_PORT/metrics" \
        >"$OUT/$name-$scheme-$n$ROUND_DIR/metrics.txt" || true
      python3 - "$line" "$name" "$scheme" "$n" "$round" "$c0" "$c1" "$idle" "$rss" "$w0" "$w1" >>"$RESULTS" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
name, scheme, n, rnd = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
c0, c1, idle, rss, w0, w1 = map(float, sys.argv[6:])
d.update(proxy=name, upstream=scheme, streams=n, round=rnd,
         cpu_us_per_request=round((c1 - c0) * 1e6 / max(d["requests"], 1), 1) if name != "direct" else None,
         waited_ms=round(w1 - w0, 1) if name != "direct" else None,
         rss_idle_kib=int(idle), rss_kib=int(rss))
print(json.dumps(d))
PY
      log "$scheme $n $name: $(tail -1 "$RESULTS" | cut -c1-200)"
      stop "$PROXY_PID"; PROXY_PID=""; stop "$REDIS_PID"; REDIS_PID=""
    done
    done
  done
  stop "$MOCK_PID"; MOCK_PID=""
done
python3 bench/paced_report.py "$OUT"
