#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 machine (as root): sets up what is missing first
# (scripts/setup.sh), then unit tests, symbol check, brief fuzzing, client tests, integration
# tests against a private mariadbd, HandlerSocket's regression suite, and a smoke run of the
# benchmark runner. Exits non-zero if any step fails; the last line totals every test run.
#
# Environment: TS_FUZZ_SECONDS (default 20) per fuzz target.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
"$here/scripts/setup.sh" || { echo "setup failed"; exit 1; }
deps=${TS_DEPS_DIR:-/var/cache/tablesocket}
# shellcheck disable=SC1091
. "$deps/env"
export MARIADB_SOURCE_DIR MARIADB_BUILD_DIR
py=$TS_VENV/bin/python
reports=$here/build/test-reports
rm -rf "$reports"; mkdir -p "$reports"

failed_steps=()
step() {
  local name=$1; shift
  echo; echo "=== $name"
  local t0=$SECONDS
  if "$@"; then
    echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
    failed_steps+=("$name")
  fi
}

unit_tests() {
  cmake -S "$here" -B "$here/build-unit" -G Ninja -DTS_UNIT_TESTS=ON > "$reports/unit-cmake.log" 2>&1 &&
    ninja -C "$here/build-unit" > "$reports/unit-build.log" 2>&1 &&
    "$here/build-unit/ts_unit_tests" --gtest_brief=1 --gtest_output="xml:$reports/unit.xml"
}
loadgen_tests() {
  [ -f "$here/tools/loadgen/CMakeLists.txt" ] || return 0
  cmake -S "$here/tools/loadgen" -B "$here/build-loadgen" -G Ninja > "$reports/loadgen-cmake.log" 2>&1 &&
    ninja -C "$here/build-loadgen" > "$reports/loadgen-build.log" 2>&1 || return 1
  [ -x "$here/build-loadgen/ts-loadgen-tests" ] || return 0
  "$here/build-loadgen/ts-loadgen-tests" --gtest_brief=1 --gtest_output="xml:$reports/loadgen.xml"
}
python_client_tests() {
  "$TS_VENV/bin/pip" install -q "$here/clients/python" &&
    "$py" -m pytest -q -p no:cacheprovider "$here/clients/python/tests" --junitxml="$reports/pyclient.xml"
}
python_client_integration() {
  # The client's integration tests against a real private server with tablesocket loaded.
  "$py" "$here/tests/integration/tsserver.py" serve -- env TABLESOCKET_EXTENSIONS=1 TABLESOCKET_EXPECT_SECURITY=1 \
    "$py" -m pytest -q -p no:cacheprovider "$here/clients/python/tests/test_integration.py" \
    --junitxml="$reports/pyclient-integration.xml"
}
integration_tests() {
  "$py" -m pytest -q -p no:cacheprovider "$here/tests/integration" --junitxml="$reports/integration.xml"
}
bench_smoke() {
  # The side-by-side benchmark end to end at a tiny size: every server starts (mariadbd with
  # tablesocket and handlersocket.so, memcached, redis-server), every answer of every system
  # verifies, the report and the chart are written (build/bench-smoke/).
  "$py" "$here/bench/run.py" --smoke --junit "$reports/bench-smoke.xml" > "$reports/bench-smoke.log" 2>&1 \
    || { tail -n 40 "$reports/bench-smoke.log"; return 1; }
}

step "unit tests (GoogleTest)" unit_tests
step "plugin symbols resolve against this mariadbd" "$here/scripts/check_symbols.sh"
step "fuzzing the parsers (${TS_FUZZ_SECONDS:-20} s each)" "$here/scripts/fuzz.sh" "${TS_FUZZ_SECONDS:-20}"
step "load generator unit tests" loadgen_tests
step "Python client unit tests" python_client_tests
step "Python client against the server" python_client_integration
step "integration tests (private mariadbd, HandlerSocket regression suite)" integration_tests
step "benchmark runner, smoke run (bench/run.py --smoke)" bench_smoke

echo
"$py" "$here/scripts/sum_reports.py" "$reports"/*.xml
if [ ${#failed_steps[@]} -ne 0 ]; then
  printf 'failed steps: %s\n' "${failed_steps[*]}"
  exit 1
fi
