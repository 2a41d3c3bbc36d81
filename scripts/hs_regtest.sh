#!/usr/bin/env bash
# Runs MariaDB HandlerSocket's own regression suite (plugin/handler_socket/regtest/test_01_lib, Perl)
# against the plugin under test, and compares each test's output with its .expected file.
#
# Usage: scripts/hs_regtest.sh [options] [TEST...]
#   TEST      test numbers (1, 01, 22 ...), or one of: read (default), write, all
#             read  = 01 02 03 04 05 07 08 20 21 22      write = 06 09-19 23 24
#
# Server: by default a private server is started for the run (tests/integration/tsserver.py) with
# the plugin named by TS_PLUGIN (tablesocket | handlersocket; default tablesocket; TS_PLUGIN_SO for
# tablesocket.so) on the suite's own ports, HS read 9998 and HS write 9999 (127.0.0.1 only).
# To use a server that is already running instead, give its SQL port or socket:
#   --sql-port P | --socket PATH    MySQL protocol (root, no password)      env MYPORT / MYSOCKET
#   --host H                        address of SQL and HS (default 127.0.0.1) env MYHOST
#   --hs-port P                     HS read port  (default 9998)            env HSPORT
#   --hs-port-wr P                  HS write port (default 9999)            env HSPORT_WR
# Other options:
#   --plugin NAME       plugin for a server started here (overrides TS_PLUGIN)
#   --results DIR       where test logs and diffs go (default <repo>/var/hs-regtest)
#   --build-dir DIR     where the Perl client is built (default $HS_PERL_BUILD_DIR or
#                       /var/cache/tablesocket/hs-perl); nothing is built inside the repo
#   --timeout S         per-test timeout in seconds (default 600)
#   --build-only        only build the Perl client (then exit)
#   --no-compat         do not load tests/hs_regtest/TSRegtestCompat.pm's client-side fixes
#   --keep-sql-mode     do not touch the server's sql_mode (see below)
#   -v, --verbose       print the full diff of failing tests (default: first 40 lines)
#
# The suite hard-codes port 9999 for writes; TSRegtestCompat.pm redirects that to --hs-port-wr,
# so any ports work.  It also fixes three client-side incompatibilities of Debian 12's Perl (see it).
#
# sql_mode: tests 15 and 16 expect non-strict value conversion (out-of-range values clamped, zero
# dates), and tablesocket converts values as SQL would under the server's GLOBAL sql_mode (re-read at
# every batch).  So the suite runs with `SET GLOBAL sql_mode=''`, and the previous value is restored
# afterwards (also on failure or Ctrl-C); a server started here gets --sql-mode= from the start.
#
# Expected output: tests/hs_regtest/expected/testNN.expected, where present, replaces the suite's
# testNN.expected when the plugin under test is tablesocket (asked from the server's
# information_schema.plugins; --plugin / TS_PLUGIN if that fails).  See that directory's README.md.
#
# Output: one line per test, then `N passed, M failed`.  Exit status 0 iff all selected tests pass.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -f /var/cache/tablesocket/env ] && . /var/cache/tablesocket/env
src_root=${MARIADB_SOURCE_DIR:-/var/cache/tablesocket/mariadb-10.11.18}
hs_src=$src_root/plugin/handler_socket
suite=$hs_src/regtest/test_01_lib
venv_py=${TS_VENV:-/var/cache/tablesocket/venv}/bin/python

READ_TESTS="01 02 03 04 05 07 08 20 21 22"
WRITE_TESTS="06 09 10 11 12 13 14 15 16 17 18 19 23 24"
ALL_TESTS="01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24"

host=${MYHOST:-127.0.0.1}
sql_port=${MYPORT:-}
sql_socket=${MYSOCKET:-}
hs_port=${HSPORT:-9998}
hs_port_wr=${HSPORT_WR:-9999}
plugin=${TS_PLUGIN:-tablesocket}
results=${HS_REGTEST_RESULTS:-$here/var/hs-regtest}
build_dir=${HS_PERL_BUILD_DIR:-/var/cache/tablesocket/hs-perl}
timeout_s=${HS_REGTEST_TIMEOUT:-600}
compat=1
keep_sql_mode=0
verbose=0
build_only=0
external=0
[ -n "$sql_port$sql_socket" ] && external=1
tests=()

