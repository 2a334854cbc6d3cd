#!/usr/bin/env bash
# Runs every fuzz target for a bounded time: `make fuzz` (FUZZ_SECONDS each, 60 by default) and the
# short pass of `make test`. Usage: tests/fuzz/run.sh BUILD_DIR SECONDS
#
# The targets are those with a seed corpus tests/fuzz/corpus/<target>/. Each starts from its seeds
# and from tests/fuzz/regressions/<target>/ (the inputs of past findings, run first), and keeps
# what it discovers in BUILD_DIR/fuzz-corpus/<target>/, so that later runs on this machine go on
# from there. A finding (crash, broken property, leak, an input running over 5 s, or one
# allocation over 64 MB) is written to BUILD_DIR/fuzz-findings/<target>/ and fails the run: turn
# it into a regression input and test (tests/fuzz/README.md). The limits are the fuzzing guarantee
# made concrete: no message may end, wedge or grow a process.
set -uo pipefail

build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
failed=()

printf '%-24s %12s %8s %10s %8s\n' target executions seconds exec/s corpus
for seeds in "$here"/corpus/*/; do
  target=$(basename "$seeds")
  inputs=("$seeds")
  [ -d "$here/regressions/$target" ] && inputs+=("$here/regressions/$target")
  corpus="$build/fuzz-corpus/$target"
  findings="$build/fuzz-findings/$target"
  log="$build/fuzz-logs/$target.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  start=$(date +%s)
  # -timeout: an input that takes seconds is a wedge; -malloc_limit_mb: decoding a message of a few
  # kilobytes has no business allocating more; UBSan reports halt (built -fno-sanitize-recover).
  if UBSAN_OPTIONS=print_stacktrace=1 "$build/tests/fuzz/$target" "$corpus" "${inputs[@]}" \
       -max_total_time="$seconds" -timeout=5 -malloc_limit_mb=64 -print_final_stats=1 \
       -artifact_prefix="$findings/" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    printf '%-24s %12s %8s %10s %8s\n' "$target" "$runs" "$(($(date +%s) - start))" "$rate" \
      "$(find "$corpus" -type f | wc -l)"
  else
    printf '%-24s FAILED, log %s, input in %s:\n' "$target" "$log" "$findings"
    grep -E '^(SUMMARY|fuzz property broken|==[0-9]+==ERROR)' "$log" | head -5
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found problems in: ${failed[*]}"
  exit 1
fi
