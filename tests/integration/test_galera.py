"""tablesocket on a Galera cluster: with tablesocket_galera_writes=ON its writes replicate through
wsrep like SQL's; without it (the default) they are refused with a clear error.

Two nodes on loopback (Debian's galera-4 provider): node 1 bootstraps the cluster (with
pc.weight=2, so it keeps quorum alone), node 2 joins it by a mysqldump state transfer. A batch
that writes is a wsrep transaction: certified and replicated at its commit, in the cluster's
order. Before, a worker's rows committed only on the node that wrote them and the cluster
diverged silently (wsrep_replicated did not move).

Checked here: HandlerSocket and memcached writes on either node reach the other; a pipelined
burst is one write set; conflicting increments from both nodes at once (tablesocket on both,
plus SQL) leave both nodes identical and count every acknowledged increment exactly once (a batch
that loses a certification conflict fails as a failed commit does: its writers are closed
unanswered); a node isolated from the cluster (not in the primary component) refuses reads and
writes as SQL does, and serves again after rejoining; `SET GLOBAL wsrep_on=OFF` stops replicating
tablesocket's writes as it does SQL's.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

import ts_harness as h
from ts_mc import McConn
from tsserver import free_ports, hs_line

PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
NOT_READY = (b"this Galera node is not ready (not part of the primary component), as SQL reports it "
             b"(WSREP has not yet prepared node for application use): try again, or use another node")

pytestmark = [
    pytest.mark.tablesocket_only("tablesocket's writes through wsrep"),
    pytest.mark.skipif(not PROVIDER.exists(), reason=f"{PROVIDER} (Debian's galera-4) is not installed"),
]


def _common(gport: int) -> list[str]:
    return ["--tablesocket-galera-writes=ON",
            "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}", "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2", f"--wsrep-node-address=127.0.0.1:{gport}",
            "--wsrep-sst-method=mysqldump", "--wsrep-sst-auth=root:"]


def _state(srv) -> str:
    return srv.sql("SHOW STATUS LIKE 'wsrep_local_state_comment'", db=None)[0][1]


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001 - a node refusing statements while it joins
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="module")
def cluster(request):
    g1, g2, ist2 = free_ports(3)
    n1_args = _common(g1) + [
        "--wsrep-cluster-address=gcomm://",
        f"--wsrep-provider-options=base_port={g1};gmcast.listen_addr=tcp://127.0.0.1:{g1};pc.weight=2"]
    with h.private_server(request, "galera-1", n1_args) as n1:
        hs, hs_wr, sql = free_ports(3, exclude=[g1, g2, ist2])
        n2_args = _common(g2) + [
            f"--wsrep-cluster-address=gcomm://127.0.0.1:{g1}",
            f"--wsrep-provider-options=base_port={g2};gmcast.listen_addr=tcp://127.0.0.1:{g2};"
            f"ist.recv_addr=127.0.0.1:{ist2}",
            f"--wsrep-sst-receive-address=127.0.0.1:{sql}"]
        with h.private_server(request, "galera-2", n2_args, hs_port=hs, hs_port_wr=hs_wr, sql_port=sql) as n2:
            _wait(lambda: _state(n2) == "Synced" and _size(n1) == 2, 60, "node 2 to join")
            n1.exec_sql("CREATE TABLE g (id int primary key, v varchar(40), n bigint not null default 0) "
                        "ENGINE=InnoDB")
            _wait(lambda: n2.sql("SHOW TABLES LIKE 'g'"), 30, "the table on node 2")
            yield n1, n2


def _size(srv) -> int:
    return int(srv.sql("SHOW STATUS LIKE 'wsrep_cluster_size'", db=None)[0][1])


def _replicated(srv) -> int:
    return int(srv.sql("SHOW GLOBAL STATUS LIKE 'wsrep_replicated'", db=None)[0][1])


def _synced_rows(srv, query: str):
    """A read that waits until the node has applied everything committed before it (as a client
    asking for causal reads does)."""
    conn = h.sql_conn(srv)
    try:
        with conn.cursor() as c:
            c.execute("SET SESSION wsrep_sync_wait = 1")
            c.execute(query)
            return [tuple(x.decode() if isinstance(x, bytes) else None if x is None else str(x) for x in row)
                    for row in c.fetchall()]
    finally:
        conn.close()


def test_handlersocket_writes_on_one_node_reach_the_other(cluster):
    n1, n2 = cluster
    before = _replicated(n1)
    with h.hs_open(n1.hs_port_wr, "g", "id,v,n") as w:
        assert w.request(hs_line(1, "+", 3, "1", "one", "10")) == b"0\t1\n"
        assert w.request(hs_line(1, "+", 3, "2", "two", "20")) == b"0\t1\n"
        assert w.request(hs_line(1, "=", 1, "1", 1, 0, "U", "1", "uno", "11")) == b"0\t1\t1\n"
        assert w.request(hs_line(1, "=", 1, "2", 1, 0, "+", "0", None, "5")).startswith(b"0\t1\t1")
        assert w.request(hs_line(1, "+=", 3, "3", "three", "30")).startswith(b"0\t")
        assert w.request(hs_line(1, "+", 3, "4", "four", "40")) == b"0\t1\n"
        assert w.request(hs_line(1, "=", 1, "4", 1, 0, "D")) == b"0\t1\t1\n"
        assert w.request(hs_line(1, "+", 3, "1", "dup", "0")).startswith(b"1\t1\t")  # duplicate: fails alone
    assert _replicated(n1) >= before + 6
    want = [("1", "uno", "11"), ("2", "two", "25"), ("3", "three", "30")]
    assert _synced_rows(n2, "SELECT id, v, n FROM g WHERE id < 100 ORDER BY id") == want
    # And node 2's own tablesocket reads them.
    with h.hs_open(n2.hs_port, "g", "id,v,n") as r:
        assert r.request(hs_line(1, ">=", 1, "1", 10, 0)) == b"0\t3\t1\tuno\t11\t2\ttwo\t25\t3\tthree\t30\n"


def test_memcached_writes_on_node_2_reach_node_1(cluster):
    n1, n2 = cluster
    c = McConn(n2.mc_port)
    try:
        c.request("set gk1 5 0 5\r\nhello\r\n", b"STORED\r\n")
        c.request("set gctr 0 0 2\r\n40\r\n", b"STORED\r\n")
        c.request("incr gctr 2\r\n", b"42\r\n")
        c.request("set gk2 0 0 1\r\nx\r\n", b"STORED\r\n")
        c.request("delete gk2\r\n", b"DELETED\r\n")
    finally:
        c.close()
    rows = _synced_rows(n1, "SELECT k, v, flags FROM kv WHERE k LIKE 'g%' ORDER BY k")
    assert rows == [("gctr", "42", "0"), ("gk1", "hello", "5")]
    c = McConn(n1.mc_port)
    try:
        c.request("get gk1 gk2 gctr\r\n", b"VALUE gk1 5 5\r\nhello\r\nVALUE gctr 0 2\r\n42\r\nEND\r\n")
    finally:
        c.close()


def test_a_pipelined_burst_is_replicated_whole(cluster):
    n1, n2 = cluster
    with h.hs_open(n1.hs_port_wr, "g", "id,v,n") as w:
        burst = b"".join(hs_line(1, "+", 3, str(1000 + j), f"burst{j}", str(j)) for j in range(200))
        assert w.request(burst, timeout=20) == b"0\t1\n" * 200
    assert _synced_rows(n2, "SELECT COUNT(*), SUM(n) FROM g WHERE id BETWEEN 1000 AND 1199") == [("200", str(sum(range(200))))]


HOT = 8


def _hs_incrementer(port: int, stop: threading.Event, acked: list, unknown: list) -> None:
    """Pipelined increments of the hot rows; counts acknowledged ones and those whose outcome the
    server could not tell (the connection was closed after a failed commit)."""
    ok = lost = 0
    while not stop.is_set():
        try:
            w = h.hs_open(port, "g", "n")
        except OSError:
            time.sleep(0.05)
            continue
        try:
            while not stop.is_set():
                reqs = [hs_line(1, "=", 1, str(9000 + (ok + i) % HOT), 1, 0, "+", "1") for i in range(4)]
                w.send(b"".join(reqs))
                for _ in reqs:
                    line = w.recv_line(timeout=30)
                    if line == b"0\t1\t1\n":
                        ok += 1
                    else:
                        # An error (a lock wait timeout) was not applied; anything else is a bug.
                        assert line.startswith(b"1\t1\t"), line
        except (EOFError, ConnectionError, socket.timeout, TimeoutError, OSError):
            lost += 4  # at most the requests in flight: applied or not, nobody was told
        finally:
            w.close()
    acked.append(ok)
    unknown.append(lost)


def _sql_incrementer(srv, stop: threading.Event, acked: list) -> None:
    ok = 0
    conn = h.sql_conn(srv)
    try:
        i = 0
        while not stop.is_set():
            try:
                with conn.cursor() as c:
                    c.execute(f"UPDATE g SET n = n + 1 WHERE id = {9000 + i % HOT}")
                ok += 1
            except Exception:  # noqa: BLE001 - a deadlock from a certification conflict: not applied
                pass
            i += 1
    finally:
        conn.close()
    acked.append(ok)


def test_conflicting_increments_on_both_nodes_keep_the_cluster_identical(cluster):
    n1, n2 = cluster
    n1.exec_sql("DELETE FROM g WHERE id >= 9000")
    n1.exec_sql("INSERT INTO g (id, v, n) SELECT 9000 + seq, 'hot', 0 FROM seq_0_to_%d" % (HOT - 1))
    _wait(lambda: _synced_rows(n2, "SELECT COUNT(*) FROM g WHERE id >= 9000") == [(str(HOT),)], 30, "hot rows")
    stop = threading.Event()
    acked: list[int] = []
    unknown: list[int] = []
    threads = [threading.Thread(target=_hs_incrementer, args=(n.hs_port_wr, stop, acked, unknown))
               for n in (n1, n2, n1, n2)]
    threads += [threading.Thread(target=_sql_incrementer, args=(n, stop, acked)) for n in (n1, n2)]
    for t in threads:
        t.start()
    time.sleep(6)
    stop.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    total = sum(acked)
    assert total > 100, acked
    q = "SELECT SUM(n), COUNT(*) FROM g WHERE id >= 9000"
    s1 = _synced_rows(n1, q)
    s2 = _synced_rows(n2, q)
    assert s1 == s2, (s1, s2)
    got = int(s1[0][0])
    assert total <= got <= total + sum(unknown), (got, total, acked, unknown)
    # Both nodes hold exactly the same rows, and both servers are still up.
    assert _synced_rows(n1, "SELECT id, n FROM g ORDER BY id") == _synced_rows(n2, "SELECT id, n FROM g ORDER BY id")
    for n in (n1, n2):
        assert n.running()
        assert "signal " not in n.log_tail(200) and "Assertion" not in n.log_tail(200)


def test_an_isolated_node_refuses_reads_and_writes_as_sql_does(cluster):
    n1, n2 = cluster
    n2.exec_sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'", db=None)
    try:
        _wait(lambda: n2.sql("SHOW STATUS LIKE 'wsrep_ready'", db=None)[0][1] == "OFF", 30, "node 2 to leave")
        want = b"1\t1\t" + NOT_READY + b"\n"
        with h.hs_open(n2.hs_port, "g", "id,v,n") as r:
            assert r.request(hs_line(1, "=", 1, "1")) == want
        with h.hs_open(n2.hs_port_wr, "g", "id,v,n") as w:
            assert w.request(hs_line(1, "+", 3, "50", "isolated", "0")) == want
        c = McConn(n2.mc_port)
        try:
            c.request("set giso 0 0 1\r\nx\r\n", b"SERVER_ERROR " + NOT_READY + b"\r\n")
        finally:
            c.close()
        # Node 1 (weight 2) keeps the primary component and goes on writing.
        with h.hs_open(n1.hs_port_wr, "g", "id,v,n") as w:
            assert w.request(hs_line(1, "+", 3, "51", "while isolated", "0")) == b"0\t1\n"
    finally:
        n2.exec_sql("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'", db=None)
    _wait(lambda: _state(n2) == "Synced" and _size(n1) == 2, 60, "node 2 to rejoin")
    with h.hs_open(n2.hs_port, "g", "id,v,n") as r:
        _wait(lambda: r.request(hs_line(1, "=", 1, "51")) == b"0\t3\t51\twhile isolated\t0\n", 30,
              "node 2 to serve the row written meanwhile")
    assert _synced_rows(n1, "SELECT COUNT(*) FROM g WHERE id = 50") == [("0",)]


def test_wsrep_on_off_stops_replicating_tablesocket_writes_as_it_does_sqls(cluster):
    n1, n2 = cluster
    n1.exec_sql("SET GLOBAL wsrep_on = OFF", db=None)
    try:
        with h.hs_open(n1.hs_port_wr, "g", "id,v,n") as w:
            assert w.request(hs_line(1, "+", 3, "60", "local only", "0")) == b"0\t1\n"
    finally:
        n1.exec_sql("SET GLOBAL wsrep_on = ON", db=None)
    with h.hs_open(n1.hs_port_wr, "g", "id,v,n") as w:
        assert w.request(hs_line(1, "+", 3, "61", "replicated", "0")) == b"0\t1\n"
    assert _synced_rows(n2, "SELECT id FROM g WHERE id IN (60, 61)") == [("61",)]
    assert n1.sql("SELECT id FROM g WHERE id IN (60, 61) ORDER BY id") == [("60",), ("61",)]
    conn = h.sql_conn(n1)
    try:
        with conn.cursor() as c:  # the row only node 1 has goes the same way
            c.execute("SET SESSION wsrep_on = OFF")
            c.execute("DELETE FROM g WHERE id = 60")
    finally:
        conn.close()


def test_ddl_from_the_other_node_is_applied_past_open_tablesocket_tables(cluster):
    """A replicated ALTER (total order isolation) needs the table's metadata lock on every node:
    node 1's workers hold it open for readers and a writer, and give it up as for local DDL."""
    n1, n2 = cluster
    n1.exec_sql("CREATE TABLE gd (id int primary key, v varchar(20)) ENGINE=InnoDB")
    n1.exec_sql("INSERT INTO gd VALUES (1, 'a'), (2, 'b')")
    r = h.hs_open(n1.hs_port, "gd", "id,v")
    w = h.hs_open(n1.hs_port_wr, "gd", "id,v")
    try:
        assert r.request(hs_line(1, "=", 1, "1")) == b"0\t2\t1\ta\n"
        assert w.request(hs_line(1, "+", 2, "3", "c")) == b"0\t1\n"
        _wait(lambda: n2.sql("SELECT COUNT(*) FROM gd") == [("3",)], 30, "the rows on node 2")
        t0 = time.monotonic()
        n2.exec_sql("ALTER TABLE gd ADD COLUMN extra int NOT NULL DEFAULT 7")
        _wait(lambda: [c[0] for c in n1.sql("SHOW COLUMNS FROM gd")] == ["id", "v", "extra"], 30,
              "the ALTER on node 1")
        assert time.monotonic() - t0 < 10
        # The open indexes go on, on the table as it is now.
        assert r.request(hs_line(1, "=", 1, "3")) == b"0\t2\t3\tc\n"
        assert w.request(hs_line(1, "+", 2, "4", "d")) == b"0\t1\n"
    finally:
        r.close()
        w.close()
    assert _synced_rows(n2, "SELECT id, v, extra FROM gd ORDER BY id") == [
        ("1", "a", "7"), ("2", "b", "7"), ("3", "c", "7"), ("4", "d", "7")]


