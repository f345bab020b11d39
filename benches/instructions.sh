#!/usr/bin/env bash
# Instructions a first execution costs, counted by callgrind rather than timed: repeatable on a
# shared machine, where the rate and the CPU time of one build move by more than a change does
# between two. For this crate's layer as built now (`ours`) and as built at each commit named
# (`BASES="name=commit …"`), benches/peer's `calls` command sends RUNS times 200 and 1 200 first
# executions in process (~1 KiB bodies, one after another); a request costs the difference over
# 1 000. The median of the runs is printed, with their range: the hash maps' random seeds move a
# run by a few per cent.
#
#   BASES="base=e9e0d3c" bash benches/instructions.sh
#
# Needs valgrind (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
  for tree in "$work"/tree-*; do
    if [ -d "$tree" ]; then git worktree remove --force "$tree" 2>/dev/null || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

(cd benches/peer && cargo build --release --ignore-rust-version --target-dir ../../target/peer) >&2
cp target/peer/release/idempotency-peer-bench "$work/app-ours"
names=()
for spec in ${BASES:-}; do
  name=${spec%%=*} commit=${spec#*=}
  git worktree add --detach -q "$work/tree-$name" "$commit"
  (cd "$work/tree-$name/benches/peer" &&
    cargo build --release --ignore-rust-version --target-dir "$OLDPWD/target/peer-base") >&2
  cp target/peer-base/release/idempotency-peer-bench "$work/app-$name"
  names+=("$name")
done
names+=(ours)

# Instructions of `app calls ours N`, the whole process.
count() { # app, n
  valgrind --tool=callgrind --callgrind-out-file="$work/out" "$1" calls ours "$2" > /dev/null 2>&1
  awk '/^summary:/ { print $2; exit }' "$work/out"
}

printf '| %-12s | %16s | %20s |\n' build "instructions/req" "range of the runs"
printf '| %-12s | %16s | %20s |\n' --- ---: ---:
for name in "${names[@]}"; do
  per=()
  for _ in $(seq 1 "$RUNS"); do
    small=$(count "$work/app-$name" 200)
    large=$(count "$work/app-$name" 1200)
    per+=($(( (large - small) / 1000 )))
  done
  sorted=($(printf '%s\n' "${per[@]}" | sort -n))
  printf '| %-12s | %16s | %20s |\n' "$name" "${sorted[$(( RUNS / 2 ))]}" "${sorted[0]}–${sorted[$(( RUNS - 1 ))]}"
done
