#!/usr/bin/env bash
# Builds a fuzz target with --config=fuzz (clang-16, libFuzzer, ASan + UBSan) and
# runs it for SECONDS on its seed corpus and dictionary.
#   scripts/fuzz.sh TARGET SECONDS    TARGET: a //fuzz target, "_fuzzer" optional
#   scripts/fuzz.sh all SECONDS       every target, one after the other
# The corpus grows in a work dir, /tmp/kiln-fuzz-work/<target>/ (or
# $KILN_FUZZ_WORK/<target>/), never in the repo: its seeds, fuzz/corpus/<target>/
# or the corpus fuzz/BUILD names for it, are copied in at each run. Prints each
# target's executions and exec/s, and for a crash the path of its reproducer
# (copy it to fuzz/regressions/<target>/ to keep it), the sanitizer's report and
# the end of libFuzzer's output; exits 1 when any target crashed, leaked, ran out
# of memory or timed out. The build runs --jobs=1 beside other work, or
# $KILN_FUZZ_JOBS (scripts/test.sh's CI smoke uses the machine's 2).
#
# The fuzz build has its own Bazel output base (<default>_fuzz): its toolchain is
# clang's, and switching the main server's toolchain back and forth would redo
# its analysis each time. The shared --disk_cache still serves both.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS" >&2
  echo "targets: $(ls fuzz/*_fuzzer.cc | sed 's|fuzz/||; s|_fuzzer.cc||' | tr '\n' ' ')" >&2
  exit 2
fi
seconds=$2
if [ "$1" = all ]; then
  targets=$(ls fuzz/*_fuzzer.cc | sed 's|fuzz/||; s|\.cc$||')
else
  targets=${1%_fuzzer}_fuzzer
  if [ ! -f "fuzz/$targets.cc" ]; then
    echo "fuzz.sh: no target $1 (fuzz/$targets.cc)" >&2
    exit 2
  fi
fi

bash scripts/setup.sh
output_base="$(bazel info output_base 2>/dev/null)_fuzz"
# Idle fuzz servers go away after 15 minutes; no workspace symlinks (bazel-bin
# stays the default build's).
fuzz_bazel=(bazel "--output_base=$output_base" --max_idle_secs=900)
build_flags=(--config=fuzz --symlink_prefix=/ "--jobs=${KILN_FUZZ_JOBS:-1}")
labels=()
for t in $targets; do labels+=("//fuzz:$t"); done
"${fuzz_bazel[@]}" build "${build_flags[@]}" "${labels[@]}" 2>&1 |
  grep -vE "linux-sandbox|^[0-9.]+: src/main/tools|Cannot export local symbol" | tail -3
bin_dir=$("${fuzz_bazel[@]}" info "${build_flags[@]}" bazel-bin 2>/dev/null)

# A target's seeds: fuzz/corpus/<its `corpus` in fuzz/BUILD, default itself>.
seeds_of() {
  local from
  from=$(awk -v name="\"$1\"," '
    $1 == "name" && $3 == name { inside = 1 }
    inside && $1 == "corpus" { gsub(/[",]/, "", $3); print $3 }
    /^\)/ { inside = 0 }' fuzz/BUILD)
  echo "${from:-$1}"
}

work_root=${KILN_FUZZ_WORK:-/tmp/kiln-fuzz-work}
# Suppressions (tools/sanitizers/) are linked in; see .bazelrc.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in $targets; do
  work="$work_root/$t"
  mkdir -p "$work/corpus" "$work/crashes"
  seeds=$(seeds_of "$t")
  cp fuzz/corpus/"$seeds"/* "$work/corpus/"
  flags=(-max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1
         -artifact_prefix="$work/crashes/")
  [ -f "fuzz/dicts/$seeds.dict" ] && flags+=(-dict="fuzz/dicts/$seeds.dict")
  log="$work/fuzz.log"
  echo "== $t: ${seconds}s, corpus $work/corpus, log $log"
  status=0
  "$bin_dir/fuzz/$t" "${flags[@]}" "$work/corpus" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  echo "$t: ${runs:-?} executions, ${rate:-?} exec/s, corpus $(ls "$work/corpus" | wc -l) inputs"
  crash=$(sed -n 's/^.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  if [ "$status" -ne 0 ] || [ -n "$crash" ]; then
    echo "$t: CRASH (exit $status): ${crash:-no reproducer written; see $log}"
    # The report's head (the error and its stack) and libFuzzer's last lines;
    # between them ASan's shadow map, which only the full log keeps.
    echo "$t: from $log:"
    { grep -a -m1 -A24 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:" \
        "$log" || true
      echo "..."
      tail -n 10 "$log"; } | sed 's/^/    /'
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "crashed: ${failed[*]}"
  exit 1
fi
