"""Helpers for the durability / replication / lock-containment / robustness tests (and
bench/write_bench.py): private servers with extra mysqld arguments, a long-lived SQL session,
status counters, a bounded multi-threaded load driver.

Built only on tsserver's public pieces (MariaDBServer(extra_args=...), HSConn); tsserver.py itself
is not changed. Every server here is a private `mariadbd` on 127.0.0.1 with tablesocket loaded.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tsserver  # noqa: E402
from tsserver import HSConn, LineConn, MariaDBServer, ServerError  # noqa: E402,F401

MARIADB_ADMIN = shutil.which("mariadb-admin") or "/usr/bin/mariadb-admin"
MARIADB_BINLOG = shutil.which("mariadb-binlog") or "/usr/bin/mariadb-binlog"


# --------------------------------------------------------------------------------------------------
# servers


def make_server(name: str, extra_args: Sequence[str] = (), **kw) -> MariaDBServer:
    """A (not yet started) tablesocket server; extra_args come last on the mariadbd command line,
    so they override tsserver's defaults (e.g. --innodb-flush-log-at-trx-commit=1, --log-bin)."""
    return MariaDBServer("tablesocket", name=name, extra_args=list(extra_args), **kw)


@contextlib.contextmanager
def private_server(request, name: str, extra_args: Sequence[str] = (), **kw) -> Iterator[MariaDBServer]:
    """Start a private server for a test or module; stop it afterwards. The run directory is kept
    (and its log tail printed) if a test failed meanwhile, if mariadbd died, or with TS_KEEP_VAR=1."""
    import pytest

    srv = make_server(name, extra_args, **kw)
    failed_before = request.session.testsfailed
    try:
        srv.start()
    except ServerError as e:
        srv.stop()
        pytest.fail(f"could not start the server {name}: {e}", pytrace=False)
    failed = False
    try:
        yield srv
    except BaseException:
        failed = True
        raise
    finally:
        alive = srv.running() or srv.proc is None
        srv.stop()
        failed = failed or request.session.testsfailed > failed_before
        if failed or not alive or os.environ.get("TS_KEEP_VAR"):
            sys.stderr.write(f"\n[ts_harness] {name}: run directory kept: {srv.rundir}\n"
                             f"--- tail of {srv.log_path} ---\n{srv.log_tail(40)}\n")
        else:
            shutil.rmtree(srv.rundir, ignore_errors=True)


def kill9(srv: MariaDBServer) -> None:
    """SIGKILL mariadbd (no shutdown, no flush) and wait for it to be gone."""
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(timeout=30)
    srv.proc = None
    tsserver._LIVE.discard(srv)


