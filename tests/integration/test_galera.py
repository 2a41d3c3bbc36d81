"""tablesocket on a Galera node: reads are served, writes are refused with a clear error.

A worker's batch commits through the storage engine without the wsrep hooks SQL statements run
(certification, write set, ordered commit), so its rows would stay on the node where they were
written and the cluster would silently diverge: before the refusal, a HandlerSocket insert on a
one-node cluster committed locally while `wsrep_replicated` did not move. The node here is a real
one-node Galera cluster (Debian's galera-4 provider, bootstrapped with gcomm://, loopback only);
SQL writes on it are replicated (wsrep_replicated counts them), tablesocket's are refused, and
`SET GLOBAL wsrep_on` switches the refusal at run time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ts_harness as h
from ts_mc import McConn
from tsserver import free_ports, hs_line

PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
REFUSED = (b"writes are refused on a Galera node (wsrep_on): tablesocket's writes would not be "
           b"replicated to the cluster; write through SQL")

pytestmark = [
    pytest.mark.tablesocket_only("tablesocket's behaviour on a Galera node"),
    pytest.mark.skipif(not PROVIDER.exists(), reason=f"{PROVIDER} (Debian's galera-4) is not installed"),
]


@pytest.fixture(scope="module")
def node(request):
    gport = free_ports(2)[0]  # group communication; IST would use the next port
    args = [
        "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}", "--wsrep-cluster-address=gcomm://",
        f"--wsrep-provider-options=base_port={gport};gmcast.listen_addr=tcp://127.0.0.1:{gport}",
        "--wsrep-node-address=127.0.0.1", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
    ]
    with h.private_server(request, "galera-node", args) as srv:
        assert srv.sql("SHOW STATUS LIKE 'wsrep_ready'", db=None)[0][1] == "ON"
        srv.exec_sql("CREATE TABLE g (id int primary key, v varchar(20), n bigint) ENGINE=InnoDB")
        srv.exec_sql("INSERT INTO g VALUES (1, 'one', 10), (2, 'two', 20)")
        yield srv


def _replicated(srv) -> int:
    return int(dict(srv.sql("SHOW GLOBAL STATUS LIKE 'wsrep_replicated'", db=None))["wsrep_replicated"])


def _rows(srv):
    return srv.sql("SELECT id, v, n FROM g ORDER BY id")


BEFORE = [("1", "one", "10"), ("2", "two", "20")]


def test_sql_writes_on_the_node_are_replicated(node):
    """The fixture is a real Galera node: an SQL write goes through wsrep."""
    before = _replicated(node)
    node.exec_sql("UPDATE g SET n = n WHERE id = 0")  # nothing changed: no write set
    node.exec_sql("INSERT INTO g VALUES (99, 'sql', 0)")
    node.exec_sql("DELETE FROM g WHERE id = 99")
    assert _replicated(node) == before + 2


def test_handlersocket_writes_are_refused_and_change_nothing(node):
    before = _replicated(node)
    with h.hs_open(node.hs_port_wr, "g", "id,v,n") as w:
        want = b"1\t1\t" + REFUSED + b"\n"
        assert w.request(hs_line(1, "+", 3, "3", "three", "30")) == want
        assert w.request(hs_line(1, "+=", 3, "1", "upsert", "11")) == want
        assert w.request(hs_line(1, "=", 1, "1", 1, 0, "U", "1", "changed", "0")) == want
        assert w.request(hs_line(1, "=", 1, "1", 1, 0, "+", None, None, "5")) == want
        assert w.request(hs_line(1, ">=", 1, "1", 10, 0, "D")) == want
        # The connection goes on, and reads on it are served.
        assert w.request(hs_line(1, "=", 1, "2")) == b"0\t3\t2\ttwo\t20\n"
        # A pipelined mix: each write fails alone, each read answers.
        burst = hs_line(1, "+", 3, "4", "four", "40") + hs_line(1, "=", 1, "1") + hs_line(1, "=", 1, "1", 1, 0, "D")
        assert w.request(burst) == want + b"0\t3\t1\tone\t10\n" + want
    with h.hs_open(node.hs_port, "g", "id,v,n") as r:
        assert r.request(hs_line(1, ">=", 1, "0", 10, 0)) == b"0\t3\t1\tone\t10\t2\ttwo\t20\n"
    assert _rows(node) == BEFORE
    assert _replicated(node) == before


def test_memcached_writes_are_refused_and_reads_are_served(node):
    node.exec_sql("DELETE FROM kv")
    node.exec_sql("INSERT INTO kv (k, v) VALUES ('gk', 'from sql')")  # the default container
    before = _replicated(node)
    want = b"SERVER_ERROR " + REFUSED + b"\r\n"
    c = McConn(node.mc_port)
    try:
        c.request("get gk\r\n", b"VALUE gk 0 8\r\nfrom sql\r\nEND\r\n")
        c.request("set gk 0 0 3\r\nnew\r\n", want)
        c.request("add fresh 0 0 1\r\nx\r\n", want)
        c.request("delete gk\r\n", want)
        c.request("ms gk 3\r\nnew\r\n", want)
        c.request("md gk\r\n", want)
        c.request("set gk 0 0 3 noreply\r\nnew\r\nmn\r\n", b"MN\r\n")  # noreply: nothing said, nothing written
        c.request("get gk fresh\r\n", b"VALUE gk 0 8\r\nfrom sql\r\nEND\r\n")
    finally:
        c.close()
    assert node.sql("SELECT k, v FROM kv") == [("gk", "from sql")]
    assert _replicated(node) == before


def test_wsrep_on_switches_the_refusal_at_run_time(node):
    node.exec_sql("SET GLOBAL wsrep_on = OFF", db=None)
    try:
        # A node not replicating (SQL's own new sessions do not replicate either): writes are served.
        with h.hs_open(node.hs_port_wr, "g", "id,v,n") as w:
            assert w.request(hs_line(1, "+", 3, "5", "five", "50")) == b"0\t1\n"
    finally:
        node.exec_sql("SET GLOBAL wsrep_on = ON", db=None)
    assert node.sql("SELECT v FROM g WHERE id = 5") == [("five",)]
    node.exec_sql("DELETE FROM g WHERE id = 5")
    with h.hs_open(node.hs_port_wr, "g", "id,v,n") as w:
        assert w.request(hs_line(1, "+", 3, "6", "six", "60")) == b"1\t1\t" + REFUSED + b"\n"
    assert _rows(node) == BEFORE


def test_the_refusal_is_logged_once(node):
    log = Path(node.log_path).read_text(errors="replace")
    lines = [ln for ln in log.splitlines() if "tablesocket: writes are refused while Galera replication is on" in ln]
    assert len(lines) == 1, lines
