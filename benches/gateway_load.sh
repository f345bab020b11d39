#!/usr/bin/env bash
# HTTP load on loopback: examples/tool_gateway with IDEMPOTENCY=off, on (memory store), on
# (tiered Redis store) and on (tiered Postgres store), driven by wrk with ~1 KiB JSON bodies;
# first executions (every request a new intent) and replays (one intent). Prints requests/s,
# p50 and p99, the ratios to `off`, and the store's round trips a request (Redis commands, or
# Postgres transactions, counted by the server before and after each run). Then pgbench runs
# the claim and completion statements alone on the same database: the floor a request's
# Postgres work cannot go under. Transactional mode runs on examples/orders (each first
# execution inserts an order in its call's transaction, where the layer commits its record),
# with a pgbench floor of its own statements.
#
# The gateway keeps its request-id and trace layers on both sides, so its ratios are not the
# layer's alone: `benches/http_load.sh` measures those on a minimal app. This one gives the
# Redis rows and the memory store's figures after a unique-intent flood.
#
#   benches/gateway_load.sh                 # 10 s per run, 32 connections
#   DURATION=20 CONNECTIONS=64 benches/gateway_load.sh
#
# Needs wrk (apt-get install wrk); the Redis rows need redis-server and the Postgres rows the
# Debian postgresql package (each skipped without it; run as root, the server runs as the
# postgres user).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

cargo build --release --features redis,postgres --example tool_gateway --example orders >&2
gateway=target/release/examples/tool_gateway
orders=target/release/examples/orders
work=$(mktemp -d)
pids=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
as_postgres=()
[ "$(id -u)" = 0 ] && as_postgres=(runuser -u postgres --)
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # The server behind `runuser` is stopped by its own tool.
  if [ -d "$work/pg/data" ]; then
    "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" stop -m immediate > /dev/null 2>&1 || true
  fi
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

postgres_url=""
if [ -n "$pg_bin" ] && [ -x "$pg_bin/postgres" ]; then
  pg_port=$(free_port)
  mkdir -p "$work/pg"
  if [ "$(id -u)" = 0 ]; then
    chmod 755 "$work"
    chown postgres:postgres "$work/pg"
  fi
  "${as_postgres[@]}" "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres --no-sync > /dev/null
  "${as_postgres[@]}" "$pg_bin/postgres" -D "$work/pg/data" -p "$pg_port" -k "$work/pg" \
    -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off > "$work/pg.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" && break; sleep 0.1; done
  postgres_url="postgres://postgres@127.0.0.1:$pg_port/postgres"
fi

# The store's round trips so far: Redis commands, or Postgres transactions.
store_calls() { # mode
  case "$1" in
    on-redis) redis-cli -p "$redis_port" info stats | awk -F: '/^total_commands_processed/ { print $2 + 0 }' ;;
    on-postgres|transactional) "$pg_bin/psql" -qtA -h 127.0.0.1 -p "$pg_port" -U postgres -c \
      "select xact_commit from pg_stat_database where datname = 'postgres'" ;;
    *) echo 0 ;;
  esac
}

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
run_mode() { # name, env... (BINARY names another server; WRK_ORDERS=1 sends it orders)
  local name=$1; shift
  local port; port=$(free_port)
  local binary=${BINARY:-$gateway}
  env ADDR="127.0.0.1:$port" RUST_LOG=error "$@" "$binary" > "$work/$name.out" 2> "$work/$name.err" &
  local pid=$!
  pids+=($pid)
  wait_for_line "$work/$name.out" "listening on"
  local url="http://127.0.0.1:$port"
  checked_load wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s benches/wrk/replay.lua "$url" > /dev/null
  for workload in first_execution replay; do
    local before after requests
    before=$(store_calls "$name")
    checked_load wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "benches/wrk/$workload.lua" "$url" \
      > "$work/$name-$workload.wrk"
    after=$(store_calls "$name")
    requests=$(awk '/ requests in / { print $1 }' "$work/$name-$workload.wrk")
    trips=$(awk -v a="$after" -v b="$before" -v n="$requests" 'BEGIN { printf "%.2f", (a - b) / n }')
    echo "$name $workload $(summarise "$work/$name-$workload.wrk") $trips" >> "$results"
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
if [ -n "$postgres_url" ]; then
  # The statements of a first execution on random keys, written once: the claim, then the
  # record's write over the claim's row (in transactional mode, in one transaction with the
  # order's insert, as the layer and the example send them).
  claim="\\set k random(1, 1000000000000)
INSERT INTO idempotency_intents AS e (key, value, expires_at)
  VALUES (decode(lpad(to_hex(:k::bigint), 64, '0'), 'hex'), '\\x0152'::bytea, clock_timestamp() + interval '30 seconds')
  ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
  WHERE e.expires_at <= clock_timestamp();"
  complete="UPDATE idempotency_intents SET value = '\\x0143'::bytea, expires_at = clock_timestamp() + interval '1 day'
  WHERE key = decode(lpad(to_hex(:k::bigint), 64, '0'), 'hex') AND get_byte(value, 1) = 82;"
  # pgbench of a script over the same number of connections: first executions a second.
  floor_of() { # script
    "$pg_bin/pgbench" -n -M extended -h 127.0.0.1 -p "$pg_port" -U postgres \
      -c "$CONNECTIONS" -j 2 -T "$DURATION" -f "$1" postgres \
      > "$1.out" 2> "$1.err" || cat "$1.err" >&2
    awk '/^tps/ { print $3; exit }' "$1.out"
  }

  run_mode on-postgres IDEMPOTENCY=on POSTGRES_URL="$postgres_url"
  printf '%s\n%s\n' "$claim" "$complete" > "$work/floor.sql"
  floor=$(floor_of "$work/floor.sql")
  echo "pgbench floor: the claim and completion statements alone, ${floor:-?} first executions/s ($CONNECTIONS connections)" > "$work/floor"

  BINARY=$orders WRK_ORDERS=1 run_mode transactional DATABASE_URL="$postgres_url"
  printf "%s\nBEGIN;\nINSERT INTO orders (item) VALUES ('tea');\n%s\nCOMMIT;\n" "$claim" "$complete" \
    > "$work/floor-tx.sql"
  floor=$(floor_of "$work/floor-tx.sql")
  echo "pgbench floor, transactional: the claim, then the order and the record in one transaction, ${floor:-?} first executions/s" >> "$work/floor"
fi

echo
echo "wrk, ${DURATION}s per run, $CONNECTIONS connections, $THREADS thread(s), ~1 KiB JSON bodies, loopback"
echo
printf '| %-13s | %-15s | %9s | %8s | %8s | %10s | %12s |\n' mode workload "req/s" "p50 ms" "p99 ms" "vs off" "store trips"
printf '| %-13s | %-15s | %9s | %8s | %8s | %10s | %12s |\n' --- --- ---: ---: ---: ---: ---:
awk '
  { rows[NR] = $0; if ($1 == "off") base[$2] = $3 }
  END {
    for (i = 1; i <= NR; i++) {
      split(rows[i], f, " ")
      # The orders example does database work of its own: its floor is its measure, not `off`.
      ratio = base[f[2]] > 0 && f[1] != "transactional" ? sprintf("%.2f x", f[3] / base[f[2]]) : "-"
      printf "| %-13s | %-15s | %9d | %8.3f | %8.3f | %10s | %12s |\n", f[1], f[2], f[3], f[4], f[5], ratio, f[6]
    }
  }
' "$results"
echo
cat "$work/memory" 2>/dev/null || true
cat "$work/floor" 2>/dev/null || true
