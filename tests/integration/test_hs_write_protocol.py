"""Exact-byte tests of the HandlerSocket WRITE protocol (the read/write port), checked with SQL.

Tests without a marker run against both plugins: handlersocket.so behaves the same there (run with
TS_PLUGIN=handlersocket to check).  `tablesocket_only` marks what tablesocket does on purpose and HS
does not (real column defaults, SQL value conversion under the server's sql_mode and its errors,
charset conversion, statement atomicity, each row modified once, upsert `+=`, the `L` op, row events
in the binary log).  `tablesocket_bug` marks correct behaviour a known tablesocket bug breaks (a strict
xfail with tablesocket).

Every test runs with the server's GLOBAL sql_mode set to MariaDB's strict default (and restored
afterwards): tablesocket converts values as SQL would under the GLOBAL sql_mode, re-read at every
batch.

Error messages are the server's own; note they say "at row 1" where an SQL INSERT says "at row 1".
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import tsserver
from tsserver import HSConn

STRICT = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"


@pytest.fixture(autouse=True)
def strict_sql_mode(server):
    (saved,), = server.sql("SELECT @@GLOBAL.sql_mode")
    server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT,))
    try:
        yield
    finally:
        if server.running():
            server.exec_sql("SET GLOBAL sql_mode = %s", (saved,))


def open_index(conn: HSConn, idx: int, table: str, index: str, cols: str, fcols: str | None = None) -> None:
    line = f"P\t{idx}\ttest\t{table}\t{index}\t{cols}" + ("" if fcols is None else f"\t{fcols}") + "\n"
    assert conn.request(line) == b"0\t1\n", line


def dump(server, table: str, cols: str = "*", order: str = "1") -> list[tuple]:
    return server.sql(f"SELECT {cols} FROM `{table}` ORDER BY {order}")


def seconds_from_now(server, table: str, col: str, where: str) -> int:
    (d,), = server.sql(f"SELECT ABS(TIMESTAMPDIFF(SECOND, `{col}`, NOW(6))) FROM `{table}` WHERE {where}")
    assert d is not None, f"{col} is NULL"
    return int(d)


# ---------------------------------------------------------------------------------------------------
# insert (+)


class TestInsert:
    def test_insert_without_auto_increment(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        assert w.request("1\t+\t2\t1\ta\n") == b"0\t1\n"
        assert w.request("1\t+\t2\t2\tb\n") == b"0\t1\n"
        # Duplicate key: the handler error number (HA_ERR_FOUND_DUPP_KEY).
        assert w.request("1\t+\t2\t1\tz\n") == b"1\t1\t121\n"
        assert dump(server, t) == [("1", "a"), ("2", "b")]

    def test_insert_auto_increment(self, server, hs, make_table):
        t = make_table("id int auto_increment primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        open_index(w, 2, t, "PRIMARY", "v")
        # The generated id is returned.
        assert w.request("2\t+\t1\ta\n") == b"0\t1\t1\n"
        assert w.request("2\t+\t1\tb\n") == b"0\t1\t2\n"
        # An id given: nothing generated, 0.
        assert w.request("1\t+\t2\t10\tc\n") == b"0\t1\t0\n"
        assert w.request("2\t+\t1\td\n") == b"0\t1\t11\n"
        assert w.request("1\t+\t2\t10\tdup\n") == b"1\t1\t121\n"
        # NULL and 0 generate one (no NO_AUTO_VALUE_ON_ZERO).
        assert w.request("1\t+\t2\t\x00\te\n") == b"0\t1\t12\n"
        assert w.request("1\t+\t2\t0\tf\n") == b"0\t1\t13\n"
        assert dump(server, t) == [("1", "a"), ("2", "b"), ("10", "c"), ("11", "d"), ("12", "e"), ("13", "f")]

    @pytest.mark.tablesocket_only("HS generates a value for 0 whatever the sql_mode")
    def test_insert_zero_under_no_auto_value_on_zero(self, server, hs, make_table):
        """sql_mode NO_AUTO_VALUE_ON_ZERO: an explicit 0 is stored as 0, as SQL's INSERT does; NULL
        (and a column left out) still generate a value."""
        t = make_table("id int auto_increment primary key, v varchar(10)")
        server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT + ",NO_AUTO_VALUE_ON_ZERO",))
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        open_index(w, 2, t, "PRIMARY", "v")
        assert w.request("1\t+\t2\t5\ta\n") == b"0\t1\t0\n"
        assert w.request("1\t+\t2\t0\tzero\n") == b"0\t1\t0\n"
        assert w.request("1\t+\t2\t0\tagain\n") == b"1\t1\t121\n"
        assert w.request("1\t+\t2\t\x00\tnull\n") == b"0\t1\t6\n"
        assert w.request("2\t+\t1\tleft out\n") == b"0\t1\t7\n"
        assert dump(server, t) == [("0", "zero"), ("5", "a"), ("6", "null"), ("7", "left out")]

    def test_insert_columns_in_any_order(self, server, hs, make_table):
        t = make_table("id int primary key, a varchar(10), b int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "b,id,a")
        assert w.request("1\t+\t3\t7\t1\tx\n") == b"0\t1\n"
        assert dump(server, t) == [("1", "x", "7")]

    def test_insert_escaped_and_null_values(self, server, hs, make_table):
        t = make_table("id int primary key, b varbinary(30), e varchar(5), n varchar(5)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,b,e,n")
        value = bytes(range(0, 0x12)) + b"\x7f\x80\xff"
        assert w.request(b"1\t+\t4\t1\t" + tsserver.hs_escape(value) + b"\t\t\x00\n") == b"0\t1\n"
        assert server.sql_bytes(f"SELECT b, e, n FROM {t}") == [(value, b"", None)]
        # Read back on the same connection: escaped again.
        assert w.request("1\t=\t1\t1\n") == b"0\t4\t1\t" + tsserver.hs_escape(value) + b"\t\t\x00\n"

    def test_insert_klen(self, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        assert w.request("1\t+\t0\n") == b"2\t1\tklen\n"
        assert w.request("1\t+\n") == b"2\t1\tklen\n"

    @pytest.mark.tablesocket_only("HS takes missing values as empty strings")
    def test_insert_vlen_beyond_the_values_sent(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        assert w.request("1\t+\t3\t1\ta\n") == b"2\t1\tklen\n"
        assert w.request("1\t+\tx2\t1\ta\n") == b"2\t1\tklen\n"
        assert dump(server, t) == []

    @pytest.mark.tablesocket_only("more values than opened columns is an error (HS drops the extra ones)")
    def test_insert_too_many_values(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        assert w.request("1\t+\t3\t1\ta\tb\n") == b"2\t1\ttoomanyvalues\n"
        assert dump(server, t) == []

    @pytest.mark.tablesocket_only("an insert takes values only (HS ignores limit, filters and modify op)")
    def test_insert_takes_values_only(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v", "id")
        assert w.request("1\t+\t2\t5\tx\t1\t0\tD\n") == b"2\t1\top\n"
        assert w.request("1\t+\t2\t7\tx\tF\t=\t0\t1\n") == b"2\t1\top\n"
        assert w.request("1\t+\t2\t8\tx\t1\t0\t@\t0\t1\t1\n") == b"2\t1\top\n"
        assert w.request("1\t+\t2\t6\tx\t1\n") == b"0\t1\n"    # a limit alone is accepted
        assert dump(server, t) == [("6", "x")]


# ---------------------------------------------------------------------------------------------------
# columns not given: their real defaults


@pytest.mark.tablesocket_only("HS ignores column defaults: it writes ''/0/zero dates for columns not given")
class TestDefaults:
    DDL = ("id int primary key, v varchar(10), n varchar(10), d varchar(10) default 'dflt', "
           "i int not null default 7, e enum('a','b') not null default 'b', "
           "dt datetime default current_timestamp, "
           "ts timestamp not null default current_timestamp on update current_timestamp, "
           "dt3 datetime(3) default current_timestamp(3) on update current_timestamp(3), "
           "nt timestamp null default null")

    def test_omitted_columns_get_their_defaults(self, server, hs, make_table):
        t = make_table(self.DDL)
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id")
        open_index(w, 2, t, "PRIMARY", "v,id")
        assert w.request("1\t+\t1\t1\n") == b"0\t1\n"
        assert w.request("2\t+\t2\tx\t2\n") == b"0\t1\n"
        assert dump(server, t, "id, v, n, d, i, e, nt") == [
            ("1", None, None, "dflt", "7", "b", None), ("2", "x", None, "dflt", "7", "b", None)]
        for col in ("dt", "ts", "dt3"):
            for i in (1, 2):
                assert seconds_from_now(server, t, col, f"id = {i}") <= 5, col

    def test_default_current_timestamp_is_the_write_time(self, server, hs, make_table):
        # A connection opened long before the write still gets the time of the write.
        t = make_table(self.DDL)
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id")
        server.exec_sql("SELECT SLEEP(1.2)")
        assert w.request("1\t+\t1\t1\n") == b"0\t1\n"
        (ok,), = server.sql(f"SELECT dt3 >= NOW(3) - INTERVAL 1 SECOND FROM {t}")
        assert ok == "1"

    def test_explicit_values_win(self, server, hs, make_table):
        t = make_table(self.DDL)
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,n,d,i,ts,nt")
        assert w.request("1\t+\t6\t1\tnn\t\x00\t3\t2001-02-03 04:05:06\t2002-01-01 00:00:00\n") == b"0\t1\n"
        assert dump(server, t, "id, n, d, i, ts, nt") == [
            ("1", "nn", None, "3", "2001-02-03 04:05:06", "2002-01-01 00:00:00")]

    def test_on_update_current_timestamp(self, server, hs, make_table):
        t = make_table(self.DDL)
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        open_index(w, 2, t, "PRIMARY", "i")
        assert w.request("1\t+\t2\t1\ta\n") == b"0\t1\n"
        old = "2001-01-01 00:00:00"
        server.exec_sql(f"UPDATE {t} SET ts = '{old}', dt3 = '{old}', dt = '{old}'")
        # A real change sets the ON UPDATE columns (not dt, which only has a DEFAULT).
        assert w.request("1\t=\t1\t1\t1\t0\tU\t1\tb\n") == b"0\t1\t1\n"
        assert seconds_from_now(server, t, "ts", "id = 1") <= 5
        assert seconds_from_now(server, t, "dt3", "id = 1") <= 5
        assert dump(server, t, "v, dt") == [("b", old)]
        server.exec_sql(f"UPDATE {t} SET ts = '{old}', dt3 = '{old}'")
        # A no-op update (same values; +0) changes nothing, not even the timestamps.
        assert w.request("1\t=\t1\t1\t1\t0\tU\t1\tb\n") == b"0\t1\t1\n"
        assert w.request("2\t=\t1\t1\t1\t0\t+\t0\n") == b"0\t1\t1\n"
        assert w.request("2\t=\t1\t1\t1\t0\t-\t0\n") == b"0\t1\t1\n"
        assert dump(server, t, "v, i, ts, dt3") == [("b", "7", old, old + ".000")]
        # An increment is a change too.
        assert w.request("2\t=\t1\t1\t1\t0\t+\t1\n") == b"0\t1\t1\n"
        assert dump(server, t, "i") == [("8",)]
        assert seconds_from_now(server, t, "ts", "id = 1") <= 5

    def test_not_null_column_without_default_under_strict_mode(self, server, hs, make_table):
        t = make_table("id int primary key, nn varchar(5) not null")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id")
        assert w.request("1\t+\t1\t1\n") == b"1\t1\tField 'nn' doesn't have a default value\n"
        assert dump(server, t) == []


# ---------------------------------------------------------------------------------------------------
# value conversion: as SQL under the server's sql_mode


@pytest.mark.tablesocket_only("HS stores whatever MariaDB's non-strict conversion makes of a value")
class TestStrictConversion:
    DDL = "id int primary key, i int, s varchar(3), nn int not null, t tinyint, d date, u int unsigned"
    ROW = ("1", "1", "a", "1", "1", "2011-01-01", "1")

    @pytest.fixture
    def st(self, server, hs, make_table):
        t = make_table(self.DDL, [self.ROW])
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,i,s,nn,t,d,u")
        return t, w

    BAD = [
        # (values after id, message; {t} is the table)
        ("x\ta\t1\t1\t2011-01-01\t1", "Incorrect integer value: 'x' for column `test`.`{t}`.`i` at row 1"),
        ("12abc\ta\t1\t1\t2011-01-01\t1", "Data truncated for column 'i' at row 1"),
        ("1\tlong\t1\t1\t2011-01-01\t1", "Data too long for column 's' at row 1"),
        ("1\ta\t\x00\t1\t2011-01-01\t1", "Column 'nn' cannot be null"),
        ("1\ta\t1\t300\t2011-01-01\t1", "Out of range value for column 't' at row 1"),
        ("1\ta\t1\t1\t2011-02-30\t1", "Incorrect date value: '2011-02-30' for column `test`.`{t}`.`d` at row 1"),
        ("1\ta\t1\t1\t2011-01-01\t-1", "Out of range value for column 'u' at row 1"),
    ]

    @pytest.mark.parametrize("values,message", BAD, ids=["int", "int-junk", "too-long", "null-not-null",
                                                         "tinyint-range", "date", "unsigned"])
    def test_insert_bad_value_leaves_nothing(self, server, st, values, message):
        t, w = st
        assert w.request(f"1\t+\t7\t2\t{values}\n") == b"1\t1\t" + message.format(t=t).encode() + b"\n"
        assert dump(server, t) == [self.ROW]
        # The connection goes on.
        assert w.request("1\t+\t7\t3\t3\tc\t3\t3\t2011-01-03\t3\n") == b"0\t1\n"
        assert len(dump(server, t)) == 2

    @pytest.mark.parametrize("values,message", BAD, ids=["int", "int-junk", "too-long", "null-not-null",
                                                         "tinyint-range", "date", "unsigned"])
    def test_update_bad_value_leaves_row_unchanged(self, server, st, values, message):
        t, w = st
        exp = b"1\t1\t" + message.format(t=t).encode() + b"\n"
        assert w.request(f"1\t=\t1\t1\t1\t0\tU\t1\t{values}\n") == exp
        assert w.request(f"1\t=\t1\t1\t1\t0\tU?\t1\t{values}\n") == exp
        assert dump(server, t) == [self.ROW]

    def test_null_primary_key(self, server, st):
        t, w = st
        assert w.request("1\t+\t2\t\x00\t5\n") == b"1\t1\tColumn 'id' cannot be null\n"
        assert dump(server, t) == [self.ROW]

    def test_invalid_utf8(self, server, hs, make_table):
        t = make_table("id int primary key, l varchar(10) charset latin1, u varchar(10) charset utf8mb4")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,l,u")
        assert w.request(b"1\t+\t3\t1\t\xff\tx\n") == (
            b"1\t1\tIncorrect string value: '\\xFF' for column `test`.`" + t.encode() + b"`.`l` at row 1\n")
        assert w.request(b"1\t+\t3\t1\tx\t\xc3\n") == (
            b"1\t1\tIncorrect string value: '\\xC3' for column `test`.`" + t.encode() + b"`.`u` at row 1\n")
        assert dump(server, t) == []

    def test_increment_out_of_range(self, server, hs, make_table):
        t = make_table("id int primary key, n tinyint", [(1, 120), (2, 100)])
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "n")
        assert w.request("1\t=\t1\t2\t1\t0\t+\t20\n") == b"0\t1\t1\n"
        # Both rows in one request: the second fails, the first is rolled back with it.
        assert w.request("1\t>=\t1\t1\t2\t0\t+\t10\n") == b"1\t1\tOut of range value for column 'n' at row 1\n"
        assert dump(server, t) == [("1", "120"), ("2", "120")]

    def test_empty_string_is_null_mode_stores_empty_values_as_null(self, server, hs, make_table):
        # sql_mode EMPTY_STRING_IS_NULL: SQL reads '' as NULL (before, '' was stored, and an empty
        # value for an INT column was an error)
        t = make_table("id int primary key, s varchar(10), i int, d date")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,s,i,d")
        server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT + ",EMPTY_STRING_IS_NULL",))
        assert w.request("1\t+\t4\t1\t\t\t\n") == b"0\t1\n"
        server.exec_sql(f"INSERT INTO {t} VALUES (2, '', '', '')")
        assert w.request("1\t=\t1\t1\t1\t0\tU\t1\t\t\t\n") == b"0\t1\t1\n"
        server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT,))
        assert dump(server, t) == [("1", None, None, None), ("2", None, None, None)]
        assert w.request("1\t+\t4\t3\t\t1\t2024-01-01\n") == b"0\t1\n"
        assert dump(server, t)[2] == ("3", "", "1", "2024-01-01")

    def test_null_for_a_not_null_column_in_an_update_is_what_sql_update_does(self, server, hs, make_table):
        # Strict: an error, as SQL's UPDATE. Not strict: the column's implicit default ('' / 0) with
        # a warning, as SQL's UPDATE (an insert of NULL fails in both modes, as SQL's one-row
        # INSERT does). Before, the update failed in both.
        t = make_table("id int primary key, s varchar(10) not null, i int not null")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 2)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "s,i")
        assert w.request("1\t=\t1\t1\t1\t0\tU\t\x00\t5\n") == b"1\t1\tColumn 's' cannot be null\n"
        server.exec_sql("SET GLOBAL sql_mode = ''")
        assert w.request("1\t=\t1\t1\t1\t0\tU\t\x00\t\x00\n") == b"0\t1\t1\n"
        assert w.request("1\t+\t2\t\x00\t3\n") == b"1\t1\tColumn 's' cannot be null\n"
        server.exec_sql(f"UPDATE {t} SET s = NULL, i = NULL WHERE id = 2")
        server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT,))
        assert dump(server, t) == [("1", "", "0"), ("2", "", "0")]

    def test_sql_mode_is_read_at_every_batch(self, server, hs, make_table):
        t = make_table("id int primary key, i int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,i")
        assert w.request("1\t+\t2\t1\tx\n").startswith(b"1\t1\tIncorrect integer value: 'x'")
        server.exec_sql("SET GLOBAL sql_mode = ''")
        # Same connection, next batch: non-strict conversion ('x' -> 0, 300 clamped...).
        assert w.request("1\t+\t2\t1\tx\n") == b"0\t1\n"
        assert w.request("1\t+\t2\t2\t12abc\n") == b"0\t1\n"
        server.exec_sql("SET GLOBAL sql_mode = %s", (STRICT,))
        assert w.request("1\t+\t2\t3\tx\n").startswith(b"1\t1\tIncorrect integer value: 'x'")
        assert dump(server, t) == [("1", "0"), ("2", "12")]


# ---------------------------------------------------------------------------------------------------
# character sets: values are UTF-8 on the wire, stored in the column's charset


@pytest.mark.tablesocket_only("HS stores the wire bytes as they are and returns the stored bytes")
class TestCharset:
    def test_utf8_into_latin1_column(self, server, hs, make_table):
        t = make_table("id int primary key, l varchar(10) charset latin1, u varchar(10) charset utf8mb4, "
                       "b varbinary(10)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,l,u,b", "l")
        e = "\u00e9".encode()          # é in UTF-8: c3 a9
        assert w.request(b"1\t+\t4\t1\t" + e + b"\t" + e + b"\t" + e + b"\n") == b"0\t1\n"
        assert w.request("1\t+\t2\t2\t\u20ac\n".encode()) == b"0\t1\n"    # € is 0x80 in latin1 (cp1252)
        assert server.sql_bytes(f"SELECT id, HEX(l), HEX(u), HEX(b) FROM {t} ORDER BY id") == [
            (b"1", b"E9", b"C3A9", b"C3A9"), (b"2", b"80", None, None)]
        # Read back as UTF-8 (binary columns as they are).
        assert w.request("1\t=\t1\t1\n") == b"0\t4\t1\t" + e + b"\t" + e + b"\t" + e + b"\n"
        assert w.request("1\t=\t1\t2\n") == "0\t4\t2\t\u20ac\t\x00\t\x00\n".encode()
        # A filter operand is converted the same way.
        assert w.request(b"1\t>=\t1\t0\t10\t0\tF\t=\t0\t" + e + b"\n") == b"0\t4\t1\t" + e + b"\t" + e + b"\t" + e + b"\n"
        # A row written with SQL reads the same.
        server.exec_sql(f"INSERT INTO {t} (id, l) VALUES (3, %s)", ("\u00e9t\u00e9",))
        assert server.sql_bytes(f"SELECT HEX(l) FROM {t} WHERE id = 3") == [(b"E974E9",)]
        assert w.request("1\t=\t1\t3\n") == "0\t4\t3\t\u00e9t\u00e9\t\x00\t\x00\n".encode()
        # Update too.
        assert w.request("1\t=\t1\t3\t1\t0\tU\t3\t\u00e0\n".encode()) == b"0\t1\t1\n"
        assert server.sql_bytes(f"SELECT HEX(l) FROM {t} WHERE id = 3") == [(b"E0",)]

    def test_text_of_every_character_set_reads_back_as_utf8(self, server, hs, make_table):
        # 7-bit text passes unconverted between ASCII-based character sets; a non-ASCII byte past
        # the first eight, and character sets that are not ASCII-based (ucs2, utf16, swe7), are
        # converted.
        t = make_table("id int primary key, l varchar(20) charset latin1, c varchar(20) charset cp1251, "
                       "u varchar(20) charset ucs2, s varchar(20) charset swe7, x varchar(20) charset utf16")
        r = hs()
        open_index(r, 1, t, "PRIMARY", "l,c,u,s,x")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 'plain ascii text', 'plain ascii text', 'abc', 'a\u00e4b', 'xyz'), "
                        "(2, 'abcdefgh\u00e9ij', 'abcdefgh\u0436', 'abcdefgh\u00e9', 'ab', 'abcdefgh\u20ac')")
        assert r.request("1\t=\t1\t1\n") == "0\t5\tplain ascii text\tplain ascii text\tabc\ta\u00e4b\txyz\n".encode()
        assert r.request("1\t=\t1\t2\n") == \
            "0\t5\tabcdefgh\u00e9ij\tabcdefgh\u0436\tabcdefgh\u00e9\tab\tabcdefgh\u20ac\n".encode()

    def test_written_text_of_every_character_set(self, server, hs, make_table):
        # The write side of the pass-through above: 7-bit text is stored as the same bytes in
        # ASCII-based columns (latin1, cp1251, ascii, binary), converted where the column's
        # character set is not ASCII-based (ucs2, utf16) or the text is not 7-bit; lengths and
        # strict mode are checked as before.
        t = make_table("id int primary key, l varchar(3) charset latin1, c varchar(20) charset cp1251, "
                       "a varchar(20) charset ascii, u varchar(20) charset ucs2, x varchar(20) charset utf16, "
                       "b varbinary(20)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,l,c,a,u,x,b")
        assert w.request(b"1\t+\t7\t1\tabc\tabc\tabc\tabc\tabc\tabc\n") == b"0\t1\n"
        assert server.sql_bytes(f"SELECT HEX(l), HEX(c), HEX(a), HEX(u), HEX(x), HEX(b) FROM {t} WHERE id = 1") == [
            (b"616263", b"616263", b"616263", b"006100620063", b"006100620063", b"616263")]
        assert w.request("1\t+\t7\t2\t\u00e9\t\u0436\t\u00e9\t\u0436\t\u20ac\t\u00e9\n".encode()) == \
            b"1\t1\tIncorrect string value: '\\xC3\\xA9' for column `test`.`" + t.split(".")[-1].encode() + \
            b"`.`a` at row 1\n"
        assert w.request("1\t+\t6\t2\t\u00e9\t\u0436\t\t\u0436\t\u20ac\n".encode()) == b"0\t1\n"
        assert server.sql_bytes(f"SELECT HEX(l), HEX(c), HEX(u), HEX(x) FROM {t} WHERE id = 2") == [
            (b"E9", b"E6", b"0436", b"20AC")]
        # Too long for varchar(3) in strict mode, 7-bit or not.
        assert w.request(b"1\t+\t2\t3\tabcd\n").startswith(b"1\t1\tData too long for column 'l'")
        assert w.request("1\t+\t2\t3\t\u00e9\u00e9\u00e9\u00e9\n".encode()).startswith(b"1\t1\tData too long for column 'l'")
        assert server.sql_bytes(f"SELECT COUNT(*) FROM {t} WHERE id = 3") == [(b"0",)]

    def test_latin1_key_column(self, server, hs, make_table):
        t = make_table("l varchar(10) charset latin1 primary key, v int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "l,v")
        assert w.request("1\t+\t2\t\u00e9\t1\n".encode()) == b"0\t1\n"
        assert server.sql_bytes(f"SELECT HEX(l) FROM {t}") == [(b"E9",)]
        assert w.request("1\t=\t1\t\u00e9\n".encode()) == "0\t2\t\u00e9\t1\n".encode()
        # The column's collation (latin1_swedish_ci) applies: É finds é.
        assert w.request("1\t=\t1\t\u00c9\n".encode()) == "0\t2\t\u00e9\t1\n".encode()
        assert w.request("1\t+\t2\t\u00c9\t2\n".encode()) == b"1\t1\t121\n"


# ---------------------------------------------------------------------------------------------------
# find_modify: U + - D and U? +? -? D?

FM_DDL = "id int primary key, k int, v varchar(10), n int, key k(k)"
FM_ROWS = [(i, i * 10, f"v{i}", i) for i in range(1, 9)]


def fm_rows(**changes) -> list[tuple]:
    """FM_ROWS as SQL returns them, with changes: id=(k, v, n) or None for deleted."""
    out = []
    for i, k, v, n in FM_ROWS:
        row = changes.get(f"r{i}", (k, v, n))
        if row is not None:
            out.append(tuple(None if x is None else str(x) for x in (i, *row)))
    return out


@pytest.fixture
def fm(make_table):
    return make_table(FM_DDL, FM_ROWS)


@pytest.fixture
def fw(hs, fm):
    """Write connection: 1 = PRIMARY(id,k,v,n; filters k,v,n), 2 = PRIMARY(v), 3 = k(k), 4 = PRIMARY(n)."""
    w = hs(wr=True)
    open_index(w, 1, fm, "PRIMARY", "id,k,v,n", "k,v,n")
    open_index(w, 2, fm, "PRIMARY", "v", "k,v,n")
    open_index(w, 3, fm, "k", "k", "k,v,n")
    open_index(w, 4, fm, "PRIMARY", "n", "k,v,n")
    return w


class TestFindModify:
    def test_update_limit_offset(self, server, fm, fw):
        assert fw.request("2\t>=\t1\t2\t3\t1\tU\tX\n") == b"0\t1\t3\n"
        assert fw.request("2\t>\t1\t8\t3\t1\tU\tY\n") == b"0\t1\t0\n"
        assert fw.request("2\t<\t1\t8\t1\t0\tU\tZ\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r3=(30, "X", 3), r4=(40, "X", 4), r5=(50, "X", 5), r7=(70, "Z", 7))

    def test_update_full_row(self, server, fm, fw):
        assert fw.request("1\t=\t1\t7\t1\t0\tU\t7\t77\tq\t\x00\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r7=(77, "q", None))

    def test_update_returns_pre_images(self, server, fm, fw):
        assert fw.request("2\t>=\t1\t2\t2\t0\tU?\tX\n") == b"0\t1\tv2\tv3\n"
        assert fw.request("2\t=\t1\t2\t1\t0\tU?\tZ\n") == b"0\t1\tX\n"
        assert fw.request("1\t=\t1\t7\t1\t0\tU?\t7\t77\tq\t0\n") == b"0\t4\t7\t70\tv7\t7\n"
        assert fw.request("2\t=\t1\t99\t1\t0\tU?\tZ\n") == b"0\t1\n"
        assert dump(server, fm) == fm_rows(r2=(20, "Z", 2), r3=(30, "X", 3), r7=(77, "q", 0))

    def test_unchanged_rows_count_as_modified(self, server, fm, fw):
        assert fw.request("2\t>=\t1\t1\t3\t0\tU\tv1\n") == b"0\t1\t3\n"   # row 1 already is v1
        assert fw.request("2\t=\t1\t1\t1\t0\tU\tv1\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r2=(20, "v1", 2), r3=(30, "v1", 3))

    @pytest.mark.tablesocket_only("HandlerSocket matches the empty value (0, '') and changes those rows")
    def test_null_key_on_a_not_null_column_changes_no_row(self, server, hs, make_table):
        """D, U and + by a NULL key on a NOT NULL column change nothing, as SQL's
        `DELETE ... WHERE n = NULL`: no row holds NULL there. (HandlerSocket deleted the rows
        holding 0.) On a nullable column NULL finds the NULL rows."""
        t = make_table("id int primary key, n int not null, s varchar(5) not null, g int null, "
                       "key kn(n), key ks(s), key kg(g)",
                       [(1, 0, "", None), (2, 1, "a", 0), (3, 0, "", None), (4, 2, "b", 5)])
        c = hs(wr=True)
        for i, index, cols in ((1, "kn", "id,n"), (2, "ks", "id,n"), (3, "kg", "n")):
            assert c.request(f"P\t{i}\ttest\t{t}\t{index}\t{cols}\n") == b"0\t1\n"
        assert c.request(b"1\t=\t1\t\x00\t10\t0\tD\n") == b"0\t1\t0\n"
        assert c.request(b"2\t=\t1\t\x00\t10\t0\tU\t9\t9\n") == b"0\t1\t0\n"
        assert c.request(b"1\t=\t1\t0\t10\t0\t@\t0\t2\t\x00\t7\tD\n") == b"0\t1\t0\n"
        assert server.sql(f"SELECT id, n FROM test.{t} ORDER BY id") == [("1", "0"), ("2", "1"), ("3", "0"), ("4", "2")]
        assert c.request(b"3\t=\t1\t\x00\t10\t0\tU\t7\n") == b"0\t1\t2\n"
        assert server.sql(f"SELECT id, n FROM test.{t} ORDER BY id") == [("1", "7"), ("2", "1"), ("3", "7"), ("4", "2")]

    def test_update_with_in(self, server, fm, fw):
        assert fw.request("2\t=\t1\t0\t10\t0\t@\t0\t3\t2\t9\t4\tU\tIN\n") == b"0\t1\t2\n"
        assert fw.request("2\t=\t1\t0\t10\t0\t@\t0\t2\t5\t6\tU?\tIN2\n") == b"0\t1\tv5\tv6\n"
        assert dump(server, fm) == fm_rows(r2=(20, "IN", 2), r4=(40, "IN", 4), r5=(50, "IN2", 5),
                                           r6=(60, "IN2", 6))

    def test_in_values_that_find_one_row_change_it_once_when_the_change_moves_its_key(self, server, fm, fw):
        # A repeated IN value finds row 3 twice; the change moves it on the index walked (its
        # primary key; its k on index k): it is changed once. tablesocket answered `1 1 120` for
        # the first (the second change looked for the row at its old key) and added twice.
        assert fw.request("1\t=\t1\t0\t10\t0\t@\t0\t2\t3\t3\tU\t33\t30\tv3\t3\n") == b"0\t1\t1\n"
        assert fw.request("3\t=\t1\t0\t10\t0\t@\t0\t3\t40\t40\t40\t+\t5\n") == b"0\t1\t1\n"
        assert dump(server, fm) == [r for r in fm_rows(r3=None, r4=(45, "v4", 4))] + [("33", "30", "v3", "3")]

    def test_offset_and_limit_count_a_repeated_in_value_as_the_read_does(self, server, fm, fw):
        # IN 4 4 2 with offset 1 reads row 4 (found the second time): a key-changing U? changes
        # that row, not row 2 (tablesocket skipped the repeat before counting the offset); with
        # limit 2, IN 3 3 5 finds row 3 twice and changes it once, not row 5 too.
        assert fw.request("1\t=\t1\t0\t1\t1\t@\t0\t3\t4\t4\t2\n") == b"0\t4\t4\t40\tv4\t4\n"
        assert fw.request("1\t=\t1\t0\t1\t1\t@\t0\t3\t4\t4\t2\tU?\t104\t40\tv4\t4\n") == \
            b"0\t4\t4\t40\tv4\t4\n"
        assert fw.request("1\t=\t1\t0\t2\t0\t@\t0\t3\t3\t3\t5\tU\t103\t30\tv3\t3\n") == b"0\t1\t1\n"
        assert dump(server, fm) == [r for r in fm_rows(r3=None, r4=None)] + [
            ("103", "30", "v3", "3"), ("104", "40", "v4", "4")]

    def test_update_with_filters(self, server, fm, fw):
        assert fw.request("2\t>=\t1\t1\t10\t0\tF\t>\t0\t60\tU\tF\n") == b"0\t1\t2\n"
        assert fw.request("2\t>=\t1\t1\t10\t0\tW\t<\t0\t30\tU\tW\n") == b"0\t1\t2\n"
        # LIMIT/OFFSET count only rows that pass the filters.
        assert fw.request("2\t>=\t1\t1\t2\t1\tF\t=\t1\tF\tU?\tG\n") == b"0\t1\tF\n"
        assert dump(server, fm) == fm_rows(r1=(10, "W", 1), r2=(20, "W", 2), r7=(70, "F", 7), r8=(80, "G", 8))

    def test_increment_and_decrement(self, server, fm, fw):
        assert fw.request("4\t>=\t1\t1\t3\t0\t+\t5\n") == b"0\t1\t3\n"
        assert fw.request("4\t>=\t1\t1\t3\t0\t+?\t5\n") == b"0\t1\t6\t7\t8\n"
        assert fw.request("4\t=\t1\t8\t1\t0\t-\t3\n") == b"0\t1\t1\n"
        assert fw.request("4\t=\t1\t8\t1\t0\t-?\t3\n") == b"0\t1\t5\n"
        # A negative increment.
        assert fw.request("4\t=\t1\t7\t1\t0\t+\t-10\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r1=(10, "v1", 11), r2=(20, "v2", 12), r3=(30, "v3", 13),
                                           r7=(70, "v7", -3), r8=(80, "v8", 2))

    def test_increment_with_filter_and_in(self, server, fm, fw):
        assert fw.request("4\t>=\t1\t1\t10\t0\tF\t<=\t2\t3\t+\t100\n") == b"0\t1\t3\n"
        assert fw.request("4\t=\t1\t0\t10\t0\t@\t0\t2\t4\t5\t-?\t1\n") == b"0\t1\t4\t5\n"
        assert dump(server, fm) == fm_rows(r1=(10, "v1", 101), r2=(20, "v2", 102), r3=(30, "v3", 103),
                                           r4=(40, "v4", 3), r5=(50, "v5", 4))

    def test_decrement_does_not_cross_zero(self, server, fm, fw):
        # n = 4: -10 would make it negative: the row is left alone and not counted.
        assert fw.request("4\t=\t1\t4\t1\t0\t-\t10\n") == b"0\t1\t0\n"
        assert fw.request("4\t=\t1\t4\t1\t0\t-?\t3\n") == b"0\t1\t4\n"
        # n = 1: the pre-image is still returned when the row is left alone.
        assert fw.request("4\t=\t1\t4\t1\t0\t-?\t5\n") == b"0\t1\t1\n"
        # Down to exactly 0 is fine.
        assert fw.request("4\t=\t1\t5\t1\t0\t-\t5\n") == b"0\t1\t1\n"
        # Several rows: each decided on its own.
        assert fw.request("4\t>=\t1\t6\t10\t0\t-\t7\n") == b"0\t1\t2\n"
        # A negative value must not become positive either.
        server.exec_sql(f"UPDATE {fm} SET n = -5 WHERE id = 1")
        assert fw.request("4\t=\t1\t1\t1\t0\t-\t-10\n") == b"0\t1\t0\n"
        assert fw.request("4\t=\t1\t1\t1\t0\t-\t-3\n") == b"0\t1\t1\n"
        # '+' may cross zero.
        assert fw.request("4\t=\t1\t2\t1\t0\t+\t-10\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r1=(10, "v1", -2), r2=(20, "v2", -8), r4=(40, "v4", 1),
                                           r5=(50, "v5", 0), r6=(60, "v6", 6), r7=(70, "v7", 0),
                                           r8=(80, "v8", 1))

    @pytest.mark.tablesocket_only("HS adds in signed 64 bits on the column's integer value (wrapping, "
                                  "dropping fractions) and reads the operand like atoll")
    @pytest.mark.parametrize("coltype,start,op,delta", [
        ("bigint unsigned", "18446744073709551615", "+", "1"),
        ("bigint unsigned", "18446744073709551614", "+", "1"),
        ("bigint unsigned", "9223372036854775807", "+", "1"),
        ("bigint unsigned", "0", "-", "1"),
        ("bigint unsigned", "5", "+", "-3"),
        ("bigint", "9223372036854775807", "+", "1"),
        ("bigint", "-9223372036854775808", "+", "-1"),
        ("bigint", "-9223372036854775807", "-", "1"),
        ("tinyint", "100", "+", "27"),
        ("tinyint", "100", "+", "28"),
        ("tinyint", "5", "-", "-9223372036854775809"),
        ("int", "5", "+", "1e2"),
        ("int", "5", "+", "1.5"),
        ("int", "5", "+", "12abc"),
        ("int", "5", "+", "abc"),
        ("int", "5", "+", " 7 "),
        ("decimal(6,2)", "1.50", "+", "1"),
        ("decimal(6,2)", "1.25", "+", "0"),
        ("decimal(6,2)", "1.25", "+", "0.5"),
        ("decimal(6,2)", "9999.50", "+", "1"),
        ("decimal(6,2)", "1.25", "-", "0.25"),
        ("double", "1.75", "+", "1"),
        ("double", "1.75", "+", "0.5"),
        ("float", "2.5", "-", "1"),
        ("bigint", "0", "-", "9223372036854775808"),
        ("int", "-2147483648", "+", "18446744073709551615"),
        ("varchar(40)", "'5'", "+", "9223372036854775807"),
        ("varchar(40)", "'5'", "+", "1.5"),
        ("varchar(40)", "'1e3'", "+", "0"),
        ("date", "'2024-01-31'", "-", "1.5"),
        ("date", "'2024-01-31'", "+", "1"),
        ("datetime(3)", "'2024-01-31 23:59:59.999'", "+", "0"),
    ])
    def test_increment_computes_as_sql_does(self, server, hs, make_table, coltype, start, op, delta):
        """`+`/`-` give what `UPDATE t SET n = n + <delta>` gives (<delta> as an SQL literal when it is
        a number, as a string otherwise): the same value, or an error where SQL has one (the
        row left unchanged). HandlerSocket's sign rule for `-` stays (tested above)."""
        t = make_table(f"id int primary key, n {coltype}")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, {start}), (2, {start})")
        numeric = re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", delta) is not None
        literal = delta.strip() if numeric else "'" + delta + "'"
        if op == "-" and literal.startswith("-"):
            literal = f"({literal})"
        sql_error = None
        try:
            server.exec_sql(f"UPDATE {t} SET n = n {op} {literal} WHERE id = 2")
        except Exception as e:  # noqa: BLE001
            sql_error = str(e)
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "n")
        reply = w.request(f"1\t=\t1\t1\t1\t0\t{op}\t{delta}\n")
        (hs_value,), (sql_value,) = server.sql(f"SELECT n FROM {t} ORDER BY id")
        if sql_error:
            assert reply.startswith(b"1\t1\t"), (reply, sql_error)
            (before,), = server.sql(f"SELECT {start}")
            assert hs_value == before or float(hs_value) == float(before), hs_value
        else:
            assert reply in (b"0\t1\t1\n", b"0\t1\t0\n"), reply
            if reply == b"0\t1\t0\n":  # HandlerSocket's sign rule: the row is left as it is
                assert op == "-" and float(hs_value) == float(start), hs_value
                assert (float(start) > 0) != (float(sql_value) > 0), sql_value
            else:
                assert hs_value == sql_value, (hs_value, sql_value)

    def test_increment_leaves_null_alone(self, server, fm, fw):
        server.exec_sql(f"UPDATE {fm} SET n = NULL WHERE id = 1")
        assert fw.request("4\t=\t1\t1\t1\t0\t+\t5\n") == b"0\t1\t1\n"
        assert fw.request("4\t=\t1\t2\t1\t0\t+\t\x00\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r1=(10, "v1", None))

    def test_delete_limit_offset_in_filters(self, server, fm, fw):
        assert fw.request("1\t=\t1\t1\t10\t0\t@\t0\t3\t2\t4\t9\tD\n") == b"0\t1\t2\n"
        assert fw.request("1\t>=\t1\t1\t10\t0\tF\t>\t2\t6\tD?\n") == b"0\t4\t7\t70\tv7\t7\t8\t80\tv8\t8\n"
        assert fw.request("1\t>=\t1\t1\t10\t1\tD\n") == b"0\t1\t3\n"
        assert dump(server, fm) == fm_rows(r2=None, r3=None, r4=None, r5=None, r6=None, r7=None, r8=None)

    def test_delete_returns_pre_images_and_w_filter(self, server, fm, fw):
        assert fw.request("1\t<=\t1\t8\t10\t0\tW\t>\t2\t5\tD?\n") == (
            b"0\t4\t8\t80\tv8\t8\t7\t70\tv7\t7\t6\t60\tv6\t6\n")
        assert fw.request("3\t=\t1\t30\t1\t0\tD?\n") == b"0\t1\t30\n"
        assert fw.request("3\t=\t1\t30\t1\t0\tD\n") == b"0\t1\t0\n"
        assert dump(server, fm) == fm_rows(r3=None, r6=None, r7=None, r8=None)

    def test_modify_errors(self, server, fm, fw):
        assert fw.request("1\t=\t2\t1\t2\t1\t0\tD\n") == b"2\t1\tkpnum\n"
        assert fw.request("1\t=\t1\t1\t1\t0\tF\t=\t9\t1\tD\n") == b"2\t1\tfilterfld\n"
        assert fw.request("9\t=\t1\t1\t1\t0\tD\n") == b"2\t1\tstmtnum\n"
        assert dump(server, fm) == fm_rows()

    @pytest.mark.handlersocket_only("tablesocket: NULL on a NOT NULL key column changes no row")
    def test_null_key_on_not_null_column_is_the_empty_value(self, server, hs, make_table):
        t = make_table("k int not null primary key, v varchar(5)", [(0, "zero"), (3, "three"), (5, "five")])
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "k,v")
        assert w.request("1\t=\t1\t3\n") == b"0\t2\t3\tthree\n"
        assert w.request("1\t=\t1\t\x00\t1\t0\tD?\n") == b"0\t2\t0\tzero\n"
        assert dump(server, t) == [("3", "three"), ("5", "five")]

    def test_primary_key_update_duplicate(self, server, fm, fw):
        assert fw.request("1\t=\t1\t1\t1\t0\tU\t2\t10\tv1\t1\n") == b"1\t1\t121\n"
        assert dump(server, fm) == fm_rows()

    # ---- tablesocket only

    @pytest.mark.tablesocket_only("HS sets the opened columns it got no value for to ''/0")
    def test_update_with_fewer_values_leaves_other_columns(self, server, fm, fw):
        assert fw.request("1\t=\t1\t7\t1\t0\tU?\t7\t77\tq\n") == b"0\t4\t7\t70\tv7\t7\n"
        assert fw.request("1\t=\t1\t8\t1\t0\tU\n") == b"0\t1\t1\n"
        assert fw.request("1\t=\t1\t6\t1\t0\t+\t0\t1\n") == b"0\t1\t1\n"
        assert dump(server, fm) == fm_rows(r6=(61, "v6", 6), r7=(77, "q", 7))

    @pytest.mark.tablesocket_only("more values than opened columns is an error (HS drops the extra ones)")
    def test_modify_too_many_values(self, server, fm, fw):
        assert fw.request("2\t=\t1\t1\t1\t0\tU\ta\tb\n") == b"2\t1\ttoomanyvalues\n"
        assert fw.request("4\t=\t1\t1\t1\t0\t+\t1\t2\n") == b"2\t1\ttoomanyvalues\n"
        assert dump(server, fm) == fm_rows()

    @pytest.mark.tablesocket_only("HS revisits rows whose key in the scanned index moved forward")
    def test_update_scanned_secondary_key_modifies_each_row_once(self, server, fm, fw):
        assert fw.request("3\t>=\t1\t10\t100\t0\tU\t1000\n") == b"0\t1\t8\n"
        assert dump(server, fm, "id, k") == [(str(i), "1000") for i in range(1, 9)]

    @pytest.mark.tablesocket_only("HS revisits rows whose key in the scanned index moved forward")
    def test_increment_scanned_secondary_key_modifies_each_row_once(self, server, fm, fw):
        assert fw.request("3\t>=\t1\t10\t100\t0\t+\t15\n") == b"0\t1\t8\n"
        assert dump(server, fm, "id, k") == [(str(i), str(i * 10 + 15)) for i in range(1, 9)]
        # With LIMIT/OFFSET, pre-images, and in reverse.
        assert fw.request("3\t>=\t1\t0\t3\t1\t+?\t1000\n") == b"0\t1\t35\t45\t55\n"
        assert fw.request("3\t<=\t1\t1000\t2\t0\tU?\t1\n") == b"0\t1\t95\t85\n"
        assert dump(server, fm, "id, k") == [("1", "25"), ("2", "1035"), ("3", "1045"), ("4", "1055"),
                                             ("5", "65"), ("6", "75"), ("7", "1"), ("8", "1")]

    @pytest.mark.tablesocket_only("HS revisits rows whose primary key moved forward")
    def test_increment_scanned_primary_key_modifies_each_row_once(self, server, fm, hs):
        w = hs(wr=True)
        open_index(w, 1, fm, "PRIMARY", "id")
        assert w.request("1\t>=\t1\t1\t100\t0\t+\t100\n") == b"0\t1\t8\n"
        assert dump(server, fm, "id, k") == [(str(i + 100), str(i * 10)) for i in range(1, 9)]
        # Moving onto the next row's key is a duplicate, as in SQL (UPDATE t SET id = id + 1) ...
        assert w.request("1\t>=\t1\t0\t100\t0\t+\t1\n") == b"1\t1\t121\n"
        # ... but not when walking backwards.
        assert w.request("1\t<=\t1\t1000\t100\t0\t+\t1\n") == b"0\t1\t8\n"
        assert dump(server, fm, "id, k") == [(str(i + 101), str(i * 10)) for i in range(1, 9)]

    @pytest.mark.tablesocket_only("a request is one statement: HS keeps the rows changed before an error")
    def test_failed_multi_row_modify_changes_nothing(self, server, hs, make_table):
        t = make_table("id int primary key, u int, unique key uu(u)", [(i, i) for i in range(1, 5)])
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "u")
        assert w.request("1\t>=\t1\t1\t10\t0\t+\t1\n") == b"1\t1\t121\n"
        assert w.request("1\t>=\t1\t1\t10\t0\tU\t9\n") == b"1\t1\t121\n"
        assert dump(server, t) == [(str(i), str(i)) for i in range(1, 5)]
        # In reverse the increment works (each row moves into a gap).
        assert w.request("1\t<=\t1\t4\t10\t0\t+\t1\n") == b"0\t1\t4\n"
        assert dump(server, t) == [(str(i), str(i + 1)) for i in range(1, 5)]


