"""A lock held by SQL holds up only the tablesocket requests that need it.

The server runs ONE tablesocket worker (--tablesocket-threads=1), so every client below shares the
worker that also serves the blocked request: if waiting for a row or metadata lock blocked the
worker, everyone would stall.

Bound: while a request waits for a lock, every other client's request is answered within
REPLY_BOUND seconds (200 ms; loopback and one worker make 1 ms typical).

  * row lock (SELECT ... FOR UPDATE / UPDATE in an open SQL transaction): the update of that row
    gets no reply while the lock is held; reads (including of that row) and writes of other rows
    from other clients are answered; after COMMIT the update completes;
  * --tablesocket-lock-wait-timeout=1000: the blocked update answers lock_wait_timeout after ~1 s,
    its connection stays usable, and requests pipelined behind it are answered in order;
  * DDL: ALTER TABLE on a table 8 readers (and 2 writers) hammer completes well under a second,
    they keep working afterwards; DROP TABLE gives them `1\\t1\\topen_table`, not a hang;
  * FLUSH TABLES WITH READ LOCK completes while tablesocket has the table open; writes wait for
    UNLOCK TABLES, reads go on.
"""

from __future__ import annotations

import random
import re
import select
import threading
import time

import pytest

import ts_harness as h

pytestmark = pytest.mark.tablesocket_only("tablesocket's lock waits (HandlerSocket blocks its worker)")

REPLY_BOUND = 0.200   # seconds: any other client's reply while one request waits for a lock
HOLD = 1.5            # seconds a lock is held while the others are measured
ROWS = 200


@pytest.fixture(scope="module")
def srv(request):
    with h.private_server(request, "locks", ["--tablesocket-threads=1"]) as s:
        assert h.variable(s, "tablesocket_threads") == "1"
        yield s


@pytest.fixture(scope="module")
def srv_timeout(request):
    with h.private_server(request, "locks-timeout",
                          ["--tablesocket-threads=1", "--tablesocket-lock-wait-timeout=1000"]) as s:
        assert h.variable(s, "tablesocket_lock_wait_timeout") == "1000"
        yield s


def _table(s, name: str, rows: int = ROWS) -> str:
    s.exec_sql(f"DROP TABLE IF EXISTS {name}")
    s.exec_sql(f"CREATE TABLE {name} (k int primary key, v varchar(32), n int not null default 0) ENGINE=InnoDB")
    s.executemany(f"INSERT INTO {name} VALUES (%s, %s, 0)", [(k, f"v{k}") for k in range(1, rows + 1)])
    return name


def _begin(sql, statement: str) -> None:
    """Opens a transaction on the SQL connection and runs statement in it (its locks stay held)."""
    with sql.cursor() as c:
        c.execute("BEGIN")
        c.execute(statement)


def _no_reply(conn: h.HSConn, wait: float = 0.0) -> bool:
    """True if nothing at all has arrived on conn (within `wait` seconds)."""
    if conn.buf:
        return False
    r, _, _ = select.select([conn.sock], [], [], wait)
    return not r


def _others_load(s, table: str, *, readers: int = 2, writers: int = 2, lo: int = 2) -> h.Load:
    """Readers (read port) find any row, row 1 included (a consistent read needs no lock); writers
    (write port) update rows lo..ROWS, each its own subset, and insert new rows."""
    def setup(i):
        if i < readers:
            c = h.hs_open(s.hs_port, table, "k,v,n", timeout=5)
        else:
            c = h.hs_open(s.hs_port_wr, table, "n", timeout=5)
            assert c.request(f"P\t2\ttest\t{table}\tPRIMARY\tk,v,n\n") == b"0\t1\n"
        c.rnd = random.Random(i)
        c.ins = 100000 * (i + 1)
        return c

    def step(i, c):
        if i < readers:
            k = c.rnd.randint(1, ROWS)
            r = c.request(f"1\t=\t1\t{k}\n", timeout=5)
            assert r.startswith(f"0\t3\t{k}\t".encode()), r
        elif c.rnd.random() < 0.8:
            k = c.rnd.randrange(lo + (i - readers), ROWS + 1, writers)
            r = c.request(f"1\t=\t1\t{k}\t1\t0\t+\t1\n", timeout=5)
            assert r == b"0\t1\t1\n", r
        else:
            c.ins += 1
            r = c.request(f"2\t+\t3\t{c.ins}\tnew\t0\n", timeout=5)
            assert r == b"0\t1\n", r

    return h.Load(readers + writers, setup, step, max_seconds=30, teardown=lambda c: c.close())


def _assert_bounded(load: h.Load, t0: float, t1: float, what: str) -> None:
    lats = load.latencies_between(t0, t1)
    per_client = [sum(1 for (end, _, i) in load.samples if t0 <= end <= t1 and i == j) for j in range(load.n)]
    assert not load.errors, f"{what}: errors from the other clients: {load.errors[:5]}"
    assert min(per_client) >= 20, f"{what}: some client was hardly served while the lock was held: {per_client}"
    worst = max(lats)
    print(f"{what}: {len(lats)} other requests, p50={h.percentile(lats, 50) * 1e3:.2f} ms "
          f"p99={h.percentile(lats, 99) * 1e3:.2f} ms max={worst * 1e3:.1f} ms")
    assert worst <= REPLY_BOUND, (f"{what}: another client waited {worst * 1e3:.0f} ms "
                                  f"(bound {REPLY_BOUND * 1e3:.0f} ms); p99={h.percentile(lats, 99) * 1e3:.1f} ms")


# --------------------------------------------------------------------------------------------------
# row locks


def test_a_row_locked_by_sql_holds_up_only_the_update_of_that_row(srv):
    t = _table(srv, "lc_row")
    before = h.status(srv)
    sql = h.sql_conn(srv, autocommit=False)
    blocked = h.hs_open(srv.hs_port_wr, t, "v")
    load = None
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        blocked.send("1\t=\t1\t1\t1\t0\tU\tfrom tablesocket\n")
        load = _others_load(srv, t).start()
        t0 = time.monotonic()
        time.sleep(HOLD)
        t1 = time.monotonic()
        assert _no_reply(blocked), f"the update of the locked row was answered while SQL held the lock: {blocked.recv_all(0.1)!r}"
        _assert_bounded(load, t0, t1, "row lock held by SQL")
        sql.commit()
        t_commit = time.monotonic()
        assert blocked.recv_line(timeout=2.0) == b"0\t1\t1\n"
        took = time.monotonic() - t_commit
        assert took < 0.5, f"the update completed {took:.3f} s after COMMIT"
        load.stop()
        assert srv.sql(f"SELECT v FROM {t} WHERE k = 1") == [("from tablesocket",)]
        assert h.status(srv)["tablesocket_lock_waits"] > before["tablesocket_lock_waits"]
    finally:
        if load:
            load.stop()
        blocked.close()
        sql.close()


