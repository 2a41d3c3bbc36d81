"""What SQL does around the storage engine, done for tablesocket's writes too (HandlerSocket skips
all of it): CHECK constraints, system-versioned tables' history, and triggers (which a worker cannot
run: writes that would skip them are refused, loudly, rather than done without them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ts_mc import McConn, wait_for_container  # noqa: E402

pytestmark = pytest.mark.tablesocket_only("HandlerSocket skips constraints, versioning and triggers")


def opened(conn, table: str, columns: str, index: str = "PRIMARY") -> None:
    assert conn.request(f"P\t1\ttest\t{table}\t{index}\t{columns}\n") == b"0\t1\n"


class TestCheckConstraints:
    def test_insert_update_and_upsert_are_checked(self, server, hs, make_table):
        t = make_table("id int primary key, n int check (n > 0), m int, constraint lim check (m < 100)")
        c = hs(wr=True)
        opened(c, t, "id,n,m")
        assert c.request("1\t+\t3\t1\t5\t5\n") == b"0\t1\n"
        r = c.request("1\t+\t3\t2\t-5\t5\n")
        assert r.startswith(b"1\t1\tCONSTRAINT `") and b"failed" in r, r
        r = c.request("1\t+\t3\t3\t5\t500\n")
        assert r.startswith(b"1\t1\tCONSTRAINT `lim` failed"), r
        r = c.request("1\t=\t1\t1\t1\t0\tU\t1\t0\t5\n")
        assert b"failed" in r, r
        r = c.request("1\t+=\t3\t1\t5\t100\n")
        assert b"failed" in r, r
        r = c.request("1\t=\t1\t1\t1\t0\t+\t0\t0\t95\n")  # increment m to 100
        assert b"CONSTRAINT `lim` failed" in r, r
        assert c.request("1\t=\t1\t1\t1\t0\t+\t0\t1\t1\n") == b"0\t1\t1\n"
        assert server.sql(f"SELECT id, n, m FROM test.{t}") == [("1", "6", "6")]
        # the connection is usable after every refusal
        assert c.request("1\t+\t3\t4\t1\t1\n") == b"0\t1\n"

    def test_memcached_set_is_checked(self, server, make_table):
        if not getattr(server, "mc_port", None):
            pytest.skip("no memcached port")
        t = make_table("k varchar(50) primary key, v varchar(50) check (v <> 'bad')")
        server.exec_sql("REPLACE INTO innodb_memcache.containers VALUES (%s,'test',%s,'k','v','0',NULL,NULL,'PRIMARY')",
                        ("chk_" + t, t), db=None)
        try:
            c = McConn(server.mc_port)
            wait_for_container(c, f"chk_{t}")
            c.set("a", b"good")
            c.send("set a 0 0 3\r\nbad\r\n")
            assert c.recv_line().startswith(b"SERVER_ERROR CONSTRAINT"), "refused"
            assert server.sql(f"SELECT v FROM test.{t}") == [("good",)]
            c.close()
        finally:
            server.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", ("chk_" + t,), db=None)


class TestSystemVersioning:
    @pytest.mark.parametrize("kind", ["timestamp", "trx_id"])
    def test_updates_and_deletes_keep_history_and_reads_hide_it(self, server, hs, make_table, kind):
        if kind == "timestamp":
            ddl = "id int primary key, n int"
            suffix = " with system versioning"
        else:
            ddl = ("id int primary key, n int, s bigint unsigned as row start invisible, "
                   "e bigint unsigned as row end invisible, period for system_time(s, e)")
            suffix = " with system versioning"
        t = make_table("id int primary key")
        server.exec_sql(f"DROP TABLE test.{t}")
        server.exec_sql(f"CREATE TABLE test.{t} ({ddl}){suffix} ENGINE=InnoDB")
        server.exec_sql(f"INSERT INTO test.{t} VALUES (1, 1), (2, 2)" if kind == "timestamp"
                        else f"INSERT INTO test.{t} (id, n) VALUES (1, 1), (2, 2)")
        w = hs(wr=True)
        opened(w, t, "id,n")
        assert w.request("1\t=\t1\t1\t1\t0\tU\t1\t10\n") == b"0\t1\t1\n"
        assert w.request("1\t=\t1\t1\t1\t0\tU\t1\t11\n") == b"0\t1\t1\n"
        assert w.request("1\t=\t1\t2\t1\t0\tD\n") == b"0\t1\t1\n"
        assert w.request("1\t+\t2\t3\t3\n") == b"0\t1\n"
        assert w.request("1\t+\t2\t2\t22\n") == b"0\t1\n"   # id 2 again: its old row is history
        assert server.sql(f"SELECT id, n FROM test.{t} ORDER BY id") == [("1", "11"), ("2", "22"), ("3", "3")]
        hist = server.sql(f"SELECT id, n FROM test.{t} FOR SYSTEM_TIME ALL ORDER BY id, n")
        assert hist == [("1", "1"), ("1", "10"), ("1", "11"), ("2", "2"), ("2", "22"), ("3", "3")]
        r = hs()
        opened(r, t, "id,n")
        assert r.request("1\t=\t1\t1\t10\t0\n") == b"0\t2\t1\t11\n"
        assert r.request("1\t>=\t1\t0\t10\t0\n") == b"0\t2\t1\t11\t2\t22\t3\t3\n"
        assert r.request("1\t=\t1\t1\t10\t0\t@\t0\t3\t1\t2\t3\n") == b"0\t2\t1\t11\t2\t22\t3\t3\n"
        # a delete of a row with history deletes just the current row
        assert w.request("1\t>=\t1\t0\t10\t0\tD\n") == b"0\t1\t3\n"
        assert r.request("1\t>=\t1\t0\t10\t0\n") == b"0\t2\n"
        assert server.sql(f"SELECT COUNT(*) FROM test.{t} FOR SYSTEM_TIME ALL") == [("6",)]


class TestTriggers:
    def test_writes_that_would_skip_a_trigger_are_refused(self, server, hs, make_table):
        t = make_table("id int primary key, n int", [(1, 1)])
        log = make_table("id int auto_increment primary key, msg varchar(50)")
        server.exec_sql(f"CREATE TRIGGER test.{t}_au AFTER UPDATE ON test.{t} FOR EACH ROW "
                        f"INSERT INTO test.{log} (msg) VALUES (CONCAT('upd ', NEW.id))")
        c = hs(wr=True)
        opened(c, t, "id,n")
        # no INSERT or DELETE trigger: those go through
        assert c.request("1\t+\t2\t2\t2\n") == b"0\t1\n"
        r = c.request("1\t=\t1\t1\t1\t0\tU\t1\t5\n")
        assert r.startswith(b"1\t1\ttable '") and b"UPDATE triggers" in r, r
        r = c.request("1\t+=\t2\t1\t7\n")    # an upsert that would update
        assert b"UPDATE triggers" in r, r
        assert c.request("1\t=\t1\t2\t1\t0\tD\n") == b"0\t1\t1\n"
        assert server.sql(f"SELECT id, n FROM test.{t}") == [("1", "1")]
        assert server.sql(f"SELECT COUNT(*) FROM test.{log}") == [("0",)]
        # reads are not affected; dropping the trigger makes the table writable again
        server.exec_sql(f"DROP TRIGGER test.{t}_au")
        assert c.request("1\t=\t1\t1\t1\t0\tU\t1\t5\n") == b"0\t1\t1\n"


class TestDefaultsAndGeneratedColumns:
    def test_a_nextval_default_is_refused_not_crashed_on(self, server, hs, make_table):
        # DEFAULT NEXTVAL(seq) needs the sequence opened with the statement (the server crashed
        # evaluating it without): a value for the column is required instead
        t = make_table("id int primary key")
        seq = f"{t}_seq"
        server.exec_sql(f"CREATE SEQUENCE test.{seq}")
        try:
            server.exec_sql(f"DROP TABLE test.{t}")
            server.exec_sql(f"CREATE TABLE test.{t} (id int primary key, n bigint default nextval(test.{seq}))")
            c = hs(wr=True)
            opened(c, t, "id,n")
            r = c.request("1\t+\t1\t1\n")
            assert r.startswith(b"1\t1\tcolumn 'n' needs a value: its DEFAULT calls NEXTVAL()"), r
            assert c.request("1\t+\t2\t2\t42\n") == b"0\t1\n"
            assert c.request("1\t+=\t2\t2\t43\n") == b"0\t1\n"
            assert server.sql(f"SELECT id, n FROM test.{t}") == [("2", "43")]
            server.exec_sql(f"INSERT INTO test.{t} (id) VALUES (3)")   # SQL still uses the sequence
            assert server.sql(f"SELECT n FROM test.{t} WHERE id = 3") == [("1",)]
        finally:
            server.exec_sql(f"DROP TABLE IF EXISTS test.{t}")
            server.exec_sql(f"DROP SEQUENCE IF EXISTS test.{seq}")

    def test_a_generated_column_error_is_the_servers_message(self, server, hs, make_table):
        t = make_table("id int primary key, a int, b int as (100 div a) stored")
        c = hs(wr=True)
        opened(c, t, "id,a")
        assert c.request("1\t+\t2\t1\t0\n") == b"1\t1\tDivision by 0\n"
        assert c.request("1\t+\t2\t2\t5\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t2\t1\t0\tU\t2\t0\n") == b"1\t1\tDivision by 0\n"
        assert server.sql(f"SELECT id, a, b FROM test.{t}") == [("2", "5", "20")]

    def test_a_value_for_a_generated_column_is_refused_in_strict_mode_as_sql_refuses_it(self, server, hs, make_table):
        # Before, the value was dropped silently and the write answered as done.
        t = make_table("id int primary key, a int, v int as (a * 2) virtual, p int as (a * 3) persistent")
        c = hs(wr=True)
        opened(c, t, "id,a,v,p")
        msg = f"The value specified for generated column 'v' in table '{t}' has been ignored".encode()
        assert c.request("1\t+\t4\t1\t5\t0\t0\n") == b"1\t1\t" + msg + b"\n"
        assert c.request("1\t+\t2\t2\t7\n") == b"0\t1\n"        # the generated columns not given
        assert c.request("1\t=\t1\t2\t1\t0\tU\t2\t8\t1\t1\n") == b"1\t1\t" + msg + b"\n"
        assert c.request("1\t=\t1\t2\n") == b"0\t4\t2\t7\t14\t21\n"
        with pytest.raises(Exception, match="1906"):
            server.exec_sql(f"INSERT INTO test.{t} (id, a, v) VALUES (3, 1, 1)")
        # Without strict mode SQL ignores it with a warning; so does tablesocket.
        server.exec_sql("SET GLOBAL sql_mode = ''", db=None)
        try:
            assert c.request("1\t+\t4\t3\t5\t0\t0\n") == b"0\t1\n"
        finally:
            server.exec_sql("SET GLOBAL sql_mode = DEFAULT", db=None)
        assert server.sql(f"SELECT id, a, v, p FROM test.{t} ORDER BY id") == [("2", "7", "14", "21"), ("3", "5", "10", "15")]


class TestSessionDefaults:
    def test_current_user_and_database_defaults_are_the_connections(self, server, hs, make_table):
        from test_security import login
        t = make_table("id int primary key, who varchar(100) default (current_user()), "
                       "db varchar(64) default (database()), at datetime default (now()), "
                       "login varchar(100) default (user())")
        server.exec_sql("DROP USER IF EXISTS 'defuser'@'%'")
        server.exec_sql("CREATE USER 'defuser'@'%' IDENTIFIED BY 'pw2'")
        server.exec_sql(f"GRANT SELECT, INSERT ON test.{t} TO 'defuser'@'%'")
        try:
            c = hs(wr=True)
            assert login(c, "defuser", "pw2") == b"0\t1\n"
            opened(c, t, "id")
            assert c.request("1\t+\t1\t1\n") == b"0\t1\n"
            anon = hs(wr=True)
            opened(anon, t, "id")
            assert anon.request("1\t+\t1\t2\n") == b"0\t1\n"
            rows = server.sql(f"SELECT id, who, db, at IS NOT NULL, login FROM test.{t} ORDER BY id")
            # USER(): the name the client logged in with @ the host it came from, as SQL gives it
            assert rows[0][:4] == ("1", "defuser@%", "test", "1"), rows
            assert rows[0][4] in ("defuser@127.0.0.1", "defuser@localhost"), rows
            assert rows[1][2:4] == ("test", "1"), rows
            assert c.request("1\t+\t1\t3\n") == b"0\t1\n"   # again, after another account's insert
            assert server.sql(f"SELECT who FROM test.{t} WHERE id = 3") == [("defuser@%",)]
        finally:
            server.exec_sql("DROP USER IF EXISTS 'defuser'@'%'")


class TestVersionedReadsElsewhere:
    def test_merges_and_memcached_skip_history_rows(self, server, hs, make_table):
        t = make_table("id int primary key")
        server.exec_sql(f"DROP TABLE test.{t}")
        server.exec_sql(f"CREATE TABLE test.{t} (g int, s int, v varchar(20), PRIMARY KEY (g, s)) "
                        "WITH SYSTEM VERSIONING")
        server.exec_sql(f"INSERT INTO test.{t} VALUES (1, 1, 'a'), (1, 2, 'b'), (2, 1, 'c')")
        server.exec_sql(f"UPDATE test.{t} SET v = 'B' WHERE g = 1 AND s = 2")   # (1, 2, 'b') is history
        server.exec_sql(f"DELETE FROM test.{t} WHERE g = 2")                    # (2, 1, 'c') too
        c = hs()
        opened(c, t, "g,s,v")
        assert c.request("1\tM-\t1\t\t10\t0\t@\t0\t2\t1\t2\n") == b"0\t3\t1\t2\tB\t1\t1\ta\n"
        assert c.request("1\tM+\t1\t\t10\t0\t@\t0\t2\t1\t2\n") == b"0\t3\t1\t1\ta\t1\t2\tB\n"
        if not getattr(server, "mc_port", None):
            return
        kv = make_table("k varchar(20) primary key")
        server.exec_sql(f"DROP TABLE test.{kv}")
        server.exec_sql(f"CREATE TABLE test.{kv} (k varchar(20) primary key, v varchar(20)) WITH SYSTEM VERSIONING")
        server.exec_sql(f"INSERT INTO test.{kv} VALUES ('a', 'old')")
        server.exec_sql(f"UPDATE test.{kv} SET v = 'new' WHERE k = 'a'")
        name = "ver_" + kv
        server.exec_sql("REPLACE INTO innodb_memcache.containers VALUES (%s,'test',%s,'k','v','0',NULL,NULL,'PRIMARY')",
                        (name, kv), db=None)
        try:
            m = McConn(server.mc_port)
            wait_for_container(m, name)
            m.request(f"get @@{name}.a\r\n", b"VALUE @@" + name.encode() + b".a 0 3\r\nnew\r\nEND\r\n")
            m.request(f"get @@{name}.@>=a\r\n", b"VALUE a 0 3\r\nnew\r\nEND\r\n")
            m.request(f"delete @@{name}.a\r\n", b"DELETED\r\n")
            m.request(f"get @@{name}.a\r\n", b"END\r\n")
            assert server.sql(f"SELECT COUNT(*) FROM test.{kv} FOR SYSTEM_TIME ALL") == [("2",)]  # both history
            m.close()
        finally:
            server.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)


class TestForeignKeyMetadataLocks:
    """A write to a table that foreign keys reference can change (ON DELETE/UPDATE CASCADE, SET
    NULL) or check the referencing tables inside the engine. SQL takes metadata locks on those
    tables for such a write, so DDL on them waits; without them a cascade lands in the copy a
    copying ALTER TABLE is making, and the new table keeps rows whose parent is gone."""

    ROWS = 200_000

    def _parent_child(self, server, make_table, levels: int) -> list[str]:
        names = [make_table("id int primary key")]
        server.exec_sql(f"INSERT INTO test.{names[0]} SELECT seq FROM seq_1_to_{self.ROWS}")
        for _ in range(levels):
            # wide rows: a copy that takes a while
            t = make_table(f"id int primary key, p int, pad char(200) default 'x', key (p), "
                           f"foreign key (p) references {names[-1]} (id) on delete cascade on update cascade")
            server.exec_sql(f"INSERT INTO test.{t} (id, p) SELECT seq, seq FROM seq_1_to_{self.ROWS}")
            names.append(t)
        return names

    def _delete_parents_during(self, server, hs, parent: str, ddl: str) -> int:
        """Runs ddl; meanwhile (from 0.3 s into it, until it is done) deletes parent rows by key,
        50 pipelined at a time. Returns how many were deleted (every one acknowledged)."""
        import threading
        import time
        failure: list[BaseException] = []
        took: list[float] = []

        def alter():
            t0 = time.monotonic()
            try:
                server.exec_sql(ddl)
            except BaseException as e:  # reported below
                failure.append(e)
            took.append(time.monotonic() - t0)

        th = threading.Thread(target=alter)
        th.start()
        time.sleep(0.3)
        w = hs(wr=True, timeout=60)
        assert w.request(f"P\t1\ttest\t{parent}\tPRIMARY\tid\n") == b"0\t1\n"
        deleted, key = 0, 1
        while th.is_alive() or deleted == 0:
            batch = range(key, key + 50)
            w.send("".join(f"1\t=\t1\t{k}\t1\t0\tD\n" for k in batch))
            for k, line in zip(batch, w.recv_lines(len(batch), timeout=60)):
                assert line == b"0\t1\t1\n", (k, line)
            key += 50
            deleted += 50
        th.join(60)
        assert not failure, failure
        return deleted

    def test_a_copying_alter_of_a_referencing_table_does_not_lose_cascades(self, server, hs, make_table):
        pa, ch = self._parent_child(server, make_table, 1)
        deleted = self._delete_parents_during(server, hs, pa, f"ALTER TABLE test.{ch} FORCE, ALGORITHM=COPY")
        assert server.sql(f"SELECT COUNT(*) FROM test.{pa}") == [(str(self.ROWS - deleted),)]
        assert server.sql(f"SELECT COUNT(*) FROM test.{ch} c LEFT JOIN test.{pa} p ON c.p = p.id "
                          f"WHERE p.id IS NULL") == [("0",)]
        assert server.sql(f"SELECT COUNT(*) FROM test.{ch}") == [(str(self.ROWS - deleted),)]

    def test_cascades_two_levels_down_are_protected_too(self, server, hs, make_table):
        pa, ch, gch = self._parent_child(server, make_table, 2)
        deleted = self._delete_parents_during(server, hs, pa, f"ALTER TABLE test.{gch} FORCE, ALGORITHM=COPY")
        assert server.sql(f"SELECT COUNT(*) FROM test.{gch} g LEFT JOIN test.{ch} c ON g.p = c.id "
                          f"WHERE c.id IS NULL") == [("0",)]
        assert server.sql(f"SELECT COUNT(*) FROM test.{gch}") == [(str(self.ROWS - deleted),)]

    def test_ddl_on_a_referencing_table_is_not_held_up_by_an_idle_writer(self, server, hs, make_table):
        import time
        pa, ch = self._parent_child(server, make_table, 1)
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{pa}\tPRIMARY\tid\n") == b"0\t1\n"
        assert w.request("1\t=\t1\t1\t1\t0\tD\n") == b"0\t1\t1\n"  # the parent is open for writing now
        t0 = time.monotonic()
        server.exec_sql(f"ALTER TABLE test.{ch} ADD COLUMN extra int, ALGORITHM=COPY")
        assert time.monotonic() - t0 < 30  # (lock_wait_timeout would fail it first if it waited for us)
        assert w.request("1\t=\t1\t2\t1\t0\tD\n") == b"0\t1\t1\n"
        assert server.sql(f"SELECT COUNT(*) FROM test.{ch} WHERE p IN (1, 2)") == [("0",)]

    @pytest.mark.parametrize("shape", ["two children", "grandchild"])
    def test_repeated_copying_alters_of_one_of_several_referencing_tables(self, server, hs, make_table, shape):
        """Near its end a copying ALTER detaches the altered table's foreign keys from the parent
        for a moment while still holding it; the engine then lists only the other children (or,
        two levels down, none): what referenced the parent before must stay locked."""
        import threading
        rows = 20_000
        pa = make_table("id int primary key")
        server.exec_sql(f"INSERT INTO test.{pa} SELECT seq FROM seq_1_to_{rows}")
        ch = make_table(f"id int primary key, p int, pad char(200) default 'x', key (p), "
                        f"foreign key (p) references {pa} (id) on delete cascade")
        server.exec_sql(f"INSERT INTO test.{ch} (id, p) SELECT seq, seq FROM seq_1_to_{rows}")
        ref = pa if shape == "two children" else ch
        last = make_table(f"id int primary key, p int, pad char(200) default 'x', key (p), "
                          f"foreign key (p) references {ref} (id) on delete cascade")
        server.exec_sql(f"INSERT INTO test.{last} (id, p) SELECT seq, seq FROM seq_1_to_{rows}")
        done = threading.Event()
        failure: list[BaseException] = []

        def alters():
            try:
                for _ in range(12):
                    server.exec_sql(f"ALTER TABLE test.{last} FORCE, ALGORITHM=COPY")
            except BaseException as e:  # reported below
                failure.append(e)
            done.set()

        th = threading.Thread(target=alters)
        th.start()
        w = hs(wr=True, timeout=60)
        assert w.request(f"P\t1\ttest\t{pa}\tPRIMARY\tid\n") == b"0\t1\n"
        key = 1
        while not done.is_set() and key + 3 <= rows:
            w.send("".join(f"1\t=\t1\t{k}\t1\t0\tD\n" for k in range(key, key + 3)))
            assert w.recv_lines(3, timeout=60) == [b"0\t1\t1\n"] * 3
            key += 3
        th.join(120)
        assert not failure, failure
        for child, parent in ((ch, pa), (last, ref)):
            assert server.sql(f"SELECT COUNT(*) FROM test.{child} c LEFT JOIN test.{parent} p ON c.p = p.id "
                              f"WHERE p.id IS NULL") == [("0",)], child
