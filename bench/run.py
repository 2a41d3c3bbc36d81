#!/usr/bin/env python3
"""The side-by-side benchmark: tablesocket against HandlerSocket, SQL, memcached and Redis.

    scripts/bench.sh                       # set up if needed, then this with the defaults
    /var/cache/tablesocket/venv/bin/python bench/run.py [--rows N] [--duration S] [--rounds R] ...
    /var/cache/tablesocket/venv/bin/python bench/run.py --smoke      # ~2 minutes, CI

In one run, on 127.0.0.1 only:

  * one private mariadbd (tests/integration/tsserver.py) with BOTH tablesocket (build/tablesocket.so)
    and Debian's handlersocket.so loaded, on different ports; Debian's memcached and redis-server;
  * loads the `user` table (user_id, user_name, user_email, created; --rows, default 1,000,000) and
    the same key/values into memcached and Redis (value "user<k>|user<k>@example.com|<created>",
    which is also what tablesocket's memcached protocol returns for the row, through a container
    on `user` with three value columns), and warms them;
  * reads: measures every system on every shape CxD (C connections, D requests in flight on each;
    default 1x1 16x1 64x1 4x16 4x64) with tools/loadgen (ts-loadgen, which checks every answer);
    SQL with server-side prepared statements (ts-loadgen --proto sql). The MySQL protocol client
    cannot pipeline, so SQL at a shape with D > 1 runs C*D connections with one statement each
    (the same number of requests in flight);
  * writes: single-row UPDATE by key (random keys of `user`, a value that changes every time) and
    INSERT by key (new keys into `user_ins`, emptied before each measurement) at --write-shapes
    (default 1x1 8x1 64x1 4x64), SQL autocommit (prepared) vs HandlerSocket vs tablesocket, with
    innodb_flush_log_at_trx_commit=1, first without the binary log, then (server restarted) with
    log_bin and sync_binlog=1; rows/s and fsyncs per row (Innodb_data_fsyncs; binlog fsyncs are
    in `Syncs`);
  * a new connection per request (--churn, default 16x1: 16 clients, each connecting, sending
    one get (HandlerSocket: opening the index first) and closing, over and over; ts-loadgen
    --reconnect 1): tablesocket's two protocols, HandlerSocket, memcached and Redis;
  * reads beside writers (--mixed, default 16x1+64x1): in each write configuration, readers
    (PK reads of `user`, every row checked) and writers (inserts into `user_ins`) at once, two
    load generators, SQL vs HandlerSocket vs tablesocket: reads/s and read latency while the
    writers wait on fsyncs, and the rows/s the writers got meanwhile;
  * fairness on a small box: every server (all of its threads) pinned to CPU 0, every load
    generator (and this script) to CPU 1; the server's CPU time (utime + stime of the whole
    process, /proc/<pid>/stat) is sampled at the edges of each measured window and reported as
    server CPU microseconds per operation beside ops/s; --rounds rounds, each running every
    system for a shape in a rotated order, so background load hits all systems alike; medians
    and min-max over the rounds;
  * writes results.md (tables with ratios vs HandlerSocket / memcached and the machine),
    results.json (every measurement) and chart.png into bench/results/<UTC timestamp>/, and
    copies them to bench/results/latest/ (which the README shows).

--smoke runs a small version (20k rows, 1 s windows, 1 round, two shapes) into build/bench-smoke/
and exits non-zero if a system cannot be started or any answer fails verification.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import tsserver  # noqa: E402

LOADGEN_DIR = REPO / "build-loadgen"
LOADGEN = LOADGEN_DIR / "ts-loadgen"
CHART = REPO / "bench" / "chart.py"
RESULTS = REPO / "bench" / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---- systems ------------------------------------------------------------------------------------
# key: (label, ts-loadgen --proto, which server, reference system for the ratio column)
SYSTEMS = {
    "ts-hs": ("tablesocket HS", "hs", "mariadbd", "handlersocket"),
    "handlersocket": ("HandlerSocket", "hs", "mariadbd", None),
    "sql": ("SQL (prepared)", "sql", "mariadbd", None),
    "ts-mc-text": ("tablesocket memcached text", "mc-text", "mariadbd", "memcached-text"),
    "memcached-text": ("memcached text", "mc-text", "memcached", None),
    "ts-mc-meta": ("tablesocket memcached meta", "mc-meta", "mariadbd", "memcached-meta"),
    "memcached-meta": ("memcached meta", "mc-meta", "memcached", None),
    "redis": ("Redis", "resp", "redis", None),
}
READ_SYSTEMS = list(SYSTEMS)
# A new connection per request (ts-loadgen --reconnect 1): what a client without persistent
# connections costs each server. The MariaDB client library's log-in is left out (SQL).
CHURN_SYSTEMS = ["ts-hs", "handlersocket", "ts-mc-text", "memcached-text", "redis"]
WRITE_SYSTEMS = ["sql", "handlersocket", "ts-hs"]
WRITE_REFERENCE = {"ts-hs": ["handlersocket", "sql"]}
STATUS_VARS = ("Innodb_data_fsyncs", "Syncs", "Binlog_commits", "Binlog_group_commits", "Handler_write",
               "Handler_update", "Com_stmt_execute", "Tablesocket_batches")

DEFAULTS = dict(rows=1_000_000, duration=10.0, warmup=1.0, rounds=3, shapes="1x1,16x1,64x1,4x16,4x64",
                write_shapes="1x1,8x1,64x1,4x64", write_ops="update,insert", binlog="off,on", mixed="16x1+64x1",
                churn="16x1")
SMOKE = dict(rows=20_000, duration=1.0, warmup=0.5, rounds=1, shapes="1x1,4x16", write_shapes="8x1,4x16",
             write_ops="update,insert", binlog="off,on", mixed="4x1+8x1", churn="4x1")


class BenchError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        part = part.strip().lower().replace("×", "x")
        if not part:
            continue
        c, _, d = part.partition("x")
        out.append((int(c), int(d or 1)))
    if not out:
        raise SystemExit("no shapes given")
    return out


def shape_name(c: int, d: int) -> str:
    return f"{c}x{d}"


def rotated(items: list, k: int) -> list:
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# ---- CPU and machine ----------------------------------------------------------------------------


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads, exited ones included), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def read_cmd(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_description() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    debian = ""
    try:
        debian = Path("/etc/debian_version").read_text().strip()
    except OSError:
        pass
    git = read_cmd(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = read_cmd(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return {
        "cpu_model": cpu, "cpus": os.cpu_count(), "memory_gib": mem_gib, "kernel": platform.release(),
        "debian": debian, "virtualization": read_cmd(["systemd-detect-virt"]) or "unknown",
        "memcached": read_cmd(["memcached", "-V"]), "redis": read_cmd(["redis-server", "--version"]).split(" sha=")[0],
        "git_commit": git + ("+dirty" if dirty else ""), "python": platform.python_version(),
    }


def parse_cpu_list(text: str) -> set[int]:
    """taskset's CPU list ("0", "0,2", "0-3") as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


# ---- servers ------------------------------------------------------------------------------------


