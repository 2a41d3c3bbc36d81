"""A private MariaDB server with an HS-protocol plugin loaded, for the integration tests.

Used by conftest.py (pytest fixtures) and, as a command-line tool, by scripts/hs_regtest.sh:

    python tests/integration/tsserver.py serve [--hs-port 9998 --hs-port-wr 9999]
        [--mysqld-arg=--some-option ...] [-- CMD ...]

The plugin under test comes from the environment:

    TS_PLUGIN     = tablesocket (default) | handlersocket
    TS_PLUGIN_SO  = path of tablesocket.so (default <repo>/build/tablesocket.so)

Everything listens on 127.0.0.1 only.  Nothing here knows anything about the plugin's internals:
the same code drives Debian's handlersocket.so and our tablesocket.so.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_PLUGIN_DIR = Path(os.environ.get("TS_SYSTEM_PLUGIN_DIR", "/usr/lib/mysql/plugin"))
MARIADBD = os.environ.get("TS_MARIADBD", shutil.which("mariadbd") or "/usr/sbin/mariadbd")
INSTALL_DB = os.environ.get("TS_INSTALL_DB", shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db")
LOOPBACK = "127.0.0.1"
MARIADB_CLIENT = os.environ.get("TS_MARIADB", shutil.which("mariadb") or "/usr/bin/mariadb")
MC_SCHEMA_SQL = REPO_ROOT / "sql" / "memcached_schema.sql"

PLUGINS = ("tablesocket", "handlersocket")


class ServerError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------------
# small helpers


def plugin_under_test() -> str:
    p = os.environ.get("TS_PLUGIN", "tablesocket").strip() or "tablesocket"
    if p not in PLUGINS:
        raise ServerError(f"TS_PLUGIN={p!r}: must be one of {', '.join(PLUGINS)}")
    return p


def tablesocket_so() -> Path:
    return Path(os.environ.get("TS_PLUGIN_SO") or (REPO_ROOT / "build" / "tablesocket.so"))


def free_ports(n: int, exclude: Iterable[int] = ()) -> list[int]:
    """n distinct currently-free TCP ports on 127.0.0.1 (racy by nature; callers retry)."""
    socks, ports = [], []
    exclude = set(exclude)
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
            socks.append(s)
            if port not in exclude and port not in ports:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def port_is_free(port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((LOOPBACK, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def port_accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout):
            return True
    except OSError:
        return False


def tail(path: Path | str, lines: int = 60) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    text = data.decode("utf-8", "replace").splitlines()
    return "\n".join(text[-lines:])


def _default_base_dir() -> Path:
    """Where per-run server directories go: $TS_TEST_VAR, else <repo>/var (git-ignored).

    A unix socket path must stay under 108 bytes, so a deep checkout falls back to /tmp."""
    base = os.environ.get("TS_TEST_VAR")
    if base:
        return Path(base)
    cand = REPO_ROOT / "var"
    if len(str(cand)) > 60:
        return Path(tempfile.gettempdir()) / "tablesocket-var"
    return cand


_TEMPLATE_CACHE: dict[str, Path] = {}
_LIVE: "set[MariaDBServer]" = set()


def _at_exit() -> None:
    for srv in list(_LIVE):          # servers a crashed or interrupted caller left running
        srv.stop(timeout=30)
    for d in _TEMPLATE_CACHE.values():
        shutil.rmtree(d.parent, ignore_errors=True)


atexit.register(_at_exit)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def prune_rundirs(base: Path, keep: int = 5) -> None:
    """Delete run directories of dead processes (name: <kind>-<name>-<pid>-<rand>), keeping the
    `keep` newest test-* ones (they are kept after failures, for their logs)."""
    try:
        entries = [p for p in base.iterdir() if p.is_dir()]
    except OSError:
        return
    dead = []
    for p in entries:
        parts = p.name.split("-")
        if len(parts) >= 3 and parts[0] in ("test", "template"):
            pid = parts[-2] if parts[-2].isdigit() else None
            if pid and not _pid_alive(int(pid)):
                dead.append(p)
    for p in dead:
        if p.name.startswith("template-"):
            shutil.rmtree(p, ignore_errors=True)
    tests = sorted((p for p in dead if p.name.startswith("test-")), key=lambda p: p.stat().st_mtime,
                   reverse=True)
    for p in tests[keep:]:
        shutil.rmtree(p, ignore_errors=True)


def _set_pdeathsig() -> None:
    """In the child: get SIGTERM if the parent dies, so no orphaned mariadbd outlives a killed run."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    os.setsid()


