"""The plugin's life in the server: init failing cleanly, the query cache, status counters."""

from __future__ import annotations

import os
import shutil
import time

import pytest

import ts_harness
from tsserver import HSConn, ServerError, free_ports

pytestmark = pytest.mark.tablesocket_only


def test_a_listener_that_cannot_bind_fails_init_cleanly_and_the_server_keeps_serving_sql():
    # 192.0.2.1 (TEST-NET-1) is not an address of this machine: bind() fails at once, nothing is sent.
    srv = ts_harness.make_server("badbind", ["--tablesocket-address=192.0.2.1"], start_timeout=10)
    try:
        with pytest.raises(ServerError) as e:
            srv.start()  # never "ready": the HandlerSocket ports do not exist
        # mariadbd came up and answered SQL all along; only the plugin stayed out.
        assert "sql=True" in str(e.value), "mariadbd itself must come up and answer SQL"
        log = srv.log_path.read_text(errors="replace")
        assert "tablesocket: not started: cannot bind hs listener to 192.0.2.1" in log
        assert "registration as a DAEMON failed" in log
        assert "got signal" not in log and "Assertion" not in log
    finally:
        srv.stop()


def test_with_force_a_plugin_that_cannot_start_stops_the_server_from_starting():
    """--tablesocket=FORCE (README): where the NoSQL ports matter more than SQL coming up alone,
    mariadbd refuses to start instead of running without the plugin."""
    srv = ts_harness.make_server("forcebind", ["--tablesocket-address=192.0.2.1", "--tablesocket=FORCE"],
                                 start_timeout=10)
    try:
        with pytest.raises(ServerError):
            srv.start()
        assert not srv.running(), "mariadbd must not run without a FORCE plugin"
        log = srv.log_path.read_text(errors="replace")
        assert "tablesocket: not started: cannot bind hs listener to 192.0.2.1" in log
        assert "registration as a DAEMON failed" in log and "Aborting" in log
        assert "got signal" not in log and "Assertion" not in log
    finally:
        srv.stop()


def test_equal_listener_ports_are_refused_with_a_clear_message():
    hs, hs_wr, sql = free_ports(3)
    srv = ts_harness.make_server("sameport", [f"--tablesocket-hs-port-wr={hs}"], hs_port=hs, hs_port_wr=hs_wr,
                                 sql_port=sql, start_timeout=10)
    try:
        with pytest.raises(ServerError) as e:
            srv.start()
        assert "sql=True" in str(e.value)
        log = srv.log_path.read_text(errors="replace")
        assert "tablesocket: not started: tablesocket_hs_port, tablesocket_hs_port_wr and " \
               "tablesocket_mc_port must differ" in log
    finally:
        srv.stop()


def _refused_start(name: str, args: list[str], message: str, **kw) -> None:
    """The plugin refuses to start with message in the log; mariadbd comes up and serves SQL."""
    srv = ts_harness.make_server(name, args, start_timeout=10, **kw)
    try:
        with pytest.raises(ServerError) as e:
            srv.start()
        assert "sql=True" in str(e.value), "mariadbd itself must come up and answer SQL"
        log = srv.log_path.read_text(errors="replace")
        assert f"tablesocket: not started: {message}" in log, log[-2000:]
        assert "tablesocket: listening on" not in log and "got signal" not in log
    finally:
        srv.stop()


def test_an_unknown_character_set_is_refused_before_anything_listens():
    # It left the plugin ACTIVE with its ports taking connections that no worker ever answered.
    _refused_start("badcs", ["--tablesocket-character-set=klingon"],
                   "unknown character set 'klingon' (tablesocket_character_set)")


def test_the_servers_own_sql_port_is_refused():
    # Bound by the plugin first, it made mariadbd abort ("Do you already have another server
    # running on port ...?"), blaming the wrong process.
    hs, hs_wr, sql = free_ports(3)
    _refused_start("sqlport", [f"--tablesocket-mc-port={sql}"], f"tablesocket_mc_port {sql} is the server's own SQL port",
                   hs_port=hs, hs_port_wr=hs_wr, sql_port=sql)


def test_a_unix_socket_another_process_listens_on_is_not_taken_over(tmp_path):
    import socket
    path = str(tmp_path / "other.sock")
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(path)
    other.listen(4)
    try:
        _refused_start("livesock", [f"--tablesocket-mc-socket={path}"],
                       f"another process is listening on unix socket {path}")
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)  # still the other process's
        c.close()
    finally:
        other.close()


def test_every_listener_off_is_warned_about():
    # A plugin shown ACTIVE that no client can reach said nothing about it in the log.
    srv = ts_harness.make_server("noports", ["--tablesocket-hs-port=0", "--tablesocket-hs-port-wr=0",
                                             "--tablesocket-mc-port=0"], start_timeout=4)
    try:
        with pytest.raises(ServerError) as e:
            srv.start()  # never "ready": no HandlerSocket port to accept
        assert "sql=True" in str(e.value)
        log = srv.log_path.read_text(errors="replace")
        assert "[Warning] tablesocket: every listener is off (tablesocket_hs_port, _hs_port_wr and _mc_port 0, " \
               "no tablesocket_mc_socket): the plugin is active but no client can reach it" in log, log[-2000:]
        assert "tablesocket: not started" not in log and "got signal" not in log
    finally:
        srv.stop()


