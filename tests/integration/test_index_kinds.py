"""Indexes that do not hold whole column values, and indexes that cannot look keys up at all.

A prefix key part (KEY(c(3)), any key on a TEXT/BLOB column) stores only the first characters of a
value, so the index alone cannot tell 'abcdef' from 'abcxyz'. HandlerSocket answers `= abcdef`
with every row starting 'abc' — and deletes or updates them all. tablesocket compares each row the
index finds with the whole values asked for, the way SQL re-checks its WHERE clause: a prefix
index gives exactly the rows SQL's `WHERE c = 'abcdef'` (or `>`, `<`, ...) gives.

FULLTEXT and SPATIAL indexes, and the hidden hash index MariaDB builds for a UNIQUE constraint too
long for a B-tree, have no key a client could send: opening one is refused with `idxtype`.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tablesocket_only("HandlerSocket matches on the prefix alone")

PREFIX_DDL = ("id int primary key, t varchar(40) character set utf8mb4 collate utf8mb4_general_ci, "
              "n int, key tp(t(3)), key nt(n, t(2))")
PREFIX_ROWS = [
    (1, "abcdef", 1),
    (2, "abcxyz", 1),
    (3, "abc", 1),
    (4, "ABCDEF", 2),   # equal to 'abcdef' under the case-insensitive collation
    (5, "abd", 2),
    (6, "ab", 2),
    (7, "zzz", 3),
    (8, "äbcdef", 3),   # two bytes in utf8mb4: the prefix holds characters, not bytes
]


def ids(reply: bytes) -> list[int]:
    """The ids of a find reply with one column (id)."""
    f = reply.rstrip(b"\n").split(b"\t")
    assert f[:2] == [b"0", b"1"], reply
    return [int(x) for x in f[2:]]


@pytest.fixture
def pt(make_table):
    return make_table(PREFIX_DDL, PREFIX_ROWS)


@pytest.fixture
def c(hs, pt):
    conn = hs()
    assert conn.request(f"P\t1\ttest\t{pt}\ttp\tid\n") == b"0\t1\n"
    assert conn.request(f"P\t2\ttest\t{pt}\tnt\tid\n") == b"0\t1\n"
    return conn


def sql_ids(server, table: str, where: str) -> list[int]:
    return sorted(int(r[0]) for r in server.sql(f"SELECT id FROM test.{table} WHERE {where}"))


class TestPrefixKeyReads:
    def test_eq_matches_whole_values_only(self, server, c, pt):
        # general_ci: 'ABCDEF' and 'äbcdef' equal 'abcdef', as in SQL
        assert sorted(ids(c.request("1\t=\t1\tabcdef\t10\t0\n"))) == [1, 4, 8]
        assert ids(c.request("1\t=\t1\tabc\t10\t0\n")) == [3]
        assert ids(c.request("1\t=\t1\tab\t10\t0\n")) == [6]
        assert ids(c.request("1\t=\t1\tabcdefg\t10\t0\n")) == []
        for v in ("abcdef", "abc", "ab", "abcxyz", "abd", "äbc", "zzz"):
            assert sorted(ids(c.request(f"1\t=\t1\t{v}\t10\t0\n"))) == sql_ids(server, pt, f"t = '{v}'"), v

    def test_limit_and_offset_count_matching_rows_only(self, c):
        both = ids(c.request("1\t=\t1\tabcdef\t10\t0\n"))
        assert ids(c.request("1\t=\t1\tabcdef\t1\t0\n")) == both[:1]
        assert ids(c.request("1\t=\t1\tabcdef\t1\t1\n")) == both[1:2]
        assert ids(c.request("1\t=\t1\tabcdef\t1\t3\n")) == []

    @pytest.mark.parametrize("op,sql_op", [(">", ">"), (">=", ">="), ("<", "<"), ("<=", "<=")])
    @pytest.mark.parametrize("value", ["abcdef", "abc", "abcm", "ab", "a", "zzzz"])
    def test_ranges_give_the_rows_sql_gives(self, server, c, pt, op, sql_op, value):
        got = ids(c.request(f"1\t{op}\t1\t{value}\t100\t0\n"))
        assert len(got) == len(set(got))
        assert sorted(got) == sql_ids(server, pt, f"t {sql_op} '{value}'")

    def test_two_part_key_with_a_prefix_part(self, server, c, pt):
        assert ids(c.request("2\t=\t2\t1\tabc\t10\t0\n")) == [3]
        assert sorted(ids(c.request("2\t=\t1\t1\t10\t0\n"))) == [1, 2, 3]
        for op in (">", ">=", "<", "<="):
            got = ids(c.request(f"2\t{op}\t2\t1\tabcm\t100\t0\n"))
            assert sorted(got) == sql_ids(server, pt, f"(n, t) {op} (1, 'abcm')"), op

    def test_in_finds_each_values_row_past_rows_sharing_its_prefix(self, c):
        # 'abcxyz' shares its index entry's prefix with rows 1, 3, 4 that come before or after it
        assert ids(c.request("1\t=\t1\t\t10\t0\t@\t0\t3\tabcxyz\tzzz\tnope\n")) == [2, 7]

    def test_filters_still_apply(self, hs, pt):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{pt}\ttp\tid\tn\n") == b"0\t1\n"
        assert ids(conn.request("1\t=\t1\tabcdef\t10\t0\tF\t=\t0\t2\n")) == [4]
        assert ids(conn.request("1\t=\t1\tabcdef\t10\t0\tF\t=\t0\t3\n")) == [8]

    def test_text_column_key(self, hs, make_table):
        t = make_table("id int primary key, body text, key b(body(4))",
                       [(1, "hello world"), (2, "hello there"), (3, "help")])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tb\tid\n") == b"0\t1\n"
        assert ids(conn.request("1\t=\t1\thello there\t10\t0\n")) == [2]
        assert ids(conn.request("1\t=\t1\thello\t10\t0\n")) == []
        assert sorted(ids(conn.request("1\t>\t1\thello there\t10\t0\n"))) == [1, 3]

    def test_reverse_last_n_within_the_whole_value(self, hs, make_table):
        t = make_table("id int primary key, g varchar(20), s int, key gs(g(2), s)",
                       [(1, "aaa", 1), (2, "aab", 2), (3, "aaa", 3), (4, "aab", 4)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tgs\tid\n") == b"0\t1\n"
        assert ids(conn.request("1\tL\t1\taaa\t10\t0\n")) == [3, 1]


class TestPrefixKeyWrites:
    def test_delete_by_prefix_key_deletes_only_the_matching_rows(self, server, hs, pt):
        conn = hs(wr=True)
        assert conn.request(f"P\t1\ttest\t{pt}\ttp\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\tabcxyz\t10\t0\tD\n") == b"0\t1\t1\n"
        assert sql_ids(server, pt, "1") == [1, 3, 4, 5, 6, 7, 8]

    def test_update_by_prefix_key_updates_only_the_matching_rows(self, server, hs, pt):
        conn = hs(wr=True)
        assert conn.request(f"P\t1\ttest\t{pt}\ttp\tn\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\tabc\t10\t0\tU\t9\n") == b"0\t1\t1\n"
        assert sql_ids(server, pt, "n = 9") == [3]

    def test_timeline_merge_on_a_prefix_key_is_refused(self, hs, make_table):
        t = make_table("id int primary key, g varchar(20), s int, key gs(g(2), s)", [(1, "aaa", 1)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tgs\tid\n") == b"0\t1\n"
        assert conn.request("1\tM-\t1\t\t10\t0\t@\t0\t1\taaa\n") == b"2\t1\tmerge\n"


class TestKeysTheColumnCannotHold:
    """A key with a character the key column's character set lacks (an emoji or CJK for latin1) or
    with invalid UTF-8 was converted to '?' there, and = then found, updated or deleted the rows
    holding '?' (found by a differential helper); SQL refuses or matches nothing, and HandlerSocket,
    storing raw bytes, never matched them. Such an exact match now finds nothing; IN goes on with
    its other values. (Keys cut, rounded or clamped to the column keep HandlerSocket's behaviour,
    which its own regression suite checks; memcached keys do not, below.)"""

    DDL = ("id int primary key, v varchar(5), l varchar(10) character set latin1, "
           "key kv(v), key kl(l)")
    ROWS = [(1, "x?y", "?"), (2, "abcde", "a?b"), (3, "xyz", "abc")]
    CASES = [("kl", "\U0001F600"), ("kl", "a\u4e00b"), ("kv", "x\udcffy")]

    @pytest.fixture
    def kt(self, make_table):
        return make_table(self.DDL, self.ROWS)

    @pytest.mark.parametrize("index,key", CASES)
    def test_find_update_and_delete_match_nothing(self, server, hs, kt, index, key):
        raw = key.encode("utf-8", "surrogateescape")  # \udcff: the invalid byte 0xff
        r, w = hs(), hs(wr=True)
        assert r.request(f"P\t1\ttest\t{kt}\t{index}\tid\n") == b"0\t1\n"
        assert w.request(f"P\t1\ttest\t{kt}\t{index}\tid\n") == b"0\t1\n"
        assert r.request(b"1\t=\t1\t" + raw + b"\t10\t0\n") == b"0\t1\n"
        assert r.request(b"1\tL\t1\t" + raw + b"\t10\t0\n") == b"0\t1\n"
        assert w.request(b"1\t=\t1\t" + raw + b"\t10\t0\tD\n") == b"0\t1\t0\n"
        assert w.request(b"1\t=\t1\t" + raw + b"\t10\t0\tU\t9\n") == b"0\t1\t0\n"
        assert sql_ids(server, kt, "1") == [1, 2, 3]

    def test_in_skips_such_a_value(self, hs, kt):
        r = hs()
        assert r.request(f"P\t1\ttest\t{kt}\tkl\tid\n") == b"0\t1\n"
        got = r.request("1\t=\t1\tx\t10\t0\t@\t0\t3\t\U0001F600\tabc\ta?b\n".encode())
        assert ids(got) == [3, 2]

    def test_a_value_that_fits_still_matches(self, hs, kt):
        r = hs()
        assert r.request(f"P\t1\ttest\t{kt}\tkv\tid\n") == b"0\t1\n"
        assert ids(r.request("1\t=\t1\tabcde\n")) == [2]
        assert ids(r.request("1\t=\t1\tabcde   \n")) == [2]  # trailing spaces: equal under PAD SPACE
        assert ids(r.request("1\t=\t1\tx?y\n")) == [1]
        assert r.request(f"P\t2\ttest\t{kt}\tkl\tid\n") == b"0\t1\n"
        assert ids(r.request("2\t=\t1\t?\n")) == [1]
        assert ids(r.request("2\t=\t1\tABC\n")) == [3]  # latin1_swedish_ci

    @pytest.mark.parametrize("index,key,where", [
        ("ki", "1.5", "i = 1.5"), ("ki", "2.4", "i = 2.4"), ("kw", "abcdef", "w = 'abcdef'"),
        ("kd", "2024-01-01 10:00:00", "d = '2024-01-01 10:00:00'"), ("km", "1.499", "m = 1.499"),
        ("ks", "32768", "s = 32768"), ("ks", "0032768", "s = 32768"),
        ("ks", "99999999999999999999", "s = 99999999999999999999"),
    ])
    def test_a_write_by_a_key_the_column_would_cut_or_round_changes_nothing(self, server, hs, make_table,
                                                                              index, key, where):
        """D, U, + and - by such a key changed the row the converted key names (or, in strict mode,
        U and + failed with the conversion's error while D deleted); SQL's DELETE and UPDATE change
        nothing, and so do they now. Reads keep HandlerSocket's clamping (its regression suite)."""
        t = make_table("id int primary key, i int, w varchar(5), d date, m decimal(5,2), s smallint, "
                       "key ki(i), key kw(w), key kd(d), key km(m), key ks(s)",
                       [(1, 2, "abcde", "2024-01-01", 1.50, 32767), (2, 1, "x", "2024-01-02", 2.00, 1)])
        assert server.exec_sql(f"DELETE FROM test.{t} WHERE {where}") == 0
        before = server.sql(f"SELECT * FROM test.{t} ORDER BY id")
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{t}\t{index}\tid,i\n") == b"0\t1\n"
        for op in ("D", "U\t9\t9", "+\t0\t1", "-\t0\t1"):
            assert w.request(f"1\t=\t1\t{key}\t1\t0\t{op}\n") == b"0\t1\t0\n", op
        for op in ("U?\t9\t9", "D?"):
            assert w.request(f"1\t=\t1\t{key}\t1\t0\t{op}\n") == b"0\t2\n", op
        assert server.sql(f"SELECT * FROM test.{t} ORDER BY id") == before
        r = hs()
        assert r.request(f"P\t1\ttest\t{t}\t{index}\tid\n") == b"0\t1\n"
        assert r.request(f"1\t=\t1\t{key}\n") != b"0\t1\n"  # a read still finds the clamped row

    @pytest.mark.parametrize("ddl,stored,asked", [
        ("k varchar(5) PRIMARY KEY", "abcde", "abcdefgh"),
        ("k int PRIMARY KEY", "2", "1.5"),
        ("k date PRIMARY KEY", "2024-01-01", "2024-01-01_10:00:00"),
    ])
    def test_a_memcached_key_its_column_cannot_hold_is_a_miss(self, server, kt, ddl, stored, asked):
        """memcached keys are whole values: get/delete of one the key column would cut or round
        name no row (before: the row of the cut key, echoed under the key asked for)."""
        from ts_mc import McConn, wait_for_container
        import uuid
        name = f"short_{uuid.uuid4().hex[:8]}"  # containers.name is short; kt's name is long
        server.exec_sql("DROP TABLE IF EXISTS test.mc_short")
        server.exec_sql(f"CREATE TABLE test.mc_short ({ddl}, v varchar(20)) ENGINE=InnoDB")
        server.exec_sql("INSERT INTO test.mc_short VALUES (%s, 'value')", (stored,))
        server.exec_sql("REPLACE INTO innodb_memcache.containers VALUES (%s, 'test', 'mc_short', 'k', 'v', "
                        "'0', NULL, NULL, 'PRIMARY')", (name,), db=None)
        c = McConn(server.mc_port)
        try:
            wait_for_container(c, name)
            c.request(f"get @@{name}.{stored}\r\n", f"VALUE @@{name}.{stored} 0 5\r\nvalue\r\nEND\r\n".encode())
            c.request(f"get @@{name}.{asked}\r\n", b"END\r\n")
            c.request(f"delete @@{name}.{asked}\r\n", b"NOT_FOUND\r\n")
            c.request(f"incr @@{name}.{asked} 1\r\n", b"NOT_FOUND\r\n")
            assert server.sql("SELECT COUNT(*) FROM test.mc_short") == [("1",)]
        finally:
            c.close()
            server.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)
            server.exec_sql("DROP TABLE IF EXISTS test.mc_short")


