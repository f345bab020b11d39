#!/usr/bin/env bash
# idempotency-proxy under load, in one run: benches/peer's minimal axum app (one
# `send_email` handler) as the upstream, reached directly, through the proxy with protection
# off (every path passed through) and through the proxy with it on (the memory store), driven
# by wrk on loopback with ~1 KiB JSON bodies: first executions (every request a new intent)
# and replays (one intent). The modes take turns round by round; a row gives the median of
# the rounds' throughput, p50 and p99 latency, and the median of each round's throughput
# ratio to the direct upstream. Upstream, proxy and wrk share this machine's cores.
#
#   bash benches/proxy_load.sh                       # 3 rounds of 4 s, 16 connections
#   ROUNDS=5 DURATION=8 bash benches/proxy_load.sh
#
# Needs wrk (apt-get install wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
CONNECTIONS=${CONNECTIONS:-16}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

cargo build --release -p tower-idempotency-proxy >&2
(cd benches/peer && cargo build --release --ignore-rust-version --target-dir ../../target/peer) >&2
proxy=target/release/idempotency-proxy
app=target/peer/release/idempotency-peer-bench
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

printf '[defaults]\nmode = "pass"\n' > "$work/off.toml"
printf '# the defaults: every path protected\n' > "$work/on.toml"

# wrk's latency distribution line for a percentile, in microseconds.
percentile() { # file, "50%" or "99%"
  awk -v p="$2" '$1 == p {
    v = $2; unit = v; sub(/[0-9.]+/, "", unit); sub(/[a-z]+$/, "", v)
    if (unit == "us") print v; else if (unit == "ms") print v * 1000; else if (unit == "s") print v * 1e6
  }' "$1"
}

# One round of one mode: "round mode workload req/s p50_us p99_us" lines. Run in this shell,
# not a pipeline's, so that the cleanup trap knows its processes.
run() { # round, mode
  local round=$1 mode=$2 upstream_port proxy_port url
  upstream_port=$(free_port)
  "$app" bare "127.0.0.1:$upstream_port" > "$work/upstream.out" 2>&1 &
  pids+=($!)
  wait_for_line "$work/upstream.out" listening
  url="http://127.0.0.1:$upstream_port"
  if [ "$mode" != direct ]; then
    proxy_port=$(free_port)
    RUST_LOG=warn "$proxy" --upstream "$url" --listen "127.0.0.1:$proxy_port" \
      --config "$work/$mode.toml" > "$work/proxy.out" 2>&1 &
    pids+=($!)
    wait_for_line "$work/proxy.out" listening
    url="http://127.0.0.1:$proxy_port"
  fi
  checked_load wrk -t1 -c"$CONNECTIONS" -d1s -s benches/peer/replay.lua "$url" > /dev/null
  for workload in first_execution replay; do
    checked_load wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "benches/peer/$workload.lua" "$url" > "$work/wrk.out"
    echo "$round $mode $workload $(awk '/Requests\/sec/ { print $2 }' "$work/wrk.out") \
$(percentile "$work/wrk.out" "50%") $(percentile "$work/wrk.out" "99%")"
  done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=()
}

results="$work/results"
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
  for mode in direct off on; do
    run "$round" "$mode" >> "$results"
  done
  echo "round $round of $ROUNDS done" >&2
done

echo
echo "wrk, $ROUNDS rounds of ${DURATION}s per row, $CONNECTIONS connections, ~1 KiB JSON bodies, loopback"
echo "direct: the upstream alone; off: through the proxy, every path passed through; on: protected, memory store"
echo
awk '
  function median(list, n,    i, j, t, a) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { rps[$2, $3, $1] = $4; p50[$2, $3, $1] = $5; p99[$2, $3, $1] = $6; rounds[$1] = 1 }
  END {
    printf "| %-6s | %-15s | %9s | %9s | %9s | %10s |\n", "mode", "workload", "req/s", "p50 µs", "p99 µs", "vs direct"
    printf "| %-6s | %-15s | %9s | %9s | %9s | %10s |\n", "---", "---", "---:", "---:", "---:", "---:"
    split("first_execution replay", loads, " "); split("direct off on", modes, " ")
    for (w = 1; w <= 2; w++) for (m = 1; m <= 3; m++) {
      all = ""; a50 = ""; a99 = ""; ratio = ""
      for (r in rounds) {
        v = rps[modes[m], loads[w], r]; d = rps["direct", loads[w], r]
        all = all " " v; a50 = a50 " " p50[modes[m], loads[w], r]; a99 = a99 " " p99[modes[m], loads[w], r]
        if (d > 0) ratio = ratio " " v / d
      }
      printf "| %-6s | %-15s | %9.0f | %9.0f | %9.0f | %9.2f× |\n", modes[m], loads[w], median(all), median(a50), median(a99), median(ratio)
    }
  }
' "$results"