def test_an_increment_waits_for_an_uncommitted_sql_update_and_applies_on_top_of_it(srv):
    t = _table(srv, "lc_inc")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "n")
    try:
        _begin(sql, f"UPDATE {t} SET n = n + 10 WHERE k = 5")
        w.send("1\t=\t1\t5\t1\t0\t+\t1\n")
        assert _no_reply(w, 0.5)
        sql.commit()
        assert w.recv_line(timeout=2.0) == b"0\t1\t1\n"
        assert srv.sql(f"SELECT n FROM {t} WHERE k = 5") == [("11",)]
        # And the other way round: rolled back, the increment applies to the old value.
        _begin(sql, f"UPDATE {t} SET n = n + 1000 WHERE k = 5")
        w.send("1\t=\t1\t5\t1\t0\t+\t1\n")
        assert _no_reply(w, 0.3)
        sql.rollback()
        assert w.recv_line(timeout=2.0) == b"0\t1\t1\n"
        assert srv.sql(f"SELECT n FROM {t} WHERE k = 5") == [("12",)]
    finally:
        w.close()
        sql.close()


def test_the_blocked_update_times_out_after_lock_wait_timeout_and_its_connection_stays_usable(srv_timeout):
    s = srv_timeout
    t = _table(s, "lc_timeout")
    sql = h.sql_conn(s, autocommit=False)
    w = h.hs_open(s.hs_port_wr, t, "v")
    other = h.hs_open(s.hs_port_wr, t, "v")
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        t0 = time.monotonic()
        # The blocked update, and behind it on the same connection a find and an update of row 2.
        w.send("1\t=\t1\t1\t1\t0\tU\tnever\n1\t=\t1\t2\n1\t=\t1\t2\t1\t0\tU\tafter\n")
        # Meanwhile another client on the same worker is served.
        for k in range(3, 13):
            t1 = time.monotonic()
            assert other.request(f"1\t=\t1\t{k}\t1\t0\tU\tother{k}\n") == b"0\t1\t1\n"
            assert time.monotonic() - t1 <= REPLY_BOUND
        assert w.recv_line(timeout=5.0) == b"1\t1\tlock_wait_timeout\n"
        waited = time.monotonic() - t0
        assert 0.9 <= waited <= 2.0, f"lock_wait_timeout=1000 ms answered after {waited:.3f} s"
        assert w.recv_lines(2, timeout=1.0) == [b"0\t1\tv2\n", b"0\t1\t1\n"]
        # Still usable, and still timing out on the row as long as it is locked.
        assert w.request("1\t=\t1\t3\n") == b"0\t1\tother3\n"
        t0 = time.monotonic()
        assert w.request("1\t=\t1\t1\t1\t0\tU\tnever\n", timeout=5.0) == b"1\t1\tlock_wait_timeout\n"
        assert 0.9 <= time.monotonic() - t0 <= 2.0
        assert s.sql(f"SELECT v FROM {t} WHERE k IN (1, 2) ORDER BY k") == [("v1",), ("after",)]
        sql.commit()
        assert w.request("1\t=\t1\t1\t1\t0\tU\tnow\n", timeout=2.0) == b"0\t1\t1\n"
        assert s.sql(f"SELECT v FROM {t} WHERE k = 1") == [("now",)]
    finally:
        w.close()
        other.close()
        sql.close()


def test_writes_sent_before_a_reset_run_even_if_the_first_was_waiting_for_a_row_lock(srv):
    """A client pipelines an update of a row SQL holds locked and 20 inserts behind it, then resets
    its connection (SO_LINGER 0) while the update waits. As after a plain close, and as an SQL
    statement waiting for a row lock still runs when its client is gone, they all run once SQL
    commits. Before, a reset that found the connection waiting for a lock closed it and dropped
    every request it had sent, while one that came a moment earlier or later ran them all."""
    t = _table(srv, "lc_reset")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "k,v")
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        w.send("1\t=\t1\t1\t1\t0\tU\t1\tafter reset\n" +
               "".join(f"1\t+\t2\t{k}\tnew{k}\n" for k in range(1001, 1021)))
        assert _no_reply(w, 0.3)
        conns = h.status(srv)["tablesocket_connections"]
        h.reset(w)
        time.sleep(0.3)  # the worker sees the reset while the update waits
        assert h.status(srv)["tablesocket_connections"] == conns, "the waiting connection was closed at its reset"
        sql.commit()
        rows = h.sql_eventually(srv, f"SELECT (SELECT v FROM {t} WHERE k = 1), (SELECT COUNT(*) FROM {t} WHERE k > 1000)",
                                [("after reset", "20")])
        assert rows == [("after reset", "20")], rows
        assert h.status(srv)["tablesocket_connections"] == conns - 1  # and then it is closed
    finally:
        w.close()
        sql.close()


# --------------------------------------------------------------------------------------------------
# DDL


class Hammer:
    """Clients each sending one request at a time in a loop, recording every reply kind with its
    time; a reply slower than 5 s is a hang and ends that client."""

    def __init__(self, s, table: str, readers: int, writers: int):
        self.s, self.table = s, table
        self.readers, self.writers = readers, writers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.log: list[tuple[float, float, int, bytes]] = []   # (end, latency, client, reply)
        self.failures: list[tuple[int, str]] = []
        self.conns = []
        for i in range(readers + writers):
            port = s.hs_port if i < readers else s.hs_port_wr
            self.conns.append(h.hs_open(port, table, "k,v", timeout=5))
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(self.conns))]

    def _run(self, i: int) -> None:
        c = self.conns[i]
        rnd = random.Random(i)
        deadline = time.monotonic() + 30
        while not self.stop.is_set() and time.monotonic() < deadline:
            k = rnd.randint(1, ROWS)
            req = f"1\t=\t1\t{k}\n" if i < self.readers else f"1\t=\t1\t{k}\t1\t0\tU\t{k}\tw{i}\n"
            t0 = time.monotonic()
            try:
                r = c.request(req, timeout=5)
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    self.failures.append((i, repr(e)))
                return
            t1 = time.monotonic()
            with self.lock:
                self.log.append((t1, t1 - t0, i, r))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(10)
        for c in self.conns:
            c.close()
        assert not any(t.is_alive() for t in self.threads)

    def replies(self, t0: float, t1: float, client: int | None = None):
        with self.lock:
            return [(end, lat, i, r) for (end, lat, i, r) in self.log
                    if t0 <= end <= t1 and (client is None or i == client)]

    @staticmethod
    def is_row(r: bytes) -> bool:
        return r.startswith(b"0\t2\t") or r == b"0\t1\t1\n"