class BenchMariaDB(tsserver.MariaDBServer):
    """mariadbd with tablesocket AND Debian's handlersocket.so, optionally pinned with taskset."""

    def __init__(self, *a, cpus: str | None, hs_threads: int, **kw):
        self.cpus = cpus
        self.hs_threads = hs_threads
        self.hsd_port = self.hsd_port_wr = None
        super().__init__("tablesocket", *a, **kw)

    def _prepare(self) -> None:
        super()._prepare()  # links Debian's plugins (handlersocket.so among them) and ours
        if not (self.plugin_dir / "handlersocket.so").exists():
            raise tsserver.ServerError(f"Debian's handlersocket.so is missing from {tsserver.DEBIAN_PLUGIN_DIR}")

    def _choose_ports(self) -> None:
        super()._choose_ports()
        self.hsd_port, self.hsd_port_wr = tsserver.free_ports(
            2, exclude=[self.hs_port, self.hs_port_wr, self.sql_port, self.mc_port])

    def plugin_args(self) -> list[str]:
        return super().plugin_args() + [
            "--plugin-load-add=handlersocket.so",
            f"--loose-handlersocket_port={self.hsd_port}",
            f"--loose-handlersocket_port_wr={self.hsd_port_wr}",
            f"--loose-handlersocket_address={tsserver.LOOPBACK}",
            f"--loose-handlersocket_threads={self.hs_threads}",
            "--loose-handlersocket_threads_wr=1",
        ]

    def command(self) -> list[str]:
        cmd = super().command()
        return ["taskset", "-c", self.cpus] + cmd if self.cpus else cmd

    def wait_all_ports(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        ports = [self.hs_port, self.hs_port_wr, self.mc_port, self.hsd_port, self.hsd_port_wr]
        while time.monotonic() < deadline:
            if all(tsserver.port_accepts(p) for p in ports):
                return
            if not self.running():
                break
            time.sleep(0.1)
        raise tsserver.ServerError(f"not every plugin port accepts connections ({ports}); log:\n{self.log_tail()}")


class ExternalServer:
    """memcached or redis-server on a free loopback port, optionally pinned."""

    def __init__(self, kind: str, rundir: Path, cpus: str | None, memcached_threads: int, rows: int):
        self.kind, self.rundir, self.cpus = kind, rundir, cpus
        self.memcached_threads, self.rows = memcached_threads, rows
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.log_path = rundir / f"{kind}.log"

    def command(self) -> list[str]:
        if self.kind == "memcached":
            mem_mb = max(256, self.rows * 400 // (1 << 20))
            cmd = [shutil.which("memcached") or "/usr/bin/memcached", "-l", tsserver.LOOPBACK, "-p", str(self.port),
                   "-U", "0", "-m", str(mem_mb), "-c", "4096", "-t", str(self.memcached_threads)]
            if os.geteuid() == 0:
                cmd += ["-u", "nobody"]
        else:
            cmd = [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(self.port),
                   "--bind", tsserver.LOOPBACK, "--save", "", "--appendonly", "no", "--daemonize", "no",
                   "--protected-mode", "yes", "--maxclients", "4096", "--dir", str(self.rundir),
                   "--logfile", str(self.log_path)]
        return (["taskset", "-c", self.cpus] + cmd) if self.cpus else cmd

    def start(self) -> "ExternalServer":
        last = ""
        for _ in range(3):
            self.port = tsserver.free_ports(1)[0]
            with open(self.rundir / f"{self.kind}.stdout", "ab") as out:
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, preexec_fn=tsserver._set_pdeathsig)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if tsserver.port_accepts(self.port, timeout=0.2):
                    return self
                time.sleep(0.05)
            last = tsserver.tail(self.rundir / f"{self.kind}.stdout", 20) + "\n" + tsserver.tail(self.log_path, 20)
            self.stop()
        raise BenchError(f"{self.kind} did not start: {last}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.proc = None


# ---- the load generator -------------------------------------------------------------------------


def build_loadgen() -> None:
    if not (LOADGEN_DIR / "build.ninja").exists():
        r = subprocess.run(["cmake", "-S", str(REPO / "tools" / "loadgen"), "-B", str(LOADGEN_DIR), "-G", "Ninja"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f"configuring the load generator failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    r = subprocess.run(["ninja", "-C", str(LOADGEN_DIR), "ts-loadgen"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"building the load generator failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    help_text = subprocess.run([str(LOADGEN), "--help"], capture_output=True, text=True).stdout
    if "--print-window" not in help_text:
        raise BenchError(f"{LOADGEN} is too old (no --print-window)")
    probe = subprocess.run([str(LOADGEN), "--proto", "sql", "--port", "1", "--requests", "1"],
                           capture_output=True, text=True)
    if "without libmariadb" in probe.stderr:
        raise BenchError("ts-loadgen was built without libmariadb (--proto sql): install libmariadb-dev "
                         "(scripts/setup.sh does) and remove build-loadgen/")


class Bench:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.pin = a.pin
        self.server_cpus = a.server_cpus if self.pin else None
        self.client_cpus = a.client_cpus if self.pin else None
        self.measurements: list[dict] = []
        self.failures: list[dict] = []  # {"system", "text"}
        self.checks: list[tuple[str, str | None]] = []  # (name, failure message or None) for JUnit
        self.seed_counter = 0
        self.db: BenchMariaDB | None = None
        self.memcached: ExternalServer | None = None
        self.redis: ExternalServer | None = None
        self.status_conn = None
        self.binlog = "off"

    # -- servers --

    def start_servers(self) -> None:
        a = self.a
        extra = ["--innodb-flush-log-at-trx-commit=1", "--innodb-doublewrite=1",
                 f"--innodb-buffer-pool-size={a.buffer_pool}", "--innodb-log-file-size=1G",
                 "--max-connections=2000", "--max-prepared-stmt-count=100000", "--table-open-cache=4000",
                 "--lock-wait-timeout=120", f"--innodb-adaptive-hash-index={a.adaptive_hash_index.upper()}",
                 *a.mysqld_arg]
        self.base_args = extra
        self.db = BenchMariaDB(name="bench", extra_args=extra, cpus=self.server_cpus, hs_threads=a.hs_threads,
                               start_timeout=180)
        try:
            self.db.start()
            self.db.wait_all_ports()
        except tsserver.ServerError as e:
            self.check("start mariadbd with tablesocket and handlersocket", str(e))
            raise BenchError(f"mariadbd did not start: {e}") from None
        self.check("start mariadbd with tablesocket and handlersocket", None)
        ahi = "on" if int(self.db.sql("SELECT @@innodb_adaptive_hash_index", db=None)[0][0]) else "off"
        log(f"innodb_adaptive_hash_index={ahi}")
        self.check("innodb_adaptive_hash_index as asked",
                   None if ahi == a.adaptive_hash_index else f"the server has it {ahi}, asked {a.adaptive_hash_index}")
        log(f"mariadbd pid {self.db.pid}: SQL {self.db.sql_port}, tablesocket HS {self.db.hs_port}/{self.db.hs_port_wr} "
            f"memcached {self.db.mc_port}, HandlerSocket {self.db.hsd_port}/{self.db.hsd_port_wr}")
        for kind in ("memcached", "redis"):
            srv = ExternalServer(kind, self.db.rundir, self.server_cpus, a.memcached_threads, a.rows)
            try:
                srv.start()
            except BenchError as e:
                self.check(f"start {kind}", str(e))
                raise
            self.check(f"start {kind}", None)
            setattr(self, kind, srv)
            log(f"{kind} pid {srv.pid} on port {srv.port}")

    def stop_servers(self) -> None:
        for srv in (self.memcached, self.redis):
            if srv:
                srv.stop()
        if self.status_conn is not None:
            try:
                self.status_conn.close()
            except Exception:
                pass
            self.status_conn = None
        if self.db:
            self.db.stop()
            if not self.a.keep:
                shutil.rmtree(self.db.rundir, ignore_errors=True)

    def restart_mariadb(self, binlog: str) -> None:
        if self.status_conn is not None:
            self.status_conn.close()
            self.status_conn = None
        args = list(self.base_args)
        if binlog == "on":
            args += ["--log-bin=binlog", "--server-id=1", "--sync-binlog=1"]
        self.db.extra_args = args
        log(f"restarting mariadbd with the binary log {binlog}")
        try:
            self.db.restart()
            self.db.wait_all_ports()
        except tsserver.ServerError as e:
            self.check(f"restart mariadbd (binlog {binlog})", str(e))
            raise BenchError(f"mariadbd did not restart: {e}") from None
        self.check(f"restart mariadbd (binlog {binlog})", None)
        self.binlog = binlog
        got = self.db.sql("SELECT @@log_bin, @@sync_binlog, @@innodb_flush_log_at_trx_commit", db=None)[0]
        log(f"log_bin={got[0]} sync_binlog={got[1]} innodb_flush_log_at_trx_commit={got[2]}")
        self.warm_sql()
        self.quiesce()

    def server_pid(self, system: str) -> int:
        kind = SYSTEMS[system][2]
        srv = {"mariadbd": self.db, "memcached": self.memcached, "redis": self.redis}[kind]
        if not srv or not srv.running():
            raise BenchError(f"{kind} is not running (needed for {system})")
        return srv.pid

    def port_of(self, system: str, write: bool) -> int:
        d = self.db
        return {
            "ts-hs": d.hs_port_wr if write else d.hs_port, "handlersocket": d.hsd_port_wr if write else d.hsd_port,
            "sql": d.sql_port, "ts-mc-text": d.mc_port, "ts-mc-meta": d.mc_port,
            "memcached-text": self.memcached.port, "memcached-meta": self.memcached.port, "redis": self.redis.port,
        }[system]

    def status(self) -> dict:
        import pymysql
        if self.status_conn is None:
            self.status_conn = pymysql.connect(unix_socket=self.db.socket, user="root", password="", autocommit=True)
        with self.status_conn.cursor() as c:
            c.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(["%s"] * len(STATUS_VARS)),
                      STATUS_VARS)
            return {k: int(v) for k, v in c.fetchall()}

    # -- data --

    def load(self) -> None:
        a, d = self.a, self.db
        t0 = time.monotonic()
        d.exec_sql("DROP TABLE IF EXISTS user")
        d.exec_sql("CREATE TABLE user (user_id INT UNSIGNED NOT NULL PRIMARY KEY, user_name VARCHAR(50), "
                   "user_email VARCHAR(255), created DATETIME) ENGINE=InnoDB")
        d.exec_sql("DROP TABLE IF EXISTS user_ins")
        d.exec_sql("CREATE TABLE user_ins LIKE user")
        step = 250_000
        for lo in range(1, a.rows + 1, step):
            hi = min(a.rows, lo + step - 1)
            d.exec_sql(f"INSERT INTO user SELECT seq, CONCAT('user', seq), CONCAT('user', seq, '@example.com'), "
                       f"'2010-01-01 00:00:00' FROM seq_{lo}_to_{hi}")
        n = int(d.sql("SELECT COUNT(*) FROM user")[0][0])
        if n != a.rows:
            raise BenchError(f"user has {n} rows, expected {a.rows}")
        # tablesocket's memcached protocol: the default container becomes the user table, its value
        # the three columns joined with '|' - the same value memcached and Redis get below.
        d.exec_sql("UPDATE innodb_memcache.containers SET db_schema = 'test', db_table = 'user', "
                   "key_columns = 'user_id', value_columns = 'user_name,user_email,created', flags = '0', "
                   "cas_column = NULL, expire_time_column = NULL, unique_idx_name_on_key = 'PRIMARY' "
                   "WHERE name = 'default'", db=None)
        log(f"loaded {a.rows:,} rows into test.user in {time.monotonic() - t0:.1f} s")
        self.wait_mc_container()
        for system, proto in (("memcached-text", "mc-text"), ("redis", "resp")):
            t1 = time.monotonic()
            r = self.loadgen(["--proto", proto, "--port", str(self.port_of(system, True)), "--load",
                              "--keys", str(a.rows), "-c", "4", "-d", "64", "--timeout", "30"], timeout=600)
            ok = r["rc"] == 0 and r.get("result", {}).get("errors") == 0
            self.check(f"load {SYSTEMS[system][2]}", None if ok else r["stderr"][-2000:])
            if not ok:
                raise BenchError(f"loading {system} failed: {r['stderr'][-2000:]}")
            log(f"loaded {a.rows:,} keys into {SYSTEMS[system][2]} in {time.monotonic() - t1:.1f} s")
        self.warm_sql()
        self.quiesce()

    def wait_mc_container(self) -> None:
        want = b"VALUE 1 0 "
        deadline = time.monotonic() + 10
        reply = b""
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((tsserver.LOOPBACK, self.db.mc_port), timeout=2) as s:
                    s.sendall(b"get 1\r\n")
                    reply = b""
                    while not reply.endswith(b"END\r\n") and len(reply) < 4096:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        reply += chunk
                if reply.startswith(want) and b"user1|user1@example.com|2010-01-01 00:00:00" in reply:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise BenchError(f"tablesocket's memcached protocol does not serve the user table: {reply[:200]!r}")

    def quiesce(self, timeout: float = 180) -> None:
        """Lets InnoDB write back its dirty pages (innodb_max_dirty_pages_pct = 0 for a while) and
        purge its undo history, so that a phase does not start behind the previous one's
        background I/O."""
        d = self.db
        t0 = time.monotonic()
        old = d.sql("SELECT @@innodb_max_dirty_pages_pct", db=None)[0][0]
        d.exec_sql("SET GLOBAL innodb_max_dirty_pages_pct = 0", db=None)
        try:
            while True:
                st = dict(d.sql("SHOW GLOBAL STATUS WHERE Variable_name IN "
                                "('Innodb_buffer_pool_pages_dirty', 'Innodb_history_list_length')", db=None))
                dirty = int(st.get("Innodb_buffer_pool_pages_dirty", 0))
                hist = int(st.get("Innodb_history_list_length", 0))
                if (dirty < 100 and hist < 1000) or time.monotonic() - t0 > timeout:
                    break
                time.sleep(0.5)
        finally:
            d.exec_sql(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(old)}", db=None)
        log(f"quiesced InnoDB in {time.monotonic() - t0:.1f} s ({dirty} dirty pages, history length {hist} left)")

    def warm_sql(self) -> None:
        t0 = time.monotonic()
        self.db.sql("SELECT COUNT(*), SUM(CRC32(user_email)), SUM(LENGTH(user_name)) FROM user")
        log(f"warmed the user table (full scan) in {time.monotonic() - t0:.1f} s")

    # -- measuring --

    def next_seed(self) -> list[str]:
        if self.a.seed is None:
            return []
        self.seed_counter += 1
        return ["--seed", str(self.a.seed + self.seed_counter)]

    def loadgen(self, args: list[str], timeout: float, server_pid: int | None = None,
                want_status: bool = False) -> dict:
        """Runs ts-loadgen (pinned to the client CPUs); samples the server's CPU time (and the
        status counters) when it prints the edges of its measured window."""
        cmd = [str(LOADGEN), *args, "--json", "--print-window"]
        if self.client_cpus:
            cmd = ["taskset", "-c", self.client_cpus] + cmd
        samples: dict[str, dict] = {}
        with tempfile.TemporaryFile(mode="w+") as err:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
            killed = {"flag": False}

            def watchdog():
                try:
                    p.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    killed["flag"] = True
                    p.kill()

            wd = threading.Thread(target=watchdog, daemon=True)
            wd.start()
            out_lines = []
            for line in p.stdout:
                if line.startswith("WINDOW ") and server_pid:
                    edge = line.split()[1]
                    s = {"t": time.monotonic(), "cpu": proc_cpu_seconds(server_pid)}
                    if want_status:
                        s["status"] = self.status()
                    samples[edge] = s
                out_lines.append(line)
            rc = p.wait()
            wd.join()
            err.seek(0)
            stderr = err.read()
        res: dict = {"rc": rc, "stderr": stderr, "cmd": cmd, "killed": killed["flag"]}
        for line in out_lines:
            if line.startswith("{"):
                try:
                    res["result"] = json.loads(line)
                except ValueError:
                    pass
        if "start" in samples and "end" in samples:
            s0, s1 = samples["start"], samples["end"]
            res["window_s"] = s1["t"] - s0["t"]
            res["server_cpu_s"] = s1["cpu"] - s0["cpu"]
            if want_status:
                res["status"] = {k: s1["status"].get(k, 0) - s0["status"].get(k, 0) for k in s1["status"]}
        return res

    def loadgen_args(self, system: str, conns: int, depth: int, op: str, warmup: float, duration: float) -> list[str]:
        a = self.a
        proto = SYSTEMS[system][1]
        args = ["--proto", proto, "--port", str(self.port_of(system, op != "get")), "-c", str(conns),
                "-d", str(depth), "--seconds", str(duration), "--warmup-seconds", str(warmup), "--keys", str(a.rows),
                "--dist", a.dist, "--timeout", "20", *self.next_seed()]
        if op == "update":
            args += ["--op", "update", "--vary-writes"]
        elif op == "insert":
            args += ["--op", "insert", "--table", "user_ins", "--insert-start", "1"]
        return args

    def measure_mixed(self, system: str, rnd: int) -> dict:
        """Readers and writers at once: two load generators (both on the client CPUs), the readers
        checking every row of `user`, the writers inserting new keys into `user_ins`."""
        a = self.a
        label = SYSTEMS[system][0]
        (rc, rd), (wc, wd) = a.mixed_shapes
        if system == "sql":  # no pipelining in the client library: C*D connections, one statement each
            rc, rd, wc, wd = rc * rd, 1, wc * wd, 1
        self.db.exec_sql("TRUNCATE TABLE user_ins")
        pid = self.server_pid(system)
        rargs = self.loadgen_args(system, rc, rd, "get", a.warmup, a.duration)
        wargs = self.loadgen_args(system, wc, wd, "insert", a.warmup, a.duration)
        timeout = a.warmup + a.duration + 120
        got: dict = {}
        t = threading.Thread(target=lambda: got.update(w=self.loadgen(wargs, timeout)))
        t.start()
        r = self.loadgen(rargs, timeout, server_pid=pid, want_status=True)
        t.join()
        w = got.get("w") or {"rc": -1, "stderr": "the writers' load generator did not run"}
        rres, wres = r.get("result") or {}, w.get("result") or {}
        rlat, wlat = rres.get("latency_us", {}), wres.get("latency_us", {})
        m = {
            "phase": "mixed", "system": system, "label": label, "shape": a.mixed, "conns": rc, "depth": rd,
            "client_conns": rc, "client_depth": rd, "op": "get+insert", "round": rnd, "binlog": self.binlog,
            "ops": rres.get("ops"), "ops_per_sec": rres.get("ops_per_sec"), "p50_us": rlat.get("p50"),
            "p99_us": rlat.get("p99"), "p999_us": rlat.get("p999"), "errors": rres.get("errors"),
            "mismatches": rres.get("mismatches"), "seed": rres.get("seed"), "rc": r["rc"],
            "write_ops": wres.get("ops"), "write_ops_per_sec": wres.get("ops_per_sec"),
            "write_p50_us": wlat.get("p50"), "write_p99_us": wlat.get("p99"), "write_errors": wres.get("errors"),
            "write_seed": wres.get("seed"), "write_rc": w["rc"],
            "server_cpu_s": r.get("server_cpu_s"), "window_s": r.get("window_s"),
        }
        total = (rres.get("ops") or 0) + (wres.get("ops") or 0)
        m["server_cpu_us_per_op"] = m["server_cpu_s"] * 1e6 / total if m["server_cpu_s"] is not None and total else None
        if "status" in r and wres.get("ops"):
            m["fsyncs_per_row"] = r["status"].get("Innodb_data_fsyncs", 0) / wres["ops"]
        ok = (r["rc"] == 0 and w["rc"] == 0 and rres and wres and not rres.get("errors") and not rres.get("mismatches")
              and not wres.get("errors") and not wres.get("mismatches"))
        if not ok:
            why = "; ".join(x for x in (r["stderr"].strip()[-800:], w["stderr"].strip()[-800:]) if x) or \
                f"exit status {r['rc']} / {w['rc']}"
            m["failure"] = why
            self.failures.append({"system": system, "text": f"mixed {label} {a.mixed} binlog {self.binlog} "
                                                           f"(round {rnd + 1}): {why}"})
        self.measurements.append(m)
        log(f"{'OK ' if ok else 'FAIL'} r{rnd + 1} {label:27s} mixed {a.mixed}: reads {m['ops_per_sec'] or 0:>9,.0f}/s "
            f"p50 {m['p50_us'] or 0:.0f} p99 {m['p99_us'] or 0:.0f} µs; writes {m['write_ops_per_sec'] or 0:>8,.0f} rows/s "
            f"p99 {m['write_p99_us'] or 0:.0f} µs")
        return m

    def measure(self, phase: str, system: str, c: int, d: int, op: str = "get", rnd: int = 0,
                warmup: float | None = None, duration: float | None = None, record: bool = True,
                reconnect: int = 0) -> dict:
        a = self.a
        label, proto, _, _ = SYSTEMS[system]
        write = op != "get"
        conns, depth = c, d
        if proto == "sql" and d > 1:  # no pipelining in the client library: the same requests in flight
            conns, depth = c * d, 1
        warmup = a.warmup if warmup is None else warmup
        duration = a.duration if duration is None else duration
        if op == "insert":
            self.db.exec_sql("TRUNCATE TABLE user_ins")
        args = self.loadgen_args(system, conns, depth, op, warmup, duration)
        if reconnect:
            args += ["--reconnect", str(reconnect)]
        pid = self.server_pid(system)
        r = self.loadgen(args, timeout=warmup + duration + 120, server_pid=pid, want_status=write)
        res = r.get("result") or {}
        lat = res.get("latency_us", {})
        m = {
            "phase": phase, "system": system, "label": label, "shape": shape_name(c, d), "conns": c, "depth": d,
            "client_conns": conns, "client_depth": depth, "op": op, "round": rnd,
            "binlog": self.binlog if write else None,
            "ops": res.get("ops"), "seconds": res.get("seconds"), "ops_per_sec": res.get("ops_per_sec"),
            "p50_us": lat.get("p50"), "p90_us": lat.get("p90"), "p99_us": lat.get("p99"), "p999_us": lat.get("p999"),
            "max_us": lat.get("max"), "errors": res.get("errors"), "mismatches": res.get("mismatches"),
            "misses": res.get("misses"), "lost_connections": res.get("lost_connections"),
            "client_cpu_pct": res.get("client_cpu_pct"), "seed": res.get("seed"), "rc": r["rc"],
            "server_cpu_s": r.get("server_cpu_s"), "window_s": r.get("window_s"),
        }
        ok = r["rc"] == 0 and res and not res.get("errors") and not res.get("mismatches")
        if m["server_cpu_s"] is not None and res.get("ops"):
            m["server_cpu_us_per_op"] = m["server_cpu_s"] * 1e6 / res["ops"]
            m["server_cpu_share"] = m["server_cpu_s"] / m["window_s"] if m["window_s"] else None
        else:
            m["server_cpu_us_per_op"] = m["server_cpu_share"] = None
        if write and "status" in r and res.get("ops"):
            st = r["status"]
            m["status"] = st
            m["fsyncs_per_row"] = st.get("Innodb_data_fsyncs", 0) / res["ops"]
            m["binlog_syncs_per_row"] = st.get("Syncs", 0) / res["ops"]
            m["binlog_group_commits_per_row"] = st.get("Binlog_group_commits", 0) / res["ops"]
            if system == "ts-hs" and st.get("Tablesocket_batches"):
                m["rows_per_batch"] = res["ops"] / st["Tablesocket_batches"]
        name = f"{phase} {label} {op} {shape_name(c, d)}" + (f" binlog {self.binlog}" if write else "")
        if not ok:
            why = r["stderr"].strip()[-1500:] or f"exit status {r['rc']}"
            if r.get("killed"):
                why = "timed out; " + why
            m["failure"] = why
            self.failures.append({"system": system, "text": f"{name} (round {rnd + 1}): {why}"})
        if record:
            self.measurements.append(m)
            cpu = f"{m['server_cpu_us_per_op']:.1f} µs/op" if m["server_cpu_us_per_op"] is not None else "? µs/op"
            extra = ""
            if write and "fsyncs_per_row" in m:
                extra = f", {m['fsyncs_per_row']:.3f} fsyncs/row"
            log(f"{'OK ' if ok else 'FAIL'} r{rnd + 1} {label:27s} {op:6s} {shape_name(c, d):>5s}"
                f"{' (' + str(conns) + 'x1)' if conns != c else '':9s}: {m['ops_per_sec'] or 0:>11,.0f} ops/s, {cpu}, "
                f"p50 {m['p50_us'] or 0:.0f} p99 {m['p99_us'] or 0:.0f} µs, client cpu {m['client_cpu_pct'] or 0:.0f}%"
                + extra)
        if not ok and not record:
            log(f"FAIL {name}: {m['failure']}")
        return m

    def warm_systems(self, systems: list[str]) -> None:
        secs = 0.5 if self.a.smoke else 1.0
        for s in systems:
            m = self.measure("warm", s, 4, 16, warmup=0.2, duration=secs, record=False)
            self.check(f"warm-up and verify {SYSTEMS[s][0]}", m.get("failure"))

    def run_reads(self) -> None:
        a = self.a
        systems = a.systems
        self.warm_systems(systems)
        for rnd in range(a.rounds):
            for si, (c, d) in enumerate(a.shape_list):
                for s in rotated(systems, rnd + si):
                    self.measure("read", s, c, d, "get", rnd)

    def run_churn(self) -> None:
        a = self.a
        systems = [s for s in CHURN_SYSTEMS if s in a.systems]
        for rnd in range(a.rounds):
            for c, d in a.churn_shapes:
                for s in rotated(systems, rnd):
                    self.measure("churn", s, c, d, "get", rnd, reconnect=1)

    def run_writes(self) -> None:
        a = self.a
        for binlog in a.binlog_list:
            if binlog != self.binlog:
                self.restart_mariadb(binlog)
            else:
                self.quiesce()
            for rnd in range(a.rounds):
                for oi, op in enumerate(a.write_op_list):
                    for si, (c, d) in enumerate(a.write_shape_list):
                        for s in rotated(a.write_systems, rnd + oi + si):
                            self.measure("write", s, c, d, op, rnd)
            if a.mixed_shapes:
                if "update" in a.write_op_list:
                    # the updates changed `created` (--vary-writes): the readers check every row
                    t0 = time.monotonic()
                    self.db.exec_sql("UPDATE user SET created = '2010-01-01 00:00:00' "
                                     "WHERE created <> '2010-01-01 00:00:00'")
                    log(f"restored the rows the updates changed in {time.monotonic() - t0:.1f} s")
                    self.quiesce()
                for rnd in range(a.rounds):
                    for s in rotated(a.write_systems, rnd):
                        self.measure_mixed(s, rnd)

    def check(self, name: str, failure: str | None) -> None:
        self.checks.append((name, failure))


# ---- aggregation and the report -----------------------------------------------------------------


def aggregate(ms: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for m in ms:
        groups.setdefault((m["phase"], m["system"], m["shape"], m["op"], m["binlog"]), []).append(m)
    out = []
    for (phase, system, shape, op, binlog), pts in groups.items():
        ops = [p["ops_per_sec"] for p in pts if p["ops_per_sec"] is not None]
        cpu = [p["server_cpu_us_per_op"] for p in pts if p.get("server_cpu_us_per_op") is not None]
        g = {
            "phase": phase, "system": system, "label": SYSTEMS[system][0], "shape": shape, "op": op, "binlog": binlog,
            "conns": pts[0]["conns"], "depth": pts[0]["depth"], "client_conns": pts[0]["client_conns"],
            "rounds": len(pts), "failed_rounds": sum(1 for p in pts if "failure" in p),
            "ops_per_sec": median(ops), "ops_per_sec_min": min(ops) if ops else None,
            "ops_per_sec_max": max(ops) if ops else None,
            "cpu_us_per_op": median(cpu), "cpu_us_per_op_min": min(cpu) if cpu else None,
            "cpu_us_per_op_max": max(cpu) if cpu else None,
            "server_cpu_share": median([p.get("server_cpu_share") for p in pts]),
            "client_cpu_pct": median([p.get("client_cpu_pct") for p in pts]),
        }
        for k in ("p50_us", "p99_us", "p999_us"):
            g[k] = median([p.get(k) for p in pts])
        if phase == "mixed":
            for k in ("write_ops_per_sec", "write_p50_us", "write_p99_us", "fsyncs_per_row"):
                g[k] = median([p.get(k) for p in pts])
        if phase == "write":
            g["fsyncs_per_row"] = median([p.get("fsyncs_per_row") for p in pts])
            g["binlog_syncs_per_row"] = median([p.get("binlog_syncs_per_row") for p in pts])
            g["rows_per_batch"] = median([p.get("rows_per_batch") for p in pts])
        out.append(g)
    return out


def fmt_int(x) -> str:
    return "–" if x is None else f"{x:,.0f}"


def fmt_k(x) -> str:
    if x is None:
        return "–"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fmt_us(x) -> str:
    if x is None:
        return "–"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def fmt_ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}x"


def spread(g, key) -> str:
    lo, hi = g.get(f"{key}_min"), g.get(f"{key}_max")
    if lo is None or g["rounds"] < 2:
        return ""
    f = fmt_k if key == "ops_per_sec" else fmt_us
    return f" ({f(lo)}–{f(hi)})"


def render_markdown(meta: dict, agg: list[dict], failures: list[str]) -> str:
    a = meta["settings"]
    mach = meta["machine"]
    idx = {(g["phase"], g["system"], g["shape"], g["op"], g["binlog"]): g for g in agg}
    L = []
    title = "Benchmark" + (" (smoke run)" if a["smoke"] else "")
    L.append(f"# tablesocket: {title}, {meta['started_utc']}")
    L.append("")
    L.append(f"**Command:** `{meta['command']}`  ")
    L.append(f"**Size:** {a['rows']:,} rows, {a['duration']:g} s measured per point after {a['warmup']:g} s warm-up, "
             f"{a['rounds']} round(s) (each round runs every system for a shape, in a rotated order), "
             f"keys {a['dist']}; figures are medians over the rounds, (min–max) when there are several.  ")
    L.append(f"**Machine:** {mach['cpu_model']}, {mach['cpus']} CPUs, {mach['memory_gib']} GiB, "
             f"{mach['virtualization']}; Linux {mach['kernel']}, Debian {mach['debian']}; "
             f"{meta.get('mariadb_version', '?')}, {mach['memcached']}, {mach['redis']}; "
             f"tablesocket {mach['git_commit']}.  ")
    pin = (f"servers (all threads) on CPU {a['server_cpus']}, load generators on CPU {a['client_cpus']}"
           if a["pin"] else "not pinned")
    L.append(f"**Placement:** {pin}; load average {meta['loadavg_start']} at the start, "
             f"{meta.get('loadavg_end', '?')} at the end (which counts the run's own writers waiting on fsync).  ")
    def n_of(n, what):
        return f"{n} {what}" + ("" if str(n) == "1" else "s")

    L.append(f"**Servers:** one mariadbd with tablesocket ({n_of(meta.get('ts_threads', '?'), 'worker')}: "
             f"`tablesocket_threads` default, one per server CPU) and Debian's "
             f"handlersocket.so ({n_of(a['hs_threads'], 'read thread')}, 1 write thread), InnoDB buffer pool "
             f"{a['buffer_pool']}, `innodb_flush_log_at_trx_commit=1`, "
             f"`innodb_adaptive_hash_index={a.get('adaptive_hash_index', 'off').upper()}`; memcached -t {a['memcached_threads']}; "
             f"redis-server without persistence. Total run time {meta.get('elapsed_s', 0) / 60:.1f} min.")
    notes = []
    if a["smoke"]:
        notes.append("*Smoke run: proves the runner works end to end; the figures mean nothing.*")
    elif (a["rows"], a["duration"], a["rounds"]) != (DEFAULTS["rows"], DEFAULTS["duration"], DEFAULTS["rounds"]):
        notes.append(f"*Reduced size: the default run is {DEFAULTS['rows']:,} rows, {DEFAULTS['duration']:g} s per "
                     f"point, {DEFAULTS['rounds']} rounds.*")
    # Busy machine: load before the run started (the end's load counts the benchmark's own write
    # phases, whose threads wait on fsync), or a server that did not get its CPU at a pipelined read
    # shape, where it is the bottleneck and should run near 100% of its core.
    try:
        load_start = float(meta["loadavg_start"].split()[0])
    except (ValueError, IndexError):
        load_start = 0.0
    starved = [g for g in agg if g["phase"] == "read" and g.get("depth", 1) > 1 and g.get("server_cpu_share")
               and g["server_cpu_share"] < 0.85 and not g["system"].startswith("sql")]
    loaded = load_start > 0.75 * (mach["cpus"] or 1)
    if not a["smoke"] and (loaded or starved):
        why = (f"load average {load_start:.1f} on {mach['cpus']} CPUs at the start" if loaded else
               f"the server got under 85% of its CPU at {len(starved)} pipelined read point(s)")
        notes.append(f"*The machine was busy with other work during the run ({why}): the servers got only "
                     f"part of their CPU (see srv% below), so ops/s are low and noisy; server CPU per "
                     f"operation is the steadier figure. Not a final measurement.*")
    for n in notes:
        L.append("")
        L.append(n)
    L.append("")
    if failures:
        L.append(f"**{len(failures)} measurement(s) FAILED verification or could not run** (marked ⚠ below; "
                 f"details in results.json):")
        L.append("")
        for f in failures[:20]:
            L.append(f"- {f['text'].splitlines()[0][:300]}")
        L.append("")

    shapes = a["shapes"]
    systems = [s for s in a["systems"]]

    def read_table(cell) -> None:
        """A table of the read points, a system per row and a shape per column: cell(point) -> text."""
        L.append("| system | " + " | ".join(shapes) + " |")
        L.append("|---|" + "---:|" * len(shapes))
        for s in systems:
            points = [idx.get(("read", s, sh, "get", None)) for sh in shapes]
            L.append(f"| {SYSTEMS[s][0]} | " + " | ".join(cell(g) if g else "–" for g in points) + " |")
    if any(g["phase"] == "read" for g in agg):
        L.append("## Reads: ops/s")
        L.append("")
        L.append("One get by primary key per request: HandlerSocket `1 = 1 <k>` (3 columns), memcached `get <k>` "
                 "/ `mg <k> v`, Redis `GET <k>`, SQL `SELECT user_name, user_email, created FROM user WHERE "
                 "user_id = ?` (prepared, executed). Every answer is checked against the expected row. "
                 "Shape CxD = C connections with D requests in flight on each (pipelined). SQL cannot "
                 "pipeline: at D > 1 it runs C·D connections with one statement each (†).")
        L.append("")
        read_table(lambda g: f"{fmt_k(g['ops_per_sec'])}{'†' if g['client_conns'] != g['conns'] else ''}"
                             f"{spread(g, 'ops_per_sec')}{' ⚠' if g['failed_rounds'] else ''}")
        L.append("")
        L.append("## Reads: server CPU µs per operation")
        L.append("")
        L.append("The server process's CPU time (all threads, user + system, from /proc) during the measured "
                 "window, divided by the operations answered in it. Lower is better; steadier than ops/s on a "
                 "shared machine. For the two plugins it is the whole mariadbd.")
        L.append("")
        read_table(lambda g: f"{fmt_us(g['cpu_us_per_op'])}{spread(g, 'cpu_us_per_op')}")
        L.append("")
        L.append("## Reads: ratios")
        L.append("")
        L.append("ops/s of tablesocket ÷ ops/s of the reference (higher is better), and server CPU per op of "
                 "the reference ÷ that of tablesocket (higher is better: how many times less CPU tablesocket "
                 "spends per operation).")
        L.append("")
        L.append("| comparison | " + " | ".join(shapes) + " |")
        L.append("|---|" + "---:|" * len(shapes))
        pairs = [("ts-hs", "handlersocket"), ("ts-mc-text", "memcached-text"), ("ts-mc-meta", "memcached-meta"),
                 ("ts-hs", "sql"), ("ts-hs", "redis")]
        for x, ref in pairs:
            if x not in systems or ref not in systems:
                continue
            ops_cells, cpu_cells = [], []
            for sh in shapes:
                gx, gr = idx.get(("read", x, sh, "get", None)), idx.get(("read", ref, sh, "get", None))
                ops_cells.append(fmt_ratio(gx and gx["ops_per_sec"], gr and gr["ops_per_sec"]))
                cpu_cells.append(fmt_ratio(gr and gr["cpu_us_per_op"], gx and gx["cpu_us_per_op"]))
            L.append(f"| {SYSTEMS[x][0]} / {SYSTEMS[ref][0]}, ops/s | " + " | ".join(ops_cells) + " |")
            L.append(f"| {SYSTEMS[x][0]} / {SYSTEMS[ref][0]}, CPU per op | " + " | ".join(cpu_cells) + " |")
        L.append("")
        L.append("## Reads: latency (µs, p50 / p99 / p999), the server's and the load generator's CPU")
        L.append("")
        L.append("Latency is measured by the closed-loop load generator from the send to the complete reply (so "
                 "a stall delays the requests behind it rather than being counted against them). *srv*: the "
                 "share of one CPU the server process used during the window (near 100%: the server was the "
                 "bottleneck, or it had to share its CPU); *cl.*: the load generator's CPU use (near 100%: "
                 "the load generator was the bottleneck of that point, not the server).")
        L.append("")
        def latency_cell(g):
            cli, srv = g.get("client_cpu_pct"), g.get("server_cpu_share")
            cpu = f" (srv {srv * 100:.0f}%, cl. {cli:.0f}%)" if cli is not None and srv is not None else ""
            return f"{fmt_us(g['p50_us'])} / {fmt_us(g['p99_us'])} / {fmt_us(g['p999_us'])}{cpu}"

        read_table(latency_cell)
        L.append("")

    churn = [g for g in agg if g["phase"] == "churn"]
    if churn:
        L.append("## A new connection per request")
        L.append("")
        L.append("Each of C clients connects, sends one get (HandlerSocket: opens the index first, `P`, and "
                 "waits for its answer), reads the answer and closes, over and over (ts-loadgen `--reconnect 1`; "
                 "the connect and the index opening block the load generator's thread, so it, not the "
                 "server, often sets the pace: compare the server CPU per connection). server µs/connection: "
                 "the server's CPU time (all threads) per connection served, accept to close.")
        L.append("")
        L.append("| shape | system | connections/s | server µs/connection | p50 / p99 µs | srv / cl. CPU | "
                 "vs reference: connections/s · CPU |")
        L.append("|---|---|---:|---:|---:|---:|---:|")
        for sh in dict.fromkeys(g["shape"] for g in churn):
            for s in CHURN_SYSTEMS:
                g = idx.get(("churn", s, sh, "get", None))
                if not g:
                    continue
                ref = SYSTEMS[s][3]  # the system's reference for ratios, as in the read tables
                gr = idx.get(("churn", ref, sh, "get", None)) if ref else None
                vs = (f"{fmt_ratio(g['ops_per_sec'], gr['ops_per_sec'])} · "
                      f"{fmt_ratio(gr['cpu_us_per_op'], g['cpu_us_per_op'])} ({SYSTEMS[ref][0]})") if gr else ""
                srv, cli = g.get("server_cpu_share"), g.get("client_cpu_pct")
                cpu = f"{srv * 100:.0f}% / {cli:.0f}%" if srv is not None and cli is not None else "–"
                L.append(f"| {sh} | {SYSTEMS[s][0]} | {fmt_int(g['ops_per_sec'])}{spread(g, 'ops_per_sec')}"
                         f"{' ⚠' if g['failed_rounds'] else ''} | {fmt_us(g['cpu_us_per_op'])}"
                         f"{spread(g, 'cpu_us_per_op')} | {fmt_us(g['p50_us'])} / {fmt_us(g['p99_us'])} | {cpu} | {vs} |")
        L.append("")

    if any(g["phase"] == "write" for g in agg):
        L.append("## Writes: rows/s, fsyncs per row")
        L.append("")
        L.append("Single-row writes by key with `innodb_flush_log_at_trx_commit=1`. update: random existing keys "
                 "of `user` (uniform over all rows), the three columns set to a value that changes with every "
                 "request; insert: new keys counting up into `user_ins` (emptied before each measurement). SQL: "
                 "autocommit, prepared `UPDATE user SET ... WHERE user_id = ?` / `INSERT INTO user_ins VALUES "
                 "(?, ?, ?, ?)`; HandlerSocket and tablesocket: `U` and `+` on the write port. Every answer is "
                 "checked (1 row changed / inserted). fsyncs/row = Innodb_data_fsyncs per row (10.11 has no "
                 "Innodb_os_log_fsyncs); binlog syncs/row = `Syncs` (my_sync calls: the binary log's fsyncs) "
                 "per row. HandlerSocket's writes do not reach the binary log (MDEV-33967); SQL's are logged "
                 "as statements (binlog_format MIXED), tablesocket's as row events.")
        L.append("")
        L.append("| binlog | op | shape | SQL rows/s | HandlerSocket rows/s | tablesocket rows/s | ts / HS | ts / SQL "
                 "| fsyncs/row SQL · HS · ts | binlog syncs/row SQL · HS · ts | server µs/row SQL · HS · ts "
                 "| ts rows/batch | ts p50 / p99 ms |")
        L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for binlog in a["binlog"]:
            bl = "off" if binlog == "off" else "sync_binlog=1"
            for op in a["write_ops"]:
                for sh in a["write_shapes"]:
                    gs = {s: idx.get(("write", s, sh, op, binlog)) for s in WRITE_SYSTEMS}
                    if not any(gs.values()):
                        continue

                    def v(s, k, f=fmt_int):
                        g = gs.get(s)
                        return f(g[k]) if g and g.get(k) is not None else "–"

                    def rate(s):
                        g = gs.get(s)
                        if not g:
                            return "–"
                        mark = "†" if g["client_conns"] != g["conns"] else ""
                        bad = " ⚠" if g["failed_rounds"] else ""
                        return f"{fmt_int(g['ops_per_sec'])}{mark}{spread(g, 'ops_per_sec')}{bad}"

                    def r(x, y):
                        gx, gy = gs.get(x), gs.get(y)
                        return fmt_ratio(gx and gx["ops_per_sec"], gy and gy["ops_per_sec"])

                    f3 = lambda x: f"{x:.3f}"  # noqa: E731
                    ts = gs.get("ts-hs")
                    lat = (f"{ts['p50_us'] / 1000:.2f} / {ts['p99_us'] / 1000:.2f}"
                           if ts and ts.get("p50_us") is not None else "–")
                    L.append(f"| {bl} | {op} | {sh} | {rate('sql')} | {rate('handlersocket')} | {rate('ts-hs')} | "
                             f"{r('ts-hs', 'handlersocket')} | {r('ts-hs', 'sql')} | "
                             f"{v('sql', 'fsyncs_per_row', f3)} · {v('handlersocket', 'fsyncs_per_row', f3)} · "
                             f"{v('ts-hs', 'fsyncs_per_row', f3)} | "
                             f"{v('sql', 'binlog_syncs_per_row', f3)} · {v('handlersocket', 'binlog_syncs_per_row', f3)} · "
                             f"{v('ts-hs', 'binlog_syncs_per_row', f3)} | "
                             f"{v('sql', 'cpu_us_per_op', fmt_us)} · {v('handlersocket', 'cpu_us_per_op', fmt_us)} · "
                             f"{v('ts-hs', 'cpu_us_per_op', fmt_us)} | {v('ts-hs', 'rows_per_batch', lambda x: f'{x:.1f}')} "
                             f"| {lat} |")
        L.append("")
        L.append("† SQL at D > 1: C·D connections, one statement each. ts rows/batch: rows per tablesocket "
                 "batch (one transaction, one commit) = rows / Tablesocket_batches.")
        L.append("")

    mixed = [g for g in agg if g["phase"] == "mixed"]
    if mixed:
        L.append(f"## Reads beside writers ({mixed[0]['shape']})")
        L.append("")
        L.append("Readers (PK reads of `user`, every row checked) and writers (single-row inserts of new keys "
                 "into `user_ins`, `innodb_flush_log_at_trx_commit=1`) at the same time, from two load generators "
                 "on the client CPU, against the one server. What the reads get while the writes wait on fsyncs, "
                 "and the rows/s the writes get meanwhile. SQL: C×D connections, one statement each. "
                 "server µs/op: the server's CPU per read or write.")
        L.append("")
        L.append("| binlog | system | reads/s | read p50 / p99 / p999 µs | rows/s written | write p50 / p99 ms "
                 "| fsyncs/row | server µs/op | reads vs HandlerSocket |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for binlog in a["binlog"]:
            bl = "off" if binlog == "off" else "sync_binlog=1"
            gs = {g["system"]: g for g in mixed if g["binlog"] == binlog}
            hs = gs.get("handlersocket")
            for sysname in WRITE_SYSTEMS:
                g = gs.get(sysname)
                if not g:
                    continue
                bad = " ⚠" if g["failed_rounds"] else ""
                wl = (f"{g['write_p50_us'] / 1000:.2f} / {g['write_p99_us'] / 1000:.2f}"
                      if g.get("write_p50_us") is not None and g.get("write_p99_us") is not None else "–")
                fs = f"{g['fsyncs_per_row']:.3f}" if g.get("fsyncs_per_row") is not None else "–"
                ratio = fmt_ratio(g["ops_per_sec"], hs and hs["ops_per_sec"]) if sysname != "handlersocket" else ""
                L.append(f"| {bl} | {g['label']} | {fmt_int(g['ops_per_sec'])}{spread(g, 'ops_per_sec')}{bad} | "
                         f"{fmt_us(g['p50_us'])} / {fmt_us(g['p99_us'])} / {fmt_us(g['p999_us'])} | "
                         f"{fmt_int(g.get('write_ops_per_sec'))} | {wl} | {fs} | {fmt_us(g['cpu_us_per_op'])} | {ratio} |")
        L.append("")

    L.append("## The issue's targets, read off this run")
    L.append("")
    L.append("Informational: a run on a shared or small machine is not the official measurement. A ratio's "
             "status is decided by ops/s; CPU per op (reference ÷ tablesocket, higher is better) is beside it.")
    L.append("")
    L.append("| target | this run | |")
    L.append("|---|---|---|")
    for row in targets(idx, a):
        L.append("| " + " | ".join(row) + " |")
    L.append("")
    L.append("Files: `results.json` (every measurement, with seeds and server counters), `chart.png`.")
    L.append("")
    return "\n".join(L)


def targets(idx: dict, a: dict) -> list[list[str]]:
    rows = []

    def get(phase, s, sh, op="get", binlog=None):
        return idx.get((phase, s, sh, op, binlog))

    def mark(ok):
        return "met" if ok else "not met"

    pipelined = [sh for sh in a["shapes"] if not sh.endswith("x1")]
    g = get("read", "ts-hs", "16x1")
    if g and g["ops_per_sec"]:
        rows.append(["HS ≥150k ops/s at 16x1", fmt_int(g["ops_per_sec"]), mark(g["ops_per_sec"] >= 150_000)])
    best = max((get("read", "ts-hs", sh) for sh in pipelined if get("read", "ts-hs", sh)),
               key=lambda g: g["ops_per_sec"] or 0, default=None)
    if best and best["ops_per_sec"]:
        rows.append(["HS ≥500k ops/s pipelined", f"{fmt_int(best['ops_per_sec'])} ({best['shape']})",
                     mark(best["ops_per_sec"] >= 500_000)])
    def ratio_row(what, x, r, need):
        if x and r and x["ops_per_sec"] and r["ops_per_sec"]:
            q = x["ops_per_sec"] / r["ops_per_sec"]
            cpu = (f"; CPU per op {r['cpu_us_per_op'] / x['cpu_us_per_op']:.2f}x"
                   if x.get("cpu_us_per_op") and r.get("cpu_us_per_op") else "")
            rows.append([what, f"{q:.3f}x ops/s{cpu}", mark(q >= need)])

    for sh in ["16x1"] + ([best["shape"]] if best else []):
        ratio_row(f"HS ≥1.4x HandlerSocket ({sh})", get("read", "ts-hs", sh), get("read", "handlersocket", sh), 1.4)
    for sys_ts, ref, sh, what in [("ts-mc-text", "memcached-text", "16x1", "memcached text ≥0.8x memcached at 16x1"),
                                  ("ts-mc-meta", "memcached-meta", "16x1", "memcached meta ≥0.8x memcached at 16x1")]:
        ratio_row(what, get("read", sys_ts, sh), get("read", ref, sh), 0.8)
    for sh in pipelined:
        ratio_row(f"memcached meta pipelined ≥0.8x memcached ({sh})", get("read", "ts-mc-meta", sh),
                  get("read", "memcached-meta", sh), 0.8)
    for op in a["write_ops"]:
        g = get("write", "ts-hs", "64x1", op, "on")
        if g and g["ops_per_sec"]:
            rows.append([f"writes ≥50k rows/s at 64 clients, binlog on, sync_binlog=1 ({op})",
                         fmt_int(g["ops_per_sec"]), mark(g["ops_per_sec"] >= 50_000)])
        ratio_row(f"writes, binlog off, ≥1.3x HandlerSocket at 64 clients ({op})",
                  get("write", "ts-hs", "64x1", op, "off"), get("write", "handlersocket", "64x1", op, "off"), 1.3)
    if not rows:
        rows.append(["(the shapes of this run do not include the targets' shapes)", "–", ""])
    return rows


def find_chart_python() -> str | None:
    for py in (sys.executable, "/usr/bin/python3"):
        if py and Path(py).exists():
            r = subprocess.run([py, "-c", "import matplotlib"], capture_output=True)
            if r.returncode == 0:
                return py
    return None


def write_chart(results_json: Path, png: Path) -> str | None:
    """Runs bench/chart.py with a Python that has matplotlib; returns an error message or None."""
    py = find_chart_python()
    if py is None:
        return "matplotlib is not installed (scripts/setup.sh installs python3-matplotlib)"
    r = subprocess.run([py, str(CHART), str(results_json), str(png)], capture_output=True, text=True)
    return f"chart.py failed: {r.stderr[-2000:]}" if r.returncode != 0 else None


def render_only(d: Path) -> int:
    data = json.loads((d / "results.json").read_text())
    md = render_markdown(data["meta"], data["summary"], data["failures"])
    if data.get("fatal"):
        md = f"**The run did not complete: {data['fatal'].splitlines()[0]}**\n\n" + md
    (d / "results.md").write_text(md)
    err = write_chart(d / "results.json", d / "chart.png")
    if err:
        log(err)
        return 1
    log(f"re-rendered {d / 'results.md'} and {d / 'chart.png'}")
    return 0


def junit(path: Path, checks: list[tuple[str, str | None]], seconds: float) -> None:
    from xml.sax.saxutils import escape, quoteattr
    fails = sum(1 for _, f in checks if f)
    lines = [f'<testsuite name="bench-smoke" tests="{len(checks)}" failures="{fails}" errors="0" skipped="0" '
             f'time="{seconds:.1f}">']
    for name, f in checks:
        lines.append(f'  <testcase classname="bench" name={quoteattr(name)}>')
        if f:
            lines.append(f'    <failure message={quoteattr(f.splitlines()[0][:200] if f else "")}>{escape(f)}</failure>')
        lines.append("  </testcase>")
    lines.append("</testsuite>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# ---- main ---------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true",
                    help="small and quick (%s); output under build/bench-smoke/; non-zero exit on any failure"
                         % ", ".join(f"{k}={v}" for k, v in SMOKE.items()))
    ap.add_argument("--rows", type=int, help=f"rows in `user` and keys in memcached/Redis (default {DEFAULTS['rows']:,})")
    ap.add_argument("--duration", type=float, help=f"measured seconds per point (default {DEFAULTS['duration']:g})")
    ap.add_argument("--warmup", type=float, help=f"warm-up seconds before each point (default {DEFAULTS['warmup']:g})")
    ap.add_argument("--rounds", type=int, help=f"rounds; each runs every system per shape in rotated order "
                                               f"(default {DEFAULTS['rounds']})")
    ap.add_argument("--shapes", help=f"read shapes CxD (default {DEFAULTS['shapes']})")
    ap.add_argument("--write-shapes", help=f"write shapes CxD (default {DEFAULTS['write_shapes']})")
    ap.add_argument("--write-ops", help=f"update,insert (default {DEFAULTS['write_ops']})")
    ap.add_argument("--binlog", help=f"write configurations: off,on (default {DEFAULTS['binlog']})")
    ap.add_argument("--systems", default=",".join(READ_SYSTEMS), help="read systems (default: all: %(default)s)")
    ap.add_argument("--write-systems", default=",".join(WRITE_SYSTEMS), help="write systems (default %(default)s)")
    ap.add_argument("--skip-reads", action="store_true")
    ap.add_argument("--skip-writes", action="store_true")
    ap.add_argument("--churn", help=f"a new connection per request, CxD shapes (default {DEFAULTS['churn']}; "
                                    f"\"\" skips it)")
    ap.add_argument("--mixed", help=f"reads beside writers, READERSxD+WRITERSxD, in each write configuration "
                                    f"(default {DEFAULTS['mixed']}; \"\" skips it)")
    ap.add_argument("--dist", default="uniform", choices=["uniform", "zipf"], help="key distribution")
    ap.add_argument("--seed", type=int, help="base seed for ts-loadgen (default: random, recorded per point)")
    ap.add_argument("--server-cpus", default="0", help="taskset CPU list of the servers (default 0)")
    ap.add_argument("--client-cpus", default="1", help="taskset CPU list of the load generators (default 1)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin servers and clients")
    ap.add_argument("--hs-threads", type=int, default=None,
                    help="handlersocket_threads (default: as many as tablesocket's default workers, one per "
                         "server CPU: 1 when the servers are pinned to one CPU)")
    ap.add_argument("--memcached-threads", type=int, default=4, help="memcached -t (default 4, memcached's default)")
    ap.add_argument("--buffer-pool", default=None, help="innodb_buffer_pool_size (default 2G, 256M with --smoke)")
    ap.add_argument("--adaptive-hash-index", choices=("on", "off"), default="on",
                    help="innodb_adaptive_hash_index of the mariadbd (default on: every system in it, tablesocket, "
                         "HandlerSocket and SQL, looks rows up by hash on hot index pages; MariaDB's own default is off)")
    ap.add_argument("--mysqld-arg", action="append", default=[], metavar="ARG", help="extra mariadbd option")
    ap.add_argument("--out", help="results directory (default bench/results/<UTC time>, smoke: build/bench-smoke/<UTC time>)")
    ap.add_argument("--no-latest", action="store_true", help="do not copy the results to bench/results/latest")
    ap.add_argument("--no-chart", action="store_true")
    ap.add_argument("--junit", help="write a JUnit XML report of the checks (scripts/test.sh)")
    ap.add_argument("--keep", action="store_true", help="keep the servers' run directory")
    ap.add_argument("--render", metavar="DIR", help="only re-render DIR/results.md and DIR/chart.png from "
                                                     "DIR/results.json (after a change to the report)")
    a = ap.parse_args(argv)
    if a.render:
        return render_only(Path(a.render))
    base = SMOKE if a.smoke else DEFAULTS
    for k, v in base.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.buffer_pool is None:
        a.buffer_pool = "256M" if a.smoke else "2G"
    a.shape_list = parse_shapes(a.shapes)
    a.write_shape_list = parse_shapes(a.write_shapes)
    a.churn = a.churn.strip()
    a.churn_shapes = parse_shapes(a.churn) if a.churn else []
    a.mixed = a.mixed.strip()
    a.mixed_shapes = [parse_shapes(x)[0] for x in a.mixed.split("+")] if a.mixed else []
    if a.mixed and len(a.mixed_shapes) != 2:
        ap.error("--mixed takes READERSxD+WRITERSxD, e.g. 16x1+64x1")
    a.write_op_list = [o.strip() for o in a.write_ops.split(",") if o.strip()]
    a.binlog_list = [b.strip() for b in a.binlog.split(",") if b.strip()]
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    a.write_systems = [s.strip() for s in a.write_systems.split(",") if s.strip()]
    for s in a.systems + a.write_systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r} (known: {', '.join(SYSTEMS)})")
    for s in a.write_systems:
        if SYSTEMS[s][1] not in ("hs", "sql"):
            ap.error(f"{s} cannot be a write system")
    if set(a.write_op_list) - {"update", "insert"} or set(a.binlog_list) - {"off", "on"}:
        ap.error("--write-ops takes update,insert; --binlog takes off,on")
    a.pin = not a.no_pin and (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None
    if not a.no_pin and not a.pin:
        log("not pinning: fewer than 2 CPUs or no taskset")
    if a.hs_threads is None:  # the rule tablesocket_threads=0 applies: one per CPU the server may use
        a.hs_threads = len(parse_cpu_list(a.server_cpus)) if a.pin else (os.cpu_count() or 1)

    started = dt.datetime.now(dt.timezone.utc)
    stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
    if a.out:
        out = Path(a.out)
    elif a.smoke:
        out = REPO / "build" / "bench-smoke" / stamp
        old = sorted(p for p in out.parent.glob("20*") if p.is_dir()) if out.parent.is_dir() else []
        for p in old[:-4]:  # keep the last few smoke runs
            shutil.rmtree(p, ignore_errors=True)
    else:
        out = RESULTS / stamp
    t_start = time.monotonic()
    if a.pin:
        try:
            os.sched_setaffinity(0, parse_cpu_list(a.client_cpus))
        except (OSError, ValueError):
            pass

    bench = Bench(a)
    meta = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["bench/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_description(),
        "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "settings": {
            "smoke": a.smoke, "rows": a.rows, "duration": a.duration, "warmup": a.warmup, "rounds": a.rounds,
            "shapes": [shape_name(*s) for s in a.shape_list], "write_shapes": [shape_name(*s) for s in a.write_shape_list],
            "write_ops": a.write_op_list, "binlog": a.binlog_list, "mixed": a.mixed, "churn": a.churn, "systems": a.systems if not a.skip_reads else [],
            "write_systems": a.write_systems if not a.skip_writes else [], "dist": a.dist, "pin": a.pin,
            "server_cpus": a.server_cpus, "client_cpus": a.client_cpus, "hs_threads": a.hs_threads,
            "memcached_threads": a.memcached_threads, "buffer_pool": a.buffer_pool,
            "adaptive_hash_index": a.adaptive_hash_index, "seed": a.seed,
        },
    }
    log(f"{meta['machine']['cpu_model']}, {meta['machine']['cpus']} CPUs; load average {meta['loadavg_start']}; "
        f"output {out}")
    fatal = None
    interrupted = False

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        try:
            build_loadgen()
            bench.check("build the load generator", None)
        except BenchError as e:
            bench.check("build the load generator", str(e))
            raise
        for tool in ("memcached", "redis-server", "taskset" if a.pin else "true"):
            if not shutil.which(tool):
                msg = f"{tool} is not installed (scripts/setup.sh installs it)"
                bench.check(f"{tool} installed", msg)
                raise BenchError(msg)
        bench.start_servers()
        meta["mariadb_version"] = "MariaDB " + bench.db.sql("SELECT VERSION()", db=None)[0][0]
        meta["ts_threads"] = int(bench.db.sql("SELECT @@tablesocket_threads", db=None)[0][0])
        bench.load()
        bench.check("load the data", None)
        if not a.skip_reads:
            bench.run_reads()
            if a.churn_shapes:
                bench.run_churn()
        if not a.skip_writes:
            bench.run_writes()
    except BenchError as e:
        fatal = str(e)
        log(f"FATAL: {e}")
    except tsserver.ServerError as e:
        fatal = str(e)
        log(f"FATAL: {e}")
    except KeyboardInterrupt:
        interrupted = True
        fatal = "interrupted"
        log("interrupted")
    finally:
        bench.stop_servers()

    meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["elapsed_s"] = time.monotonic() - t_start
    agg = aggregate(bench.measurements)
    for s in SYSTEMS:
        if any(m["system"] == s for m in bench.measurements):
            bad = [f["text"] for f in bench.failures if f["system"] == s]
            bench.check(f"every answer of {SYSTEMS[s][0]} verified", "\n".join(bad) if bad else None)

    if bench.measurements or not fatal:
        out.mkdir(parents=True, exist_ok=True)
        data = {"meta": meta, "summary": agg, "measurements": bench.measurements, "failures": bench.failures,
                "fatal": fatal}
        (out / "results.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
        md = render_markdown(meta, agg, bench.failures)
        if fatal:
            md = f"**The run did not complete: {fatal.splitlines()[0]}**\n\n" + md
        (out / "results.md").write_text(md)
        chart_failure = None
        if not a.no_chart:
            chart_failure = write_chart(out / "results.json", out / "chart.png")
            bench.check("chart.png written", chart_failure)
            if chart_failure:
                log(chart_failure)
        log(f"results in {out}")
        if not a.smoke and not a.no_latest and not fatal and not a.out:
            latest = RESULTS / "latest"
            if latest.is_symlink() or latest.is_file():
                latest.unlink()
            shutil.rmtree(latest, ignore_errors=True)
            shutil.copytree(out, latest)
            log(f"copied to {latest}")
        print(md)
    if a.junit:
        junit(Path(a.junit), bench.checks, meta["elapsed_s"])
    failed_checks = [n for n, f in bench.checks if f]
    if fatal or failed_checks:
        log(f"FAILED: {fatal or ''} {'; '.join(failed_checks)}".strip())
        return 130 if interrupted else 1
    log(f"done in {meta['elapsed_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
