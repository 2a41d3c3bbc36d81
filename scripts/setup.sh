#!/usr/bin/env bash
# Installs everything tablesocket needs on a fresh Debian 12 machine (as root), fetches and configures
# the MariaDB source matching the installed server, and builds tablesocket.so against it.
# Idempotent: every step is skipped when its result is already there.
#
# Environment:
#   TS_DEPS_DIR   where the MariaDB source/build and the Python venv live (default /var/cache/tablesocket)
#   TS_SKIP_BUILD set to 1 to stop after dependencies are ready
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
deps=${TS_DEPS_DIR:-/var/cache/tablesocket}
export DEBIAN_FRONTEND=noninteractive
log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs Debian packages)"
mkdir -p "$deps"

# ---- 1. apt sources: binary + deb-src -------------------------------------------------------
src_list=/etc/apt/sources.list.d/tablesocket-src.sources
stamp=$deps/.apt-updated
if [ ! -f "$src_list" ]; then
  [ -f /etc/apt/sources.list.d/debian.sources ] || die "no /etc/apt/sources.list.d/debian.sources to copy deb-src entries from"
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$src_list"
  rm -f "$stamp"
fi
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +720 2>/dev/null)" ]; then
  log "apt-get update"
  apt-get update -qq
  touch "$stamp"
fi

# ---- 2. choose the newest mariadb-server version whose binary AND source are reachable --------
# The source index can list a version whose files are not downloadable (bookworm-security), so a
# version counts only once its source package has actually been fetched.
ver_file=$deps/mariadb-version
if [ -f "$ver_file" ] && [ -f "$deps/src-$(cat "$ver_file")/.fetched" ] \
   && dpkg -s mariadb-server 2>/dev/null | grep -qx "Version: $(cat "$ver_file")"; then
  ver=$(cat "$ver_file")
else
  bin_versions=$(apt-cache policy mariadb-server | sed -n '/Version table/,$p' | grep -oE '^[ *]+[0-9]+:[^ ]+' | tr -d ' *' | sort -u)
  src_versions=$(apt-cache showsrc mariadb 2>/dev/null | awk '/^Version:/{print $2}' | sort -u)
  both=""
  for v in $bin_versions; do
    printf '%s\n' $src_versions | grep -qxF "$v" && both="$both $v"
  done
  # newest first
  both=$(for v in $both; do echo "$v"; done | sort -r -V)
  ver=""
  for v in $both; do
    d=$deps/src-$v
    if [ -f "$d/.fetched" ]; then ver=$v; break; fi
    log "trying to fetch MariaDB source $v"
    rm -rf "$d"; mkdir -p "$d"
    if (cd "$d" && apt-get source --download-only -qq "mariadb=$v" >/dev/null 2>&1); then
      touch "$d/.fetched"; ver=$v; break
    fi
    log "source of $v is listed but not downloadable; trying an older version"
    rm -rf "$d"
  done
  [ -n "$ver" ] || die "no mariadb-server version has both a binary and a downloadable source package (binary: $(echo $bin_versions); source: $(echo $src_versions))"
  log "MariaDB version chosen: $ver"
  pkgs="mariadb-server mariadb-server-core mariadb-client mariadb-client-core mariadb-common"
  apt-mark unhold $pkgs >/dev/null 2>&1 || true
  apt-get install -y -qq --allow-downgrades $(for p in $pkgs; do printf '%s=%s ' "$p" "$ver"; done) >/dev/null
  apt-mark hold $pkgs >/dev/null
  # Debian's package starts a system service: the project never uses it.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now mariadb >/dev/null 2>&1 || true; fi
  service mariadb stop >/dev/null 2>&1 || true
  echo "$ver" > "$ver_file"
fi

# mariabackup of the same version (tests/integration/test_backup.py backs up a server tablesocket
# writes to); pinned and held like the server, which a newer one would pull up.
if ! dpkg -s mariadb-backup 2>/dev/null | grep -qx "Version: $ver"; then
  log "installing mariadb-backup $ver"
  apt-mark unhold mariadb-backup >/dev/null 2>&1 || true
  apt-get install -y -qq --allow-downgrades --no-install-recommends "mariadb-backup=$ver" >/dev/null \
    || log "WARNING: mariadb-backup $ver could not be installed; test_backup.py's mariabackup test will be skipped"
fi
if dpkg -s mariadb-backup >/dev/null 2>&1; then apt-mark hold mariadb-backup >/dev/null; fi

