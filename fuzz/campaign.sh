#!/usr/bin/env bash
# A fuzzing campaign: each target for SECONDS (default 600) with its corpus under corpus/, on
# the nightly toolchain where rustup has one (else the stable one, with RUSTC_BOOTSTRAP=1).
# Prints, per target, the build's time, the executions, the edges covered and the crashes
# found (files under artifacts/); exits non-zero when any target crashed.
#
#   bash fuzz/campaign.sh [SECONDS] [TARGET...]     (every target when none is named)
#
# FUZZ_SANITIZER picks cargo fuzz's sanitizer (default none: the crate has no unsafe code,
# and a panic is what the targets look for); FUZZ_MAX_LEN the longest input (default 4096);
# FUZZ_TARGET_DIR where the instrumented build goes (default fuzz/target), so that it can be
# kept between checkouts.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-600}"
shift || true
sanitizer="${FUZZ_SANITIZER:-none}"
# The fuzz crate's builds stay in its own target dir, whatever the workspace's is.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$(pwd)/target}"
max_len="${FUZZ_MAX_LEN:-4096}"

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list)
fi

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target" "artifacts/$target"
  found_before="$(find "artifacts/$target" -type f | wc -l)"
  start="$(date +%s)"
  "${fuzz[@]}" build -s "$sanitizer" "$target"
  built="$(($(date +%s) - start))"
  start="$(date +%s)"
  status=0
  "${fuzz[@]}" run -s "$sanitizer" "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -print_final_stats=1 \
    >"$logs/$target" 2>&1 || status=$?
  ran="$(($(date +%s) - start))"
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$target" | tail -n 1)"
  # The last status line libFuzzer printed: `#N DONE cov: E ft: F corp: ...`.
  edges="$(grep -o 'cov: [0-9]*' "$logs/$target" | tail -n 1 | cut -d' ' -f2)"
  crashes="$(($(find "artifacts/$target" -type f | wc -l) - found_before))"
  if [ "$status" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    failed=1
    tail -n 60 "$logs/$target" >&2
  fi
  line="$(printf '%-14s built in %4ss, ran %4ss: %12s executions, %6s edges, %s crashes (exit %s)' \
    "$target" "$built" "$ran" "${executions:-?}" "${edges:-?}" "$crashes" "$status")"
  echo "$line"
  summary+=("$line")
done

echo
echo "fuzzing campaign, ${seconds}s a target:"
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "a target crashed: see its artifacts under fuzz/artifacts/" >&2
  exit 1
fi
