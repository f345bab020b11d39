#!/usr/bin/env bash
# How close the tiered Redis store runs to Redis's own limit, in one run: what one redis-server
# sustains for the two scripts a first execution costs (CLAIM and COMPLETE, as the store runs
# them, read from src/store/redis/scripts.rs, on fresh keys, with a ~1 KiB record), measured
# with redis-benchmark, against first executions through examples/tool_gateway on the same
# server, driven by wrk with ~1 KiB bodies.
#
#   bash benches/redis_floor.sh                 # 8 s of wrk, 200 000 calls per script
#
# Needs redis-server, redis-cli, redis-benchmark (apt-get install redis-server redis-tools)
# and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

DURATION=${DURATION:-8}
CONNECTIONS=${CONNECTIONS:-16}
CALLS=${CALLS:-200000}
for tool in redis-server redis-cli redis-benchmark wrk; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done

cargo build --release --features redis --example tool_gateway >&2
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done

# The scripts as the store sends them.
script() {
  python3 - "$1" <<'PY'
import re, sys
source = open("src/store/redis/scripts.rs").read()
match = re.search(r"pub\(super\) static " + sys.argv[1] + r": LazyLock<Script>.*?r\"\n(.*?)\",\n", source, re.S)
print(match.group(1), end="")
PY
}
claim_sha=$(redis-cli -p "$port" script load "$(script CLAIM)")
complete_sha=$(redis-cli -p "$port" script load "$(script COMPLETE)")
running="xR$(printf 'r%.0s' $(seq 1 81))"
token=$(printf 't%.0s' $(seq 1 16))
record="xC$(printf 'b%.0s' $(seq 1 1200))"

per_second() { # redis-benchmark -q ends with "...: N requests per second, ..."
  tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{ print $1 }'
}
claims=$(redis-benchmark -p "$port" -q -c "$CONNECTIONS" -n "$CALLS" -r 100000000 \
  EVALSHA "$claim_sha" 1 "claim:__rand_int__" "$running" 30000 | per_second)
completes=$(redis-benchmark -p "$port" -q -c "$CONNECTIONS" -n "$CALLS" -r 100000000 \
  EVALSHA "$complete_sha" 1 "complete:__rand_int__" "$token" "$record" 86400000 | per_second)
redis-cli -p "$port" flushall >/dev/null

gateway_port=$(free_port)
ADDR="127.0.0.1:$gateway_port" IDEMPOTENCY=on REDIS_URL="redis://127.0.0.1:$port" RUST_LOG=error \
  target/release/examples/tool_gateway > "$work/gateway.out" 2>&1 &
pids+=($!)
wait_for_line "$work/gateway.out" "listening on"
url="http://127.0.0.1:$gateway_port"
checked_load wrk -t1 -c"$CONNECTIONS" -d2s -s benches/wrk/replay.lua "$url" > /dev/null
gateway=$(checked_load wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s benches/wrk/first_execution.lua "$url" \
  | awk '/Requests\/sec/ { print $2 }')

awk -v c="$claims" -v d="$completes" -v g="$gateway" 'BEGIN {
  both = 1 / (1 / c + 1 / d)
  printf "redis-benchmark, %s calls each: CLAIM %.0f/s, COMPLETE %.0f/s: Redis sustains %.0f first executions/s (one of each)\n", '"$CALLS"', c, d, both
  printf "tool_gateway on the tiered Redis store, wrk %ss: %.0f first executions/s, %.2f× of what Redis itself sustains\n", '"$DURATION"', g, g / both
}'
