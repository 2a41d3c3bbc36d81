"""Writes through tablesocket replicate: a primary and a replica on loopback, both with tablesocket.

The primary runs with --binlog-format=STATEMENT: tablesocket has no statement to log, so it must
log row events whatever binlog_format says. The replica (--log-slave-updates, its own binlog)
connects with MASTER_USE_GTID=slave_pos or current_pos. The table is created on the primary and
reaches the replica as DDL; rows are inserted (AUTO_INCREMENT and explicit), updated, incremented,
decremented, deleted and upserted through the primary's write port, mixed with a few SQL
statements; after MASTER_GTID_WAIT the replica must hold exactly the primary's rows, read back
through SQL and through the replica's own tablesocket read port (a connection opened before the
writes, so the worker's table stays open while the applier changes it). Columns filled by
DEFAULT CURRENT_TIMESTAMP and ON UPDATE CURRENT_TIMESTAMP must be identical on both.
"""

from __future__ import annotations

import re
import time

import pytest

import ts_harness as h
from tsserver import hs_line

pytestmark = pytest.mark.tablesocket_only("tablesocket's binlogging of HS writes")

DDL = """CREATE TABLE rt (
  id int not null auto_increment primary key,
  k varchar(32) not null,
  v varchar(200) character set utf8mb4,
  n bigint,
  f double,
  b varbinary(64),
  created timestamp(6) not null default current_timestamp(6),
  updated timestamp(6) not null default current_timestamp(6) on update current_timestamp(6),
  d datetime default current_timestamp,
  unique key uk(k)
) ENGINE=InnoDB"""
COLS = "id,k,v,n,f,b,created,updated,d"


def _start_pair(request, use_gtid: str):
    stack = []
    prim_cm = h.private_server(request, f"repl-primary-{use_gtid}",
                               ["--log-bin=primary-bin", "--server-id=1", "--binlog-format=STATEMENT"])
    prim = prim_cm.__enter__()
    stack.append(prim_cm)
    try:
        repl_cm = h.private_server(request, f"repl-replica-{use_gtid}",
                                   ["--server-id=2", "--log-bin=replica-bin", "--log-slave-updates",
                                    "--relay-log=relay-bin", "--skip-slave-start"])
        repl = repl_cm.__enter__()
        stack.append(repl_cm)
        repl.exec_sql("RESET MASTER", db=None)  # its own startup statements: gtid_current_pos empty
        repl.exec_sql(
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={prim.sql_port}, MASTER_USER='root', "
            f"MASTER_PASSWORD='', MASTER_CONNECT_RETRY=1, MASTER_USE_GTID={use_gtid}", db=None)
        repl.exec_sql("START SLAVE", db=None)
    except BaseException:
        for cm in reversed(stack):
            cm.__exit__(None, None, None)
        raise
    return prim, repl, stack


@pytest.fixture(scope="module", params=["slave_pos", "current_pos"])
def pair(request):
    prim, repl, stack = _start_pair(request, request.param)
    try:
        yield prim, repl
    finally:
        try:
            repl.exec_sql("STOP SLAVE", db=None)
        except Exception:  # noqa: BLE001
            pass
        for cm in reversed(stack):
            cm.__exit__(None, None, None)


def _slave_status(repl) -> dict:
    conn = h.sql_conn(repl, db=None)
    try:
        with conn.cursor() as c:
            c.execute("SHOW SLAVE STATUS")
            row = c.fetchone()
            names = [d[0] for d in c.description] if c.description else []
        return dict(zip(names, row)) if row else {}
    finally:
        conn.close()


