#!/usr/bin/env bash
# HTTP load on loopback: examples/tool_gateway with IDEMPOTENCY=off, on (memory store) and on
# (tiered Redis store), driven by wrk with ~1 KiB JSON bodies; first executions (every request a
# new intent) and replays (one intent). Prints requests/s, p50 and p99 and the ratios to `off`.
#
# The gateway keeps its request-id and trace layers on both sides, so its ratios are not the
# layer's alone: `benches/http_load.sh` measures those on a minimal app. This one gives the
# Redis rows and the memory store's figures after a unique-intent flood.
#
#   benches/gateway_load.sh                 # 10 s per run, 32 connections
#   DURATION=20 CONNECTIONS=64 benches/gateway_load.sh
#
# Needs wrk (apt-get install wrk); the Redis rows need redis-server (skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

cargo build --release --features redis --example tool_gateway >&2
gateway=target/release/examples/tool_gateway
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

redis_url=""
if command -v redis-server >/dev/null; then
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$work" --logfile "$work/redis.log" &
  pids+=($!)
  sleep 0.5
  redis_url="redis://127.0.0.1:$redis_port"
fi

# wrk's summary as "req/s p50_ms p99_ms".
summarise() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
      if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1000
      return v
    }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    $1 == "Requests/sec:" { rps = $2 }
    END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }
  ' "$1"
}

results="$work/results"
: > "$results"
run_mode() { # name, env...
  local name=$1; shift
  local port; port=$(free_port)
  env ADDR="127.0.0.1:$port" RUST_LOG=error "$@" "$gateway" > "$work/$name.out" 2> "$work/$name.err" &
  local pid=$!
  pids+=($pid)
  wait_for_line "$work/$name.out" "listening on"
  local url="http://127.0.0.1:$port"
  checked_load wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s benches/wrk/replay.lua "$url" > /dev/null
  for workload in first_execution replay; do
    checked_load wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "benches/wrk/$workload.lua" "$url" \
      > "$work/$name-$workload.wrk"
    echo "$name $workload $(summarise "$work/$name-$workload.wrk")" >> "$results"
  done
  if [ "$name" = "on-memory" ]; then
    local store_bytes rss
    store_bytes=$(curl -s "$url/metrics" | awk '$1 == "idempotency_memory_store_bytes" { print $2 }')
    rss=$(ps -o rss= -p "$pid" | tr -d ' ')
    echo "memory store after the unique-intent flood: ${store_bytes:-?} bytes kept (budget 67108864), gateway RSS $((rss / 1024)) MiB" > "$work/memory"
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

run_mode off IDEMPOTENCY=off
run_mode on-memory IDEMPOTENCY=on
if [ -n "$redis_url" ]; then
  run_mode on-redis IDEMPOTENCY=on REDIS_URL="$redis_url"
fi

echo
echo "wrk, ${DURATION}s per run, $CONNECTIONS connections, $THREADS thread(s), ~1 KiB JSON bodies, loopback"
echo
printf '| %-10s | %-15s | %9s | %8s | %8s | %10s |\n' mode workload "req/s" "p50 ms" "p99 ms" "vs off"
printf '| %-10s | %-15s | %9s | %8s | %8s | %10s |\n' --- --- ---: ---: ---: ---:
awk '
  { rows[NR] = $0; if ($1 == "off") base[$2] = $3 }
  END {
    for (i = 1; i <= NR; i++) {
      split(rows[i], f, " ")
      ratio = base[f[2]] > 0 ? sprintf("%.2f x", f[3] / base[f[2]]) : "-"
      printf "| %-10s | %-15s | %9d | %8.3f | %8.3f | %10s |\n", f[1], f[2], f[3], f[4], f[5], ratio
    }
  }
' "$results"
echo
cat "$work/memory" 2>/dev/null || true