# ---------------------------------------------------------------------------------------------------
# upsert (+=): tablesocket's extension


@pytest.mark.tablesocket_only("'+=' (insert or update) is a tablesocket extension")
class TestUpsert:
    def test_insert_then_update_only_the_given_columns(self, server, hs, make_table):
        t = make_table("id int primary key, a varchar(10), b int default 5, c varchar(5) default 'c0', "
                       "ts timestamp(3) null default null on update current_timestamp(3)")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,a")
        assert w.request("1\t+=\t2\t1\tone\n") == b"0\t1\n"
        assert dump(server, t) == [("1", "one", "5", "c0", None)]
        server.exec_sql(f"UPDATE {t} SET b = 7, c = 'c7', ts = '2001-01-01 00:00:00'")
        assert w.request("1\t+=\t2\t1\tuno\n") == b"0\t1\n"
        assert dump(server, t, "id, a, b, c") == [("1", "uno", "7", "c7")]
        assert seconds_from_now(server, t, "ts", "id = 1") <= 5
        # The same values again: nothing changes (not even ON UPDATE columns).
        server.exec_sql(f"UPDATE {t} SET ts = '2001-01-01 00:00:00'")
        assert w.request("1\t+=\t2\t1\tuno\n") == b"0\t1\n"
        assert dump(server, t) == [("1", "uno", "7", "c7", "2001-01-01 00:00:00.000")]
        # Only a key column given: inserted, or left as it is.
        open_index(w, 2, t, "PRIMARY", "id")
        assert w.request("2\t+=\t1\t1\n") == b"0\t1\n"
        assert w.request("2\t+=\t1\t2\n") == b"0\t1\n"
        assert dump(server, t, "id, a, b, c") == [("1", "uno", "7", "c7"), ("2", None, "5", "c0")]

    def test_upsert_by_unique_secondary_key_with_auto_increment(self, server, hs, make_table):
        t = make_table("id int auto_increment primary key, k varchar(10), c int, unique key kk(k)")
        w = hs(wr=True)
        open_index(w, 1, t, "kk", "k,c")
        assert w.request("1\t+=\t2\tx\t1\n") == b"0\t1\t1\n"
        assert w.request("1\t+=\t2\ty\t1\n") == b"0\t1\t2\n"
        # Updating an existing row returns its id.
        assert w.request("1\t+=\t2\tx\t2\n") == b"0\t1\t1\n"
        assert w.request("1\t+=\t2\tx\t2\n") == b"0\t1\t1\n"
        reply = w.request("1\t+=\t2\tz\t3\n")
        assert re.fullmatch(rb"0\t1\t\d+\n", reply)
        assert dump(server, t) == [("1", "x", "2"), ("2", "y", "1"), (reply[4:-1].decode(), "z", "3")]

    def test_upsert_without_a_required_column_updates_through_a_given_unique_key(self, server, hs, make_table):
        # id is NOT NULL without a default: an insert without it is refused under strict sql_mode,
        # but an upsert that gives the unique key `name` can still update the existing row.
        t = make_table("id int not null primary key, name varchar(10) not null, score int, unique key uk(name)",
                       [(1, "carol", 1)])
        w = hs(wr=True)
        open_index(w, 1, t, "uk", "name,score")
        assert w.request("1\t+=\t2\tcarol\t9\n") == b"0\t1\n"
        assert dump(server, t) == [("1", "carol", "9")]
        assert w.request("1\t+=\t2\tnobody\t9\n") == b"1\t1\tField 'id' doesn't have a default value\n"
        assert w.request("1\t+\t2\tcarol\t9\n") == b"1\t1\tField 'id' doesn't have a default value\n"
        assert dump(server, t) == [("1", "carol", "9")]

    def test_upsert_can_change_the_primary_key_through_a_unique_key(self, server, hs, make_table):
        t = make_table("id int primary key, a varchar(10), u int, unique key uu(u)", [(1, "a", 100)])
        w = hs(wr=True)
        open_index(w, 1, t, "uu", "id,a,u")
        assert w.request("1\t+=\t3\t9\tx\t100\n") == b"0\t1\n"
        assert dump(server, t) == [("9", "x", "100")]

    def test_upsert_errors(self, server, hs, make_table):
        t = make_table("id int primary key, a varchar(3), b int", [(1, "a", 1)])
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,a,b")
        assert w.request("1\t+=\t3\t1\tx\tbad\n") == (
            b"1\t1\tIncorrect integer value: 'bad' for column `test`.`" + t.encode() + b"`.`b` at row 1\n")
        assert w.request("1\t+=\t3\t1\ttoolong\t1\n") == b"1\t1\tData too long for column 'a' at row 1\n"
        assert w.request("1\t+=\t3\t2\ttoolong\t1\n") == b"1\t1\tData too long for column 'a' at row 1\n"
        assert w.request("1\t+=\t2\t\x00\tq\n") == b"1\t1\tColumn 'id' cannot be null\n"
        assert w.request("1\t+=\t4\t1\tx\t1\t1\n") == b"2\t1\ttoomanyvalues\n"
        assert w.request("1\t+=\t0\n") == b"2\t1\tklen\n"
        assert w.request("1\t+=\t2\t1\tq\t1\t0\tU\tz\n") == b"2\t1\top\n"
        assert dump(server, t) == [("1", "a", "1")]