@pytest.mark.parametrize("writers", [0, 2], ids=["8_readers", "8_readers_2_writers"])
def test_alter_and_drop_table_under_load_finish_fast_and_clients_get_clear_answers(srv, writers):
    t = _table(srv, f"lc_ddl{writers}")
    with Hammer(srv, t, readers=8, writers=writers) as hm:
        time.sleep(0.5)
        for alter in (f"ALTER TABLE {t} ADD COLUMN extra int", f"ALTER TABLE {t} ENGINE=InnoDB"):
            a0 = time.monotonic()
            srv.exec_sql(alter)
            a1 = time.monotonic()
            print(f"{alter}: {(a1 - a0) * 1e3:.0f} ms")
            assert a1 - a0 < 1.0, f"{alter} took {a1 - a0:.3f} s with tablesocket clients on the table"
            time.sleep(0.5)
            after = time.monotonic()
            assert not hm.failures, hm.failures
            for i in range(len(hm.conns)):
                got = hm.replies(a1, after, i)
                assert got, f"client {i} got no reply in the 0.5 s after {alter}"
        bad = [(i, r) for (_, _, i, r) in hm.replies(0, time.monotonic()) if not hm.is_row(r)]
        assert not bad, f"error replies around ALTER TABLE: {bad[:5]}"
        worst = max(lat for (_, lat, _, _) in hm.log)
        assert worst < 1.0, f"a request waited {worst:.3f} s around ALTER TABLE"

        d0 = time.monotonic()
        srv.exec_sql(f"DROP TABLE {t}")
        d1 = time.monotonic()
        print(f"DROP TABLE: {(d1 - d0) * 1e3:.0f} ms")
        assert d1 - d0 < 1.0, f"DROP TABLE took {d1 - d0:.3f} s with tablesocket clients on the table"
        time.sleep(1.0)
        assert not hm.failures, f"clients hung or lost their connection after DROP TABLE: {hm.failures}"
        for i in range(len(hm.conns)):
            got = hm.replies(d1 + 0.05, time.monotonic(), i)
            assert got, f"client {i} got no reply in the second after DROP TABLE"
            kinds = {r for (_, _, _, r) in got}
            assert kinds == {b"1\t1\topen_table\n"}, f"client {i} after DROP TABLE: {sorted(kinds)[:3]}"

        # The same connections (same open index) read the table again once it exists again.
        srv.exec_sql(f"CREATE TABLE {t} (k int primary key, v varchar(32), n int not null default 0)")
        srv.executemany(f"INSERT INTO {t} VALUES (%s, %s, 0)", [(k, f"v{k}") for k in range(1, ROWS + 1)])
        c0 = time.monotonic()
        time.sleep(0.5)
        for i in range(len(hm.conns)):
            got = hm.replies(c0 + 0.1, time.monotonic(), i)
            assert got and all(hm.is_row(r) for (_, _, _, r) in got), \
                f"client {i} after the table was created again: {[r for (_, _, _, r) in got][:3]}"
    srv.exec_sql(f"DROP TABLE IF EXISTS {t}")


def test_flush_tables_with_read_lock_holds_writes_not_reads(srv):
    t = _table(srv, "lc_ftwrl")
    r = h.hs_open(srv.hs_port, t, "k,v")
    w = h.hs_open(srv.hs_port_wr, t, "v")
    sql = h.sql_conn(srv)
    try:
        assert r.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
        assert w.request("1\t=\t1\t1\t1\t0\tU\tbefore\n") == b"0\t1\t1\n"
        f0 = time.monotonic()
        with sql.cursor() as c:
            c.execute("FLUSH TABLES WITH READ LOCK")
        took = time.monotonic() - f0
        assert took < 1.0, f"FLUSH TABLES WITH READ LOCK took {took:.3f} s with tablesocket tables open"
        w.send("1\t=\t1\t2\t1\t0\tU\tduring\n")
        for k in range(1, 11):
            t0 = time.monotonic()
            assert r.request(f"1\t=\t1\t{k}\n").startswith(f"0\t2\t{k}\t".encode())
            assert time.monotonic() - t0 <= REPLY_BOUND
        time.sleep(0.5)
        assert _no_reply(w), "a write was executed under FLUSH TABLES WITH READ LOCK"
        assert srv.sql(f"SELECT v FROM {t} WHERE k = 2") == [("v2",)]
        # The parked write is not tried on every loop of the worker (busy readers made it try
        # 560,000 times a second): after 1 ms, backing off to every 8 ms as its wait grows. It has
        # waited 0.5 s already, so about 125 tries a second now (without the back-off, 1,000).
        m0, reads, r0 = h.status(srv)["tablesocket_requests_modify"], 0, time.monotonic()
        while time.monotonic() - r0 < 1.0:
            assert r.request(f"1\t=\t1\t{reads % 10 + 1}\n").startswith(b"0\t2\t")
            reads += 1
        tries = h.status(srv)["tablesocket_requests_modify"] - m0
        print(f"parked write tried {tries} times")
        spent = time.monotonic() - r0
        assert tries <= 200 * spent + 20, f"a parked write was tried {tries} times in {spent:.2f} s ({reads} reads)"
        with sql.cursor() as c:
            c.execute("UNLOCK TABLES")
        assert w.recv_line(timeout=2.0) == b"0\t1\t1\n"
        assert srv.sql(f"SELECT v FROM {t} WHERE k = 2") == [("during",)]
    finally:
        r.close()
        w.close()
        sql.close()