def test_default_worker_count_is_one_per_cpu_of_the_server(server):
    # tablesocket_threads=0 (the default) becomes the number of CPUs in the server's affinity mask,
    # which it inherits from this test process; the variable shows the number chosen.
    want = min(64, len(os.sched_getaffinity(0)))
    assert ts_harness.variable(server, "tablesocket_threads") == str(want)


class _PinnedServer(ts_harness.MariaDBServer):
    """mariadbd started under taskset, as the benchmark starts it."""

    def __init__(self, cpus: str, *a, **kw):
        self.cpus = cpus
        super().__init__("tablesocket", *a, **kw)

    def command(self):
        return ["taskset", "-c", self.cpus] + super().command()


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is missing")
def test_a_server_pinned_to_one_cpu_runs_one_worker_and_serves():
    cpu = min(os.sched_getaffinity(0))
    srv = _PinnedServer(str(cpu), name="pinned")
    try:
        srv.start()
        assert ts_harness.variable(srv, "tablesocket_threads") == "1"
        log = srv.log_path.read_text(errors="replace")
        assert ", 1 workers" in log
        srv.sql("CREATE TABLE test.pinned (id INT PRIMARY KEY, v VARCHAR(10))")
        srv.sql("INSERT INTO test.pinned VALUES (1, 'one'), (2, 'two')")
        conns = [HSConn(srv.hs_port) for _ in range(4)]  # all served by the one worker
        for c in conns:
            assert c.request("P\t1\ttest\tpinned\tPRIMARY\tv\n") == b"0\t1\n"
        for i, c in enumerate(conns):
            want = [b"one", b"two"][i % 2]
            assert c.request(f"1\t=\t1\t{1 + i % 2}\n") == b"0\t1\t" + want + b"\n"
        for c in conns:
            c.close()
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def qc_server(request):
    with ts_harness.private_server(request, "qcache", ["--query-cache-type=1", "--query-cache-size=4M"]) as srv:
        yield srv


def test_a_write_through_tablesocket_invalidates_the_query_cache(qc_server):
    srv = qc_server
    srv.exec_sql("CREATE TABLE IF NOT EXISTS test.qc (id INT PRIMARY KEY, v VARCHAR(10))")
    srv.exec_sql("REPLACE INTO test.qc VALUES (1, 'old')")

    def cached_select():
        return srv.sql("SELECT SQL_CACHE v FROM qc WHERE id = 1")

    assert cached_select() == [("old",)]
    hits = ts_harness.status(srv, "Qcache_hits")["qcache_hits"]
    assert cached_select() == [("old",)]
    assert ts_harness.status(srv, "Qcache_hits")["qcache_hits"] == hits + 1, "the query cache is in use"
    with HSConn(srv.hs_port_wr) as c:
        assert c.request("P\t1\ttest\tqc\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\t1\t0\tU\t1\tnew\n") == b"0\t1\t1\n"
        assert cached_select() == [("new",)]  # a stale cached result would still say 'old'
        assert c.request("1\t+\t2\t2\ttwo\n") == b"0\t1\n"
    assert srv.sql("SELECT SQL_CACHE COUNT(*) FROM qc") == [("2",)]


def test_status_variables_count_connections_requests_rows_errors_and_batches(server, make_table):
    t = make_table("id INT PRIMARY KEY, v VARCHAR(10)", [(1, "a"), (2, "b"), (3, "c")])
    before = ts_harness.status(server)
    with HSConn(server.hs_port) as c:
        assert c.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t>=\t1\t1\t10\t0\n") == b"0\t2\t1\ta\t2\tb\t3\tc\n"
        assert c.request("1\t=\t1\t2\n") == b"0\t2\t2\tb\n"
        assert c.request("9\t=\t1\t2\n") == b"2\t1\tstmtnum\n"
        during = ts_harness.status(server)
    assert during["tablesocket_connections"] >= before["tablesocket_connections"] + 1
    assert during["tablesocket_connections_total"] >= before["tablesocket_connections_total"] + 1
    assert during["tablesocket_requests_open"] >= before["tablesocket_requests_open"] + 1
    assert during["tablesocket_requests_find"] >= before["tablesocket_requests_find"] + 2
    assert during["tablesocket_rows_read"] >= before["tablesocket_rows_read"] + 4
    assert during["tablesocket_errors"] >= before["tablesocket_errors"] + 1
    # a batch is a transaction: the two finds (one round trip each) made two; P and the error none
    assert during["tablesocket_batches"] >= before["tablesocket_batches"] + 2
    deadline = time.monotonic() + 5
    while ts_harness.status(server)["tablesocket_connections"] > during["tablesocket_connections"] - 1:
        assert time.monotonic() < deadline, "the closed connection is not counted down"
        time.sleep(0.05)