def _writer(port: int, table: str, start: int, stop: threading.Event, acked: list, lock: threading.Lock) -> None:
    """One HS insert at a time, as long as asked; records acknowledged ids. A closed connection
    (a batch that lost to the DDL) reconnects."""
    k = start
    while not stop.is_set():
        try:
            w = h.hs_open(port, table, "id,v")
        except OSError:
            time.sleep(0.05)
            continue
        try:
            while not stop.is_set():
                k += 1
                reply = w.request(hs_line(1, "+", 2, str(k), "w"), timeout=20)
                if reply == b"0\t1\n":
                    with lock:
                        acked.append(k)
        except (EOFError, ConnectionError, OSError, TimeoutError, socket.timeout):
            pass
        finally:
            w.close()


@pytest.mark.parametrize("ddl_node", [0, 1])
def test_ddl_on_a_table_being_written_is_applied_and_writes_go_on(cluster, ddl_node):
    """A replicated ALTER of a table node 2's workers are writing: the batch that meets it yields
    (its metadata locks are the wsrep client's, released before Galera replays it behind the DDL).
    Before, node 2's applier waited forever "to execute in isolation" behind a worker replaying its
    batch while holding the table's lock, and flow control stalled the whole cluster."""
    n1, n2 = cluster
    tbl = f"gw{ddl_node}"
    n1.exec_sql(f"CREATE TABLE {tbl} (id int primary key, v varchar(10)) ENGINE=InnoDB")
    _wait(lambda: n2.sql(f"SHOW TABLES LIKE '{tbl}'"), 30, "the table on node 2")
    stop, lock, acked = threading.Event(), threading.Lock(), []
    threads = [threading.Thread(target=_writer, args=(n2.hs_port_wr, tbl, i * 1_000_000, stop, acked, lock))
               for i in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        for i, col in enumerate(("c1", "c2", "c3")):
            (n1, n2)[ddl_node].exec_sql(f"ALTER TABLE {tbl} ADD COLUMN {col} int")
            _wait(lambda: col in [r[0] for r in n2.sql(f"SHOW COLUMNS FROM {tbl}")], 30, f"ALTER {i} on node 2")
            _wait(lambda: col in [r[0] for r in n1.sql(f"SHOW COLUMNS FROM {tbl}")], 30, f"ALTER {i} on node 1")
            before = len(acked)
            _wait(lambda: len(acked) > before + 5, 30, "writes after the ALTER")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    ids = {int(r[0]) for r in _synced_rows(n1, f"SELECT id FROM {tbl}")}
    assert set(acked) <= ids, sorted(set(acked) - ids)[:10]
    assert _synced_rows(n1, f"SELECT COUNT(*) FROM {tbl}") == _synced_rows(n2, f"SELECT COUNT(*) FROM {tbl}")


def test_batches_stay_under_wsrep_max_ws_rows(cluster):
    """A batch is one write set: past wsrep_max_ws_rows the server rolled back all of it, and the
    writes acknowledged before were lost (10 of a 50-insert burst were answered and none existed).
    A batch now ends before it gets there; the rest run in the next batches."""
    n1, n2 = cluster
    n2.exec_sql("CREATE TABLE gws (id int primary key, v varchar(10)) ENGINE=InnoDB")
    _wait(lambda: n1.sql("SHOW TABLES LIKE 'gws'"), 30, "the table on node 1")
    n2.exec_sql("SET GLOBAL wsrep_max_ws_rows = 10", db=None)
    try:
        with h.hs_open(n2.hs_port_wr, "gws", "id,v") as w:
            burst = b"".join(hs_line(1, "+", 2, str(i), "b") for i in range(1, 51))
            assert w.request(burst, timeout=30) == b"0\t1\n" * 50
        c = McConn(n2.mc_port)
        try:
            c.send(b"".join(b"set gws%d 0 0 1\r\nx\r\n" % i for i in range(30)))
            c.expect(b"STORED\r\n" * 30, timeout=30)
        finally:
            c.close()
    finally:
        n2.exec_sql("SET GLOBAL wsrep_max_ws_rows = 0", db=None)
    assert _synced_rows(n1, "SELECT COUNT(*) FROM gws") == [("50",)]
    assert _synced_rows(n1, "SELECT COUNT(*) FROM kv WHERE k LIKE 'gws%'") == [("30",)]


@pytest.fixture(scope="module")
def lone_node(request):
    """A one-node cluster without tablesocket_galera_writes."""
    g, = free_ports(1)
    args = ["--wsrep-on=ON", f"--wsrep-provider={PROVIDER}", "--wsrep-cluster-address=gcomm://",
            f"--wsrep-provider-options=base_port={g};gmcast.listen_addr=tcp://127.0.0.1:{g}",
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", f"--wsrep-node-address=127.0.0.1:{g}"]
    with h.private_server(request, "galera-lone", args) as srv:
        srv.exec_sql("CREATE TABLE gl (id int primary key, v varchar(10)) ENGINE=InnoDB")
        srv.exec_sql("INSERT INTO gl VALUES (1, 'one')")
        yield srv


def test_without_galera_writes_writes_are_refused_and_reads_served(lone_node):
    """By default a Galera node refuses tablesocket's writes (they would commit on this node only,
    as Debian's handlersocket.so's do) with a message naming the option; reads are served."""
    want = (b"writes are refused on a Galera node (wsrep_on): start the server with "
            b"tablesocket_galera_writes=ON to replicate them (experimental), or write through SQL")
    before = _replicated(lone_node)
    with h.hs_open(lone_node.hs_port_wr, "gl", "id,v") as w:
        assert w.request(hs_line(1, "+", 2, "2", "two")) == b"1\t1\t" + want + b"\n"
        assert w.request(hs_line(1, "=", 1, "1", 1, 0, "D")) == b"1\t1\t" + want + b"\n"
        assert w.request(hs_line(1, "=", 1, "1")) == b"0\t2\t1\tone\n"
    c = McConn(lone_node.mc_port)
    try:
        c.request("set glk 0 0 1\r\nx\r\n", b"SERVER_ERROR " + want + b"\r\n")
    finally:
        c.close()
    assert lone_node.sql("SELECT id, v FROM gl") == [("1", "one")]
    assert _replicated(lone_node) == before
