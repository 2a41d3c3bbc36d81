"""pytest fixtures for the integration tests: a private MariaDB server with the HS plugin under test.

    TS_PLUGIN=handlersocket pytest -q tests/integration     # Debian's handlersocket.so (reference)
    pytest -q tests/integration                             # tablesocket (TS_PLUGIN_SO or build/tablesocket.so)

Fixtures:
    server      (session) MariaDBServer: .hs_port .hs_port_wr .sql_port .socket .datadir .log_path
                .plugin .sql() .sql_bytes() .exec_sql() .restart() .stop()
    hs          (function) factory of raw HS connections: hs() -> read port, hs(wr=True) -> write
                port; each an HSConn with .send() .recv_line() .recv_lines(n) .request() .close()
    make_table  (function) factory: make_table("k int primary key, v varchar(30)", rows) -> name
                of a fresh table in database `test`, dropped after the test
    plugin      (session) name of the plugin under test

Markers:
    @pytest.mark.tablesocket_only(reason)  behaviour tablesocket changes on purpose; skipped when
                                           TS_PLUGIN=handlersocket
    @pytest.mark.handlersocket_only(reason) HS behaviour tablesocket deliberately does not copy
    @pytest.mark.tablesocket_bug(reason)    correct behaviour a known tablesocket bug breaks: a strict
                                           xfail with tablesocket (an XPASS fails: drop the marker
                                           once the bug is fixed); runs normally with HS
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tsserver  # noqa: E402
from tsserver import HSConn, MariaDBServer, ServerError, hs_escape, hs_line  # noqa: E402,F401

_failures = {"count": 0}
_kept_servers: list[MariaDBServer] = []


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def pytest_configure(config):
    # A CI timeout's SIGTERM then still runs fixture teardown (which stops mariadbd).
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    config.addinivalue_line("markers", "tablesocket_only(reason): behaviour tablesocket changes on purpose; "
                                       "skipped when TS_PLUGIN=handlersocket")
    config.addinivalue_line("markers", "handlersocket_only(reason): HS behaviour tablesocket does not copy")
    config.addinivalue_line("markers", "tablesocket_bug(reason): known tablesocket bug; strict xfail with "
                                       "tablesocket")


def pytest_collection_modifyitems(config, items):
    try:
        plugin = tsserver.plugin_under_test()
    except ServerError:
        return
    for item in items:
        m = item.get_closest_marker("tablesocket_only")
        if m is not None and plugin != "tablesocket":
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"tablesocket only: {why}".rstrip(": ")))
        m = item.get_closest_marker("handlersocket_only")
        if m is not None and plugin != "handlersocket":
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.skip(reason=f"handlersocket only: {why}".rstrip(": ")))
        m = item.get_closest_marker("tablesocket_bug")
        if m is not None and plugin == "tablesocket":
            why = m.args[0] if m.args else m.kwargs.get("reason", "")
            item.add_marker(pytest.mark.xfail(reason=f"tablesocket bug: {why}", strict=True))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        _failures["count"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for srv in _kept_servers:
        terminalreporter.section(f"tail of {srv.log_path} ({srv.plugin})")
        terminalreporter.write_line(srv.log_tail(60))
        terminalreporter.write_line(f"(run directory kept: {srv.rundir})")


@pytest.fixture(scope="session")
def plugin() -> str:
    return tsserver.plugin_under_test()


@pytest.fixture(scope="session")
def server(plugin):
    srv = MariaDBServer(plugin, name="pytest")
    try:
        srv.start()
    except ServerError as e:
        _kept_servers.append(srv)
        srv.stop()
        pytest.fail(f"could not start the {plugin} server: {e}", pytrace=False)
    try:
        yield srv
    finally:
        alive = srv.running()
        srv.stop()
        if _failures["count"] or not alive or os.environ.get("TS_KEEP_VAR"):
            _kept_servers.append(srv)
        else:
            shutil.rmtree(srv.rundir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _ts_server_guard(request):
    """After each test that used the server: if mariadbd died, fail the test and restart it."""
    yield
    if "server" not in request.fixturenames:
        return
    srv = request.getfixturevalue("server")
    if srv.running():
        return
    rc = srv.proc.returncode if srv.proc else None
    text = srv.log_tail(60)
    srv.proc = None
    try:
        srv.start()
        restarted = "restarted"
    except ServerError as e:
        restarted = f"restart failed: {e}"
    pytest.fail(f"mariadbd died during this test (exit {rc}; {restarted})\n--- tail of {srv.log_path} ---\n{text}",
                pytrace=False)


class TableFactory:
    _seq = itertools.count(1)

    def __init__(self, server: MariaDBServer, test_name: str):
        self.server = server
        self.base = re.sub(r"[^0-9a-zA-Z_]", "_", test_name)[:40].strip("_").lower() or "t"
        self.created: list[str] = []

    def __call__(self, columns: str, rows=(), *, engine: str = "InnoDB", options: str = "",
                 name: str | None = None, db: str = "test") -> str:
        """Create `db`.`name` (columns) and insert rows (sequences of values; bytes are binary-safe).

        Returns the table name (unqualified)."""
        name = name or f"t{next(self._seq)}_{self.base}"
        self.server.exec_sql(f"DROP TABLE IF EXISTS `{db}`.`{name}`")
        self.server.exec_sql(f"CREATE TABLE `{db}`.`{name}` ({columns}) ENGINE={engine} {options}")
        self.created.append(f"`{db}`.`{name}`")
        rows = list(rows)
        if rows:
            marks = ",".join(["%s"] * len(rows[0]))
            self.server.executemany(f"INSERT INTO `{db}`.`{name}` VALUES ({marks})", rows, db=db)
        return name

    def drop_all(self) -> None:
        for t in reversed(self.created):
            try:
                self.server.exec_sql(f"DROP TABLE IF EXISTS {t}")
            except Exception as e:  # pragma: no cover - diagnostics only
                sys.stderr.write(f"[conftest] could not drop {t}: {e}\n")
        self.created.clear()


@pytest.fixture
def make_table(server, request):
    f = TableFactory(server, request.node.name)
    yield f
    f.drop_all()


class HSFactory:
    def __init__(self, server: MariaDBServer):
        self.server = server
        self.conns: list[HSConn] = []

    def __call__(self, wr: bool = False, port: int | None = None, timeout: float = 10.0) -> HSConn:
        c = HSConn(port or (self.server.hs_port_wr if wr else self.server.hs_port), timeout=timeout)
        self.conns.append(c)
        return c

    def close_all(self) -> None:
        for c in self.conns:
            c.close()
        self.conns.clear()


@pytest.fixture
def hs(server, make_table):
    """Raw HS connections; depends on make_table so that connections close before tables drop
    (an open HS connection keeps its tables' metadata locks, blocking DROP TABLE)."""
    f = HSFactory(server)
    yield f
    f.close_all()


@pytest.fixture(scope="module")
def mc_ref():
    """A private memcached (Debian's package): the protocol reference of the memcached tests."""
    from ts_mc import MemcachedRef
    if not MemcachedRef.available():
        pytest.skip("memcached is not installed (the protocol reference)")
    ref = MemcachedRef()
    try:
        ref.start()
    except RuntimeError as e:
        pytest.skip(str(e))
    yield ref
    ref.stop()
