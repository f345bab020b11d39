#!/usr/bin/env bash
# The HTTP comparison, side by side in one run: benches/peer's minimal axum app (one
# `send_email` handler, no other layers) served bare, behind this crate's
# `IdempotencyLayer::new()` and behind the `idempotent` crate's layer, both over their memory
# stores, and behind `digest`, a layer that only reads the body, canonicalises and hashes it and
# passes the request on (the floor of a layer that keys by content, over the same HTTP), and
# behind `keep`, a plain layer that keeps outcomes (described in `benches/peer/src/keep.rs`);
# driven by wrk on loopback with ~1 KiB JSON bodies: first executions (every request a new
# intent and key) and replays (one intent). The modes take turns round by round, each round
# starting from the next; a row is the median of the rounds and its ratio the median of each
# round's ratio to bare in that round. Pinned: the server on one core, wrk on the other;
# unpinned: both anywhere. Beside each rate, the server's CPU time a request (user and kernel,
# read from /proc): on a shared machine, time its core lost to other tenants slows the rate but
# is not counted there, so the ratios by CPU move less from round to round. Beside those, how
# often a request woke wrk (its voluntary context switches a request): a server that answers one
# request at a time wakes a reader on the same host for each answer, and where an idle core
# halts (most VMs) each wake-up costs the server an interrupt the hypervisor delivers.
#
# Last, the floor in process: canonicalising and hashing the same body, and the ratio a layer
# that did only that would reach on the pinned bare app if its time simply added to bare's
# (the digest row measures it instead); and the memory store after 300 000 new intents over
# 1 000 scopes, in process.
#
#   bash benches/http_load.sh                        # 3 rounds of 4 s, 16 connections
#   ROUNDS=5 DURATION=8 bash benches/http_load.sh
#   RESULTS=rounds.txt bash benches/http_load.sh      # also keeps each round's figures
#   MODES="bare ours ours-1mib" bash benches/http_load.sh   # some modes only (bare first)
#   MODES="bare ours observe" bash benches/http_load.sh     # observe mode beside enforcing
#   BASE=<commit> MODES="bare base ours" bash benches/http_load.sh
#                                                    # `base`: this crate's layer as built at
#                                                    # <commit>, beside today's, in one run
#   BASES="base-a=<commit> base-b=<commit>" MODES="bare base-a base-b ours" bash benches/http_load.sh
#                                                    # several builds of the layer in one run
#                                                    # (a trial: one without a piece each)
#
# Needs wrk, taskset and GNU time (apt-get install wrk util-linux time).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
CONNECTIONS=${CONNECTIONS:-16}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
command -v taskset >/dev/null || { echo "taskset is needed: apt-get install util-linux" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "GNU time is needed: apt-get install time" >&2; exit 1; }

# The peer crate declares a newer Rust than this crate; it builds with the one here.
(cd benches/peer && cargo build --release --ignore-rust-version --target-dir ../../target/peer) >&2
app=target/peer/release/idempotency-peer-bench
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  for tree in "$work"/tree-*; do
    if [ -d "$tree" ]; then git worktree remove --force "$tree" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