class TestIndexesWithoutLookups:
    @pytest.mark.parametrize("ddl,index", [
        ("id int primary key, body text, fulltext key ft(body)", "ft"),
        ("id int primary key, p point not null, spatial key sp(p)", "sp"),
        ("id int primary key, big blob, unique key u(big)", "u"),
    ])
    def test_open_is_refused(self, hs, make_table, ddl, index):
        t = make_table(ddl)
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\t{index}\tid\n") == b"2\t1\tidxtype\n"
        # the connection and the table's other indexes go on working
        assert conn.request(f"P\t2\ttest\t{t}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("2\t=\t1\t1\n") == b"0\t1\n"



class TestServerCheckedUniques:
    """UNIQUE keys the server (not the engine) enforces: a long UNIQUE checked through a hash, and
    WITHOUT OVERLAPS. The server needs a second handler for them on every write; a write into such
    a table that SQL had not written first used to crash mariadbd."""

    def test_long_unique_on_a_table_sql_never_wrote(self, server, hs, make_table):
        t = make_table("id int primary key, big blob, n int, unique key u(big)")
        conn = hs(wr=True)
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,big,n\n") == b"0\t1\n"
        big = "x" * 3000
        assert conn.request(f"1\t+\t3\t1\t{big}\t1\n") == b"0\t1\n"
        assert conn.request(f"1\t+\t3\t2\t{big}\t1\n") == b"1\t1\t121\n"     # duplicate
        assert conn.request(f"1\t+\t3\t2\t{big}y\t2\n") == b"0\t1\n"
        # an update onto another row's value is refused; onto a new value it works
        assert conn.request(f"1\t=\t1\t2\t1\t0\tU\t2\t{big}\t2\n") == b"1\t1\t121\n"
        assert conn.request(f"1\t=\t1\t2\t1\t0\tU\t2\t{big}z\t2\n") == b"0\t1\t1\n"
        # an upsert whose new id collides on the long UNIQUE updates that row
        assert conn.request(f"1\t+=\t3\t3\t{big}\t7\n") == b"0\t1\n"
        assert server.sql(f"SELECT id, n, length(big) FROM test.{t} ORDER BY id") == \
            [("2", "2", "3001"), ("3", "7", "3000")]
        assert conn.request("1\t=\t1\t3\t1\t0\tD\n") == b"0\t1\t1\n"
        assert server.sql(f"CHECK TABLE test.{t}")[-1][-1] == "OK"
        assert server.sql(f"SELECT COUNT(*) FROM test.{t} WHERE big = '{big}'") == [("0",)]

    def test_without_overlaps(self, server, hs, make_table):
        t = make_table("id int, s date, e date, period for app(s, e), primary key(id, app without overlaps)")
        conn = hs(wr=True)
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,s,e\n") == b"0\t1\n"
        assert conn.request("1\t+\t3\t1\t2024-01-01\t2024-02-01\n") == b"0\t1\n"
        assert conn.request("1\t+\t3\t1\t2024-01-15\t2024-03-01\n") == b"1\t1\t121\n"
        assert conn.request("1\t+\t3\t1\t2024-02-01\t2024-03-01\n") == b"0\t1\n"
        assert server.sql(f"SELECT COUNT(*) FROM test.{t}") == [("2",)]

    def test_indexed_virtual_column_stays_consistent(self, server, hs, make_table):
        t = make_table("id int primary key, n int, u int unique, v int as (n * 2) virtual, key kv(v)")
        conn = hs(wr=True)
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,n,u\n") == b"0\t1\n"
        assert conn.request("1\t+\t3\t1\t5\t100\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t1\t1\t0\tU\t1\t6\t100\n") == b"0\t1\t1\n"
        assert conn.request("1\t+=\t3\t2\t7\t100\n") == b"0\t1\n"   # duplicate u: updates row 1
        assert server.sql(f"SELECT id, n, v FROM test.{t}") == [("2", "7", "14")]
        assert server.sql(f"SELECT id FROM test.{t} FORCE INDEX (kv) WHERE v = 14") == [("2",)]
        assert server.sql(f"CHECK TABLE test.{t} EXTENDED")[-1][-1] == "OK"


class TestHashIndexes:
    """A MEMORY table's indexes are hash indexes by default: they find whole keys, in no order."""

    @pytest.fixture
    def mh(self, server, make_table):
        t = make_table("id int primary key")
        server.exec_sql(f"DROP TABLE test.{t}")
        server.exec_sql(f"CREATE TABLE test.{t} (id int, a int, b varchar(10), PRIMARY KEY USING HASH (id), "
                        f"KEY ab (a, b) USING HASH, KEY bt (b) USING BTREE) ENGINE=MEMORY")
        server.exec_sql(f"INSERT INTO test.{t} VALUES (1, 1, 'x'), (2, 1, 'x'), (3, 2, 'y')")
        return t

    def test_whole_key_lookups_work(self, hs, mh):
        c = hs()
        assert c.request(f"P\t1\ttest\t{mh}\tPRIMARY\tid\n") == b"0\t1\n"
        assert c.request(f"P\t2\ttest\t{mh}\tab\tid\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t2\n") == b"0\t1\t2\n"
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\t3\t3\t9\t1\n") == b"0\t1\t3\t1\n"
        assert sorted(ids(c.request("2\t=\t2\t1\tx\t10\t0\n"))) == [1, 2]

    def test_ranges_and_partial_keys_are_refused_not_answered_wrongly(self, hs, mh):
        c = hs()
        assert c.request(f"P\t1\ttest\t{mh}\tPRIMARY\tid\n") == b"0\t1\n"
        assert c.request(f"P\t2\ttest\t{mh}\tab\tid\n") == b"0\t1\n"
        for op in (">", ">=", "<", "<=", "L"):
            assert c.request(f"1\t{op}\t1\t1\t10\t0\n") == b"2\t1\tidxtype\n", op
        assert c.request("2\t=\t1\t1\t10\t0\n") == b"2\t1\tidxtype\n"   # part of a hash key
        assert c.request("2\tM-\t1\t\t10\t0\t@\t0\t1\t1\n") == b"2\t1\tidxtype\n"
        # a BTREE index of the same table does ranges
        assert c.request(f"P\t3\ttest\t{mh}\tbt\tid\n") == b"0\t1\n"
        assert ids(c.request("3\t>\t1\tx\t10\t0\n")) == [3]


class TestPartitionedTables:
    """A partitioned table's index is one per partition: the partition handler merges them in key
    order, backwards only for the read flags SQL uses for a backward range. Every range and
    direction must give SQL's rows in SQL's order, and writes by range must change those rows."""

    @pytest.fixture(params=["InnoDB", "MyISAM", "Aria"])
    def ptab(self, request, server, make_table):
        t = make_table("id int primary key, a int, u int, key a(a), key ua(u, a)",
                       [(i, 100 - i, i % 3) for i in range(1, 21)], engine=request.param,
                       options="PARTITION BY HASH(id) PARTITIONS 4")
        return t

    CASES = [  # (index, op, key, SQL condition, SQL order)
        ("PRIMARY", "<=", "1000", "id <= 1000", "id DESC"),
        ("PRIMARY", "<=", "10", "id <= 10", "id DESC"),
        ("PRIMARY", "<", "10", "id < 10", "id DESC"),
        ("PRIMARY", ">=", "10", "id >= 10", "id"),
        ("PRIMARY", ">", "10", "id > 10", "id"),
        ("a", "<=", "90", "a <= 90", "a DESC"),
        ("a", "<", "90", "a < 90", "a DESC"),
        ("ua", "<=", "1", "u <= 1", "u DESC, a DESC"),
        ("ua", "<", "2", "u < 2", "u DESC, a DESC"),
        ("ua", "<=", "1\t85", "(u, a) <= (1, 85)", "u DESC, a DESC"),
        ("ua", ">", "1", "u > 1", "u, a"),
        ("ua", ">", "0\t90", "(u, a) > (0, 90)", "u, a"),
        ("ua", "<", "1\t85", "(u, a) < (1, 85)", "u DESC, a DESC"),
        ("ua", ">=", "1", "u >= 1", "u, a"),
    ]

    @pytest.mark.parametrize("index,op,key,where,order", CASES)
    def test_ranges_give_sqls_rows_in_sqls_order(self, server, hs, ptab, index, op, key, where, order):
        c = hs()
        assert c.request(f"P\t1\ttest\t{ptab}\t{index}\tid\n") == b"0\t1\n"
        n = key.count("\t") + 1
        got = ids(c.request(f"1\t{op}\t{n}\t{key}\t5\t0\n"))
        want = [int(r[0]) for r in server.sql(f"SELECT id FROM test.{ptab} WHERE {where} ORDER BY {order} LIMIT 5")]
        assert got == want

    def test_writes_to_the_last_n_change_those_rows(self, server, hs, ptab):
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{ptab}\tPRIMARY\tid\n") == b"0\t1\n"
        assert w.request("1\t<=\t1\t20\t3\t0\tD\n") == b"0\t1\t3\n"
        assert [int(r[0]) for r in server.sql(f"SELECT id FROM test.{ptab} ORDER BY id DESC LIMIT 3")] == [17, 16, 15]
        assert w.request(f"P\t2\ttest\t{ptab}\tPRIMARY\ta\n") == b"0\t1\n"
        assert w.request("2\t<=\t1\t10\t2\t0\tU\t0\n") == b"0\t1\t2\n"
        assert sorted(int(r[0]) for r in server.sql(f"SELECT id FROM test.{ptab} WHERE a = 0")) == [9, 10]
        assert w.request("2\t<\t1\t9\t2\t0\t+\t1000\n") == b"0\t1\t2\n"
        assert sorted(int(r[0]) for r in server.sql(f"SELECT id FROM test.{ptab} WHERE a > 1000")) == [7, 8]

    @pytest.mark.parametrize("engine", ["InnoDB", "MyISAM", "Aria"])
    @pytest.mark.parametrize("partitioning", ["PARTITION BY HASH(id) PARTITIONS 4", "PARTITION BY KEY(id) PARTITIONS 2",
                                              "PARTITION BY RANGE(id) (PARTITION p0 VALUES LESS THAN (3), "
                                              "PARTITION p1 VALUES LESS THAN MAXVALUE)"])
    def test_strict_bounds_skip_rows_equal_to_the_key(self, server, hs, make_table, engine, partitioning):
        t = make_table("id int not null, a int not null, b int not null, primary key (id, a), key kb (b)",
                       [(1, 1, 10), (1, 2, 10), (2, 1, 20), (2, 2, 20), (3, 1, 30), (4, 1, 40)],
                       engine=engine, options=partitioning)
        c = hs()
        assert c.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,a\n") == b"0\t1\n"
        assert c.request(f"P\t2\ttest\t{t}\tkb\tb\n") == b"0\t1\n"
        assert c.request("1\t>\t1\t2\t10\t0\n") == b"0\t2\t3\t1\t4\t1\n"
        assert c.request("2\t>\t1\t20\t10\t0\n") == b"0\t1\t30\t40\n"
        assert c.request("1\t<\t1\t2\t10\t0\n") == b"0\t2\t1\t2\t1\t1\n"
        assert c.request("2\t<\t1\t20\t10\t0\n") == b"0\t1\t10\t10\n"
        assert c.request("1\t>\t1\t2\t1\t1\n") == b"0\t2\t4\t1\n"  # the offset counts matching rows only
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,a\n") == b"0\t1\n"
        assert w.request("1\t>\t1\t2\t2\t0\tD\n") == b"0\t1\t2\n"
        assert server.sql(f"SELECT id, a FROM test.{t} ORDER BY id, a") == [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]

    @pytest.mark.parametrize("engine", ["InnoDB", "MyISAM"])
    def test_an_in_value_no_partition_holds_finds_nothing_and_the_list_goes_on(self, server, hs, make_table, engine):
        t = make_table("id int primary key, a int", [(1, 1), (2, 2), (3, 3), (4, 4)], engine=engine,
                       options="PARTITION BY LIST(id MOD 3) (PARTITION p0 VALUES IN (0), "
                               "PARTITION p1 VALUES IN (1), PARTITION p2 VALUES IN (2))")
        c = hs()
        assert c.request(f"P\t1\ttest\t{t}\tPRIMARY\tid\n") == b"0\t1\n"
        assert ids(c.request("1\t=\t1\t0\t10\t0\t@\t0\t4\t1\t-1\t2\t3\n")) == [1, 2, 3]
        assert c.request("1\t=\t1\t-1\n") == b"0\t1\n"
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{t}\tPRIMARY\tid\n") == b"0\t1\n"
        assert w.request("1\t=\t1\t0\t10\t0\t@\t0\t4\t1\t-1\t2\t3\tD\n") == b"0\t1\t3\n"
        assert server.sql(f"SELECT id FROM test.{t}") == [("4",)]


class TestMemoryBtreeWrites:
    """Deleting the row under a MEMORY B-tree cursor loses its place: the next step lands on the
    wrong row. Deletes through a range must delete exactly the rows SQL's DELETE ... ORDER BY ...
    LIMIT deletes."""

    CASES = [  # (request, SQL's choice of ids)
        ("1\t>\t1\t2\t3\t0\tD", "id > 2 ORDER BY id LIMIT 3"),
        ("1\t>=\t1\t2\t2\t1\tD", "id >= 2 ORDER BY id LIMIT 1, 2"),
        ("1\t<\t1\t5\t2\t1\tD", "id < 5 ORDER BY id DESC LIMIT 1, 2"),
        ("1\t<=\t1\t5\t3\t0\tD", "id <= 5 ORDER BY id DESC LIMIT 3"),
        ("2\t>\t1\t20\t2\t0\tD", "a > 20 ORDER BY a LIMIT 2"),
    ]

    @pytest.mark.parametrize("request_line,choice", CASES)
    def test_range_deletes_delete_sqls_rows(self, server, hs, make_table, request_line, choice):
        t = make_table("id int, a int, primary key using btree (id, a), key kb (a) using btree",
                       [(i, i * 10) for i in range(1, 7)], engine="MEMORY")
        want = {int(r[0]) for r in server.sql(f"SELECT id FROM test.{t} WHERE {choice.split(' ORDER')[0]} "
                                              f"ORDER {choice.split(' ORDER ')[1]}")}
        w = hs(wr=True)
        assert w.request(f"P\t1\ttest\t{t}\tPRIMARY\tid\n") == b"0\t1\n"
        assert w.request(f"P\t2\ttest\t{t}\tkb\tid\n") == b"0\t1\n"
        assert w.request(request_line + "\n") == b"0\t1\t%d\n" % len(want)
        left = {int(r[0]) for r in server.sql(f"SELECT id FROM test.{t}")}
        assert left == set(range(1, 7)) - want