# ---------------------------------------------------------------------------------------------------
# batches: one bad request fails alone


class TestBatch:
    @pytest.mark.tablesocket_only("HS stores a bad value as whatever non-strict conversion makes of it")
    def test_one_bad_request_fails_alone(self, server, hs, make_table):
        t = make_table("id int primary key, v int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        w.send(b"1\t+\t2\t1\t10\n"      # ok
               b"1\t+\t2\t1\t11\n"      # duplicate
               b"1\t+\t2\t2\tbad\n"     # bad value
               b"1\t+\t2\t3\t30\n")     # ok
        assert w.recv_lines(4) == [
            b"0\t1\n", b"1\t1\t121\n",
            b"1\t1\tIncorrect integer value: 'bad' for column `test`.`" + t.encode() + b"`.`v` at row 1\n",
            b"0\t1\n"]
        assert dump(server, t) == [("1", "10"), ("3", "30")]
        # Modifications too, mixed with reads.
        w.send(b"1\t=\t1\t1\t1\t0\tU\t1\t12\n"
               b"1\t=\t1\t3\t1\t0\tU\t3\tx\n"
               b"1\t>=\t1\t0\t10\t0\n"
               b"1\t>=\t1\t0\t10\t0\t+\t0\t5\n"
               b"1\t=\t1\t1\t1\t0\tU\t3\t0\n"
               b"1\t=\t1\t3\t1\t0\tD?\n")
        assert w.recv_lines(6) == [
            b"0\t1\t1\n",
            b"1\t1\tIncorrect integer value: 'x' for column `test`.`" + t.encode() + b"`.`v` at row 1\n",
            b"0\t2\t1\t12\t3\t30\n",
            b"0\t1\t2\n",
            b"1\t1\t121\n",
            b"0\t2\t3\t35\n"]
        assert dump(server, t) == [("1", "17")]

    def test_pipelined_inserts_and_duplicates(self, server, hs, make_table):
        t = make_table("id int primary key, v int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        reqs, exp = [], []
        for i in range(200):
            k = i % 150
            reqs.append(f"1\t+\t2\t{k}\t{i}\n".encode())
            exp.append(b"0\t1\n" if i < 150 else b"1\t1\t121\n")
        w.send(b"".join(reqs))
        assert w.recv_lines(len(reqs), timeout=30) == exp
        assert dump(server, t) == [(str(k), str(k)) for k in range(150)]


    @pytest.mark.tablesocket_only("HS stores a bad value as whatever non-strict conversion makes of it")
    def test_failures_between_one_row_writes_leave_the_others(self, server, hs, make_table):
        """Consecutive one-row writes to one table share a statement (as the rows of one multi-row
        INSERT or UPDATE do): each one that fails (duplicate on a secondary UNIQUE, a bad value, a
        foreign key, a row referenced) must leave the rows written before and after it, in the
        same batch, and change nothing itself."""
        p = make_table("id int primary key", engine="InnoDB")
        server.exec_sql(f"INSERT INTO {p} VALUES (1), (2), (3)")
        c = make_table(f"id int primary key, pid int, u int unique, v int, "
                       f"foreign key (pid) references {p} (id)", engine="InnoDB")
        server.exec_sql(f"INSERT INTO {c} VALUES (1, 1, 1, 0), (2, 1, 2, 0), (3, 1, 3, 0)")
        w = hs(wr=True)
        open_index(w, 1, c, "PRIMARY", "id,pid,u,v")
        open_index(w, 2, p, "PRIMARY", "id")
        reqs = [
            (b"1\t=\t1\t1\t1\t0\tU\t1\t1\t1\t10\n", b"0\t1\t1\n"),
            (b"1\t=\t1\t2\t1\t0\tU\t2\t1\t1\t20\n", b"1\t1\t121\n"),       # u duplicate
            (b"1\t=\t1\t2\t1\t0\tU\t2\t1\t2\tx\n", None),                    # bad value
            (b"1\t=\t1\t2\t1\t0\tU\t2\t9\t2\t20\n", None),                   # no parent 9
            (b"1\t=\t1\t2\t1\t0\tU\t2\t2\t2\t20\n", b"0\t1\t1\n"),
            (b"1\t=\t1\t3\t1\t0\t+\t0\t0\t0\t5\n", b"0\t1\t1\n"),
            (b"1\t+\t4\t4\t1\t4\t40\n", b"0\t1\n"),
            (b"1\t+\t4\t5\t9\t5\t50\n", None),                            # no parent 9
            (b"1\t+\t4\t6\t1\t1\t60\n", b"1\t1\t121\n"),                   # u duplicate
            (b"1\t+\t4\t4\t1\t7\t70\n", b"1\t1\t121\n"),                   # id duplicate
            (b"1\t+\t4\t7\t2\t7\t70\n", b"0\t1\n"),
            (b"2\t=\t1\t2\t1\t0\tD\n", None),                             # referenced by row 2
            (b"2\t=\t1\t3\t1\t0\tD\n", b"0\t1\t1\n"),
            (b"1\t=\t1\t4\t1\t0\tD\n", b"0\t1\t1\n"),
            (b"1\t=\t1\t9\t1\t0\tD\n", b"0\t1\t0\n"),
            (b"1\t=\t1\t1\t1\t0\tU\t1\t1\t1\t11\n", b"0\t1\t1\n"),
        ]
        for rounds in range(2):  # pipelined (one batch), then one by one
            if rounds:
                server.exec_sql(f"DELETE FROM {c}")
                server.exec_sql(f"INSERT IGNORE INTO {p} VALUES (3)")
                server.exec_sql(f"INSERT INTO {c} VALUES (1, 1, 1, 0), (2, 1, 2, 0), (3, 1, 3, 0)")
                got = [w.request(r) for r, _ in reqs]
            else:
                w.send(b"".join(r for r, _ in reqs))
                got = w.recv_lines(len(reqs))
            for (req, want), reply in zip(reqs, got):
                if want is None:
                    assert reply.startswith(b"1\t1\t"), (req, reply)
                else:
                    assert reply == want, (req, reply)
            assert dump(server, c) == [("1", "1", "1", "11"), ("2", "2", "2", "20"), ("3", "1", "3", "5"),
                                       ("7", "2", "7", "70")]
            assert dump(server, p) == [("1",), ("2",)]

    def test_reads_between_one_row_writes_see_them(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)", engine="InnoDB")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 'a')")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        w.send(b"1\t=\t1\t1\t1\t0\tU\t1\tb\n"
               b"1\t=\t1\t1\n"
               b"1\t=\t1\t1\t1\t0\tU\t1\tc\n"
               b"1\t+\t2\t2\td\n"
               b"1\t>=\t1\t1\t10\t0\n"
               b"1\t=\t1\t2\t1\t0\tD\n"
               b"1\t+\t2\t3\te\n"
               b"1\t>=\t1\t1\t10\t0\n")
        assert w.recv_lines(8) == [b"0\t1\t1\n", b"0\t2\t1\tb\n", b"0\t1\t1\n", b"0\t1\n",
                                   b"0\t2\t1\tc\t2\td\n", b"0\t1\t1\n", b"0\t1\n",
                                   b"0\t2\t1\tc\t3\te\n"]
        assert dump(server, t) == [("1", "c"), ("3", "e")]

    def test_pipelined_auto_increment_inserts_reserve_no_values(self, server, hs, make_table):
        """Inserts in one batch take one AUTO_INCREMENT value each, as one-row INSERTs do (a multi-row
        statement reserves growing intervals, whose unused values would be lost)."""
        t = make_table("id int auto_increment primary key, u int unique", engine="InnoDB")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "u")
        w.send(b"".join(b"1\t+\t1\t%d\n" % i for i in range(1, 41)))
        assert w.recv_lines(40) == [b"0\t1\t%d\n" % i for i in range(1, 41)]
        w.send(b"1\t+\t1\t41\n1\t+\t1\t5\n1\t+\t1\t42\n")  # a duplicate uses a value, as in SQL
        assert w.recv_lines(3) == [b"0\t1\t41\n", b"1\t1\t121\n", b"0\t1\t43\n"]
        server.exec_sql(f"INSERT INTO {t} (u) VALUES (100)")
        assert server.sql(f"SELECT id FROM {t} WHERE u = 100") == [("44",)]


