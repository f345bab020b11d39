#!/usr/bin/env bash
# What relaying a protected MCP call's events costs idempotency-proxy: the proxy's CPU time per
# call (all its threads, kernel included, from `perf stat`) in front of an upstream whose
# tools/call answers stream PROGRESS progress notifications before the result, with 10 and
# with 0 of them, in one run, the two taking turns round by round. Every call is a new intent
# (first executions). The difference bounds the relay's cost from above: it also holds the
# reading of ten more events, which the layer did before it relayed them.
#
#   bash benches/relay_cpu.sh                 # 5 rounds of 6 s, 16 connections
#   ROUNDS=3 DURATION=4 bash benches/relay_cpu.sh
#
# Needs wrk and perf (apt-get install wrk linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-16}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is needed: apt-get install linux-perf" >&2; exit 1; }

cargo build --release -p tower-idempotency-proxy >&2
proxy=${CARGO_TARGET_DIR:-target}/release/idempotency-proxy
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# One round with `progress` notifications a call: "progress req/s cpu_us_per_call".
run() { # progress
  local progress=$1 upstream_port proxy_port url proxy_pid rps cpu_ms
  upstream_port=$(free_port)
  python3 benches/mcp_progress_upstream.py "$upstream_port" "$progress" > "$work/upstream.out" 2>&1 &
  pids+=($!)
  wait_for_line "$work/upstream.out" listening
  proxy_port=$(free_port)
  RUST_LOG=warn "$proxy" --upstream "http://127.0.0.1:$upstream_port" \
    --listen "127.0.0.1:$proxy_port" --mcp /mcp > "$work/proxy.out" 2>&1 &
  proxy_pid=$!
  pids+=($proxy_pid)
  wait_for_line "$work/proxy.out" listening
  url="http://127.0.0.1:$proxy_port"
  checked_load wrk -t1 -c"$CONNECTIONS" -d1s -s benches/wrk/mcp_call.lua "$url" > /dev/null
  perf stat -x, -e task-clock -p "$proxy_pid" -o "$work/stat" -- sleep "$DURATION" &
  local stat=$!
  rps=$(checked_load wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s benches/wrk/mcp_call.lua "$url" \
    | awk '/Requests\/sec/ { print $2 }')
  wait "$stat"
  cpu_ms=$(awk -F, '$3 ~ /task-clock/ { print $1; exit }' "$work/stat")
  awk -v p="$progress" -v r="$rps" -v c="$cpu_ms" -v d="$DURATION" \
    'BEGIN { printf "%s %.0f %.1f\n", p, r, c * 1000 / (r * d) }'
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=()
}

results="$work/results"
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
  for progress in 10 0; do
    run "$progress" >> "$results"
  done
  echo "round $round of $ROUNDS done" >&2
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '| %-22s | %9s | %14s |\n' "progress notifications" "req/s" "CPU µs a call"
printf '| %-22s | %9s | %14s |\n' --- ---: ---:
for progress in 10 0; do
  rps=$(awk -v p="$progress" '$1 == p { print $2 }' "$results" | median)
  cpu=$(awk -v p="$progress" '$1 == p { print $3 }' "$results" | median)
  printf '| %-22s | %9.0f | %14.1f |\n' "$progress" "$rps" "$cpu"
done
with=$(awk '$1 == 10 { print $3 }' "$results" | median)
without=$(awk '$1 == 0 { print $3 }' "$results" | median)
awk -v a="$with" -v b="$without" \
  'BEGIN { printf "\nten events read and relayed: %.1f µs a call, %.1f %% of a call with them\n", a - b, (a - b) * 100 / a }'