# ---- 3. build and test packages ----------------------------------------------------------------
pkg_stamp=$deps/.packages-v6
if [ ! -f "$pkg_stamp" ]; then
  log "installing build and test packages"
  apt-get install -y -qq --no-install-recommends \
    cmake ninja-build bison pkg-config g++ clang libclang-rt-14-dev libgtest-dev googletest \
    libssl-dev libncurses-dev zlib1g-dev libpcre2-dev libaio-dev liburing-dev libsystemd-dev \
    libxml2-dev libfmt-dev libsnappy-dev libnuma-dev libcrack2-dev libpam0g-dev gnutls-dev \
    libcurl4-openssl-dev libkrb5-dev libedit-dev libzstd-dev liblz4-dev dpkg-dev \
    python3 python3-venv python3-pip perl libperl-dev libdbi-perl libdbd-mariadb-perl \
    libmariadb-dev openssl procps iproute2 libmemcached-tools netcat-openbsd memcached \
    redis-server python3-matplotlib util-linux galera-4 \
    python3-pylibmc libcache-memcached-perl libcache-memcached-fast-perl php-cli php-memcached \
    ruby ruby-dalli python3-memcache >/dev/null
  # galera-4: the provider test_galera.py runs a two-node cluster with (mariadb-server needs it too).
  # The last line: third-party memcached clients for tests/integration/test_mc_clients.py.
  # memcached and redis-server are only the tests' and the benchmark's references (bench/run.py
  # starts private ones): their system services must not hold 11211 / 6379.
  for svc in memcached redis-server; do
    if command -v systemctl >/dev/null 2>&1; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
    service "$svc" stop >/dev/null 2>&1 || true
  done
  touch "$pkg_stamp"
fi

# Python venv for the integration tests (Debian's python3, packages from PyPI).
venv=$deps/venv
if [ ! -x "$venv/bin/pytest" ] || [ ! -f "$venv/.reqs-v2" ]; then
  log "creating Python venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >/dev/null
  "$venv/bin/pip" install -q -r "$here/tests/requirements.txt"
  touch "$venv/.reqs-v2"
fi
# meta-memcache (a meta-protocol memcached client; a compiled wheel with three more) for its
# conformance test: optional, the test is skipped without it.
if [ ! -f "$venv/.meta-memcache-v1" ]; then
  if "$venv/bin/pip" install -q --timeout 30 --retries 2 'meta-memcache==4.3.0' >/dev/null 2>&1; then
    touch "$venv/.meta-memcache-v1"
  else
    log "meta-memcache could not be installed from PyPI: its test will be skipped"
  fi
fi

# ---- 4. MariaDB source, unpacked with Debian's patches, configured ------------------------------
upstream=${ver#*:}; upstream=${upstream%%-*}
src=$deps/mariadb-$upstream
bld=$deps/mariadb-$upstream-build
if [ ! -f "$src/.unpacked" ]; then
  log "unpacking MariaDB source $ver"
  rm -rf "$src"
  dsc=$(ls "$deps/src-$ver"/mariadb_*.dsc | head -n1)
  dpkg-source --no-check -x "$dsc" "$src" >/dev/null
  touch "$src/.unpacked"
fi
if [ ! -f "$bld/.configured" ]; then
  log "configuring MariaDB source (about 40 s)"
  rm -rf "$bld"; mkdir -p "$bld"
  (cd "$bld" && cmake "$src" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_CONFIG=mysql_release -DCONC_DEFAULT_CHARSET=utf8mb4 \
    -DPLUGIN_AWS_KEY_MANAGEMENT=NO -DPLUGIN_COLUMNSTORE=NO -DWITH_NUMA=AUTO -DIGNORE_AIO_CHECK=ON \
    -DWITH_URING=ON -DWITH_LIBAIO=ON -DWITH_INNODB_SNAPPY=ON -DWITH_PMEM=ON -DDEB=debian \
    -DPLUGIN_ROCKSDB=NO -DPLUGIN_MROONGA=NO -DPLUGIN_SPIDER=NO -DPLUGIN_CONNECT=NO \
    -DPLUGIN_OQGRAPH=NO -DPLUGIN_S3=NO -DWITH_UNIT_TESTS=OFF > "$bld/configure.log" 2>&1) \
    || { tail -n 40 "$bld/configure.log" >&2; die "cmake configure of MariaDB failed (see $bld/configure.log)"; }
  log "generating server headers"
  (cd "$bld" && make -j"$(nproc)" GenError GenServerSource mysqlservices > "$bld/gen.log" 2>&1) \
    || { tail -n 40 "$bld/gen.log" >&2; die "generating MariaDB headers failed"; }
  touch "$bld/.configured"
fi
if [ ! -f "$bld/libservices/libmysqlservices.a" ]; then
  (cd "$bld" && make -j"$(nproc)" mysqlservices > "$bld/services.log" 2>&1) || die "building libmysqlservices failed"
fi
printf 'MARIADB_VERSION=%s\nMARIADB_SOURCE_DIR=%s\nMARIADB_BUILD_DIR=%s\nTS_VENV=%s\n' "$ver" "$src" "$bld" "$venv" > "$deps/env"

[ "${TS_SKIP_BUILD:-0}" = 1 ] && exit 0

# ---- 5. tablesocket itself --------------------------------------------------------------------
log "building tablesocket"
cmake -S "$here" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMARIADB_SOURCE_DIR="$src" -DMARIADB_BUILD_DIR="$bld" > "$here/build.log" 2>&1 \
  || { tail -n 40 "$here/build.log" >&2; die "cmake configure of tablesocket failed"; }
ninja -C "$here/build" >> "$here/build.log" 2>&1 || { tail -n 60 "$here/build.log" >&2; die "build of tablesocket failed"; }
log "built $here/build/tablesocket.so"