die() { printf 'hs_regtest: %s\n' "$*" >&2; exit 2; }
log() { printf 'hs_regtest: %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case $1 in
    --sql-port) sql_port=$2; external=1; shift 2 ;;
    --sql-port=*) sql_port=${1#*=}; external=1; shift ;;
    --socket) sql_socket=$2; external=1; shift 2 ;;
    --socket=*) sql_socket=${1#*=}; external=1; shift ;;
    --host) host=$2; shift 2 ;;
    --host=*) host=${1#*=}; shift ;;
    --hs-port) hs_port=$2; shift 2 ;;
    --hs-port=*) hs_port=${1#*=}; shift ;;
    --hs-port-wr) hs_port_wr=$2; shift 2 ;;
    --hs-port-wr=*) hs_port_wr=${1#*=}; shift ;;
    --plugin) plugin=$2; shift 2 ;;
    --plugin=*) plugin=${1#*=}; shift ;;
    --results) results=$2; shift 2 ;;
    --results=*) results=${1#*=}; shift ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --timeout=*) timeout_s=${1#*=}; shift ;;
    --no-compat) compat=0; shift ;;
    --keep-sql-mode) keep_sql_mode=1; shift ;;
    --build-only) build_only=1; shift ;;
    -v|--verbose) verbose=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --internal-run) shift ;;   # used when re-executed under a server started by tsserver.py
    -*) die "unknown option $1 (see --help)" ;;
    *) tests+=("$1"); shift ;;
  esac
done

# ---- which tests -------------------------------------------------------------------------------
sel=""
[ ${#tests[@]} -eq 0 ] && tests=(read)
for t in "${tests[@]}"; do
  case $t in
    read) sel="$sel $READ_TESTS" ;;
    write) sel="$sel $WRITE_TESTS" ;;
    all) sel="$sel $ALL_TESTS" ;;
    *[!0-9]*|'') die "bad test name '$t'" ;;
    *) n=$(printf '%02d' "$((10#$t))"); [ -f "$suite/test$n.pl" ] || die "no test $n in $suite"; sel="$sel $n" ;;
  esac
done
sel=$(printf '%s\n' $sel | sort -u | tr '\n' ' ')

[ -d "$suite" ] || die "HandlerSocket regression suite not found at $suite (set MARIADB_SOURCE_DIR)"

# ---- build the Perl client (Net::HandlerSocket + libhsclient) outside the repo --------------------
build_client() {
  local recipe=3   # bump when the recipe below changes
  local stamp="$build_dir/.built-v$recipe"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hs_src" ] \
     && [ -f "$build_dir/perl/blib/arch/auto/Net/HandlerSocket/HandlerSocket.so" ]; then
    return 0
  fi
  log "building the Perl HandlerSocket client in $build_dir"
  rm -rf "$build_dir"
  mkdir -p "$build_dir/shim" "$build_dir/libhsclient" || return 1
  # libhsclient includes a few MariaDB headers for trivia; MariaDB's real ones clash with perl.h.
  printf '/* empty: tablesocket hs_regtest shim */\n' > "$build_dir/shim/config.h"
  printf '#include <alloca.h>\n' > "$build_dir/shim/my_alloca.h"
  printf '#include <sys/socket.h>\n#include <fcntl.h>\n#include <unistd.h>\n#define SOCKET_SIZE_TYPE socklen_t\n' \
    > "$build_dir/shim/my_global.h"
  local f objs=()
  for f in config fatal socket string_util escape hstcpcli; do
    g++ -Wall -g -O2 -DNDEBUG -fno-rtti -fno-exceptions -fPIC -DPIC -I"$build_dir/shim" \
      -c "$hs_src/libhsclient/$f.cpp" -o "$build_dir/libhsclient/$f.o" >>"$build_dir/build.log" 2>&1 \
      || { tail -n 30 "$build_dir/build.log" >&2; return 1; }
    objs+=("$build_dir/libhsclient/$f.o")
  done
  ar rcs "$build_dir/libhsclient/libhsclient.a" "${objs[@]}" || return 1
  # MakeMaker builds in the module's directory, so it gets a private copy (outside the repo).
  cp -r "$hs_src/perl-Net-HandlerSocket" "$build_dir/perl" || return 1
  sed -e "s|-L@builddir@/../libhsclient -L@builddir@/../libhsclient/.libs|-L$build_dir/libhsclient|" \
      -e "s|-I. -I../libhsclient -I@builddir@/../libhsclient -I@top_builddir@/include|-I. -I$hs_src/libhsclient -I$build_dir/shim|" \
      "$hs_src/perl-Net-HandlerSocket/Makefile.PL.in" > "$build_dir/perl/Makefile.PL"
  (cd "$build_dir/perl" && perl Makefile.PL && make) >>"$build_dir/build.log" 2>&1 \
    || { tail -n 30 "$build_dir/build.log" >&2; return 1; }
  (cd "$build_dir/perl" && perl -Mblib -MNet::HandlerSocket -e 1) >>"$build_dir/build.log" 2>&1 \
    || { tail -n 30 "$build_dir/build.log" >&2; return 1; }
  printf '%s' "$hs_src" > "$stamp"
}
mkdir -p "$(dirname "$build_dir")"
{
  # One build at a time (concurrent runs share the build dir).
  command -v flock >/dev/null && flock -w 900 9
  build_client
} 9>"$build_dir.lock" || die "building the Perl client failed (log: $build_dir/build.log)"
if [ "$build_only" = 1 ]; then
  printf 'Perl client ready: %s\n' "$build_dir/perl/blib"
  exit 0