# The same app with this crate as it was at each commit named, served as the mode of its name
# (`BASE=<commit>` names mode `base`). They build one after another in one target folder, so
# that only this crate and the app are built again for each.
declare -A built_at
bases="${BASES:-}"
if [ -n "${BASE:-}" ]; then bases="base=$BASE $bases"; fi
for spec in $bases; do
  name=${spec%%=*} commit=${spec#*=}
  git worktree add --detach -q "$work/tree-$name" "$commit"
  (cd "$work/tree-$name/benches/peer" &&
    cargo build --release --ignore-rust-version --target-dir "$OLDPWD/target/peer-base") >&2
  cp target/peer-base/release/idempotency-peer-bench "$work/app-$name"
  built_at[$name]="$work/app-$name"
done

# The server's CPU time so far, user and kernel, in clock ticks: what it spent, whatever share
# of the core the machine's other tenants took meanwhile.
ticks_per_second=$(getconf CLK_TCK)
cpu_ticks() { # pid
  local stat
  stat=$(< "/proc/$1/stat")
  # The fields after the command's name, which is in parentheses: utime and stime are the
  # 12th and 13th of them.
  awk '{ print $12 + $13 }' <<< "${stat##*) }"
}

# One round of one mode: "round placement mode workload req/s cpu-µs-a-request
# wrk-wake-ups-a-request" lines, one per
# workload. Run in this shell, not a pipeline's, so that the cleanup trap knows the server.
run() { # round, placement, mode
  local round=$1 placement=$2 mode=$3 serve=() load=()
  if [ "$placement" = pinned ]; then serve=(taskset -c 0); load=(taskset -c 1); fi
  local port; port=$(free_port)
  local binary=$app served=$mode
  if [ -n "${built_at[$mode]:-}" ]; then
    binary=${built_at[$mode]} served=ours
  elif [[ "$mode" == base* ]]; then
    echo "mode $mode needs BASE=<commit> or BASES=\"$mode=<commit>\"" >&2; exit 1
  fi
  "${serve[@]}" "$binary" "$served" "127.0.0.1:$port" > "$work/server.out" 2>&1 &
  server=$!
  wait_for_line "$work/server.out" listening
  local url="http://127.0.0.1:$port"
  # A load that fails says what the server printed and whether it still runs.
  trap 'echo "round $round, $placement, $mode: the load failed; the server (pid $server, $(kill -0 "$server" 2>/dev/null && echo running || echo exited)) printed: $(cat "$work/server.out")" >&2' ERR
  # The replayed intent is first run on one connection: the peer answers 409 to a duplicate
  # sent while its first call is still running.
  checked_load "${load[@]}" wrk -t1 -c1 -d1s -s benches/peer/replay.lua "$url" > /dev/null
  checked_load "${load[@]}" wrk -t1 -c"$CONNECTIONS" -d1s -s benches/peer/replay.lua "$url" > /dev/null
  for workload in first_execution replay; do
    local before after report rps requests cpu_us
    before=$(cpu_ticks "$server")
    report=$(checked_load "${load[@]}" /usr/bin/time -o "$work/wrk.time" -f %w \
      wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "benches/peer/$workload.lua" "$url")
    after=$(cpu_ticks "$server")
    rps=$(awk '/Requests\/sec/ { print $2 }' <<< "$report")
    requests=$(awk '/ requests in / { print $1 }' <<< "$report")
    cpu_us=$(awk -v t=$((after - before)) -v hz="$ticks_per_second" -v n="$requests" \
      'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
    wakes=$(awk -v w="$(tail -n 1 "$work/wrk.time")" -v n="$requests" 'BEGIN { printf "%.3f", w / n }')
    echo "$round $placement $mode $workload $rps $cpu_us $wakes"
  done
  trap - ERR
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
}

# The app's modes to compare, bare first: the ratios are to it (and to the peer's, if it runs).
read -r -a modes <<< "${MODES:-bare digest keep ours peer}"
[ "${modes[0]}" = bare ] || { echo "MODES must start with bare: the ratios are to it" >&2; exit 1; }
results="$work/results"
: > "$results"
for round in $(seq 1 "$ROUNDS"); do
  for placement in pinned unpinned; do
    # Each round starts from the next mode, so that no mode always runs at the same point of
    # a round.
    for turn in "${!modes[@]}"; do
      run "$round" "$placement" "${modes[(round + turn) % ${#modes[@]}]}" >> "$results"
    done
  done
  echo "round $round of $ROUNDS done" >&2
done
if [ -n "${RESULTS:-}" ]; then cp "$results" "$RESULTS"; fi
floor_us=$("$app" floor)
flood=$("$app" flood)

echo
echo "wrk, $ROUNDS rounds of ${DURATION}s per row, $CONNECTIONS connections, ~1 KiB JSON bodies, loopback"
echo
awk -v floor_us="$floor_us" -v mode_list="${modes[*]}" '
  function median(list, n,    i, j, t, a) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function range(list, n,    i, a, lo, hi) {
    n = split(list, a, " "); lo = a[1]; hi = a[1]
    for (i = 2; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
    return sprintf("%.2f–%.2f", lo, hi)
  }
  { rps[$2, $3, $4, $1] = $5; cpu[$2, $3, $4, $1] = $6; woke[$2, $3, $4, $1] = $7; rounds[$1] = 1; seen[$2, $3, $4] = 1 }
  END {
    printf "| %-8s | %-14s | %-15s | %9s | %15s | %15s | %10s | %15s | %15s | %12s |\n", "placement", "mode", "workload", "req/s", "vs bare", "vs peer", "CPU µs/req", "by CPU vs bare", "by CPU vs peer", "wrk woken/req"
    printf "| %-8s | %-14s | %-15s | %9s | %15s | %15s | %10s | %15s | %15s | %12s |\n", "---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"
    split("pinned unpinned", places, " "); split("first_execution replay", loads, " ")
    n_modes = split(mode_list, modes, " ")
    for (p = 1; p <= 2; p++) for (w = 1; w <= 2; w++) for (m = 1; m <= n_modes; m++) {
      key = places[p] SUBSEP modes[m] SUBSEP loads[w]
      if (!(key in seen)) continue
      all = ""; vs_bare = ""; vs_peer = ""; spent = ""; cpu_bare = ""; cpu_peer = ""; wakes = ""
      for (r in rounds) {
        v = rps[places[p], modes[m], loads[w], r]; b = rps[places[p], "bare", loads[w], r]
        q = rps[places[p], "peer", loads[w], r]
        all = all " " v
        if (b > 0) vs_bare = vs_bare " " v / b
        if (q > 0 && b > 0) vs_peer = vs_peer " " (v / b) / (q / b)
        # By CPU, a ratio is the CPU time a request of the other over that of this one:
        # above 1, this one spends less.
        c = cpu[places[p], modes[m], loads[w], r]; cb = cpu[places[p], "bare", loads[w], r]
        cq = cpu[places[p], "peer", loads[w], r]
        spent = spent " " c
        wakes = wakes " " woke[places[p], modes[m], loads[w], r]
        if (c > 0) { cpu_bare = cpu_bare " " cb / c; cpu_peer = cpu_peer " " cq / c }
      }
      bare_cell = sprintf("%.2f× (%s)", median(vs_bare), range(vs_bare))
      # The columns against the peer, for the layers, when the peer ran.
      layer = modes[m] ~ /^(ours|keep|base)/ && (" " mode_list " ") ~ / peer /
      peer_cell = layer ? sprintf("%.2f× (%s)", median(vs_peer), range(vs_peer)) : "-"
      cpu_bare_cell = sprintf("%.2f× (%s)", median(cpu_bare), range(cpu_bare))
      cpu_peer_cell = layer ? sprintf("%.2f× (%s)", median(cpu_peer), range(cpu_peer)) : "-"
      printf "| %-8s | %-14s | %-15s | %9.0f | %15s | %15s | %10.2f | %15s | %15s | %12.3f |\n", places[p], modes[m], loads[w], median(all), bare_cell, peer_cell, median(spent), cpu_bare_cell, cpu_peer_cell, median(wakes)
      if (places[p] == "pinned" && modes[m] == "bare" && loads[w] == "first_execution") bare_rps = median(all)
    }
    bare_us = 1e6 / bare_rps
    printf "\nfloor: canonicalising and hashing the body in process takes %.2f µs; on the pinned bare app (%.1f µs a request) a layer that did only that would reach %.2f×\n", floor_us, bare_us, bare_us / (bare_us + floor_us)
  }
' "$results"
echo "memory store after a flood of new intents over many scopes: $flood"