def admin_shutdown(srv: MariaDBServer, timeout: float = 60.0) -> float:
    """`mariadb-admin shutdown`; returns seconds until the mariadbd process exited."""
    t0 = time.monotonic()
    subprocess.run([MARIADB_ADMIN, "--no-defaults", "-uroot", f"--socket={srv.socket}",
                    "--connect-timeout=10", "shutdown"],
                   check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    assert srv.proc is not None
    srv.proc.wait(timeout=timeout)
    took = time.monotonic() - t0
    srv.proc = None
    tsserver._LIVE.discard(srv)
    return took


def raise_nofile(want: int) -> int:
    """Raise this process's RLIMIT_NOFILE soft limit towards `want` (capped by the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft == resource.RLIM_INFINITY or soft >= new:
        return soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return new


# --------------------------------------------------------------------------------------------------
# SQL


def sql_conn(srv: MariaDBServer, db: str | None = "test", autocommit: bool = True, tcp: bool = False,
             read_timeout: int = 60):
    """A plain PyMySQL connection (str values) for sessions that must stay open (BEGIN ... FOR UPDATE)."""
    import pymysql
    kw = dict(user="root", password="", database=db, charset="utf8mb4", autocommit=autocommit,
              connect_timeout=10, read_timeout=read_timeout, write_timeout=60)
    if tcp:
        return pymysql.connect(host=tsserver.LOOPBACK, port=srv.sql_port, **kw)
    return pymysql.connect(unix_socket=srv.socket, **kw)


def status(srv: MariaDBServer, like: str = "Tablesocket%") -> dict[str, int]:
    out = {}
    for name, value in srv.sql("SHOW GLOBAL STATUS LIKE %s", (like,), db=None):
        try:
            out[name.lower()] = int(value)
        except (TypeError, ValueError):
            pass
    return out


def variable(srv: MariaDBServer, name: str) -> str | None:
    rows = srv.sql(f"SELECT @@GLOBAL.{name}", db=None)
    return rows[0][0] if rows else None


@contextlib.contextmanager
def global_setting(srv: MariaDBServer, name: str, value) -> Iterator[None]:
    """SET GLOBAL name = value (a numeric variable) for a with-block; its previous value after."""
    old = variable(srv, name)
    srv.exec_sql(f"SET GLOBAL {name} = {value}", db=None)
    try:
        yield
    finally:
        srv.exec_sql(f"SET GLOBAL {name} = {old}", db=None)


# --------------------------------------------------------------------------------------------------
# HS


def hs_open(port: int, table: str, columns: str, *, db: str = "test", index: str = "PRIMARY",
            index_id: int = 1, timeout: float = 10.0) -> HSConn:
    """A connection with index `index_id` opened on db.table(columns)."""
    c = HSConn(port, timeout=timeout)
    reply = c.request(f"P\t{index_id}\t{db}\t{table}\t{index}\t{columns}\n")
    if reply != b"0\t1\n":
        c.close()
        raise AssertionError(f"open_index {db}.{table}.{index}({columns}) answered {reply!r}")
    return c


def hs_split(reply: bytes) -> list[bytes]:
    """Reply line -> unescaped tokens (without the trailing LF)."""
    line = reply[:-1] if reply.endswith(b"\n") else reply
    out = []
    for tok in line.split(b"\t"):
        if tok == b"\x00":
            out.append(None)
            continue
        b = bytearray()
        i = 0
        while i < len(tok):
            if tok[i] == 0x01 and i + 1 < len(tok):
                b.append(tok[i + 1] - 0x40)
                i += 2
            else:
                b.append(tok[i])
                i += 1
        out.append(bytes(b))
    return out


def reset(conn) -> None:
    """Closes conn (anything with a .sock, or a socket) with a TCP reset rather than a FIN:
    SO_LINGER 0, as a client that exits with replies unread does."""
    sock = getattr(conn, "sock", conn)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def sql_eventually(srv: MariaDBServer, query: str, want, timeout: float = 5.0):
    """Runs query every 50 ms until it returns want or timeout passes; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        rows = srv.sql(query)
        if rows == want or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def closed_now(conn: HSConn) -> bool:
    """Without waiting: has the peer closed (EOF or reset)? Data that arrived is kept in conn.buf."""
    import select
    while True:
        r, _, _ = select.select([conn.sock], [], [], 0)
        if not r:
            return False
        try:
            chunk = conn.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not chunk:
            return True
        conn.buf += chunk


def wait_closed(conn: LineConn, timeout: float) -> float | None:
    """Seconds until the peer closes `conn` (EOF or reset), or None if it is still open after `timeout`."""
    t0 = time.monotonic()
    if conn.is_closed_by_peer(timeout):
        return time.monotonic() - t0
    return None


# --------------------------------------------------------------------------------------------------
# bounded load from threads


class Load:
    """Runs `n` threads, each calling step(i, ctx) in a loop until stop() or `max_seconds`.

    ctx = setup(i) runs once per thread (e.g. opens a connection); step returns nothing and raises
    to record an error (the thread then calls setup again after `reconnect_delay`, if reconnect).
    Latencies of each step are kept, with the wall-clock time each one finished."""

    def __init__(self, n: int, setup: Callable[[int], object], step: Callable[[int, object], None],
                 *, max_seconds: float = 30.0, reconnect: bool = False, reconnect_delay: float = 0.05,
                 teardown: Callable[[object], None] | None = None):
        self.n, self.setup, self.step, self.teardown = n, setup, step, teardown
        self.max_seconds, self.reconnect, self.reconnect_delay = max_seconds, reconnect, reconnect_delay
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.samples: list[tuple[float, float, int]] = []  # (end time, latency, thread)
        self.errors: list[tuple[float, int, str]] = []     # (time, thread, repr)
        self.ok = [0] * n
        self.threads: list[threading.Thread] = []
        self.ready = threading.Barrier(n + 1)

    def _run(self, i: int) -> None:
        deadline = time.monotonic() + self.max_seconds
        ctx = None
        try:
            try:
                ctx = self.setup(i)
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    self.errors.append((time.monotonic(), i, f"setup: {e!r}"))
            try:
                self.ready.wait(timeout=60)
            except threading.BrokenBarrierError:
                return
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                if ctx is None:
                    if not self.reconnect:
                        return
                    time.sleep(self.reconnect_delay)
                    try:
                        ctx = self.setup(i)
                    except Exception as e:  # noqa: BLE001
                        with self.lock:
                            self.errors.append((time.monotonic(), i, f"setup: {e!r}"))
                        continue
                t0 = time.monotonic()
                try:
                    self.step(i, ctx)
                except Exception as e:  # noqa: BLE001
                    with self.lock:
                        self.errors.append((time.monotonic(), i, repr(e)))
                    if self.teardown:
                        with contextlib.suppress(Exception):
                            self.teardown(ctx)
                    ctx = None
                    continue
                t1 = time.monotonic()
                with self.lock:
                    self.samples.append((t1, t1 - t0, i))
                    self.ok[i] += 1
        finally:
            if ctx is not None and self.teardown:
                with contextlib.suppress(Exception):
                    self.teardown(ctx)

    def start(self) -> "Load":
        for i in range(self.n):
            t = threading.Thread(target=self._run, args=(i,), daemon=True, name=f"load-{i}")
            t.start()
            self.threads.append(t)
        self.ready.wait(timeout=60)
        self.started_at = time.monotonic()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"load threads still running after {timeout}s: {alive}"

    def latencies_between(self, t0: float, t1: float) -> list[float]:
        with self.lock:
            return [lat for (end, lat, _) in self.samples if t0 <= end <= t1]

    def count_between(self, t0: float, t1: float) -> int:
        return len(self.latencies_between(t0, t1))

    def total_ok(self) -> int:
        with self.lock:
            return sum(self.ok)


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def connect_raw(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection((tsserver.LOOPBACK, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def start_clients(target, logs: list, port: int) -> tuple[list[threading.Thread], threading.Event]:
    """One daemon thread per log running target(i, port, logs[i], stop, started): each sets up its
    connection, then waits on the barrier `started`, so all begin together. Returns (threads, stop)
    once every client is set up; fails the test if one could not (it aborts the barrier and leaves
    the reason in its log's `end`)."""
    import pytest

    stop = threading.Event()
    started = threading.Barrier(len(logs) + 1)
    threads = [threading.Thread(target=target, args=(i, port, logs[i], stop, started), daemon=True)
               for i in range(len(logs))]
    for t in threads:
        t.start()
    try:
        started.wait(timeout=30)
    except threading.BrokenBarrierError:
        stop.set()
        pytest.fail(f"clients could not start: {[lg.end for lg in logs if lg.end]}")
    return threads, stop


@contextlib.contextmanager
def backup_stage(srv, *stages: str) -> Iterator[None]:
    """BACKUP STAGE START and then each of `stages` (e.g. "BLOCK_COMMIT", what mariabackup holds
    while it copies the last files) from an SQL session of its own, for the duration of the with
    block; BACKUP STAGE END when it ends."""
    conn = sql_conn(srv, db=None)
    try:
        with conn.cursor() as c:
            c.execute("BACKUP STAGE START")
            for stage in stages:
                c.execute(f"BACKUP STAGE {stage}")
        try:
            yield
        finally:
            with conn.cursor() as c:
                c.execute("BACKUP STAGE END")
    finally:
        conn.close()