# ---------------------------------------------------------------------------------------------------
# the read port refuses writes


class TestReadPort:
    def test_writes_on_the_read_port_are_readonly(self, server, hs, fm):
        r = hs()
        open_index(r, 1, fm, "PRIMARY", "id,k,v,n", "k")
        for req in ("1\t+\t4\t9\t90\tv9\t9", "1\t=\t1\t1\t1\t0\tU\t1\t1\tx\t1", "1\t=\t1\t1\t1\t0\t+\t0\t0\t0\t1",
                    "1\t=\t1\t1\t1\t0\t-\t0\t0\t0\t1", "1\t=\t1\t1\t1\t0\tD", "1\t>=\t1\t1\t10\t0\tU?\t1",
                    "1\t>=\t1\t1\t10\t0\t+?\t0\t0\t0\t1", "1\t>=\t1\t1\t10\t0\t-?\t0", "1\t>=\t1\t1\t10\t0\tD?",
                    "1\t=\t1\t1\t10\t0\t@\t0\t2\t1\t2\tD", "1\t>=\t1\t1\t10\t0\tF\t>\t0\t10\tD"):
            assert r.request(req + "\n") == b"2\t1\treadonly\n", req
        assert dump(server, fm) == fm_rows()

    @pytest.mark.tablesocket_only("'+=' is a tablesocket extension")
    def test_upsert_on_the_read_port_is_readonly(self, server, hs, fm):
        r = hs()
        open_index(r, 1, fm, "PRIMARY", "id,k,v,n")
        assert r.request("1\t+=\t4\t9\t90\tv9\t9\n") == b"2\t1\treadonly\n"
        assert r.request("1\t+=\t4\t1\t90\tv9\t9\n") == b"2\t1\treadonly\n"
        assert r.request("1\tL\t1\t1\t1\t0\tD\n") == b"2\t1\treadonly\n"
        assert dump(server, fm) == fm_rows()