fi

# ---- no server given: start one on the suite's ports and re-run this script under it -------------
if [ "$external" = 0 ]; then
  [ -x "$venv_py" ] || die "no Python venv at $venv_py (run scripts/setup.sh)"
  args=(--internal-run --results "$results" --build-dir "$build_dir" --timeout "$timeout_s")
  [ "$compat" = 0 ] && args+=(--no-compat)
  [ "$keep_sql_mode" = 1 ] && args+=(--keep-sql-mode)
  sql_mode_arg=(--mysqld-arg=--sql-mode=)
  [ "$keep_sql_mode" = 1 ] && sql_mode_arg=()
  [ "$verbose" = 1 ] && args+=(-v)
  log "starting a $plugin server on HS ports $hs_port/$hs_port_wr"
  TS_PLUGIN=$plugin "$venv_py" "$here/tests/integration/tsserver.py" serve \
    --plugin "$plugin" --hs-port "$hs_port" --hs-port-wr "$hs_port_wr" "${sql_mode_arg[@]}" -- \
    bash -c 'exec "$0" "$@" --sql-port "$TS_SQL_PORT" --hs-port "$TS_HS_PORT" --hs-port-wr "$TS_HS_PORT_WR"' \
    "$0" "${args[@]}" $sel
  rc=$?
  if [ "$rc" = 3 ]; then
    log "could not start the server (see above); if ports $hs_port/$hs_port_wr are taken, pick others with"
    log "--hs-port/--hs-port-wr (any ports work), or point at a running server with --sql-port/--socket"
  fi
  exit "$rc"
fi

# ---- run ---------------------------------------------------------------------------------------
mkdir -p "$results" || die "cannot create $results"
export PERL5LIB="$here/tests/hs_regtest:$build_dir/perl/blib/lib:$build_dir/perl/blib/arch${PERL5LIB:+:$PERL5LIB}"
export PERL5OPT="-MTSRegtestCompat"
export HS_REGTEST_COMMON="$hs_src/regtest/common"
export HSPORT=$hs_port HSPORT_WR=$hs_port_wr MYHOST=$host
if [ -n "$sql_socket" ]; then
  # hstest.pm builds a host/port DSN; TSRegtestCompat.pm connects through MYSOCKET instead.
  export MYSOCKET=$sql_socket HSHOST=$host
  unset MYPORT
else
  export MYPORT=$sql_port
fi
[ "$compat" = 1 ] && export TS_REGTEST_COMPAT=1 || export TS_REGTEST_COMPAT=0
DIFF=(diff -u --ignore-space --strip-trailing-cr)   # as in the suite's run.sh + common/compat.sh