def _catch_up(prim, repl, timeout: int = 30) -> None:
    pos = prim.sql("SELECT @@GLOBAL.gtid_binlog_pos", db=None)[0][0]
    got = repl.sql("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, timeout), db=None)[0][0]
    if got != "0":
        st = _slave_status(repl)
        pytest.fail(f"replica did not reach {pos} in {timeout}s (MASTER_GTID_WAIT={got}): "
                    f"IO={st.get('Slave_IO_Running')} SQL={st.get('Slave_SQL_Running')} "
                    f"IO error={st.get('Last_IO_Error')!r} SQL error={st.get('Last_SQL_Error')!r} "
                    f"gtid_slave_pos={repl.sql('SELECT @@gtid_slave_pos', db=None)}")


def _ok(reply: bytes, want: bytes | None = None) -> bytes:
    assert reply.startswith(b"0\t"), reply
    if want is not None:
        assert reply == want
    return reply


def _write_workload(prim) -> dict:
    """The write mix, through the primary's write port. Returns facts to check afterwards."""
    facts = {}
    w = h.hs_open(prim.hs_port_wr, "rt", "k,v,n,f,b", index_id=1)       # insert with AUTO_INCREMENT
    _ok(w.request("P\t2\ttest\trt\tPRIMARY\tid,k,v,n\n"), b"0\t1\n")       # explicit ids
    _ok(w.request("P\t3\ttest\trt\tPRIMARY\tv,n\n"), b"0\t1\n")            # update / increment by id
    _ok(w.request("P\t4\ttest\trt\tuk\tk,v,n\n"), b"0\t1\n")               # by unique key
    ids = []
    for i in range(40):
        v = ("h\u00e9llo \u2603 " + "\t\n" * (i % 3) + str(i)).encode()
        b = bytes([i, 0, 255, 10, 9, 1]) if i % 4 else None
        reply = w.request(hs_line(1, "+", 5, f"key{i:03d}", v, str(i * 10), f"{i}.25", b))
        tok = h.hs_split(reply)
        assert tok[:2] == [b"0", b"1"] and len(tok) == 3, reply
        ids.append(int(tok[2]))
    assert ids == sorted(ids) and len(set(ids)) == 40, ids
    facts["ids"] = ids
    _ok(w.request(hs_line(2, "+", 4, "1000", "explicit", "explicit value", None)), b"0\t1\t0\n")  # given, not generated
    time.sleep(0.02)  # ON UPDATE CURRENT_TIMESTAMP must differ from the insert's timestamp
    for i in ids[:10]:
        _ok(w.request(hs_line(3, "=", 1, str(i), 1, 0, "U", f"updated {i}".encode(), str(i))), b"0\t1\t1\n")
    for i in ids[10:15]:
        _ok(w.request(hs_line(3, "=", 1, str(i), 1, 0, "+", None, "7")), b"0\t1\t1\n")
    for i in ids[15:18]:
        _ok(w.request(hs_line(3, "=", 1, str(i), 1, 0, "-", None, "3")), b"0\t1\t1\n")
    # A range: five rows after ids[20], n incremented (a multi-row statement).
    _ok(w.request(hs_line(3, ">", 1, str(ids[20]), 5, 0, "+", None, "1000")), b"0\t1\t5\n")
    for i in ids[30:35]:
        _ok(w.request(hs_line(3, "=", 1, str(i), 1, 0, "D")), b"0\t1\t1\n")
    # Update and delete by unique key.
    _ok(w.request(hs_line(4, "=", 1, "key036", 1, 0, "U", "key036", b"via uk", "36")), b"0\t1\t1\n")
    _ok(w.request(hs_line(4, "=", 1, "key037", 1, 0, "D")), b"0\t1\t1\n")
    # Upserts: an existing unique key (updates that row) and a new one (inserts).
    _ok(w.request(hs_line(1, "+=", 5, "key005", b"upserted", "555", "5.5", b"\x00up")))
    _ok(w.request(hs_line(1, "+=", 5, "keyNEW", b"upsert-inserted", "777", None, None)))
    # Statement-logged SQL on the same table, between HS writes.
    prim.exec_sql(f"UPDATE rt SET n = n + 100 WHERE id = {ids[2]}")
    _ok(w.request(hs_line(3, "=", 1, str(ids[2]), 1, 0, "+", None, "1")), b"0\t1\t1\n")
    # A pipelined burst (one batch, one transaction for all of them).
    burst = b"".join(hs_line(2, "+", 4, str(2000 + j), f"burst{j}", "x", str(j)) for j in range(50))
    replies = w.request(burst)
    assert replies == b"0\t1\t0\n" * 50, replies[:200]
    w.close()
    return facts


def _hs_rows(port: int) -> bytes:
    with h.hs_open(port, "rt", COLS) as c:
        return c.request("1\t>=\t1\t0\t10000\t0\n", timeout=20)


def test_rows_written_through_tablesocket_are_identical_on_the_replica(pair):
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt")
    prim.exec_sql(DDL)
    _catch_up(prim, repl)
    # Opened before the writes: the replica's worker keeps rt open while the applier changes it.
    early = h.hs_open(repl.hs_port, "rt", COLS)
    try:
        assert early.request("1\t>=\t1\t0\t10000\t0\n") == f"0\t{len(COLS.split(','))}\n".encode()
        facts = _write_workload(prim)
        _catch_up(prim, repl)
        st = _slave_status(repl)
        assert st.get("Slave_SQL_Running") == "Yes" and not st.get("Last_SQL_Error"), st

        q = f"SELECT {COLS} FROM rt ORDER BY id"
        want = prim.sql_bytes(q)
        got = repl.sql_bytes(q)
        assert len(want) == 40 - 6 + 1 + 1 + 50, len(want)
        assert got == want, "replica rows differ from the primary's (SQL)"
        # --log-slave-updates: the replica's own binlog carries the same transactions.
        assert repl.sql("SELECT @@gtid_binlog_pos", db=None) == prim.sql("SELECT @@gtid_binlog_pos", db=None)

        prim_hs = _hs_rows(prim.hs_port)
        assert prim_hs.startswith(f"0\t{len(COLS.split(','))}\t".encode())
        assert _hs_rows(repl.hs_port) == prim_hs, "replica rows differ from the primary's (tablesocket read port)"
        assert early.request("1\t>=\t1\t0\t10000\t0\n") == prim_hs, \
            "a tablesocket connection opened on the replica before the writes does not see them"
        with h.hs_open(prim.hs_port, "rt", COLS) as pc:
            for i in facts["ids"][:3] + [1000, 2049]:
                assert early.request(f"1\t=\t1\t{i}\n") == pc.request(f"1\t=\t1\t{i}\n")
    finally:
        early.close()


def test_current_timestamp_defaults_are_identical_on_primary_and_replica(pair):
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt")
    prim.exec_sql(DDL)
    _catch_up(prim, repl)
    facts = _write_workload(prim)
    time.sleep(1.1)  # a replica using its own clock would now be more than a second off
    _catch_up(prim, repl)
    q = "SELECT id, created, updated, d FROM rt ORDER BY id"
    want, got = prim.sql(q), repl.sql(q)
    assert got == want
    assert all(r[1] and r[2] and r[3] for r in want), "CURRENT_TIMESTAMP defaults were not filled"
    by_id = {int(r[0]): r for r in want}
    updated = [by_id[i] for i in facts["ids"][:10]]
    assert all(r[2] > r[1] for r in updated), f"ON UPDATE CURRENT_TIMESTAMP did not move: {updated[:3]}"
    untouched = by_id[facts["ids"][28]]
    assert untouched[1] == untouched[2], untouched


def test_tablesocket_logs_row_events_under_binlog_format_statement(pair):
    prim, repl = pair
    assert h.variable(prim, "binlog_format") == "STATEMENT"
    prim.exec_sql("DROP TABLE IF EXISTS rt_fmt")
    prim.exec_sql("CREATE TABLE rt_fmt (id int primary key, v varchar(10))")
    start = prim.sql("SHOW MASTER STATUS", db=None)[0]
    with h.hs_open(prim.hs_port_wr, "rt_fmt", "id,v") as w:
        assert w.request("1\t+\t2\t1\tone\n") == b"0\t1\n"
    events = prim.sql(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}", db=None)
    kinds = [e[2] for e in events]
    assert any(k.startswith("Write_rows") for k in kinds), events
    assert "Table_map" in kinds, events
    _catch_up(prim, repl)
    assert repl.sql("SELECT id, v FROM rt_fmt") == [("1", "one")]


def test_tablesocket_transactions_are_committed_with_an_xid_event_like_sql(pair):
    """Two-phase commit between InnoDB and the binlog: a transaction's binlog entry ends with an
    Xid event carrying the (non-zero) XID InnoDB prepared it with; crash recovery commits the
    prepared InnoDB transactions whose XID is in the binlog and rolls back the others. A plain
    `COMMIT` query event means a one-phase commit (no prepare), and xid=0 cannot be matched: a crash
    between the binlog write and the InnoDB commit then leaves the transaction in the binlog (and on
    replicas) but not in the primary's tables (test_durability.py's binlog variant shows that)."""
    prim, _ = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt_xid")
    prim.exec_sql("CREATE TABLE rt_xid (id int primary key, v varchar(10)) ENGINE=InnoDB")
    start = prim.sql("SHOW MASTER STATUS", db=None)[0]
    prim.exec_sql("INSERT INTO rt_xid VALUES (1, 'sql')")
    with h.hs_open(prim.hs_port_wr, "rt_xid", "id,v") as w:
        for i in range(2, 6):  # one request at a time: each its own batch, its own transaction
            assert w.request(f"1\t+\t2\t{i}\ths\n") == b"0\t1\n"
        assert w.request("1\t=\t1\t2\t1\t0\tU\t2\tupd\n") == b"0\t1\t1\n"
    prim.exec_sql("UPDATE rt_xid SET v = 'sql2' WHERE id = 1")
    events = prim.sql(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}", db=None)
    # Transactions: from each Gtid event to the next; (kind of the last event, its info).
    trx, cur = [], None
    for e in events:
        if e[2] == "Gtid":
            cur = []
            trx.append(cur)
        if cur is not None:
            cur.append((e[2], e[5]))
    assert len(trx) == 7, events
    ends = [t[-1] for t in trx]
    for i in (0, 6):
        assert ends[i][0] == "Xid" and not ends[i][1].endswith("xid=0 */"), trx[i]  # SQL: the reference
    bad = [(i, t[-1]) for i, t in enumerate(trx[1:6], 1)
           if t[-1][0] != "Xid" or re.search(r"xid=0 \*/$", t[-1][1])]
    assert not bad, ("tablesocket transactions not ended by an Xid event with a non-zero xid "
                     f"(transaction number, last event): {bad}")


def test_pipelined_one_row_writes_share_statements_and_replicate(pair):
    """Consecutive one-row writes of a batch (pipelined, from several connections) share one
    statement with the binary log on too: one table map for many rows, as a multi-row INSERT or
    UPDATE logs them, instead of one statement per request. Failures between them (a duplicate
    key, a bad value) fail alone; the replica ends up with exactly the primary's rows."""
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt_sh")
    prim.exec_sql("CREATE TABLE rt_sh (id int primary key, k varchar(20) not null, n int not null, "
                  "unique key uk(k)) ENGINE=InnoDB")
    prim.exec_sql("INSERT INTO rt_sh SELECT seq, CONCAT('k', seq), seq FROM seq_1_to_200")
    _catch_up(prim, repl)
    start = prim.sql("SHOW MASTER STATUS", db=None)[0]
    conns = [h.hs_open(prim.hs_port_wr, "rt_sh", "id,k,n") for _ in range(4)]
    try:
        for c in conns:
            _ok(c.request("P\t2\ttest\trt_sh\tPRIMARY\tn\n"), b"0\t1\n")
        for rnd in range(3):
            for ci, c in enumerate(conns):
                base = rnd * 100 + ci * 25
                lines = [f"1\t+\t3\t{1000 + base + j}\tnew{1000 + base + j}\t{j}\n" for j in range(25)]
                lines += [f"2\t=\t1\t{1 + (base + j) % 200}\t1\t0\t+\t1\n" for j in range(25)]
                lines.insert(10, "1\t+\t3\t5000\tk7\t0\n")  # a duplicate k: fails alone
                lines.insert(40, "2\t=\t1\t3\t1\t0\tU\tnot-a-number\n")  # a bad value: fails alone
                c.send("".join(lines))
            for c in conns:
                r = c.recv_lines(52, timeout=30)
                assert r[10].startswith(b"1\t1\t") and r[40].startswith(b"1\t1\t"), (r[10], r[40])
                assert [x for i, x in enumerate(r) if i not in (10, 40)] == [b"0\t1\n"] * 25 + [b"0\t1\t1\n"] * 25, r
    finally:
        for c in conns:
            c.close()
    events = prim.sql(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}", db=None)
    writes = 3 * 4 * 50
    maps = sum(1 for e in events if e[2] == "Table_map")
    assert sum(1 for e in events if e[2] == "Xid") < writes / 4, "batches did not group the writes"
    assert maps < writes / 4, f"{maps} table maps for {writes} one-row writes: statements were not shared"
    _catch_up(prim, repl)
    st = _slave_status(repl)
    assert st.get("Slave_SQL_Running") == "Yes" and not st.get("Last_SQL_Error"), st
    q = "SELECT id, k, n FROM rt_sh ORDER BY id"
    want = prim.sql(q)
    assert len(want) == 200 + 300 and repl.sql(q) == want
    assert prim.sql("SELECT SUM(n) FROM rt_sh WHERE id <= 200") == [(str(200 * 201 // 2 + 300),)]


def test_a_multi_row_update_that_waited_for_a_row_lock_replicates_once(pair):
    """The increment of rows 1..10 meets an SQL row lock on row 5 and is retried every few ms until
    COMMIT; each failed try must leave nothing in the binlog, or the replica would apply partial
    increments again (and stop on a row image that no longer matches)."""
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt_wait")
    prim.exec_sql("CREATE TABLE rt_wait (id int primary key, n int not null) ENGINE=InnoDB")
    prim.executemany("INSERT INTO rt_wait VALUES (%s, 0)", [(i,) for i in range(1, 21)])
    sql = h.sql_conn(prim, autocommit=False)
    w = h.hs_open(prim.hs_port_wr, "rt_wait", "n")
    try:
        with sql.cursor() as c:
            c.execute("BEGIN")
            c.execute("SELECT * FROM rt_wait WHERE id = 5 FOR UPDATE")
        w.send("1\t>=\t1\t1\t10\t0\t+\t1\n")
        time.sleep(0.5)
        sql.commit()
        assert w.recv_line(timeout=5.0) == b"0\t1\t10\n"
    finally:
        w.close()
        sql.close()
    _catch_up(prim, repl)
    st = _slave_status(repl)
    assert st.get("Slave_SQL_Running") == "Yes" and not st.get("Last_SQL_Error"), st
    want = [(str(i), "1" if i <= 10 else "0") for i in range(1, 21)]
    assert prim.sql("SELECT id, n FROM rt_wait ORDER BY id") == want
    assert repl.sql("SELECT id, n FROM rt_wait ORDER BY id") == want


def test_replicated_ddl_is_not_held_up_by_tablesocket_readers_on_the_replica(pair):
    """The replica's applier needs exclusive metadata locks for DDL while tablesocket clients on the
    replica keep the table open; tablesocket must let go (the applier has no lock_wait_timeout to
    fall back on other than the server's)."""
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt_ddl")
    prim.exec_sql("CREATE TABLE rt_ddl (id int primary key, v varchar(10)) ENGINE=InnoDB")
    prim.executemany("INSERT INTO rt_ddl VALUES (%s, %s)", [(i, f"v{i}") for i in range(1, 101)])
    _catch_up(prim, repl)

    def setup(i):
        return h.hs_open(repl.hs_port, "rt_ddl", "id,v", timeout=10)

    def step(i, c):
        r = c.request(f"1\t=\t1\t{i + 1}\n", timeout=10)
        assert r.startswith(b"0\t2\t") or r == b"1\t1\topen_table\n", r

    load = h.Load(4, setup, step, max_seconds=30, teardown=lambda c: c.close()).start()
    try:
        time.sleep(0.3)
        for ddl in ("ALTER TABLE rt_ddl ADD COLUMN extra int", "ALTER TABLE rt_ddl ENGINE=InnoDB",
                    "ALTER TABLE rt_ddl ADD INDEX iv (v)", "RENAME TABLE rt_ddl TO rt_ddl2",
                    "RENAME TABLE rt_ddl2 TO rt_ddl"):
            prim.exec_sql(ddl)
            t0 = time.monotonic()
            _catch_up(prim, repl, timeout=10)
            took = time.monotonic() - t0
            assert took < 2.0, f"the replica took {took:.1f} s to apply {ddl!r} with tablesocket readers on it"
        time.sleep(0.3)
        t1 = time.monotonic()
        time.sleep(0.3)
        assert load.count_between(t1, time.monotonic()) > 0, "replica readers stopped being served"
        assert not load.errors, load.errors[:3]
    finally:
        load.stop()
    assert repl.sql("SHOW CREATE TABLE rt_ddl")[0][1] == prim.sql("SHOW CREATE TABLE rt_ddl")[0][1]


def test_tablesocket_refuses_writes_on_a_read_only_replica(pair):
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS rt_ro")
    prim.exec_sql("CREATE TABLE rt_ro (id int primary key, v varchar(10)) ENGINE=InnoDB")
    _catch_up(prim, repl)
    repl.exec_sql("SET GLOBAL read_only = 1", db=None)
    try:
        with h.hs_open(repl.hs_port_wr, "rt_ro", "id,v") as w:
            assert w.request("1\t+\t2\t1\treplica\n") == b"1\t1\tread_only\n"
        # Replication itself still applies.
        with h.hs_open(prim.hs_port_wr, "rt_ro", "id,v") as w:
            assert w.request("1\t+\t2\t1\tprimary\n") == b"0\t1\n"
        _catch_up(prim, repl)
        assert repl.sql("SELECT id, v FROM rt_ro") == [("1", "primary")]
    finally:
        repl.exec_sql("SET GLOBAL read_only = 0", db=None)


def test_history_rows_and_long_unique_upserts_replicate(pair):
    """A system-versioned table's history rows (written by tablesocket's updates and deletes) and
    upserts resolved through a long UNIQUE reach the replica identically."""
    prim, repl = pair
    prim.exec_sql("DROP TABLE IF EXISTS vt")
    prim.exec_sql("DROP TABLE IF EXISTS lut")
    prim.exec_sql("CREATE TABLE vt (id INT PRIMARY KEY, n INT) WITH SYSTEM VERSIONING")
    prim.exec_sql("CREATE TABLE lut (id INT PRIMARY KEY, big BLOB, n INT, UNIQUE KEY u(big))")
    _catch_up(prim, repl)
    with h.hs_open(prim.hs_port_wr, "vt", "id,n") as w:
        assert w.request("P\t2\ttest\tlut\tPRIMARY\tid,big,n\n") == b"0\t1\n"
        for i in range(1, 6):
            _ok(w.request(f"1\t+\t2\t{i}\t{i}\n"), b"0\t1\n")
        _ok(w.request("1\t=\t1\t1\t1\t0\tU\t1\t10\n"), b"0\t1\t1\n")
        _ok(w.request("1\t>\t1\t3\t10\t0\tD\n"), b"0\t1\t2\n")
        big = "b" * 2000
        _ok(w.request(f"2\t+\t3\t1\t{big}\t1\n"), b"0\t1\n")
        _ok(w.request(f"2\t+=\t3\t2\t{big}\t2\n"), b"0\t1\n")
    _catch_up(prim, repl)
    st = _slave_status(repl)
    assert st.get("Slave_SQL_Running") == "Yes" and not st.get("Last_SQL_Error"), st
    q = "SELECT id, n, ROW_END = TIMESTAMP'2038-01-19 03:14:07.999999' FROM vt FOR SYSTEM_TIME ALL ORDER BY id, n"
    want = prim.sql(q)
    assert len(want) == 6 and repl.sql(q) == want, want
    assert repl.sql("SELECT id, n FROM lut") == prim.sql("SELECT id, n FROM lut") == [("2", "2")]