# ---------------------------------------------------------------------------------------------------
# visibility: a write is committed before its reply is sent


class TestVisibility:
    def test_sql_sees_each_write_as_soon_as_it_is_answered(self, server, hs, make_table):
        t = make_table("id int primary key, v int")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "id,v")
        conn = server._connect()
        try:
            with conn.cursor() as cur:
                def one(q, *args):
                    cur.execute(q, args)
                    return cur.fetchone()

                for i in range(1, 151):
                    assert w.request(f"1\t+\t2\t{i}\t{i}\n") == b"0\t1\n"
                    assert one(f"SELECT v FROM {t} WHERE id = %s", i) == (str(i).encode(),)
                    assert w.request(f"1\t=\t1\t{i}\t1\t0\tU\t{i}\t{i + 1000}\n") == b"0\t1\t1\n"
                    assert one(f"SELECT v FROM {t} WHERE id = %s", i) == (str(i + 1000).encode(),)
                    assert w.request(f"1\t=\t1\t{i}\t1\t0\t+\t0\t1\n") == b"0\t1\t1\n"
                    assert one(f"SELECT v FROM {t} WHERE id = %s", i) == (str(i + 1001).encode(),)
                    if i % 2:
                        assert w.request(f"1\t=\t1\t{i}\t1\t0\tD\n") == b"0\t1\t1\n"
                        assert one(f"SELECT COUNT(*) FROM {t} WHERE id = %s", i) == (b"0",)
        finally:
            conn.close()
        assert len(dump(server, t)) == 75

    def test_writes_of_other_connections_are_visible_to_reads(self, hs, make_table):
        t = make_table("id int primary key, v int")
        w, r = hs(wr=True), hs()
        open_index(w, 1, t, "PRIMARY", "id,v")
        open_index(r, 1, t, "PRIMARY", "id,v")
        for i in range(1, 51):
            assert w.request(f"1\t+\t2\t{i}\t{i}\n") == b"0\t1\n"
            assert r.request(f"1\t=\t1\t{i}\n") == b"0\t2\t%d\t%d\n" % (i, i)


