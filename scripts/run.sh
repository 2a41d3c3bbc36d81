#!/usr/bin/env bash
# The main job: sets up (if needed), then starts a private mariadbd with tablesocket loaded, its
# datadir under the checkout (./var), listening on loopback only, with the demo table test.user.
#
#   scripts/run.sh              set up, start in the background, print how to use it
#   scripts/run.sh --foreground the same, but stay attached (Ctrl-C stops the server)
#   scripts/run.sh stop         stop the server
#
# Environment: TS_HS_PORT (9998), TS_HS_PORT_WR (9999), TS_MC_PORT (11211), TS_SQL_PORT (3307),
#              TS_VAR (./var)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
var=${TS_VAR:-$here/var}
hs_port=${TS_HS_PORT:-9998}
hs_port_wr=${TS_HS_PORT_WR:-9999}
mc_port=${TS_MC_PORT:-11211}
sql_port=${TS_SQL_PORT:-3307}
sock=$var/mysqld.sock
pidfile=$var/mysqld.pid

stop_server() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "stopped"
  else
    echo "not running"
  fi
}
if [ "${1:-}" = stop ]; then stop_server; exit 0; fi

"$here/scripts/setup.sh"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "already running (pid $(cat "$pidfile")); 'scripts/run.sh stop' first" >&2
  exit 1
fi
mkdir -p "$var"
plugin_dir=$var/plugin
mkdir -p "$plugin_dir"
ln -sf "$here/build/tablesocket.so" "$plugin_dir/tablesocket.so"
if [ ! -d "$var/data/mysql" ]; then
  mariadb-install-db --no-defaults --datadir="$var/data" --user=root --skip-test-db \
    --auth-root-authentication-method=normal > "$var/install-db.log" 2>&1 \
    || { cat "$var/install-db.log" >&2; exit 1; }
fi
args=(--no-defaults --datadir="$var/data" --socket="$sock" --pid-file="$pidfile"
  --port="$sql_port" --bind-address=127.0.0.1 --user=root --log-error="$var/error.log"
  --plugin-dir="$plugin_dir" --plugin-maturity=beta --plugin-load-add=tablesocket.so
  --tablesocket-address=127.0.0.1 --tablesocket-hs-port="$hs_port" --tablesocket-hs-port-wr="$hs_port_wr"
  --tablesocket-mc-port="$mc_port"
  --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=1
  --innodb-adaptive-hash-index=ON
  --log-bin=mariadb-bin --server-id=1 --binlog-format=ROW)
if [ "${1:-}" = --foreground ]; then
  echo "starting mariadbd in the foreground (log: $var/error.log)"
  exec mariadbd "${args[@]}"
fi
mariadbd "${args[@]}" > /dev/null 2>&1 &
for _ in $(seq 1 300); do
  if mariadb --no-defaults --socket="$sock" -uroot -e 'select 1' >/dev/null 2>&1; then break; fi
  if ! kill -0 $! 2>/dev/null; then echo "mariadbd exited; see $var/error.log:" >&2; tail -n 30 "$var/error.log" >&2; exit 1; fi
  sleep 0.1
done
mariadb --no-defaults --socket="$sock" -uroot < "$here/sql/memcached_schema.sql"
mariadb --no-defaults --socket="$sock" -uroot <<'SQL'
CREATE DATABASE IF NOT EXISTS test;
CREATE TABLE IF NOT EXISTS test.user (
  user_id INT UNSIGNED PRIMARY KEY,
  user_name VARCHAR(50),
  user_email VARCHAR(255),
  created DATETIME
) ENGINE=InnoDB;
INSERT IGNORE INTO test.user VALUES
  (1, 'alice', 'alice@example.com', '2024-01-01 10:00:00'),
  (2, 'bob', 'bob@example.com', '2024-01-02 11:00:00'),
  (3, 'carol', 'carol@example.com', '2024-01-03 12:00:00'),
  (4, 'dave', NULL, '2024-01-04 13:00:00'),
  (5, 'eve', 'eve@example.com', NULL);
SQL
cat <<EOF2
tablesocket is running (mariadbd pid $(cat "$pidfile"), log $var/error.log).
  HandlerSocket protocol: read port 127.0.0.1:$hs_port, read/write port 127.0.0.1:$hs_port_wr
  memcached protocol: 127.0.0.1:$mc_port (container 'default' = table test.kv)
  SQL: mariadb --socket=$sock -uroot test     (or TCP 127.0.0.1:$sql_port)
Try it:
  printf 'P\t1\ttest\tuser\tPRIMARY\tuser_name,user_email,created\n1\t=\t1\t2\n' | nc -q1 127.0.0.1 $hs_port
  -> 0	1
     0	3	bob	bob@example.com	2024-01-02 11:00:00
  printf 'set greeting 0 0 5\r\nhello\r\nget greeting\r\n' | nc -q1 127.0.0.1 $mc_port
Stop it with: scripts/run.sh stop
EOF2