def test_a_table_level_lock_held_by_sql_holds_up_only_the_write_on_that_table(srv):
    """MyISAM takes table-level locks: a long SQL SELECT holds the table's read lock, which a write
    must wait for. The write waits (parked, retried) and is done once the SELECT ends, as SQL's
    UPDATE would be; everyone else is served meanwhile. Before, the worker waited for the lock
    itself: every client of it stalled for 2 s, and then the write failed with lock_tables."""
    srv.exec_sql("DROP TABLE IF EXISTS lc_myisam")
    srv.exec_sql("CREATE TABLE lc_myisam (k int primary key, v varchar(32)) ENGINE=MyISAM")
    srv.exec_sql("INSERT INTO lc_myisam VALUES (1, 'a'), (2, 'b')")
    other = _table(srv, "lc_myisam_other")
    w = h.hs_open(srv.hs_port_wr, "lc_myisam", "v")
    r = h.hs_open(srv.hs_port, other, "k,v")
    sql = h.sql_conn(srv)
    done = threading.Event()

    def long_select():
        with sql.cursor() as c:
            c.execute("SELECT SLEEP(3) FROM lc_myisam LIMIT 1")  # holds the table's read lock 3 s
            c.fetchall()
        done.set()
    th = threading.Thread(target=long_select)
    try:
        th.start()
        time.sleep(0.3)
        w.send("1\t=\t1\t1\t1\t0\tU\tlater\n")
        t0 = time.monotonic()
        while not done.is_set() and time.monotonic() - t0 < 2.4:  # past the old 2 s stall
            r0 = time.monotonic()
            assert r.request("1\t=\t1\t3\n") == b"0\t2\t3\tv3\n"
            assert time.monotonic() - r0 <= REPLY_BOUND, "a read of another table waited for the table lock"
            time.sleep(0.02)
        assert _no_reply(w), "a write was answered while SQL held the table's read lock"
        th.join(10)
        assert w.recv_line(timeout=3.0) == b"0\t1\t1\n"
        assert srv.sql("SELECT v FROM lc_myisam WHERE k = 1") == [("later",)]
    finally:
        th.join(10)
        w.close()
        r.close()
        sql.close()


def test_a_one_row_write_blocked_between_others_of_its_batch_waits_alone(srv):
    """Pipelined one-row updates share a statement; the one that meets SQL's row lock fails its
    attempts (InnoDB undoes only that row's) until the lock is gone: the rows before and after it
    in the same batch are changed once, the blocked one once it can be."""
    t = _table(srv, "lc_shared")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "n")
    try:
        assert w.request(f"P\t2\ttest\t{t}\tPRIMARY\tk,v,n\n") == b"0\t1\n"
        _begin(sql, f"SELECT * FROM {t} WHERE k = 5 FOR UPDATE")
        w.send("".join(f"1\t=\t1\t{k}\t1\t0\t+\t1\n" for k in (4, 5, 6)) + "2\t+\t3\t1000\tnew\t7\n")
        # Row 4's batch commits without the blocked request; the replies after it wait for it.
        assert w.recv_line(timeout=2.0) == b"0\t1\t1\n"
        assert _no_reply(w, 0.5)
        assert srv.sql(f"SELECT n FROM {t} WHERE k = 4") == [("1",)]
        sql.commit()
        assert w.recv_lines(3, timeout=3.0) == [b"0\t1\t1\n"] * 2 + [b"0\t1\n"]
        assert srv.sql(f"SELECT k, n FROM {t} WHERE k BETWEEN 3 AND 7 OR k = 1000 ORDER BY k") == \
            [("3", "0"), ("4", "1"), ("5", "1"), ("6", "1"), ("7", "0"), ("1000", "7")]
    finally:
        w.close()
        sql.close()


def test_with_rollback_on_timeout_a_blocked_one_row_write_loses_no_acknowledged_write(request):
    """innodb_rollback_on_timeout: the blocked attempt rolls back the whole batch transaction,
    with the shared statement of the rows before it. Whatever was answered must be there, and
    the worker goes on serving."""
    with h.private_server(request, "locks-rbt", ["--innodb-rollback-on-timeout=1",
                                                 "--tablesocket-threads=1"]) as s:
        t = _table(s, "lc_rbt")
        sql = h.sql_conn(s, autocommit=False)
        w = h.hs_open(s.hs_port_wr, t, "n")
        try:
            _begin(sql, f"SELECT * FROM {t} WHERE k = 5 FOR UPDATE")
            w.send("".join(f"1\t=\t1\t{k}\t1\t0\t+\t1\n" for k in (3, 4, 5, 6)))
            time.sleep(0.5)
            sql.commit()
            got = []
            try:
                while len(got) < 4:
                    got.append(w.recv_line(timeout=3.0))
            except (EOFError, ConnectionError, TimeoutError):
                pass  # closed: its answers would have been false
            assert all(r == b"0\t1\t1\n" for r in got), got
            rows = dict(s.sql(f"SELECT k, n FROM {t} WHERE k BETWEEN 3 AND 6"))
            for i, k in enumerate((3, 4, 5, 6)):
                if i < len(got):
                    assert rows[str(k)] == "1", (k, got, rows)
                assert rows[str(k)] in ("0", "1"), rows
            with h.hs_open(s.hs_port_wr, t, "n") as w2:
                assert w2.request("1\t=\t1\t8\t1\t0\t+\t1\n", timeout=3.0) == b"0\t1\t1\n"
            assert s.sql(f"SELECT n FROM {t} WHERE k = 8") == [("1",)]
        finally:
            w.close()
            sql.close()


def test_a_range_increment_blocked_midway_is_retried_without_applying_twice(srv):
    """The update walks rows 1..10 and meets the SQL lock on row 5 after changing rows 1..4: each
    retry (every few ms for a second) must undo its partial work, so every row ends at exactly +1."""
    t = _table(srv, "lc_range")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "n")
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 5 FOR UPDATE")
        w.send("1\t>=\t1\t1\t10\t0\t+\t1\n")
        assert _no_reply(w, 1.0)
        assert srv.sql(f"SELECT SUM(n) FROM {t}") == [("0",)]
        sql.commit()
        assert w.recv_line(timeout=2.0) == b"0\t1\t10\n"
        assert srv.sql(f"SELECT k, n FROM {t} WHERE k <= 11 ORDER BY k") == \
            [(str(k), "1" if k <= 10 else "0") for k in range(1, 12)]
    finally:
        w.close()
        sql.close()