# ---------------------------------------------------------------------------------------------------
# L: the last rows within a key prefix (tablesocket's extension)


@pytest.mark.tablesocket_only("'L' is a tablesocket extension")
class TestLastInPrefix:
    ROWS = [(1, 1, "a"), (2, 2, "b"), (3, 1, "c"), (4, 3, "d"), (5, 1, "e"), (6, 2, "f"), (7, 1, "g"),
            (8, 3, "h"), (9, 3, "i")]

    @pytest.fixture
    def lp(self, make_table):
        return make_table("id int primary key, user_id int not null, body varchar(10), key uid(user_id, id)",
                          self.ROWS)

    @pytest.fixture
    def lc(self, hs, lp):
        c = hs()
        open_index(c, 1, lp, "uid", "id,user_id,body", "body,id")
        return c

    def test_newest_first(self, lc):
        assert lc.request("1\tL\t1\t1\n") == b"0\t3\t7\t1\tg\n"               # default limit 1
        assert lc.request("1\tL\t1\t1\t10\t0\n") == b"0\t3\t7\t1\tg\t5\t1\te\t3\t1\tc\t1\t1\ta\n"
        assert lc.request("1\tL\t1\t2\t10\t0\n") == b"0\t3\t6\t2\tf\t2\t2\tb\n"

    def test_limit_offset(self, lc):
        assert lc.request("1\tL\t1\t1\t2\t0\n") == b"0\t3\t7\t1\tg\t5\t1\te\n"
        assert lc.request("1\tL\t1\t1\t2\t1\n") == b"0\t3\t5\t1\te\t3\t1\tc\n"
        assert lc.request("1\tL\t1\t1\t10\t3\n") == b"0\t3\t1\t1\ta\n"
        assert lc.request("1\tL\t1\t1\t10\t4\n") == b"0\t3\n"

    def test_prefix_with_no_rows(self, lc):
        assert lc.request("1\tL\t1\t0\t10\t0\n") == b"0\t3\n"      # before the first
        assert lc.request("1\tL\t1\t4\t10\t0\n") == b"0\t3\n"      # past the last
        assert lc.request("1\tL\t1\t2\t10\t0\n") == b"0\t3\t6\t2\tf\t2\t2\tb\n"   # between: unaffected

    def test_prefix_at_the_end_of_the_index(self, lc):
        assert lc.request("1\tL\t1\t3\t10\t0\n") == b"0\t3\t9\t3\ti\t8\t3\th\t4\t3\td\n"
        assert lc.request("1\tL\t1\t3\t1\t2\n") == b"0\t3\t4\t3\td\n"

    def test_full_key(self, lc):
        assert lc.request("1\tL\t2\t1\t5\t10\t0\n") == b"0\t3\t5\t1\te\n"
        assert lc.request("1\tL\t2\t1\t6\t10\t0\n") == b"0\t3\n"
        assert lc.request("1\tL\t3\t1\t5\t0\n") == b"2\t1\tkpnum\n"

    def test_filters(self, lc):
        assert lc.request("1\tL\t1\t1\t10\t0\tF\t!=\t0\tc\n") == b"0\t3\t7\t1\tg\t5\t1\te\t1\t1\ta\n"
        assert lc.request("1\tL\t1\t1\t2\t0\tF\t!=\t0\tg\n") == b"0\t3\t5\t1\te\t3\t1\tc\n"
        # W stops at the first row that fails.
        assert lc.request("1\tL\t1\t1\t10\t0\tW\t>\t1\t3\n") == b"0\t3\t7\t1\tg\t5\t1\te\n"
        assert lc.request("1\tL\t1\t3\t10\t0\tW\t>\t1\t8\n") == b"0\t3\t9\t3\ti\n"

    def test_in(self, lc):
        # One row (the newest) per IN value.
        assert lc.request("1\tL\t1\t1\t10\t0\t@\t0\t3\t3\t1\t4\n") == b"0\t3\t9\t3\ti\t7\t1\tg\n"

    def test_primary_key(self, hs, lp):
        c = hs()
        open_index(c, 2, lp, "PRIMARY", "id,body")
        assert c.request("2\tL\t1\t5\t10\t0\n") == b"0\t2\t5\te\n"
        assert c.request("2\tL\t1\t10\t10\t0\n") == b"0\t2\n"

    def test_sees_new_rows(self, server, lc, lp):
        server.exec_sql(f"INSERT INTO {lp} VALUES (10, 1, 'j'), (11, 4, 'k')")
        assert lc.request("1\tL\t1\t1\t2\t0\n") == b"0\t3\t10\t1\tj\t7\t1\tg\n"
        assert lc.request("1\tL\t1\t4\t10\t0\n") == b"0\t3\t11\t4\tk\n"

    def test_modify_the_last_rows(self, server, hs, lp):
        w = hs(wr=True)
        open_index(w, 1, lp, "uid", "id,user_id,body")
        open_index(w, 2, lp, "uid", "body")
        assert w.request("1\tL\t1\t1\t2\t0\tD?\n") == b"0\t3\t7\t1\tg\t5\t1\te\n"
        assert w.request("2\tL\t1\t3\t1\t0\tU\tI\n") == b"0\t1\t1\n"
        assert w.request("1\tL\t1\t1\t10\t0\n") == b"0\t3\t3\t1\tc\t1\t1\ta\n"
        assert dump(server, lp, "id, body", "id") == [
            ("1", "a"), ("2", "b"), ("3", "c"), ("4", "d"), ("6", "f"), ("8", "h"), ("9", "I")]