def _template_datadir(base: Path) -> Path:
    """One freshly installed (empty) datadir per process, copied for every server we start."""
    key = str(base)
    if key in _TEMPLATE_CACHE and (_TEMPLATE_CACHE[key] / "mysql").is_dir():
        return _TEMPLATE_CACHE[key]
    base.mkdir(parents=True, exist_ok=True)
    tdir = Path(tempfile.mkdtemp(prefix=f"template-{os.getpid()}-", dir=base))
    datadir = tdir / "data"
    cmd = [INSTALL_DB, "--no-defaults", f"--datadir={datadir}", "--user=root",
           "--auth-root-authentication-method=normal", "--skip-test-db"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not (datadir / "mysql").is_dir():
        raise ServerError(f"mariadb-install-db failed ({r.returncode}):\n{r.stdout[-4000:]}")
    _TEMPLATE_CACHE[key] = datadir
    return datadir


# --------------------------------------------------------------------------------------------------


class MariaDBServer:
    """A private mariadbd with the plugin under test.

    Attributes: plugin, hs_port (read), hs_port_wr (read/write), sql_port, socket, datadir,
    log_path, rundir, pid; mc_port (tablesocket only: the memcached port, a free port chosen with
    the others; None with handlersocket).
    """

    def __init__(self, plugin: str | None = None, *, hs_port: int | None = None,
                 hs_port_wr: int | None = None, sql_port: int | None = None,
                 base_dir: Path | str | None = None, plugin_so: Path | str | None = None,
                 extra_args: Sequence[str] = (), name: str = "srv",
                 start_timeout: float = 90.0):
        self.plugin = plugin or plugin_under_test()
        if self.plugin not in PLUGINS:
            raise ServerError(f"unknown plugin {self.plugin!r}")
        self._fixed_ports = (hs_port, hs_port_wr, sql_port)
        self.hs_port, self.hs_port_wr, self.sql_port = hs_port, hs_port_wr, sql_port
        self.mc_port: int | None = None
        self.base_dir = Path(base_dir) if base_dir else _default_base_dir()
        self.plugin_so = Path(plugin_so) if plugin_so else (
            tablesocket_so() if self.plugin == "tablesocket" else DEBIAN_PLUGIN_DIR / "handlersocket.so")
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self.base_dir.mkdir(parents=True, exist_ok=True)
        prune_rundirs(self.base_dir)
        self.rundir = Path(tempfile.mkdtemp(prefix=f"test-{name}-{os.getpid()}-", dir=self.base_dir))
        self.datadir = self.rundir / "data"
        self.socket = str(self.rundir / "sock")
        self.log_path = self.rundir / "error.log"
        self.plugin_dir = self.rundir / "plugin"
        self.tmpdir = self.rundir / "tmp"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._prepared = False

    # ---- lifecycle ---------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self._prepared:
            return
        try:
            import pymysql  # noqa: F401
        except ImportError:
            raise ServerError("PyMySQL is missing: pip install -r tests/requirements.txt into the venv "
                              "(scripts/setup.sh does it for a new venv)") from None
        if self.plugin == "tablesocket" and not self.plugin_so.is_file():
            raise ServerError(f"tablesocket plugin not found at {self.plugin_so} "
                              "(build it, set TS_PLUGIN_SO, or run with TS_PLUGIN=handlersocket)")
        if self.plugin == "handlersocket" and not self.plugin_so.is_file():
            raise ServerError(f"handlersocket plugin not found at {self.plugin_so}")
        # A private plugin dir: Debian's plugins plus ours, so either can be loaded.
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        for so in sorted(DEBIAN_PLUGIN_DIR.glob("*.so")):
            (self.plugin_dir / so.name).symlink_to(so)
        if self.plugin == "tablesocket":
            link = self.plugin_dir / "tablesocket.so"
            if link.exists() or link.is_symlink():
                link.unlink()
            link.symlink_to(self.plugin_so.resolve())
        self.tmpdir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(_template_datadir(self.base_dir), self.datadir, symlinks=True)
        self._prepared = True

    def plugin_args(self) -> list[str]:
        if self.plugin == "handlersocket":
            return ["--plugin-load-add=handlersocket.so",
                    f"--loose-handlersocket_port={self.hs_port}",
                    f"--loose-handlersocket_port_wr={self.hs_port_wr}",
                    f"--loose-handlersocket_address={LOOPBACK}",
                    "--loose-handlersocket_threads=2",
                    "--loose-handlersocket_threads_wr=1"]
        return ["--plugin-load-add=tablesocket.so",
                f"--tablesocket-hs-port={self.hs_port}",
                f"--tablesocket-hs-port-wr={self.hs_port_wr}",
                f"--tablesocket-mc-port={self.mc_port or 0}",
                f"--tablesocket-address={LOOPBACK}"]

    def command(self) -> list[str]:
        return [MARIADBD, "--no-defaults",
                f"--datadir={self.datadir}", f"--socket={self.socket}",
                f"--port={self.sql_port}", f"--bind-address={LOOPBACK}",
                "--user=root", f"--plugin-dir={self.plugin_dir}", "--plugin-maturity=beta",
                f"--log-error={self.log_path}", f"--pid-file={self.rundir / 'mariadbd.pid'}",
                f"--tmpdir={self.tmpdir}", "--skip-name-resolve",
                "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M",
                "--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0",
                "--skip-log-bin", "--max-connections=200",
                # A leaked HS connection holds table metadata locks; make DDL fail instead of
                # hanging for a day.
                "--lock-wait-timeout=60",
                "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
                *self.plugin_args(), *self.extra_args]

    def _choose_ports(self) -> None:
        fixed = self._fixed_ports
        want = [p for p in fixed if p is None]
        new = iter(free_ports(len(want), exclude=[p for p in fixed if p]))
        self.hs_port, self.hs_port_wr, self.sql_port = (p if p else next(new) for p in fixed)
        if self.plugin == "tablesocket":  # else the memcached listener takes 11211, its default
            given = [a.split("=", 1)[1] for a in self.extra_args
                     if a.replace("_", "-").startswith("--tablesocket-mc-port=")]
            # a port given in the extra arguments (the last one wins, as in mariadbd) is the one
            self.mc_port = int(given[-1]) if given else \
                free_ports(1, exclude=[self.hs_port, self.hs_port_wr, self.sql_port])[0]

    def start(self) -> "MariaDBServer":
        if self.running():
            return self
        self._prepare()
        attempts = 1 if all(self._fixed_ports) else 3
        last_err: Exception | None = None
        for attempt in range(attempts):
            if self.starts == 0 or not all(p for p in (self.hs_port, self.hs_port_wr, self.sql_port)):
                self._choose_ports()
            busy = [p for p in (self.hs_port, self.hs_port_wr, self.sql_port) if not port_is_free(p)]
            if busy:
                last_err = ServerError(f"ports already in use on {LOOPBACK}: {busy}")
                if all(self._fixed_ports) or attempt == attempts - 1:
                    raise last_err
                self.starts = 0
                continue
            try:
                self._spawn_and_wait()
                self.starts += 1
                return self
            except ServerError as e:
                last_err = e
                self._kill()
                if "in use" not in str(e) or attempt == attempts - 1:
                    raise
                self.starts = 0
        raise last_err or ServerError("could not start")

    def _spawn_and_wait(self) -> None:
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.rundir / "mariadbd.stdout", "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_set_pdeathsig)
        _LIVE.add(self)
        deadline = time.monotonic() + self.start_timeout
        sql_ok = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(self._failure(f"mariadbd exited with {self.proc.returncode} during startup",
                                                log_offset))
            if not sql_ok:
                sql_ok = self._sql_ping()
            if sql_ok and port_accepts(self.hs_port) and port_accepts(self.hs_port_wr):
                self.exec_sql("CREATE DATABASE IF NOT EXISTS test", db=None)
                if self.plugin == "tablesocket":
                    self.load_mc_schema()
                return
            time.sleep(0.1)
        raise ServerError(self._failure(
            f"server not ready after {self.start_timeout}s (sql={sql_ok}, hs={port_accepts(self.hs_port)}, "
            f"hs_wr={port_accepts(self.hs_port_wr)})", log_offset))

    def _failure(self, msg: str, log_offset: int = 0) -> str:
        text = tail(self.log_path)
        if "Address already in use" in text or "bind" in text.lower() and "in use" in text.lower():
            msg += " (port in use)"
        return f"{msg}\ncommand: {' '.join(self.command())}\n--- tail of {self.log_path} ---\n{text}"

    def _sql_ping(self) -> bool:
        try:
            conn = self._connect(db=None, connect_timeout=1)
        except Exception:
            return False
        try:
            with conn.cursor() as c:
                c.execute("SELECT 1")
                # A Galera node refuses statements until it has joined its cluster.
                c.execute("SELECT @@GLOBAL.wsrep_on")
                if not int(c.fetchone()[0]):
                    return True
                c.execute("SHOW STATUS LIKE 'wsrep_ready'")
                row = c.fetchone()
            return row is None or row[1] in (b"ON", "ON")
        except Exception:
            return False
        finally:
            conn.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> None:
        """Orderly shutdown (SIGTERM), escalating to SIGKILL after `timeout` seconds."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                sys.stderr.write(f"[tsserver] mariadbd {self.proc.pid} did not stop in {timeout}s; killing\n")
                self._kill()
            except ProcessLookupError:
                pass
        self.proc = None
        _LIVE.discard(self)

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass

    def restart(self) -> "MariaDBServer":
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        """Stop and delete the run directory."""
        self.stop()
        shutil.rmtree(self.rundir, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def load_mc_schema(self) -> None:
        """sql/memcached_schema.sql (idempotent): the memcached containers, test.kv, test.demo_test."""
        with open(MC_SCHEMA_SQL, "rb") as f:
            r = subprocess.run([MARIADB_CLIENT, "--no-defaults", f"--socket={self.socket}", "-uroot"],
                               stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise ServerError(f"loading {MC_SCHEMA_SQL} failed ({r.returncode}): {r.stdout[-2000:]}")

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)

    def env(self) -> dict[str, str]:
        """How to reach this server, as environment variables (used by the CLI)."""
        return {"TS_SQL_SOCKET": self.socket, "TS_SQL_PORT": str(self.sql_port),
                "TS_HS_PORT": str(self.hs_port), "TS_HS_PORT_WR": str(self.hs_port_wr),
                "TS_SQL_HOST": LOOPBACK, "TS_DATADIR": str(self.datadir),
                "TS_ERROR_LOG": str(self.log_path), "TS_PLUGIN": self.plugin,
                "TS_SERVER_PID": str(self.pid or ""), "TS_MC_PORT": str(self.mc_port or "")}

    # ---- SQL ---------------------------------------------------------------------------------

    def _connect(self, db: str | None = "test", connect_timeout: int = 10):
        try:
            import pymysql
        except ImportError as e:  # pragma: no cover
            raise ServerError("PyMySQL is missing: pip install -r tests/requirements.txt into the venv") from e
        # Encoders only, no decoders, and use_unicode=False: every value comes back as the raw bytes
        # the server sent (None for NULL); bytes parameters are sent as _binary'...'.
        conv = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
        return pymysql.connect(unix_socket=self.socket, user="root", password="", database=db,
                               charset="utf8mb4", use_unicode=False, conv=conv, binary_prefix=True,
                               autocommit=True, connect_timeout=connect_timeout,
                               read_timeout=120, write_timeout=120)

    def sql_bytes(self, query: str, params=None, db: str | None = "test") -> list[tuple]:
        """Run one statement; rows as tuples of bytes/None (binary-safe). `params` uses %s."""
        conn = self._connect(db=db)
        try:
            with conn.cursor() as c:
                c.execute(query, params)
                rows = c.fetchall() if c.description else ()
            return [tuple(v if v is None or isinstance(v, bytes) else str(v).encode() for v in r)
                    for r in rows]
        finally:
            conn.close()

    def sql(self, query: str, params=None, db: str | None = "test") -> list[tuple]:
        """Run one statement; rows as tuples of str/None (UTF-8, undecodable bytes surrogate-escaped)."""
        return [tuple(None if v is None else v.decode("utf-8", "surrogateescape") for v in r)
                for r in self.sql_bytes(query, params, db=db)]

    def exec_sql(self, query: str, params=None, db: str | None = "test") -> int:
        """Run one statement for its effect; returns the affected-row count."""
        conn = self._connect(db=db)
        try:
            with conn.cursor() as c:
                return c.execute(query, params)
        finally:
            conn.close()

    def executemany(self, query: str, seq, db: str | None = "test") -> int:
        conn = self._connect(db=db)
        try:
            with conn.cursor() as c:
                return c.executemany(query, seq)
        finally:
            conn.close()

    def __repr__(self) -> str:
        return (f"<MariaDBServer {self.plugin} sql={self.sql_port} hs={self.hs_port} "
                f"hs_wr={self.hs_port_wr} dir={self.rundir}>")


# --------------------------------------------------------------------------------------------------
# raw HS client for exact-byte tests


class LineConn:
    """A raw client connection (TCP, or a unix socket) to a line protocol: send bytes, read whole
    reply lines (ending in `eol`) as bytes from a buffer. Reads never wait longer than `timeout`."""

    label = "server"      # names the protocol in timeout and EOF messages
    eol = b"\n"
    recv_size = 65536

    def __init__(self, port: int | None = None, host: str = LOOPBACK, timeout: float = 10.0,
                 unix_path: str | None = None):
        self.port = port
        self.timeout = timeout
        if unix_path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix_path)
        else:
            self.sock = socket.create_connection((host, port), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def is_closed_by_peer(self, timeout: float = 2.0) -> bool:
        """True if the server closes the connection within `timeout` (any pending data is dropped)."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
            return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True

    def _fill(self, deadline: float) -> bool:
        """Reads what arrives before `deadline` into the buffer; False at EOF, TimeoutError if nothing."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{self.label} reply timed out; have {self.buf[:300]!r}")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(self.recv_size)
        except socket.timeout:
            raise TimeoutError(f"{self.label} reply timed out; have {self.buf[:300]!r}") from None
        if not chunk:
            return False
        self.buf += chunk
        return True

    def recv_line(self, timeout: float | None = None) -> bytes:
        """One reply line, including its end of line. Raises EOFError if the peer closes first."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while self.eol not in self.buf:
            if not self._fill(deadline):
                raise EOFError(f"{self.label} connection closed; partial data {self.buf[:300]!r}")
        line, _, self.buf = self.buf.partition(self.eol)
        return line + self.eol

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HSConn(LineConn):
    """A raw HandlerSocket connection: send bytes, read whole reply lines as bytes."""

    label = "HS"

    def __init__(self, port: int, host: str = LOOPBACK, timeout: float = 10.0):
        super().__init__(port, host, timeout)

    def recv_lines(self, n: int, timeout: float | None = None) -> list[bytes]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        return [self.recv_line(max(0.001, deadline - time.monotonic())) for _ in range(n)]

    def recv_all(self, timeout: float = 0.5) -> bytes:
        """Whatever arrives within `timeout` (or until EOF), plus anything buffered."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            pass
        data, self.buf = self.buf, b""
        return data

    def request(self, data: bytes | str, timeout: float | None = None) -> bytes:
        """Send request line(s); return the concatenated replies, one per b'\\n' sent."""
        if isinstance(data, str):
            data = data.encode()
        n = data.count(b"\n")
        self.send(data)
        return b"".join(self.recv_lines(n, timeout))


def hs_escape(value: bytes | None) -> bytes:
    """Encode one HS token (None -> NUL)."""
    if value is None:
        return b"\x00"
    out = bytearray()
    for b in value:
        if b < 0x10:
            out += bytes((0x01, b + 0x40))
        else:
            out.append(b)
    return bytes(out)


def hs_line(*tokens) -> bytes:
    """Join tokens (bytes/str/int/None) with TAB, escaping bytes values, and append LF.

    str and int tokens are sent as they are (they are protocol words); bytes are escaped; None is NULL."""
    parts = []
    for t in tokens:
        if t is None:
            parts.append(b"\x00")
        elif isinstance(t, bytes):
            parts.append(hs_escape(t))
        else:
            parts.append(str(t).encode())
    return b"\t".join(parts) + b"\n"


# --------------------------------------------------------------------------------------------------
# command line: start a server, run a command against it, stop it


def _cli(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="tsserver.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="start a server; run CMD with TS_* variables set, or wait for SIGINT/SIGTERM")
    s.add_argument("--plugin", choices=PLUGINS, default=None)
    s.add_argument("--hs-port", type=int, default=None)
    s.add_argument("--hs-port-wr", type=int, default=None)
    s.add_argument("--sql-port", type=int, default=None)
    s.add_argument("--base-dir", default=None)
    s.add_argument("--keep", action="store_true", help="keep the run directory afterwards")
    s.add_argument("--mysqld-arg", action="append", default=[], metavar="ARG",
                   help="extra mariadbd option, repeatable; write it as --mysqld-arg=--sql-mode=")
    s.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    srv = MariaDBServer(a.plugin, hs_port=a.hs_port, hs_port_wr=a.hs_port_wr, sql_port=a.sql_port,
                        base_dir=a.base_dir, extra_args=a.mysqld_arg, name="cli")
    rc = 0
    stop_now = {"flag": False}

    def on_signal(signum, frame):
        stop_now["flag"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        try:
            srv.start()
        except ServerError as e:
            sys.stderr.write(f"[tsserver] {e}\n")
            return 3
        sys.stderr.write(f"[tsserver] started {srv}\n")
        env = dict(os.environ, **srv.env())
        if cmd:
            rc = subprocess.call(cmd, env=env)
            if not srv.running():
                sys.stderr.write(f"[tsserver] the server died during the run\n--- tail of {srv.log_path} ---\n"
                                 f"{srv.log_tail()}\n")
                rc = rc or 4
        else:
            for k, v in srv.env().items():
                print(f"{k}={v}", flush=True)
            while srv.running():
                time.sleep(0.5)
    except KeyboardInterrupt:
        rc = rc or 130
    finally:
        srv.stop()
        if rc != 0:
            sys.stderr.write(f"[tsserver] server log: {srv.log_path}\n")
        if not a.keep and rc == 0:
            shutil.rmtree(srv.rundir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