def test_lock_tables_write_holds_up_only_the_requests_on_that_table(srv):
    t = _table(srv, "lc_locked")
    t2 = _table(srv, "lc_free")
    blocked = h.hs_open(srv.hs_port, t, "k,v")
    assert blocked.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"  # the worker has t open
    sql = h.sql_conn(srv)
    load = None
    try:
        l0 = time.monotonic()
        with sql.cursor() as c:
            c.execute(f"LOCK TABLES {t} WRITE")
        took = time.monotonic() - l0
        assert took < 1.0, f"LOCK TABLES took {took:.3f} s while tablesocket had the table open"
        with sql.cursor() as c:
            c.execute(f"UPDATE {t} SET v = 'locked' WHERE k = 1")
        blocked.send("1\t=\t1\t1\n")
        load = _others_load(srv, t2).start()
        t0 = time.monotonic()
        time.sleep(HOLD)
        t1 = time.monotonic()
        assert _no_reply(blocked), f"a read of a table under LOCK TABLES WRITE was answered: {blocked.recv_all(0.1)!r}"
        _assert_bounded(load, t0, t1, "LOCK TABLES WRITE on another table")
        with sql.cursor() as c:
            c.execute("UNLOCK TABLES")
        assert blocked.recv_line(timeout=2.0) == b"0\t2\t1\tlocked\n"
    finally:
        if load:
            load.stop()
        blocked.close()
        sql.close()


def test_several_increments_waiting_on_one_locked_row_all_apply_after_commit(srv):
    t = _table(srv, "lc_many")
    sql = h.sql_conn(srv, autocommit=False)
    waiters = [h.hs_open(srv.hs_port_wr, t, "n") for _ in range(8)]
    try:
        _begin(sql, f"UPDATE {t} SET n = 100 WHERE k = 7")
        for i, w in enumerate(waiters):
            w.send(f"1\t=\t1\t7\t1\t0\t+\t{i + 1}\n")
        time.sleep(0.5)
        assert all(_no_reply(w) for w in waiters)
        sql.commit()
        for w in waiters:
            assert w.recv_line(timeout=3.0) == b"0\t1\t1\n"
        assert srv.sql(f"SELECT n FROM {t} WHERE k = 7") == [(str(100 + sum(range(1, 9))),)]
    finally:
        for w in waiters:
            w.close()
        sql.close()


# --------------------------------------------------------------------------------------------------
# one client's long scans


def test_pipelined_full_table_scans_hold_up_another_client_by_about_one_scan(srv):
    """A client pipelines 12 requests that each examine every row of a 300,000-row table (a filter
    nothing passes). The batch stops taking requests once it has examined tablesocket_max_batch_rows
    rows, so the other client's point read (same worker) waits for about one scan, not twelve."""
    t = "scan_big"
    srv.exec_sql(f"DROP TABLE IF EXISTS {t}")
    srv.exec_sql(f"CREATE TABLE {t} (k int primary key, v varchar(8)) ENGINE=InnoDB")
    srv.exec_sql(f"INSERT INTO {t} SELECT seq, 'x' FROM seq_1_to_300000")
    assert int(h.variable(srv, "tablesocket_max_batch_rows")) < 300000
    scanner = h.HSConn(srv.hs_port, timeout=60)
    assert scanner.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\tv\n") == b"0\t1\n"
    assert scanner.request("1\t>=\t1\t0\t1\t0\tF\t=\t0\tnone\n") == b"0\t2\n"  # warm the buffer pool
    other = h.hs_open(srv.hs_port, t, "k,v")
    n = 12
    t0 = time.monotonic()
    scanner.send("1\t>=\t1\t0\t1\t0\tF\t=\t0\tnone\n" * n)
    time.sleep(0.02)  # the scans are under way
    t1 = time.monotonic()
    assert other.request("1\t=\t1\t7\n") == b"0\t2\t7\tx\n"
    waited = time.monotonic() - t1
    replies = scanner.recv_lines(n, timeout=60)
    total = time.monotonic() - t0
    assert replies == [b"0\t2\n"] * n
    print(f"{n} scans took {total * 1e3:.0f} ms; the point read waited {waited * 1e3:.0f} ms")
    assert waited < total / 3, f"the point read waited {waited:.2f} s of the scans' {total:.2f} s"
    scanner.close()
    other.close()
    srv.exec_sql(f"DROP TABLE {t}")


# --------------------------------------------------------------------------------------------------
# The lock queue: a write that keeps meeting a row lock waits in InnoDB's queue on a session of its own


class _SqlHotRow:
    """`sessions` SQL clients taking turns on one row as fast as they can: BEGIN, SELECT ... FOR
    UPDATE, hold it `hold` s, n = n + 1 (or the `bump` statement given), COMMIT. With two or more,
    one always waits in InnoDB's queue, and the row goes from one to the next the moment it is
    committed: never free."""

    def __init__(self, s, table: str, k, sessions: int = 3, hold: float = 0.002, col: str = "k",
                 bump: str = "n = n + 1"):
        self.stop = threading.Event()
        self.count = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._conns = [h.sql_conn(s, autocommit=False) for _ in range(sessions)]
        lock_sql = f"SELECT 1 FROM {table} WHERE {col} = %s FOR UPDATE"
        bump_sql = f"UPDATE {table} SET {bump} WHERE {col} = %s"
        self._threads = [threading.Thread(target=self._run, args=(c, lock_sql, bump_sql, k, hold), daemon=True)
                         for c in self._conns]

    def _run(self, conn, lock_sql, bump_sql, k, hold):
        try:
            with conn.cursor() as c:
                while not self.stop.is_set():
                    c.execute(lock_sql, (k,))
                    time.sleep(hold)
                    c.execute(bump_sql, (k,))
                    conn.commit()
                    with self._lock:
                        self.count += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(e))

    def __enter__(self):
        for t in self._threads:
            t.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self._threads:
            t.join(10)
        for c in self._conns:
            c.close()