# ---------------------------------------------------------------------------------------------------
# the binary log: writes are logged as row events


@pytest.fixture(scope="module")
def binlog_server(request, plugin):
    """A private server with the binary log on, in STATEMENT format (tablesocket logs row events anyway).

    Its run directory is kept if any test of the session failed."""
    srv = tsserver.MariaDBServer(plugin, name="binlog",
                                 extra_args=["--log-bin", "--binlog-format=STATEMENT", "--server-id=1"])
    try:
        srv.start()
    except tsserver.ServerError as e:
        srv.stop()
        pytest.fail(f"could not start a {plugin} server with --log-bin: {e}", pytrace=False)
    yield srv
    srv.stop()
    if not request.session.testsfailed:
        shutil.rmtree(srv.rundir, ignore_errors=True)
    else:
        print(f"\n[binlog_server] run directory kept: {srv.rundir}")


class Binlog:
    def __init__(self, srv, table: str):
        self.srv, self.table = srv, table
        self.conns: list[HSConn] = []
        srv.exec_sql(f"DROP TABLE IF EXISTS {table}")
        srv.exec_sql(f"CREATE TABLE {table} (id int primary key, v int, u int, unique key uu(u)) ENGINE=InnoDB")
        (self.file, self.pos, *_), = srv.sql("SHOW MASTER STATUS")

    def hs(self) -> HSConn:
        c = HSConn(self.srv.hs_port_wr)
        self.conns.append(c)
        return c

    def events(self) -> list[tuple]:
        """(type, info) of the events since the start, following rotations."""
        out, file, pos = [], self.file, self.pos
        files = [r[0] for r in self.srv.sql("SHOW BINARY LOGS")]
        for f in files[files.index(file):]:
            q = f"SHOW BINLOG EVENTS IN '{f}'" + (f" FROM {pos}" if f == file else "")
            out += [(r[2], r[5]) for r in self.srv.sql(q)]
        return out

    def transactions(self) -> list[list[tuple]]:
        """Event groups from a BEGIN GTID to the end of that transaction, for our table only."""
        groups, cur = [], None
        for typ, info in self.events():
            if typ == "Gtid":
                cur = [] if info.startswith("BEGIN") else None
                if cur is not None:
                    groups.append(cur)
                continue
            if cur is not None:
                cur.append((re.sub(r"_v\d$", "", typ), info))
        mine = re.compile(rf"\b{re.escape(self.table)}\b")
        return [g for g in groups if any(mine.search(info) for _, info in g)]

    def rows(self) -> list[tuple[str, tuple[str, ...]]]:
        """The row changes logged for our table since the start, decoded by mariadb-binlog:
        (INSERT/UPDATE/DELETE, the after image's values, or the before image's for a DELETE)."""
        out, file, pos = [], self.file, self.pos
        files = [r[0] for r in self.srv.sql("SHOW BINARY LOGS")]
        for f in files[files.index(file):]:
            args = [shutil.which("mariadb-binlog") or "/usr/bin/mariadb-binlog", "--no-defaults", "--base64-output=decode-rows", "-v", f"--socket={self.srv.socket}",
                    "--user=root", "--read-from-remote-server", *([f"--start-position={pos}"] if f == file else []), f]
            r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", timeout=60)
            assert r.returncode == 0, r.stderr[-2000:]
            pat = rf"^### (INSERT INTO|UPDATE|DELETE FROM) `test`\.`{re.escape(self.table)}`\n((?:###   .*\n|### (?:SET|WHERE)\n)+)"
            for m in re.finditer(pat, r.stdout, re.M):
                kind = m.group(1).split()[0]
                body = m.group(2).split("### SET\n")[-1]
                out.append((kind, tuple(re.findall(r"^###   @\d+=(.*)$", body, re.M))))
        return out

    def close(self):
        for c in self.conns:
            c.close()
        self.srv.exec_sql(f"DROP TABLE IF EXISTS {self.table}")


