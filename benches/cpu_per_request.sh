#!/usr/bin/env bash
# CPU time per request of examples/tool_gateway (all its threads, kernel included), with
# IDEMPOTENCY=off and on (memory store), for first executions and replays of ~1 KiB JSON
# bodies driven by wrk on loopback: what the layer costs a request, free of wrk's share of the
# cores. With PROFILE=1 it also records each run with `perf record` under benches/profiles/,
# for `perf report --no-children --sort sym -i <file>`.
#
#   bash benches/cpu_per_request.sh            # 8 s per run
#
# Needs wrk and perf (apt-get install wrk linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-32}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is needed: apt-get install linux-perf" >&2; exit 1; }

cargo build --release --example tool_gateway >&2
gateway=target/release/examples/tool_gateway
port=$(free_port)
url="http://127.0.0.1:$port"
[ "${PROFILE:-0}" = 1 ] && mkdir -p benches/profiles

printf '| %-5s | %-15s | %9s | %12s |\n' mode workload "req/s" "CPU µs/req"
printf '| %-5s | %-15s | %9s | %12s |\n' --- --- ---: ---:
for mode in off on; do
  for workload in first_execution replay; do
    ADDR="127.0.0.1:$port" IDEMPOTENCY=$mode RUST_LOG=error "$gateway" > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do curl -s "$url/stats" > /dev/null && break; sleep 0.1; done
    checked_load wrk -t1 -c"$CONNECTIONS" -d2s -s "benches/wrk/$workload.lua" "$url" > /dev/null
    record=""
    if [ "${PROFILE:-0}" = 1 ]; then
      perf record -q -F 4000 -p "$pid" -o "benches/profiles/$mode-$workload.data" -- sleep "$DURATION" 2> /dev/null &
      record=$!
    fi
    perf stat -x, -e task-clock -p "$pid" -o "$pid.stat" -- sleep "$DURATION" &
    stat=$!
    rps=$(checked_load wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "benches/wrk/$workload.lua" "$url" | awk '/Requests\/sec/ { print $2 }')
    wait "$stat"
    [ -n "$record" ] && wait "$record"
    cpu_ms=$(awk -F, '$3 == "task-clock" || $3 ~ /task-clock/ { print $1; exit }' "$pid.stat")
    rm -f "$pid.stat"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    awk -v m="$mode" -v w="$workload" -v r="$rps" -v c="$cpu_ms" -v d="$DURATION" \
      'BEGIN { printf "| %-5s | %-15s | %9.0f | %12.1f |\n", m, w, r, c * 1000 / (r * d) }'
  done
done