def test_a_write_gets_its_turn_on_a_row_sql_transactions_hand_to_each_other(srv):
    """Three SQL sessions lock and update one row back to back (one commits while the next already
    waits in InnoDB's queue, so the row is never free). A request that only retries the lock never
    gets it: every HandlerSocket and memcached write of that row timed out after
    tablesocket_lock_wait_timeout (50 s) while SQL went on. Queued for the lock after
    tablesocket_lock_queue_after (20 ms), each gets the row in its turn, and no increment is lost."""
    t = _table(srv, "lc_hot")
    srv.exec_sql("DELETE FROM kv WHERE k = 'lc_hot'")
    srv.exec_sql("INSERT INTO kv (k, v, flags, cas, exp) VALUES ('lc_hot', '0', 0, 1, 0)")
    from ts_mc import McConn
    before = h.status(srv)
    w = h.hs_open(srv.hs_port_wr, t, "n")
    mc = McConn(srv.mc_port)
    try:
        with _SqlHotRow(srv, t, 1) as hot:
            worst = 0.0
            for i in range(10):
                t0 = time.monotonic()
                assert w.request("1\t=\t1\t1\t1\t0\t+\t1\n", timeout=10.0) == b"0\t1\t1\n"
                worst = max(worst, time.monotonic() - t0)
            print(f"10 increments of the hot row, slowest {worst * 1e3:.0f} ms; SQL did {hot.count}")
            assert worst < 3.0, f"an increment of the hot row took {worst:.2f} s"
        assert not hot.errors, hot.errors
        assert srv.sql(f"SELECT n FROM {t} WHERE k = 1") == [(str(hot.count + 10),)]
        # memcached: incr on a row SQL sessions hand to each other the same way.
        with _SqlHotRow(srv, "kv", "lc_hot", bump="v = CAST(v AS UNSIGNED) + 1, cas = cas + 1") as kvhot:
            for i in range(5):
                t0 = time.monotonic()
                mc.send(b"incr lc_hot 1000\r\n")
                line = mc.recv_line(10.0)
                assert line.strip().isdigit(), line
                assert time.monotonic() - t0 < 3.0
        assert not kvhot.errors, kvhot.errors
        assert srv.sql("SELECT v FROM kv WHERE k = 'lc_hot'") == [(str(kvhot.count + 5000),)]
        after = h.status(srv)
        assert after["tablesocket_lock_queued"] >= before["tablesocket_lock_queued"] + 1
        # Nothing is left waiting: the queue's sessions are gone once their requests are answered.
        assert srv.sql("SELECT COUNT(*) FROM information_schema.processlist "
                       "WHERE state = 'tablesocket lock queue'") == [("0",)]
    finally:
        w.close()
        mc.close()


def test_a_queued_write_whose_connection_is_reset_still_runs_after_the_lock(srv):
    """A write waiting in InnoDB's lock queue for a row SQL holds: its connection is reset (RST, as
    the kernel sends for a client that exits with replies unread). The worker goes on serving, and
    the write runs once SQL commits, as it would after a plain close and as an SQL statement
    waiting for a row lock runs when its client is gone (it used to be cancelled: whether a
    client's writes happened then depended on the moment its reset arrived)."""
    t = _table(srv, "lc_gone")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "v")
    other = h.hs_open(srv.hs_port_wr, t, "v")
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        q0 = h.status(srv)["tablesocket_lock_queued"]
        w.send("1\t=\t1\t1\t1\t0\tU\tfrom a client that left\n")
        deadline = time.monotonic() + 5
        while h.status(srv)["tablesocket_lock_queued"] == q0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert h.status(srv)["tablesocket_lock_queued"] == q0 + 1, "the write was not queued for the lock"
        assert srv.sql("SELECT COUNT(*) FROM information_schema.processlist "
                       "WHERE state = 'tablesocket lock queue'") == [("1",)]
        h.reset(w)
        t0 = time.monotonic()
        assert other.request("1\t=\t1\t2\t1\t0\tU\tother\n") == b"0\t1\t1\n"
        assert time.monotonic() - t0 < REPLY_BOUND
        assert srv.sql(f"SELECT v FROM {t} WHERE k IN (1, 2) ORDER BY k") == [("v1",), ("other",)]
        sql.commit()
        assert h.sql_eventually(srv, "SELECT COUNT(*) FROM information_schema.processlist "
                                "WHERE state = 'tablesocket lock queue'", [("0",)]) == [("0",)], \
            "the queued write's session is still there"
        assert h.sql_eventually(srv, f"SELECT v FROM {t} WHERE k = 1", [("from a client that left",)]) == \
            [("from a client that left",)], "the queued write did not run after the commit"
        assert srv.sql(f"SELECT v FROM {t} WHERE k IN (1, 2) ORDER BY k") == [("from a client that left",), ("other",)]
    finally:
        other.close()
        sql.close()


def test_a_table_slot_reused_after_a_ddl_took_its_table_refuses_no_write(request):
    """A worker that gave a table up for a waiting DDL does not reopen it for writing for a moment
    (twice the DDL check interval: a waiting LOCK TABLES ... READ must get its turn). Once no open
    index refers to that table, its slot is reused by the next table opened, which inherited the
    moment: its writes waited for it (2 s here) for nothing, and a client that reset its
    connection meanwhile lost them (test_memcached's reset test, whenever the previous test's
    DROP TABLE came just before)."""
    with h.private_server(request, "slot-reuse",
                          ["--tablesocket-threads=1", "--tablesocket-ddl-check-interval=1000"]) as s:
        a, b, c = (_table(s, name, rows=5) for name in ("lc_slot_a", "lc_slot_b", "lc_slot_c"))
        conn = h.hs_open(s.hs_port_wr, a, "v")
        try:
            assert conn.request("1\t=\t1\t1\n") == b"0\t1\tv1\n"
            s.exec_sql(f"DROP TABLE {a}")  # the worker gives the table up (its index stays open)
            # Index 1 now on b: nothing refers to a's slot, which is freed after this request ...
            assert conn.request(f"P\t1\ttest\t{b}\tPRIMARY\tv\n") == b"0\t1\n"
            # ... and taken by c.
            assert conn.request(f"P\t2\ttest\t{c}\tPRIMARY\tv\n") == b"0\t1\n"
            waits = h.status(s)["tablesocket_lock_waits"]
            t0 = time.monotonic()
            assert conn.request("2\t=\t1\t1\t1\t0\tU\tnew\n", timeout=5.0) == b"0\t1\t1\n"
            took = time.monotonic() - t0
            assert took < 0.5, f"a write to a table nothing was locking waited {took:.3f} s"
            assert h.status(s)["tablesocket_lock_waits"] == waits
            assert s.sql(f"SELECT v FROM {c} WHERE k = 1") == [("new",)]
        finally:
            conn.close()