@pytest.mark.tablesocket_only("HS writes never reach the binary log")
class TestBinlog:
    def test_row_events_for_every_kind_of_write(self, binlog_server):
        b = Binlog(binlog_server, "bl1")
        try:
            w = b.hs()
            open_index(w, 1, "bl1", "PRIMARY", "id,v,u")
            open_index(w, 2, "bl1", "PRIMARY", "v")
            assert w.request("1\t+\t3\t1\t10\t1\n") == b"0\t1\n"
            assert w.request("1\t+\t3\t2\t20\t2\n") == b"0\t1\n"
            assert w.request("1\t=\t1\t1\t1\t0\tU\t1\t11\t1\n") == b"0\t1\t1\n"
            assert w.request("2\t=\t1\t2\t1\t0\t+\t5\n") == b"0\t1\t1\n"
            assert w.request("1\t=\t1\t2\t1\t0\tD\n") == b"0\t1\t1\n"
            assert w.request("1\t+=\t3\t3\t30\t3\n") == b"0\t1\n"       # upsert: insert
            assert w.request("1\t+=\t3\t3\t31\t3\n") == b"0\t1\n"       # upsert: update
            kinds = [[typ for typ, _ in g if typ.endswith("_rows") or typ == "Table_map"]
                     for g in b.transactions()]
            assert kinds == [["Table_map", "Write_rows"], ["Table_map", "Write_rows"],
                             ["Table_map", "Update_rows"], ["Table_map", "Update_rows"],
                             ["Table_map", "Delete_rows"], ["Table_map", "Write_rows"],
                             ["Table_map", "Update_rows"]]
            assert binlog_server.sql("SELECT id, v, u FROM bl1 ORDER BY id") == [("1", "11", "1"), ("3", "31", "3")]
        finally:
            b.close()

    def test_failed_requests_leave_no_events(self, binlog_server):
        b = Binlog(binlog_server, "bl2")
        try:
            w = b.hs()
            open_index(w, 1, "bl2", "PRIMARY", "id,v,u")
            open_index(w, 2, "bl2", "PRIMARY", "u")
            # One batch: ok, duplicate, bad value, ok; then a multi-row update failing on its 2nd row.
            w.send(b"1\t+\t3\t1\t10\t1\n1\t+\t3\t1\t10\t5\n1\t+\t3\t2\tbad\t2\n1\t+\t3\t3\t30\t3\n")
            assert [x[:4] for x in w.recv_lines(4)] == [b"0\t1\n", b"1\t1\t", b"1\t1\t", b"0\t1\n"]
            assert w.request("2\t>=\t1\t0\t10\t0\tU\t7\n") == b"1\t1\t121\n"
            assert w.request("1\t=\t1\t9\t1\t0\tD\n") == b"0\t1\t0\n"   # nothing to delete
            assert b.rows() == [("INSERT", ("1", "10", "1")), ("INSERT", ("3", "30", "3"))]
            assert binlog_server.sql("SELECT id, v, u FROM bl2 ORDER BY id") == [("1", "10", "1"), ("3", "30", "3")]
        finally:
            b.close()

    def test_batch_of_pipelined_writes(self, binlog_server):
        b = Binlog(binlog_server, "bl3")
        try:
            w = b.hs()
            open_index(w, 1, "bl3", "PRIMARY", "id,v,u")
            w.send(b"".join(b"1\t+\t3\t%d\t%d\t%d\n" % (i, i, i) for i in range(1, 51)))
            assert w.recv_lines(50) == [b"0\t1\n"] * 50
            assert b.rows() == [("INSERT", (str(i), str(i), str(i))) for i in range(1, 51)]
            # One statement for the pipelined one-row inserts of a batch: a table map per batch
            # (or a few), not one per row, as a multi-row INSERT logs them.
            events = [typ for g in b.transactions() for typ, _ in g]
            assert 1 <= events.count("Table_map") < 10, events
        finally:
            b.close()

    def test_write_batches_commit_with_an_xid_like_sql(self, binlog_server):
        b = Binlog(binlog_server, "bl4")
        try:
            w = b.hs()
            open_index(w, 1, "bl4", "PRIMARY", "id,v")
            for i in range(1, 6):
                assert w.request(f"1\t+\t2\t{i}\t{i}\n") == b"0\t1\n"
            binlog_server.exec_sql("INSERT INTO bl4 (id, v) VALUES (100, 1)")
            ends = [g[-1][0] for g in b.transactions()]
            assert ends == ["Xid"] * 6
        finally:
            b.close()


# ---------------------------------------------------------------------------------------------------
# what a differential fuzz against handlersocket.so found (each answered as HandlerSocket answers it)


class TestAsHandlerSocketReadsTheLine:
    def test_a_write_by_a_number_or_date_key_with_trailing_spaces_changes_that_row(self, server, hs, make_table):
        """'5 ' names 5 (SQL's WHERE a = '5 ' too, with a note): a read found row 5 and a write
        by the same key changed nothing."""
        t = make_table("id int primary key, a int, d date, v varchar(10), key ka (a), key kd (d)")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 5, '2020-01-02', 'x'), (2, 5, '2020-01-03', 'y'), "
                        "(3, 7, '2020-01-02', 'z')")
        w = hs(wr=True)
        open_index(w, 1, t, "ka", "v")
        open_index(w, 2, t, "kd", "id")
        assert w.request("1\t=\t1\t5 \t10\t0\n") == b"0\t1\tx\ty\n"
        assert w.request("1\t=\t1\t5  \t10\t0\tU\tfive\n") == b"0\t1\t2\n"
        assert w.request("2\t=\t1\t2020-01-02 \t10\t0\tD\n") == b"0\t1\t2\n"
        assert dump(server, t, "id, v") == [("2", "five")]

    def test_a_write_by_the_empty_enum_value_changes_the_rows_holding_it(self, server, hs, make_table):
        """'' is an ENUM's error value (index 0), which SQL's WHERE e = '' matches: a read found
        those rows and a write by the same key changed nothing."""
        t = make_table("id int primary key, e enum('a','b') not null, v varchar(10), key ke (e)")
        server.exec_sql(f"SET STATEMENT sql_mode = '' FOR INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 0, 'y'), (3, 0, 'z')")
        w = hs(wr=True)
        open_index(w, 1, t, "ke", "id")
        assert w.request("1\t=\t1\t\t10\t0\n") == b"0\t1\t2\t3\n"
        assert w.request("1\t=\t1\t\t10\t0\tD?\n") == b"0\t1\t2\t3\n"
        assert dump(server, t, "id") == [("1",)]

    def test_a_trailing_tab_after_the_modify_values_is_ignored(self, server, hs, make_table):
        t = make_table("id int primary key, n int, v varchar(10)")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 0, 'a'), (2, 0, 'b')")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "v")
        open_index(w, 2, t, "PRIMARY", "n")
        assert w.request("1\t=\t1\t1\t1\t0\tU\tnew\t\n") == b"0\t1\t1\n"
        assert w.request("2\t=\t1\t2\t1\t0\t+\t5\t\n") == b"0\t1\t1\n"
        assert w.request("2\t=\t1\t2\t1\t0\tU?\t6\t\n") == b"0\t1\t5\n"
        assert dump(server, t) == [("1", "0", "new"), ("2", "6", "b")]

    @pytest.mark.tablesocket_only("HS ignores any value past the index's columns")
    def test_a_value_past_the_columns_is_still_an_error(self, server, hs, make_table):
        t = make_table("id int primary key, v varchar(10)")
        server.exec_sql(f"INSERT INTO {t} VALUES (1, 'a')")
        w = hs(wr=True)
        open_index(w, 1, t, "PRIMARY", "v")
        assert w.request("1\t=\t1\t1\t1\t0\tU\tnew\textra\n") == b"2\t1\ttoomanyvalues\n"
        assert w.request("1\t=\t1\t1\t1\t0\tU\tnew\t\x00\n") == b"2\t1\ttoomanyvalues\n"
        assert dump(server, t) == [("1", "a")]

    def test_a_trailing_tab_after_the_filter_columns_of_an_open_is_ignored(self, hs, make_table):
        t = make_table("id int primary key, a int, key ka (a)")
        w = hs(wr=True)
        assert w.request(f"P\t2\ttest\t{t}\tka\tid\ta\t\n") == b"0\t1\n"
        assert w.request(f"P\t3\ttest\t{t}\tka\tid\t\t\n") == b"0\t1\n"

    def test_an_index_that_is_not_open_is_stmtnum_before_the_rest_of_the_line(self, hs):
        w = hs(wr=True)
        assert w.request("9\t=\t0\n") == b"2\t1\tstmtnum\n"
        assert w.request("9\tX\t1\t1\n") == b"2\t1\tstmtnum\n"
        assert w.request("9\t=\t1\t1\t1\t0\tZ\n") == b"2\t1\tstmtnum\n"
