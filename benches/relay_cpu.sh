#!/usr/bin/env bash
# What relaying a protected MCP call's events costs idempotency-proxy: the proxy's CPU time per
# call (all its threads, kernel included, from `perf stat`) in front of an upstream whose
# tools/call answers stream progress notifications before the result. Every call is a new
# intent (a first execution). In one run, the modes taking turns round by round:
#
# - `10`: this build, ten notifications a call, relayed to the caller as they come;
# - `0`: this build, none: the difference is what reading and relaying ten events costs;
# - `base-10`, with BASE=<commit>: that commit's build, ten notifications a call: with a
#   commit from before the relay (which read the events and dropped them), the difference to
#   `10` is what relaying them costs.
#
#   bash benches/relay_cpu.sh                      # 5 rounds of 6 s, 16 connections
#   BASE=30df5f7 ROUNDS=5 bash benches/relay_cpu.sh
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

target=${CARGO_TARGET_DIR:-$(pwd)/target}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "${BASE:-}" ] && git worktree remove --force "$work/base" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
modes="10 0"
if [ -n "${BASE:-}" ]; then
  # Built in a worktree of its own over the same target folder: only the workspace's crates
  # build again.
  git worktree add -q --detach "$work/base" "$BASE"
  (cd "$work/base" && CARGO_TARGET_DIR="$target" cargo build --release -p tower-idempotency-proxy) >&2
  cp "$target/release/idempotency-proxy" "$work/proxy-base"
  modes="10 base-10 0"
fi
CARGO_TARGET_DIR="$target" cargo build --release -p tower-idempotency-proxy >&2
cp "$target/release/idempotency-proxy" "$work/proxy-head"

# One round of `mode`: "mode req/s cpu_us_per_call".
run() { # mode
  local mode=$1 progress=${1#base-} proxy="$work/proxy-head" upstream_port proxy_port url proxy_pid rps cpu_ms
  [ "$mode" != "$progress" ] && proxy="$work/proxy-base"
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
  awk -v p="$mode" -v r="$rps" -v c="$cpu_ms" -v d="$DURATION" \
    'BEGIN { printf "%s %.0f %.1f\n", p, r, c * 1000 / (r * d) }'
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=()
}

results="$work/results"
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
  for mode in $modes; do
    run "$mode" >> "$results"
  done
  echo "round $round of $ROUNDS done" >&2
done

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
of() { awk -v m="$1" -v f="$2" '$1 == m { print $f }' "$results" | median; }
printf '| %-8s | %-24s | %9s | %14s |\n' mode "progress notifications" "req/s" "CPU µs a call"
printf '| %-8s | %-24s | %9s | %14s |\n' --- --- ---: ---:
for mode in $modes; do
  printf '| %-8s | %-24s | %9.0f | %14.1f |\n' "$mode" "${mode#base-}" "$(of "$mode" 2)" "$(of "$mode" 3)"
done
awk -v a="$(of 10 3)" -v b="$(of 0 3)" \
  'BEGIN { printf "\nten events read and relayed: %.1f µs a call, %.1f %% of a call with them\n", a - b, (a - b) * 100 / a }'
if [ -n "${BASE:-}" ]; then
  awk -v a="$(of 10 3)" -v b="$(of base-10 3)" \
    'BEGIN { printf "relaying them, against %s: %.1f µs a call, %.1f %% of a call\n", ENVIRON["BASE"], a - b, (a - b) * 100 / a }'
fi