def test_a_write_that_waited_for_a_lock_is_counted_once(srv):
    """A write parked on a row lock is tried again every few milliseconds until it gets the lock
    (or is queued for it): each try used to count as another request, so half a second of waiting
    made Tablesocket_requests_modify / _insert and memcached's cmd_set grow by dozens for one
    write. They count requests, once each."""
    from ts_mc import McConn
    t = _table(srv, "lc_count")
    srv.exec_sql("DELETE FROM kv WHERE k = 'lc_count'")
    srv.exec_sql("INSERT INTO kv (k, v, flags, cas, exp) VALUES ('lc_count', 'old', 0, 1, 0)")
    sql = h.sql_conn(srv, autocommit=False)
    w = h.hs_open(srv.hs_port_wr, t, "v")
    mc = McConn(srv.mc_port)

    def cmd_set() -> int:
        mc.send(b"stats\r\n")
        return int(re.search(rb"STAT cmd_set (\d+)\r\n", mc.recv_until()).group(1))

    try:
        set0, st0 = cmd_set(), h.status(srv)
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        with sql.cursor() as c:
            c.execute("SELECT * FROM kv WHERE k = 'lc_count' FOR UPDATE")
        w.send("1\t=\t1\t1\t1\t0\tU\tafter the lock\n")
        mc.send(b"set lc_count 0 0 3\r\nnew\r\n")
        time.sleep(0.5)
        assert _no_reply(w) and _no_reply(mc)
        sql.commit()
        assert w.recv_line(timeout=5.0) == b"0\t1\t1\n"
        assert mc.recv_line(5.0) == b"STORED\r\n"
        st1 = h.status(srv)
        assert st1["tablesocket_lock_waits"] - st0["tablesocket_lock_waits"] == 2, (st0, st1)
        assert st1["tablesocket_requests_modify"] - st0["tablesocket_requests_modify"] == 1, (st0, st1)
        assert st1["tablesocket_requests_insert"] - st0["tablesocket_requests_insert"] == 1, (st0, st1)
        assert cmd_set() - set0 == 1
        # An insert through HandlerSocket is not a memcached store: cmd_set does not count it.
        assert w.request(f"P\t2\ttest\t{t}\tPRIMARY\tk,v,n\n") == b"0\t1\n"
        set1 = cmd_set()
        assert w.request("2\t+\t3\t9001\tnew\t0\n") == b"0\t1\n"
        assert cmd_set() == set1
        assert srv.sql(f"SELECT v FROM {t} WHERE k = 1") == [("after the lock",)]
        assert srv.sql("SELECT v FROM kv WHERE k = 'lc_count'") == [("new",)]
    finally:
        w.close()
        mc.close()
        sql.close()


def test_a_touch_that_waited_for_a_lock_is_done_and_counted_once(srv):
    """`gat` of two keys whose second row SQL holds: the request runs again until it gets the
    lock, and used to touch (write and commit) the first key again every time, and to count the
    expired key it met in get_expired and an `mg ... T` in cmd_touch each time (+300 for one
    request)."""
    from ts_mc import McConn
    srv.exec_sql("DELETE FROM kv WHERE k IN ('lt_a', 'lt_b', 'lt_x')")
    srv.exec_sql("INSERT INTO kv (k, v, flags, cas, exp) VALUES ('lt_a', 'A', 0, 1, 0), ('lt_b', 'B', 0, 2, 0), "
                 "('lt_x', 'X', 0, 3, 1)")
    sql = h.sql_conn(srv, autocommit=False)
    mc = McConn(srv.mc_port)
    try:
        st0 = h.status(srv)
        _begin(sql, "SELECT * FROM kv WHERE k = 'lt_b' FOR UPDATE")
        mc.send(b"gat 0 lt_x lt_a lt_b\r\n")
        time.sleep(0.4)
        assert _no_reply(mc)
        sql.commit()
        assert mc.recv_until(timeout=5.0) == b"VALUE lt_a 0 1\r\nA\r\nVALUE lt_b 0 1\r\nB\r\nEND\r\n"
        st1 = h.status(srv)
        assert st1["tablesocket_rows_written"] - st0["tablesocket_rows_written"] == 2, (st0, st1)
        assert st1["tablesocket_mc_get_expired"] - st0["tablesocket_mc_get_expired"] == 0, (st0, st1)
        assert st1["tablesocket_mc_cmd_touch"] - st0["tablesocket_mc_cmd_touch"] == 3, (st0, st1)
        assert st1["tablesocket_mc_touch_hits"] - st0["tablesocket_mc_touch_hits"] == 2, (st0, st1)
        assert st1["tablesocket_rows_read"] - st0["tablesocket_rows_read"] == 2, (st0, st1)
        # mg with T on a locked row: one touch, one hit.
        _begin(sql, "SELECT * FROM kv WHERE k = 'lt_a' FOR UPDATE")
        mc.send(b"mg lt_a v T0\r\n")
        time.sleep(0.4)
        assert _no_reply(mc)
        sql.commit()
        assert mc.recv_line(5.0) == b"VA 1\r\n" and mc.recv_line(5.0) == b"A\r\n"
        st2 = h.status(srv)
        assert st2["tablesocket_mc_cmd_touch"] - st1["tablesocket_mc_cmd_touch"] == 1, (st1, st2)
        assert st2["tablesocket_mc_touch_hits"] - st1["tablesocket_mc_touch_hits"] == 1, (st1, st2)
        assert st2["tablesocket_rows_written"] - st1["tablesocket_rows_written"] == 1, (st1, st2)
    finally:
        mc.close()
        sql.close()