# ---- SQL on the server under test (mariadb client, root without password) -------------------------
sql() {
  local conn=(--protocol=TCP -h "$host" -P "$sql_port")
  [ -n "$sql_socket" ] && conn=(--protocol=SOCKET -S "$sql_socket")
  mariadb --no-defaults -uroot "${conn[@]}" -N -B -e "$1"
}
command -v mariadb >/dev/null || die "the mariadb command-line client is missing"

# Which plugin is loaded (decides which expected files apply).
detected=$(sql "SELECT LOWER(plugin_name) FROM information_schema.plugins WHERE plugin_status = 'ACTIVE'
                AND LOWER(plugin_name) IN ('tablesocket', 'handlersocket')" 2>/dev/null | head -n 1)
if [ -n "$detected" ]; then
  [ "$detected" != "$plugin" ] && [ "$external" = 1 ] && log "server runs $detected (TS_PLUGIN/--plugin said $plugin)"
  plugin=$detected
else
  log "could not ask the server which plugin it runs; assuming $plugin"
fi
ts_expected_dir=$here/tests/hs_regtest/expected

# Non-strict sql_mode for the run (see the header), restored on exit.
saved_sql_mode=""
sql_mode_set=0
restore_sql_mode() {
  [ "$sql_mode_set" = 1 ] || return 0
  sql "SET GLOBAL sql_mode = '$saved_sql_mode'" || log "could not restore GLOBAL sql_mode='$saved_sql_mode'"
  sql_mode_set=0
}
if [ "$keep_sql_mode" = 0 ]; then
  saved_sql_mode=$(sql "SELECT @@GLOBAL.sql_mode") || die "cannot read @@GLOBAL.sql_mode from the server"
  trap 'restore_sql_mode' EXIT
  trap 'restore_sql_mode; exit 130' INT
  trap 'restore_sql_mode; exit 143' TERM
  sql "SET GLOBAL sql_mode = ''" || die "cannot SET GLOBAL sql_mode = ''"
  sql_mode_set=1
  [ -n "$saved_sql_mode" ] && log "GLOBAL sql_mode set to '' for the run (was '$saved_sql_mode'; restored afterwards)"
fi

log "suite $suite; plugin $plugin; SQL ${sql_socket:-$host:$sql_port}; HS $host:$hs_port (read) $host:$hs_port_wr (write); logs in $results"
passed=0; failed=0; failed_names=""
for t in $sel; do
  rm -f "$results/test$t.log" "$results/test$t.log2" "$results/test$t.diff"
  start=$(date +%s)
  (cd "$suite" && timeout --kill-after=10 "$timeout_s" perl "test$t.pl" >"$results/test$t.log" 2>"$results/test$t.log2")
  rc=$?
  secs=$(( $(date +%s) - start ))
  expected=$suite/test$t.expected
  exp_note=""
  if [ "$plugin" = tablesocket ] && [ -f "$ts_expected_dir/test$t.expected" ]; then
    expected=$ts_expected_dir/test$t.expected
    exp_note=" [expected: tests/hs_regtest/expected/test$t.expected]"
  fi
  if "${DIFF[@]}" "$results/test$t.log" "$expected" >"$results/test$t.diff" 2>&1; then
    passed=$((passed + 1))
    printf 'test%s ok (%ss)%s\n' "$t" "$secs" "$exp_note"
    rm -f "$results/test$t.diff"
  else
    failed=$((failed + 1)); failed_names="$failed_names $t"
    why=""
    [ "$rc" = 124 ] && why=" TIMEOUT after ${timeout_s}s" || { [ "$rc" != 0 ] && why=" (perl exit $rc)"; }
    printf 'test%s FAILED%s (%ss): %s differing lines; diff in %s%s\n' "$t" "$why" "$secs" \
      "$(tail -n +3 "$results/test$t.diff" | grep -c '^[-+]')" "$results/test$t.diff" "$exp_note"
    if [ "$verbose" = 1 ]; then cat "$results/test$t.diff"; else head -n 40 "$results/test$t.diff"; fi
    if [ -s "$results/test$t.log2" ]; then
      printf -- '--- stderr of test%s (first 10 lines) ---\n' "$t"; head -n 10 "$results/test$t.log2"
    fi
  fi
done
[ -n "$failed_names" ] && printf 'failed:%s\n' "$failed_names"
printf '%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" = 0 ]
