#!/usr/bin/env bash
# Builds every libFuzzer target (src/proto/<proto>/*_fuzz.cc) with clang++ and
# -fsanitize=fuzzer,address,undefined straight from the sources into build-fuzz/, then runs each
# for the given number of seconds against its seed corpus fuzz/<proto>/corpus.
#
# Usage: scripts/fuzz.sh [seconds] [target...]      (targets by name: hs, mc; default: all)
#   seconds defaults to $FUZZ_SECONDS, else 30.
# A libFuzzer dictionary fuzz/<proto>/<target>.dict is used when present (mc has one: commands,
# meta flags, noreply, CRLF).
# New inputs go to build-fuzz/corpus-<target>/ (not committed); the seed directory is only read.
# Crash/leak/timeout reproducers are written to fuzz/<proto>/ (ignored by git); reproduce one with
#   build-fuzz/<target> fuzz/<proto>/crash-...
# Exits non-zero when a target fails to build or a fuzzer finds a problem.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
seconds=${1:-${FUZZ_SECONDS:-30}}
[ $# -gt 0 ] && shift
case $seconds in ''|*[!0-9]*) echo "usage: $0 [seconds] [target...]" >&2; exit 2 ;; esac
want=" $* "

CXX=${FUZZ_CXX:-clang++}
command -v "$CXX" >/dev/null || { echo "fuzz: $CXX not found" >&2; exit 2; }
out=build-fuzz
mkdir -p "$out"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -Wall -Wextra
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Isrc)

shopt -s nullglob
status=0
ran=0
summary=()
for fuzz_src in src/proto/*/*_fuzz.cc; do
  dir=$(dirname "$fuzz_src")
  proto=$(basename "$dir")
  name=$(basename "$fuzz_src" .cc); name=${name%_fuzz}
  if [ "$want" != "  " ] && [[ $want != *" $name "* ]]; then continue; fi

  # The library sources of this protocol plus the common ones; no tests, no other fuzz targets.
  srcs=("$fuzz_src")
  for f in "$dir"/*.cc src/common/*.cc; do
    case $f in *_test.cc|*_fuzz.cc) continue ;; esac
    srcs+=("$f")
  done
  bin=$out/$name
  echo "== fuzz: building $bin"
  if ! "$CXX" "${flags[@]}" "${srcs[@]}" -o "$bin"; then
    echo "== fuzz: build of $name failed" >&2
    status=1
    continue
  fi

  seeds=fuzz/$proto/corpus
  work=$out/corpus-$name
  mkdir -p "$seeds" "$work"
  log=$out/$name.log
  extra=()
  dict=fuzz/$proto/$name.dict
  [ -f "$dict" ] && extra+=(-dict="$dict")
  echo "== fuzz: running $name for ${seconds}s (seeds: $seeds, log: $log)"
  rc=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="fuzz/$proto/" ${extra[@]+"${extra[@]}"} "$work" "$seeds" >"$log" 2>&1 || rc=$?
  ran=$((ran + 1))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  if [ "$rc" -ne 0 ]; then
    echo "== fuzz: $name FAILED (exit $rc); last lines of $log:" >&2
    tail -n 40 "$log" >&2
    ls -1 "fuzz/$proto"/crash-* "fuzz/$proto"/leak-* "fuzz/$proto"/timeout-* "fuzz/$proto"/oom-* 2>/dev/null >&2 || true
    status=1
    summary+=("$name: FAILED (exit $rc)")
  else
    summary+=("$name: ok, ${execs:-?} execs, ${rate:-?} exec/s")
  fi
done

[ "$ran" -gt 0 ] || [ "$status" -ne 0 ] || { echo "fuzz: no fuzz target matched" >&2; exit 2; }
for s in "${summary[@]}"; do echo "== fuzz: $s"; done
exit "$status"