def test_a_blocked_write_times_out_at_its_own_timeout_however_often_it_is_sent_again(srv):
    """tablesocket_lock_wait_timeout is the request's own, to the tens of milliseconds: a write
    handed to the lock queue (which waits in InnoDB in one-second attempts) is stopped at its
    deadline rather than at the end of the attempt, and the same write sent again after a timeout
    waits its full time (it inherited the first one's start and timed out at once, every other
    time). Nothing is written while the row stays locked."""
    s = srv
    t = _table(s, "lc_own_timeout", rows=4)
    sql = h.sql_conn(s, autocommit=False)
    w = h.hs_open(s.hs_port_wr, t, "n")
    before = {v: h.variable(s, f"tablesocket_{v}") for v in ("lock_wait_timeout", "lock_queue_after")}
    try:
        _begin(sql, f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
        for timeout_ms, queue_after_ms in ((300, 20), (1500, 20), (400, 20), (250, 100000)):
            s.exec_sql(f"SET GLOBAL tablesocket_lock_wait_timeout = {timeout_ms}, "
                       f"tablesocket_lock_queue_after = {queue_after_ms}")
            for _ in range(3):  # the same request again and again
                t0 = time.monotonic()
                assert w.request("1\t=\t1\t1\t1\t0\t+\t1\n", timeout=5.0) == b"1\t1\tlock_wait_timeout\n"
                waited = time.monotonic() - t0
                assert timeout_ms / 1000 - 0.03 <= waited <= timeout_ms / 1000 + 0.35, \
                    (timeout_ms, queue_after_ms, round(waited, 3))
        assert s.sql(f"SELECT n FROM {t} WHERE k = 1") == [("0",)]
        sql.commit()
        assert w.request("1\t=\t1\t1\t1\t0\t+\t1\n", timeout=5.0) == b"0\t1\t1\n"
        assert s.sql(f"SELECT n FROM {t} WHERE k = 1") == [("1",)]
    finally:
        s.exec_sql(f"SET GLOBAL tablesocket_lock_wait_timeout = {before['lock_wait_timeout']}, "
                   f"tablesocket_lock_queue_after = {before['lock_queue_after']}")
        w.close()
        sql.close()


def test_inserts_meeting_the_auto_inc_table_lock_wait_for_it(request):
    """innodb_autoinc_lock_mode=0: every AUTO_INCREMENT insert takes InnoDB's table-level AUTO-INC
    lock to the end of its statement. A worker's insert that found it held (by the other worker
    or SQL) failed with "1 1 166" (HA_ERR_AUTOINC_READ_FAILED: InnoDB's word for that lock wait):
    it waits and is retried as for a row lock."""
    with h.private_server(request, "autoinc0", ["--innodb-autoinc-lock-mode=0", "--tablesocket-threads=2"]) as s:
        s.exec_sql("CREATE TABLE ai0 (id bigint auto_increment primary key, u int not null unique) ENGINE=InnoDB")
        replies: dict[int, list[bytes]] = {}

        def client(c: int) -> None:
            w = h.hs_open(s.hs_port_wr, "ai0", "u")
            try:
                w.send("".join(f"1\t+\t1\t{c * 100000 + i}\n" for i in range(300)))
                replies[c] = w.recv_lines(300, timeout=60)
            finally:
                w.close()

        stop = threading.Event()
        sql_rows = []

        def sql_inserts() -> None:
            conn = h.sql_conn(s)
            try:
                with conn.cursor() as cur:
                    i = 0
                    while not stop.is_set():
                        cur.execute("INSERT INTO ai0 (u) VALUES (%s)", (9000000 + i,))
                        i += 1
                    sql_rows.append(i)
            finally:
                conn.close()

        sq = threading.Thread(target=sql_inserts)
        sq.start()
        clients = [threading.Thread(target=client, args=(c,)) for c in range(6)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        stop.set()
        sq.join()
        ids = []
        for c in range(6):
            assert len(replies[c]) == 300
            for r in replies[c]:
                assert r.startswith(b"0\t1\t"), r
                ids.append(int(r.split(b"\t")[2]))
        assert len(set(ids)) == len(ids) == 1800
        got = dict((int(i), int(u)) for i, u in s.sql("SELECT id, u FROM ai0 WHERE u < 9000000"))
        assert sorted(got) == sorted(ids)
        assert s.sql("SELECT COUNT(*) FROM ai0 WHERE u >= 9000000") == [(str(sql_rows[0]),)]


def test_a_queued_write_whose_request_changed_is_stopped_and_a_new_login_cancels_its_account(request):
    """A write queued for a row lock runs as a copy on a session of its own (the lock queue). Its
    request, retried by the worker, may find other rows (an IN list taken from another index with
    ^): the worker then runs it itself, and the copy went on waiting — writing, once the lock was
    gone, rows the client was never told about, as the connection's account of the time even
    after a new login had freed it (a use-after-free: the server crashed with MALLOC_PERTURB_).
    The copy is now stopped, and a login that changes the account cancels any copy first."""
    with h.private_server(request, "lanerelogin", ["--tablesocket-require-auth=ON", "--tablesocket-threads=1",
                                                  "--tablesocket-lock-queue-after=0",
                                                  "--tablesocket-lock-wait-timeout=20000"]) as s:
        from test_security import login
        s.exec_sql("CREATE TABLE lq (id int primary key, v varchar(20)) ENGINE=InnoDB")
        s.exec_sql("INSERT INTO lq VALUES (1, 'a'), (2, 'b')")
        s.exec_sql("CREATE TABLE lqsrc (id int primary key, ref int) ENGINE=InnoDB")
        s.exec_sql("INSERT INTO lqsrc VALUES (1, 1)")
        for u in ("lqa", "lqb"):
            s.exec_sql(f"CREATE USER '{u}'@'127.0.0.1' IDENTIFIED BY 'pw'")
        s.exec_sql("GRANT ALL ON test.* TO 'lqa'@'127.0.0.1'")
        s.exec_sql("GRANT SELECT ON test.lqsrc TO 'lqb'@'127.0.0.1'")
        sql = h.sql_conn(s, autocommit=False)
        c = h.HSConn(s.hs_port_wr)
        try:
            _begin(sql, "SELECT * FROM lq WHERE id = 1 FOR UPDATE")
            assert login(c, "lqa", "pw") == b"0\t1\n"
            assert c.request("P\t1\ttest\tlq\tPRIMARY\tv\n") == b"0\t1\n"
            assert c.request("P\t2\ttest\tlqsrc\tPRIMARY\tref\n") == b"0\t1\n"
            queued = h.status(s)["tablesocket_lock_queued"]
            c.send("1\t=\t1\t0\t10\t0\t@\t0\t^\t2\t1\t1\t10\tU\tLANE\n")  # the rows lqsrc's refs name
            deadline = time.monotonic() + 5
            while h.status(s)["tablesocket_lock_queued"] == queued:
                assert time.monotonic() < deadline, "the write was not queued"
                time.sleep(0.05)
            s.exec_sql("UPDATE lqsrc SET ref = 2 WHERE id = 1")  # its retry now names row 2
            assert c.recv_line(timeout=10) == b"0\t1\t1\n"
            assert login(c, "lqb", "pw") == b"0\t1\n"
            time.sleep(1.5)
            sql.rollback()
            time.sleep(1.5)
            assert s.sql("SELECT id, v FROM lq ORDER BY id") == [("1", "a"), ("2", "LANE")]
            assert s.running()
        finally:
            c.close()
            sql.close()
