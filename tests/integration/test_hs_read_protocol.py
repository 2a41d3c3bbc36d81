"""Exact-byte tests of the HandlerSocket READ protocol (the read port).

Every expected byte string here was obtained from MariaDB 10.11's handlersocket.so (Debian 12), which
is the reference: run `TS_PLUGIN=handlersocket pytest tests/integration` to check them against it.
Behaviour that tablesocket changes on purpose is marked `tablesocket_only`.

Conventions: b"\\t" separates tokens, a line ends in b"\\n", NULL is the single byte b"\\x00", and
bytes 0x00-0x0f inside a value are sent as 0x01 followed by the byte + 0x40.
"""

from __future__ import annotations

import socket
import time

import pytest

from tsserver import hs_escape, hs_line

# ---------------------------------------------------------------------------------------------------
# Tables

# Key numbering trap: MariaDB orders a table's keys PRIMARY first, then UNIQUE keys, then the others,
# whatever order the DDL lists them in; HS's numeric index names use that order.  Here:
#   0 = PRIMARY(id), 1 = uc(c) (unique), 2 = ab(a, b)
MAIN_DDL = ("id int not null primary key, a varchar(20), b varchar(20), c int, "
            "key ab(a, b), unique key uc(c)")
MAIN_ROWS = [
    (1, "x", "p", 10),
    (2, "x", "q", 20),
    (3, "y", "p", 30),
    (4, "y", None, None),
    (5, "", None, 50),
    (6, None, "n", 60),
]
# Rows by id as HS returns them with columns id,a,b,c.
R = {
    1: b"1\tx\tp\t10",
    2: b"2\tx\tq\t20",
    3: b"3\ty\tp\t30",
    4: b"4\ty\t\x00\t\x00",
    5: b"5\t\t\x00\t50",
    6: b"6\t\x00\tn\t60",
}


def rows(*ids: int, ncols: int = 4) -> bytes:
    """The reply for a successful find returning rows `ids` (columns id,a,b,c)."""
    body = b"".join(b"\t" + R[i] for i in ids)
    return b"0\t%d%s\n" % (ncols, body)


@pytest.fixture
def main(make_table):
    return make_table(MAIN_DDL, MAIN_ROWS)


@pytest.fixture
def c(hs, main):
    """A read connection with index 1 = PRIMARY (id,a,b,c; filter columns a,b,c) and 2 = ab (id,a,b,c)."""
    conn = hs()
    assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid,a,b,c\ta,b,c\n") == b"0\t1\n"
    assert conn.request(f"P\t2\ttest\t{main}\tab\tid,a,b,c\ta,b,c\n") == b"0\t1\n"
    return conn


# ---------------------------------------------------------------------------------------------------
# open_index


class TestOpenIndex:
    def test_open_by_name_primary_and_empty_name(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid,a\n") == b"0\t1\n"
        assert conn.request(f"P\t2\ttest\t{main}\tab\tid,a\n") == b"0\t1\n"
        # An empty index name means PRIMARY.
        assert conn.request(f"P\t3\ttest\t{main}\t\tid,a\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t3\n") == b"0\t2\t3\ty\n"
        assert conn.request("2\t=\t1\tx\t5\t0\n") == b"0\t2\t1\tx\t2\tx\n"
        assert conn.request("3\t=\t1\t3\n") == b"0\t2\t3\ty\n"

    def test_numeric_index_order_is_primary_unique_others(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\t0\tid\n") == b"0\t1\n"
        assert conn.request(f"P\t2\ttest\t{main}\t1\tid\n") == b"0\t1\n"
        assert conn.request(f"P\t3\ttest\t{main}\t2\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t2\n") == b"0\t1\t2\n"            # PRIMARY(id)
        assert conn.request("2\t=\t1\t30\n") == b"0\t1\t3\n"           # uc(c), declared last
        assert conn.request("3\t=\t1\ty\t5\t0\n") == b"0\t1\t4\t3\n"   # ab(a,b): (y,NULL) < (y,p)

    def test_bad_table_and_db(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}_nope\tPRIMARY\tid\n") == b"1\t1\topen_table\n"
        assert conn.request(f"P\t1\tnodb_xyz\t{main}\tPRIMARY\tid\n") == b"1\t1\topen_table\n"
        # Table names are case-sensitive (lower_case_table_names=0).
        assert conn.request(f"P\t1\ttest\t{main.upper()}\tPRIMARY\tid\n") == b"1\t1\topen_table\n"
        # The connection is still usable.
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t1\n") == b"0\t1\t1\n"

    @pytest.mark.tablesocket_only("HandlerSocket reads names as C strings: a NUL byte ends them")
    def test_a_nul_byte_in_a_name_names_no_table_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\x00zz\t{main}\tPRIMARY\tid\n") == b"1\t1\topen_table\n"
        assert conn.request(f"P\t1\ttest\t{main}\x00zz\tPRIMARY\tid\n") == b"1\t1\topen_table\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\x00zz\tid\n") == b"2\t1\tidxnum\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\x00zz\n") == b"2\t1\tfld\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"

    def test_bad_index(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tnope\tid\n") == b"2\t1\tidxnum\n"
        assert conn.request(f"P\t1\ttest\t{main}\t3\tid\n") == b"2\t1\tidxnum\n"
        assert conn.request(f"P\t1\ttest\t{main}\t99\tid\n") == b"2\t1\tidxnum\n"

    def test_bad_columns(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid,zz\n") == b"2\t1\tfld\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tzz\n") == b"2\t1\tfld\n"
        # A trailing comma makes an empty column name.
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid,\n") == b"2\t1\tfld\n"
        # Bad filter column.
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\tzz\n") == b"2\t1\tfld\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\ta,\n") == b"2\t1\tfld\n"
        # A failed open leaves the id unopened.
        assert conn.request("1\t=\t1\t1\n") == b"2\t1\tstmtnum\n"

    def test_empty_and_duplicate_columns(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\t\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t1\n") == b"0\t0\n"
        assert conn.request("1\t>=\t1\t1\t3\t0\n") == b"0\t0\n"
        # Missing column list entirely.
        assert conn.request(f"P\t2\ttest\t{main}\n") == b"0\t1\n"
        assert conn.request("2\t=\t1\t1\n") == b"0\t0\n"
        # Duplicates and any order.
        assert conn.request(f"P\t3\ttest\t{main}\t\tc,id,c\n") == b"0\t1\n"
        assert conn.request("3\t=\t1\t2\n") == b"0\t3\t20\t2\t20\n"

    def test_reopen_replaces_and_ids_are_per_connection(self, hs, main):
        conn, other = hs(), hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t2\n") == b"0\t1\t2\n"
        assert conn.request(f"P\t1\ttest\t{main}\tab\tb,a\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\ty\n") == b"0\t2\t\x00\ty\n"
        assert other.request("1\t=\t1\t2\n") == b"2\t1\tstmtnum\n"
        # A failed re-open keeps the previous definition.
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tnope\n") == b"2\t1\tfld\n"
        assert conn.request("1\t=\t1\ty\n") == b"0\t2\t\x00\ty\n"

    def test_large_index_id_and_holes(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t200\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("200\t=\t1\t5\n") == b"0\t1\t5\n"
        # Ids below the highest opened one but never opened: stmtnum too.
        assert conn.request("0\t=\t1\t5\n") == b"2\t1\tstmtnum\n"
        assert conn.request("199\t=\t1\t5\n") == b"2\t1\tstmtnum\n"
        assert conn.request("201\t=\t1\t5\n") == b"2\t1\tstmtnum\n"

# ---------------------------------------------------------------------------------------------------
# find


class TestFind:
    def test_eq_primary(self, c):
        assert c.request("1\t=\t1\t1\n") == rows(1)
        assert c.request("1\t=\t1\t4\n") == rows(4)
        assert c.request("1\t=\t1\t99\n") == b"0\t4\n"
        # Limit > 1 on a unique key still gives one row.
        assert c.request("1\t=\t1\t2\t10\t0\n") == rows(2)

    def test_ranges_primary(self, c):
        assert c.request("1\t>\t1\t2\t10\t0\n") == rows(3, 4, 5, 6)
        assert c.request("1\t>=\t1\t2\t10\t0\n") == rows(2, 3, 4, 5, 6)
        # < and <= walk the index backwards.
        assert c.request("1\t<\t1\t4\t10\t0\n") == rows(3, 2, 1)
        assert c.request("1\t<=\t1\t4\t10\t0\n") == rows(4, 3, 2, 1)
        assert c.request("1\t>\t1\t6\t10\t0\n") == b"0\t4\n"
        assert c.request("1\t<\t1\t1\t10\t0\n") == b"0\t4\n"
        # Keys between existing values.
        assert c.request("1\t>=\t1\t0\t2\t0\n") == rows(1, 2)
        assert c.request("1\t<=\t1\t100\t2\t0\n") == rows(6, 5)

    def test_default_limit_is_one(self, c):
        assert c.request("1\t>\t1\t2\n") == rows(3)
        assert c.request("1\t<\t1\t4\n") == rows(3)

    def test_limit_offset(self, c):
        assert c.request("1\t>=\t1\t1\t2\t0\n") == rows(1, 2)
        assert c.request("1\t>=\t1\t1\t2\t3\n") == rows(4, 5)
        assert c.request("1\t>=\t1\t1\t10\t4\n") == rows(5, 6)
        assert c.request("1\t>=\t1\t1\t10\t6\n") == b"0\t4\n"
        assert c.request("1\t>=\t1\t1\t10\t100\n") == b"0\t4\n"
        assert c.request("1\t<=\t1\t6\t2\t1\n") == rows(5, 4)
        # Limit 0 means 1; only a limit (no offset) means offset 0.
        assert c.request("1\t>=\t1\t1\t0\t0\n") == rows(1)
        assert c.request("1\t>=\t1\t1\t3\n") == rows(1, 2, 3)

    def test_multi_column_full_key(self, c):
        assert c.request("2\t=\t2\tx\tq\n") == rows(2)
        assert c.request("2\t=\t2\tx\tr\n") == b"0\t4\n"
        assert c.request("2\t>\t2\tx\tp\t10\t0\n") == rows(2, 4, 3)
        assert c.request("2\t>=\t2\tx\tq\t10\t0\n") == rows(2, 4, 3)
        assert c.request("2\t<\t2\ty\tp\t10\t0\n") == rows(4, 2, 1, 5, 6)
        assert c.request("2\t<=\t2\ty\tp\t10\t0\n") == rows(3, 4, 2, 1, 5, 6)

    def test_multi_column_prefix(self, c):
        # Index ab order: (NULL,n)=6, ('',NULL)=5, (x,p)=1, (x,q)=2, (y,NULL)=4, (y,p)=3
        assert c.request("2\t=\t1\tx\t10\t0\n") == rows(1, 2)
        assert c.request("2\t=\t1\ty\t10\t0\n") == rows(4, 3)
        assert c.request("2\t>\t1\tx\t10\t0\n") == rows(4, 3)
        assert c.request("2\t>=\t1\tx\t10\t0\n") == rows(1, 2, 4, 3)
        assert c.request("2\t<\t1\ty\t10\t0\n") == rows(2, 1, 5, 6)
        assert c.request("2\t<=\t1\tx\t10\t0\n") == rows(2, 1, 5, 6)
        # An empty string key is not NULL.
        assert c.request("2\t=\t1\t\t10\t0\n") == rows(5)
        assert c.request("2\t>=\t1\t\t10\t0\n") == rows(5, 1, 2, 4, 3)

    def test_null_key(self, c):
        # NUL as a key value means NULL: on a nullable column it finds the NULL rows.
        assert c.request("2\t=\t1\t\x00\t10\t0\n") == rows(6)
        assert c.request("2\t=\t2\ty\t\x00\t10\t0\n") == rows(4)
        assert c.request("2\t>\t1\t\x00\t10\t0\n") == rows(5, 1, 2, 4, 3)

    @pytest.mark.handlersocket_only("tablesocket: NULL on a NOT NULL key column matches no row")
    def test_null_key_on_not_null_column_is_empty_string(self, hs, make_table):
        t = make_table("k varchar(10) not null primary key, v varchar(10)",
                       [("", "E"), ("a", "A"), ("b", None)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert conn.request(b"1\t=\t1\t\x00\n") == b"0\t2\t\tE\n"
        assert conn.request(b"1\t=\t1\t\n") == b"0\t2\t\tE\n"
        assert conn.request(b"1\t>\t1\t\x00\t10\t0\n") == b"0\t2\ta\tA\tb\t\x00\n"

    @pytest.mark.handlersocket_only("tablesocket: NULL on a NOT NULL key column matches no row")
    def test_null_key_on_not_null_column_does_not_reuse_the_previous_key(self, hs, make_table):
        t = make_table("k int not null primary key, v varchar(5)", [(0, "zero"), (3, "three"), (5, "five")])
        s = make_table("k varchar(5) not null primary key, v varchar(5)", [("", "E"), ("b", "B")])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert conn.request(f"P\t2\ttest\t{s}\tPRIMARY\tk,v\n") == b"0\t1\n"
        # NULL on a NOT NULL int key is 0, whatever was looked up before.
        assert conn.request(b"1\t=\t1\t\x00\n") == b"0\t2\t0\tzero\n"
        assert conn.request(b"1\t=\t1\t3\n") == b"0\t2\t3\tthree\n"
        assert conn.request(b"1\t=\t1\t\x00\n") == b"0\t2\t0\tzero\n"
        assert conn.request(b"1\t=\t1\t5\n") == b"0\t2\t5\tfive\n"
        assert conn.request(b"1\t>=\t1\t\x00\t10\t0\n") == b"0\t2\t0\tzero\t3\tthree\t5\tfive\n"
        # ... and '' on a NOT NULL string key.
        assert conn.request(b"2\t=\t1\tb\n") == b"0\t2\tb\tB\n"
        assert conn.request(b"2\t=\t1\t\x00\n") == b"0\t2\t\tE\n"

    @pytest.mark.tablesocket_only("NULL on a NOT NULL key column matches no row (HandlerSocket: the empty value)")
    def test_null_key_on_not_null_column_matches_no_row_ts(self, hs, make_table):
        """As SQL's `WHERE k = NULL`: no row of a NOT NULL column holds NULL, so an exact match
        (=, an IN value, L) finds none, whatever was looked up before; a range starts from the
        empty value (0, ''), as HandlerSocket's does."""
        t = make_table("k int not null primary key, v varchar(5)", [(-2, "neg"), (0, "zero"), (3, "three")])
        s = make_table("k varchar(5) not null primary key, v varchar(5)", [("", "E"), ("b", "B")])
        m = make_table("a int not null, b int not null, v varchar(5), primary key (a, b)",
                       [(1, 0, "p"), (1, 1, "q"), (2, 0, "r")])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert conn.request(f"P\t2\ttest\t{s}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert conn.request(f"P\t3\ttest\t{m}\tPRIMARY\ta,b,v\n") == b"0\t1\n"
        assert conn.request(b"1\t=\t1\t0\n") == b"0\t2\t0\tzero\n"
        assert conn.request(b"1\t=\t1\t\x00\n") == b"0\t2\n"
        assert conn.request(b"1\t=\t1\t3\t10\t0\t@\t0\t3\t\x00\t-2\t\x00\n") == b"0\t2\t-2\tneg\n"
        assert conn.request(b"1\t>=\t1\t\x00\t10\t0\n") == b"0\t2\t0\tzero\t3\tthree\n"
        assert conn.request(b"2\t=\t1\t\x00\n") == b"0\t2\n"
        assert conn.request(b"2\t=\t1\t\n") == b"0\t2\t\tE\n"
        assert conn.request(b"3\t=\t2\t1\t\x00\t10\t0\n") == b"0\t3\n"
        assert conn.request(b"3\t=\t2\t\x00\t0\t10\t0\n") == b"0\t3\n"
        assert conn.request(b"3\tL\t1\t\x00\t10\t0\n") == b"0\t3\n"
        assert conn.request(b"3\tL\t1\t1\t10\t0\n") == b"0\t3\t1\t1\tq\t1\t0\tp\n"

    def test_numeric_key_conversion(self, c):
        # Keys are stored into the key column with MariaDB's string->number conversion.
        assert c.request("1\t=\t1\t3abc\n") == rows(3)
        assert c.request("1\t=\t1\t 3\n") == rows(3)
        assert c.request("1\t=\t1\t+3\n") == rows(3)
        assert c.request("1\t=\t1\t2.5\n") == rows(3)   # rounded
        assert c.request("1\t=\t1\t3.4\n") == rows(3)
        assert c.request("1\t=\t1\t3e0\n") == rows(3)
        assert c.request("1\t=\t1\tabc\n") == b"0\t4\n"  # 0
        assert c.request("1\t>=\t1\tabc\n") == rows(1)

    def test_key_errors(self, c):
        assert c.request("1\t=\t2\t1\t2\n") == b"2\t1\tkpnum\n"
        assert c.request("2\t=\t3\tx\tp\tz\n") == b"2\t1\tkpnum\n"
        assert c.request("1\t=\t0\n") == b"2\t1\tklen\n"
        assert c.request("1\t=\t0\t1\t0\n") == b"2\t1\tklen\n"
        assert c.request("1\t=\n") == b"2\t1\tklen\n"
        assert c.request("1\n") == b"2\t1\top\n"

    def test_bad_op(self, c):
        for op in ("!", "=>", ">>", "==", "!=", "<>", "x", "", "=<", ">==", "++", "+==", "l"):
            assert c.request(f"1\t{op}\t1\t1\n") == b"2\t1\top\n", op

    @pytest.mark.handlersocket_only("'+=' (upsert) and 'L' (last in prefix) are tablesocket ops")
    def test_tablesocket_ops_are_bad_ops(self, c):
        assert c.request("1\t+=\t1\t1\n") == b"2\t1\top\n"
        assert c.request("1\tL\t1\t1\n") == b"2\t1\top\n"

    @pytest.mark.tablesocket_only("'+=' is tablesocket's upsert: a write")
    def test_upsert_op_on_read_port_is_readonly(self, c):
        assert c.request("1\t+=\t4\t1\tz\tz\t90\n") == b"2\t1\treadonly\n"
        assert c.request("1\t+=\t1\t1\n") == b"2\t1\treadonly\n"
        assert c.request("1\t>=\t1\t1\t10\t0\n") == rows(1, 2, 3, 4, 5, 6)

    def test_write_ops_on_read_port(self, c):
        assert c.request("1\t+\t4\t9\tz\tz\t90\n") == b"2\t1\treadonly\n"
        assert c.request("1\t=\t1\t1\t1\t0\tD\n") == b"2\t1\treadonly\n"
        assert c.request("1\t=\t1\t1\t1\t0\tU\t1\tx\tp\t10\n") == b"2\t1\treadonly\n"
        assert c.request("1\t=\t1\t1\t1\t0\tF\t=\t0\tx\tD?\n") == b"2\t1\treadonly\n"
        # klen is checked before readonly.
        assert c.request("1\t+\t0\n") == b"2\t1\tklen\n"
        # Nothing was changed.
        assert c.request("1\t>=\t1\t1\t10\t0\n") == rows(1, 2, 3, 4, 5, 6)


# ---------------------------------------------------------------------------------------------------
# IN


class TestIn:
    def test_in_primary(self, c):
        assert c.request("1\t=\t1\t\t10\t0\t@\t0\t3\t5\t1\t3\n") == rows(5, 1, 3)
        # The key value at the IN position is ignored.
        assert c.request("1\t=\t1\t999\t10\t0\t@\t0\t2\t2\t4\n") == rows(2, 4)
        # Missing values are skipped.
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\t4\t9\t3\t77\t1\n") == rows(3, 1)
        # Duplicates are returned again.
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\t3\t2\t2\t2\n") == rows(2, 2, 2)

    def test_in_limit_offset_count_across_values(self, c):
        assert c.request("1\t=\t1\t1\t2\t0\t@\t0\t4\t1\t2\t3\t4\n") == rows(1, 2)
        assert c.request("1\t=\t1\t1\t2\t1\t@\t0\t4\t1\t2\t3\t4\n") == rows(2, 3)
        # Default limit 1 applies.
        assert c.request("1\t=\t1\t1\t1\t0\t@\t0\t3\t4\t5\t6\n") == rows(4)

    def test_in_reads_one_row_per_value(self, c):
        # With IN, each value is one index lookup: '=' on a non-unique prefix gives its first row only.
        assert c.request("2\t=\t1\t\t10\t0\t@\t0\t2\tx\ty\n") == rows(1, 4)
        # '>' gives the first row after each value.
        assert c.request("1\t>\t1\t1\t10\t0\t@\t0\t3\t1\t9\t2\n") == rows(2, 3)

    def test_in_second_key_part(self, c):
        assert c.request("2\t=\t2\tx\t\t10\t0\t@\t1\t3\tq\tz\tp\n") == rows(2, 1)

    def test_in_zero_values(self, c):
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\t0\n") == b"2\t1\tinvalueslen\n"
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\n") == b"2\t1\tinvalueslen\n"

    def test_in_with_filter(self, c):
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\t4\t1\t2\t3\t4\tF\t=\t1\tp\n") == rows(1, 3)


# ---------------------------------------------------------------------------------------------------
# filters (filter columns of c: 0 = a, 1 = b, 2 = c)


class TestFilters:
    ALL = "1\t>=\t1\t1\t10\t0"

    def q(self, c, flt: str) -> bytes:
        return c.request(f"{self.ALL}\t{flt}\n")

    def test_f_each_op(self, c):
        assert self.q(c, "F\t=\t2\t30") == rows(3)
        assert self.q(c, "F\t!=\t2\t30") == rows(1, 2, 4, 5, 6)
        assert self.q(c, "F\t<\t2\t30") == rows(1, 2, 4)      # NULL < anything
        assert self.q(c, "F\t<=\t2\t30") == rows(1, 2, 3, 4)
        assert self.q(c, "F\t>\t2\t30") == rows(5, 6)
        assert self.q(c, "F\t>=\t2\t30") == rows(3, 5, 6)
        assert self.q(c, "F\t=\t0\tx") == rows(1, 2)
        assert self.q(c, "F\t>\t0\tx") == rows(3, 4)
        assert self.q(c, "F\t=\t0\t") == rows(5)

    def test_f_null_value(self, c):
        # NULL compares equal to NULL and below every value.
        assert self.q(c, "F\t=\t1\t\x00") == rows(4, 5)
        assert self.q(c, "F\t!=\t1\t\x00") == rows(1, 2, 3, 6)
        assert self.q(c, "F\t>\t1\t\x00") == rows(1, 2, 3, 6)
        assert self.q(c, "F\t<\t1\t\x00") == b"0\t4\n"
        assert self.q(c, "F\t<=\t1\t\x00") == rows(4, 5)
        assert self.q(c, "F\t>=\t1\t\x00") == rows(1, 2, 3, 4, 5, 6)

    def test_w_stops_at_first_miss(self, c):
        assert self.q(c, "W\t<\t2\t25") == rows(1, 2)
        assert self.q(c, "W\t=\t0\tx") == rows(1, 2)
        assert self.q(c, "W\t=\t0\ty") == b"0\t4\n"
        assert c.request("1\t<=\t1\t6\t10\t0\tW\t>\t2\t25\n") == rows(6, 5)

    def test_multiple_filters_are_anded_in_order(self, c):
        assert self.q(c, "F\t=\t0\tx\tF\t>\t2\t10") == rows(2)
        assert self.q(c, "F\t=\t0\ty\tW\t<\t2\t25") == b"0\t4\n"      # 3 stops it
        assert self.q(c, "F\t=\t0\tx\tW\t<\t2\t25") == rows(1, 2)
        # A row failing an F filter before the W is skipped without evaluating the W.
        assert self.q(c, "F\t!=\t0\ty\tW\t<\t2\t55") == rows(1, 2, 5)

    def test_limit_offset_count_only_passing_rows(self, c):
        assert c.request("1\t>=\t1\t1\t2\t1\tF\t!=\t0\tx\n") == rows(4, 5)
        assert c.request("1\t>=\t1\t1\t1\t0\tF\t=\t0\ty\n") == rows(3)

    def test_filter_value_conversion(self, c):
        # The value is stored into the column's type first: "30abc" -> 30, "abc" -> 0.
        assert self.q(c, "F\t=\t2\t30abc") == rows(3)
        assert self.q(c, "F\t>\t2\tabc") == rows(1, 2, 3, 5, 6)

    def test_filter_errors(self, c):
        assert self.q(c, "F\t=\t3\tx") == b"2\t1\tfilterfld\n"
        assert self.q(c, "F\t=\t99\tx") == b"2\t1\tfilterfld\n"
        assert self.q(c, "FF\t=\t0\tx") == b"2\t1\tfiltertype\n"
        assert self.q(c, "W\t=\t0\tx\tFW\t=\t0\tx") == b"2\t1\tfiltertype\n"

    def test_no_filter_columns_opened(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("1\t>=\t1\t1\t10\t0\tF\t=\t0\tx\n") == b"2\t1\tfilterfld\n"

    def test_filter_on_blob_column(self, hs, make_table):
        t = make_table("id int primary key, tx text, bl blob, v varchar(5)",
                       [(1, "a", b"a", "a"), (2, "b", b"b", "b")])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid\ttx,bl,v\n") == b"0\t1\n"
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t=\t0\ta\n") == b"2\t1\tfilterblob\n"
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t=\t1\ta\n") == b"2\t1\tfilterblob\n"
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t=\t2\tb\n") == b"0\t1\t2\n"

# ---------------------------------------------------------------------------------------------------
# encoding of values


class TestEncoding:
    @pytest.fixture
    def bin_table(self, make_table):
        data = [(bytes([i]), b"a" + bytes([i]) + b"z") for i in range(0x20)]
        data += [(b"\x7f", b"\x80\xff"), (b"empty", b""), (b"null", None),
                 (b"\x01\x02", b"\t\n\r"), (b"nu", b"N"), (b"?", b"Q")]
        return make_table("k varbinary(20) not null primary key, v varbinary(40)", data)

    def test_bytes_below_0x10_are_escaped(self, hs, bin_table):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{bin_table}\tPRIMARY\tk,v\n") == b"0\t1\n"
        got = conn.request(b"1\t>=\t1\t\t100\t0\n")
        exp = [b"0", b"2"]
        for k, v in sorted([(bytes([i]), b"a" + bytes([i]) + b"z") for i in range(0x20)]
                           + [(b"\x7f", b"\x80\xff"), (b"empty", b""), (b"null", None),
                              (b"\x01\x02", b"\t\n\r"), (b"nu", b"N"), (b"?", b"Q")]):
            exp += [hs_escape(k), hs_escape(v)]
        assert got == b"\t".join(exp) + b"\n"
        # Spot checks of the exact bytes.
        assert b"\t\x01@\ta\x01@z\t" in got            # 0x00
        assert b"\t\x01A\x01B\t\x01I\x01J\x01M\t" in got  # 0x01 0x02 / TAB LF CR
        assert b"\t\x0f" not in got and b"\t\x01O\ta\x01Oz\t" in got  # 0x0f
        assert b"\t\x10\ta\x10z\t" in got              # 0x10: not escaped
        assert got.endswith(b"\t\x7f\t\x80\xff\n")       # high bytes as they are
        assert b"\tempty\t\t" in got                   # empty string: nothing between tabs
        assert b"\tnull\t\x00\t" in got                # NULL: a single NUL byte

    def test_escaped_keys(self, hs, bin_table):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{bin_table}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert conn.request(b"1\t=\t1\t\x01\x40\n") == b"0\t2\t\x01@\ta\x01@z\n"
        assert conn.request(b"1\t=\t1\t\x01\x49\n") == b"0\t2\t\x01I\ta\x01Iz\n"
        assert conn.request(b"1\t=\t1\t\x01\x41\x01\x42\n") == b"0\t2\t\x01A\x01B\t\x01I\x01J\x01M\n"
        assert conn.request(b"1\t=\t1\t\x7f\n") == b"0\t2\t\x7f\t\x80\xff\n"
        # Unescaped control bytes (other than TAB/LF) in a key are taken as they are.
        assert conn.request(b"1\t=\t1\t\x05\n") == b"0\t2\t\x01E\ta\x01Ez\n"
        assert conn.request(b"1\t=\t1\t\x1f\n") == b"0\t2\t\x1f\ta\x1fz\n"

    def test_empty_vs_null_results(self, hs, make_table):
        t = make_table("id int primary key, s varchar(10), n varchar(10), z int",
                       [(1, "", None, 0), (2, None, "", None)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid,s,n,z\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t1\n") == b"0\t4\t1\t\t\x00\t0\n"
        assert conn.request("1\t=\t1\t2\n") == b"0\t4\t2\t\x00\t\t\x00\n"
        assert conn.request("1\t>=\t1\t1\t5\t0\n") == b"0\t4\t1\t\t\x00\t0\t2\t\x00\t\t\x00\n"

    def test_value_formatting_of_types(self, server, hs, make_table):
        t = make_table(
            "id int primary key, f float, d double, dc decimal(10,2), dt datetime, da date, "
            "ti time, y year, e enum('a','b'), s set('x','y'), bt bit(8), bi bigint unsigned, "
            "tx text, bl blob, ch char(5), bn binary(4), u varchar(10) charset utf8mb4, "
            "dt6 datetime(6), neg int",
            [(1, 1.5, 0.1, 3.1, "2011-01-02 03:04:05", "2011-01-02", "-01:02:03", 2011, "b",
              "x,y", 65, 18446744073709551615, "tx", b"\x00\x01\xff", "ab", b"a", "h\u00e9",
              "2011-01-02 03:04:05.123", -7)])
        server.exec_sql(f"INSERT INTO {t} (id) VALUES (2)")
        conn = hs()
        cols = "id,f,d,dc,dt,da,ti,y,e,s,bt,bi,tx,bl,ch,bn,u,dt6,neg"
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\t{cols}\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t1\n") == (
            b"0\t19\t1\t1.5\t0.1\t3.10\t2011-01-02 03:04:05\t2011-01-02\t-01:02:03\t2011\tb\tx,y\t"
            b"A\t18446744073709551615\ttx\t\x01@\x01A\xff\tab\ta\x01@\x01@\x01@\th\xc3\xa9\t"
            b"2011-01-02 03:04:05.123000\t-7\n")
        assert conn.request("1\t=\t1\t2\n") == b"0\t19\t2" + b"\t\x00" * 18 + b"\n"


# ---------------------------------------------------------------------------------------------------
# framing: pipelining, CRLF, commands


class TestFraming:
    def test_pipelining_many_requests_in_one_send(self, c):
        reqs, exp = [], []
        for i in range(300):
            k = i % 8
            reqs.append(f"1\t=\t1\t{k}\n".encode())
            exp.append(rows(k) if 1 <= k <= 6 else b"0\t4\n")
            if i % 50 == 7:
                reqs.append(b"9\t=\t1\t1\n")
                exp.append(b"2\t1\tstmtnum\n")
        c.send(b"".join(reqs))
        got = c.recv_lines(len(reqs), timeout=20)
        assert got == exp

    def test_pipelined_open_and_find(self, hs, main):
        conn = hs()
        data = (f"P\t1\ttest\t{main}\tPRIMARY\tid,a,b,c\n"
                f"1\t=\t1\t1\n"
                f"P\t1\ttest\t{main}\tPRIMARY\tid\n"
                f"1\t>\t1\t4\t5\t0\n"
                f"P\t1\ttest\tnope\tPRIMARY\tid\n"
                f"1\t=\t1\t2\n").encode()
        assert conn.request(data) == (b"0\t1\n" + rows(1) + b"0\t1\n0\t1\t5\t6\n"
                                      b"1\t1\topen_table\n0\t1\t2\n")

    def test_request_split_across_sends(self, c):
        req = b"1\t>=\t1\t2\t2\t0\n1\t=\t1\t6\n"
        for i in range(len(req)):
            c.send(req[i:i + 1])
            time.sleep(0.002)
        assert c.recv_lines(2) == [rows(2, 3), rows(6)]

    def test_large_request_line(self, c):
        vals = "\t".join(str(i % 7 + 1) for i in range(5000))
        assert c.request(f"1\t=\t1\t1\t3\t0\t@\t0\t5000\t{vals}\n") == rows(1, 2, 3)

    def test_crlf(self, c):
        assert c.request(b"1\t=\t1\t3\r\n") == rows(3)
        assert c.request(b"1\t>=\t1\t3\t2\t0\r\n") == rows(3, 4)
        # Only one CR before the LF is removed; another one stays in the last token.
        assert c.request(b"P\t3\ttest\tx\tPRIMARY\tid\r\r\n") == b"1\t1\topen_table\n"
        # CRLF and LF can be mixed in one send; replies always end in LF only.
        assert c.request(b"1\t=\t1\t1\r\n1\t=\t1\t2\n\r\n") == rows(1) + rows(2) + b"2\t1\tcmd\n"

    def test_cr_inside_key_is_data(self, hs, make_table):
        t = make_table("k varbinary(10) not null primary key", [(b"a\r",), (b"a",)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk\n") == b"0\t1\n"
        assert conn.request(b"1\t=\t1\ta\r\r\n") == b"0\t1\ta\x01M\n"
        assert conn.request(b"1\t=\t1\ta\r\n") == b"0\t1\ta\n"

    def test_unknown_index_id(self, c):
        assert c.request("7\t=\t1\t1\n") == b"2\t1\tstmtnum\n"
        assert c.request("4294967295\t=\t1\t1\n") == b"2\t1\tstmtnum\n"
        assert c.request("0\t=\t1\t1\n") == b"2\t1\tstmtnum\n"

    def test_bad_commands(self, c):
        assert c.request(b"\n") == b"2\t1\tcmd\n"
        assert c.request(b"\r\n") == b"2\t1\tcmd\n"
        assert c.request(b"\t1\t=\t1\t1\n") == b"2\t1\tcmd\n"
        assert c.request(b"x\t=\t1\t1\n") == b"2\t1\tcmd\n"
        assert c.request(b"PP\t1\n") == b"2\t1\tcmd\n"
        assert c.request(b"p\t1\ttest\tt\tPRIMARY\tid\n") == b"2\t1\tcmd\n"
        assert c.request(b" 1\t=\t1\t1\n") == b"2\t1\tcmd\n"
        assert c.request(b"hello world\n") == b"2\t1\tcmd\n"
        # Still fine afterwards.
        assert c.request("1\t=\t1\t1\n") == rows(1)

    def test_auth_without_secret(self, c, main):
        # No secret configured: only the empty key is "right"; nothing needs auth anyway.
        assert c.request("A\t1\twrong\n") == b"3\t1\tunauth\n"
        # ... and a wrong key locks nothing: requests go on (HandlerSocket checks only with a secret)
        assert c.request("1\t=\t1\t1\n") == rows(1)
        assert c.request(f"P\t9\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        # (types 2-4 are tablesocket's account logins, docs/security.md; 9 is unknown to both)
        assert c.request("A\t9\twrong\n") == b"3\t1\tauthtype\n"
        assert c.request("A\t1\t\n") == b"0\t1\n"
        assert c.request("A\t1\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == rows(1)

    def test_connections_are_independent(self, hs, main):
        a, b = hs(), hs()
        assert a.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert b.request(f"P\t1\ttest\t{main}\tPRIMARY\tc\n") == b"0\t1\n"
        a.send(b"1\t=\t1\t2\n")
        b.send(b"1\t=\t1\t2\n")
        assert b.recv_line() == b"0\t1\t20\n"
        assert a.recv_line() == b"0\t1\t2\n"

    def test_sql_changes_are_visible(self, server, c, main):
        assert c.request("1\t=\t1\t7\n") == b"0\t4\n"
        server.exec_sql(f"INSERT INTO {main} VALUES (7, 'z', 'z', 70)")
        assert c.request("1\t=\t1\t7\n") == b"0\t4\t7\tz\tz\t70\n"
        server.exec_sql(f"UPDATE {main} SET a = 'w' WHERE id = 7")
        assert c.request("1\t=\t1\t7\n") == b"0\t4\t7\tw\tz\t70\n"
        server.exec_sql(f"DELETE FROM {main} WHERE id = 7")
        assert c.request("1\t=\t1\t7\n") == b"0\t4\n"

    def test_myisam_table(self, hs, make_table):
        t = make_table("id int primary key, v varchar(5), key v(v)", [(1, "a"), (2, "b"), (3, "b")],
                       engine="MyISAM")
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tv\tid,v\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\tb\t10\t0\n") == b"0\t2\t2\tb\t3\tb\n"
        assert conn.request("1\t<\t1\tb\t10\t0\n") == b"0\t2\t1\ta\n"
        assert conn.request("1\t=\t1\ta\t10\t0\t@\t0\t3\tb\tz\ta\n") == b"0\t2\t2\tb\t1\ta\n"


# ---------------------------------------------------------------------------------------------------
# HS quirks: odd but real handlersocket.so behaviour, one per test.  Where tablesocket deliberately
# answers malformed or odd input differently (normally with a clear error from its parser), the HS
# test is marked handlersocket_only and is followed by a tablesocket_only counterpart (`..._ts`)
# asserting tablesocket's exact reply.

HS_LAX = "HS accepts malformed input here; tablesocket answers it with a clear error"


class TestHSQuirks:
    @pytest.mark.handlersocket_only("tablesocket matches index names case-insensitively, like SQL")
    def test_index_names_are_case_sensitive(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tprimary\tid\n") == b"2\t1\tidxnum\n"
        assert conn.request(f"P\t1\ttest\t{main}\tAB\tid\n") == b"2\t1\tidxnum\n"

    @pytest.mark.tablesocket_only("index names are matched case-insensitively, like SQL")
    def test_index_names_are_case_insensitive_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tprimary\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t3\n") == b"0\t1\t3\n"
        assert conn.request(f"P\t2\ttest\t{main}\tAB\tid\n") == b"0\t1\n"
        assert conn.request("2\t=\t1\tx\t5\t0\n") == b"0\t1\t1\t2\n"
        assert conn.request(f"P\t3\ttest\t{main}\tUc\tid\n") == b"0\t1\n"
        assert conn.request("3\t=\t1\t30\n") == b"0\t1\t3\n"

    @pytest.mark.handlersocket_only("tablesocket matches column names case-insensitively, like SQL")
    def test_column_names_are_case_sensitive(self, hs, main):
        # Unlike SQL.
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tID\n") == b"2\t1\tfld\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\tA\n") == b"2\t1\tfld\n"

    @pytest.mark.tablesocket_only("column names are matched case-insensitively, like SQL")
    def test_column_names_are_case_insensitive_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tID\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t3\n") == b"0\t1\t3\n"
        assert conn.request(f"P\t2\ttest\t{main}\tPRIMARY\tiD,B\tA\n") == b"0\t1\n"
        assert conn.request("2\t>=\t1\t1\t10\t0\tF\t=\t0\ty\n") == b"0\t2\t3\tp\t4\t\x00\n"
        # Still an error for a name that does not exist in any case.
        assert conn.request(f"P\t3\ttest\t{main}\tPRIMARY\tIDX\n") == b"2\t1\tfld\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_numeric_index_name_is_atoi(self, hs, main):
        # An index name starting with a digit is read with atoi(): trailing junk is ignored.
        conn = hs()
        assert conn.request(f"P\t4\ttest\t{main}\t1junk\tid\n") == b"0\t1\n"
        assert conn.request("4\t=\t1\t30\n") == b"0\t1\t3\n"

    @pytest.mark.tablesocket_only("a numeric index name must be all digits")
    def test_numeric_index_name_with_junk_is_idxnum_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t4\ttest\t{main}\t1junk\tid\n") == b"2\t1\tidxnum\n"
        assert conn.request("4\t=\t1\t30\n") == b"2\t1\tstmtnum\n"
        assert conn.request(f"P\t4\ttest\t{main}\t1\tid\n") == b"0\t1\n"
        assert conn.request("4\t=\t1\t30\n") == b"0\t1\t3\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_bare_open_index(self, hs):
        # "P" alone: empty db and table names.
        conn = hs()
        assert conn.request("P\n") == b"1\t1\topen_table\n"

    @pytest.mark.tablesocket_only("a short P request names what is missing")
    def test_bare_open_index_ts(self, hs):
        conn = hs()
        assert conn.request("P\n") == b"2\t1\tindexid\n"
        assert conn.request("P\t1\n") == b"2\t1\tdbname\n"
        assert conn.request("P\t1\ttest\n") == b"2\t1\ttablename\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_index_ids_skip_non_digits(self, hs, main):
        conn = hs()
        assert conn.request(f"P\tx1y\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("1\t=\t1\t3\n") == b"0\t1\t3\n"
        assert conn.request("1a\t=\t1\t3\n") == b"0\t1\t3\n"

    @pytest.mark.tablesocket_only("index ids must be all digits")
    def test_index_ids_must_be_digits_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\tx1y\ttest\t{main}\tPRIMARY\tid\n") == b"2\t1\tindexid\n"
        assert conn.request("1\t=\t1\t3\n") == b"2\t1\tstmtnum\n"
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        assert conn.request("1a\t=\t1\t3\n") == b"2\t1\tindexid\n"
        assert conn.request("1\t=\t1\t3\n") == b"0\t1\t3\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_numbers_skip_non_digits(self, c):
        # limit/offset/vlen/IN counts are read skipping every non-digit: "-2" is 2, "1x0" is 10.
        assert c.request("1\t>=\t1\t1\t-2\t0\n") == rows(1, 2)
        assert c.request("1\t>=\t1\t1\t1x0\t0\n") == rows(1, 2, 3, 4, 5, 6)
        assert c.request("1\t>=\t1\t1\t2\t+1\n") == rows(2, 3)
        assert c.request("1\t>=\tx1\t5\t9\t0\n") == rows(5, 6)

    @pytest.mark.tablesocket_only("numbers must be all digits")
    def test_numbers_must_be_digits_ts(self, c):
        # A limit/offset that is not all digits is not a limit: it is read as a modify op; a
        # negative number is a limit (or offset) out of range.
        assert c.request("1\t>=\t1\t1\t-2\t0\n") == b"2\t1\tlimit\n"
        assert c.request("1\t>=\t1\t1\t2\t-1\n") == b"2\t1\toffset\n"
        assert c.request("1\t>=\t1\t1\t1x0\t0\n") == b"2\t1\tmodop\n"
        assert c.request("1\t>=\t1\t1\t2\t+1\n") == b"2\t1\tmodop\n"
        assert c.request("1\t>=\tx1\t5\t9\t0\n") == b"2\t1\tklen\n"
        assert c.request("1\t=\t1\t1\t10\t0\t@\t0\tx2\t1\t2\n") == b"2\t1\tinvalueslen\n"
        assert c.request("1\t=\t1\t1\t10\t0\t@\tx0\t2\t1\t2\n") == b"2\t1\tincol\n"
        assert c.request("1\t>=\t1\t1\t10\t0\tF\t=\tx2\t30\n") == b"2\t1\tfilterfld\n"
        assert c.request("1\t>=\t1\t1\t2\t1\n") == rows(2, 3)

    def test_trailing_tabs_are_ignored(self, c):
        # Empty tokens that end the line after the values, the limit, the offset or a filter: a
        # client's trailing tab. (An empty token followed by more is still an error here.)
        assert c.request("1\t>=\t1\t1\t2\t\n") == rows(1, 2)
        assert c.request("1\t>=\t1\t1\t2\t1\t\n") == rows(2, 3)
        assert c.request("1\t>=\t1\t1\t2\t1\t\t\t\n") == rows(2, 3)
        assert c.request("1\t=\t1\t1\t\t\n") == rows(1)
        assert c.request("1\t>=\t1\t1\t10\t0\tF\t=\t2\t30\t\n") == rows(3)

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_fewer_key_values_than_vlen(self, c):
        # Missing values are empty strings.
        assert c.request("2\t=\t2\tx\n") == b"0\t4\n"
        assert c.request("2\t>=\t2\tx\n") == rows(1)

    @pytest.mark.tablesocket_only("vlen must not exceed the values sent")
    def test_fewer_key_values_than_vlen_is_klen_ts(self, c):
        assert c.request("2\t=\t2\tx\n") == b"2\t1\tklen\n"
        assert c.request("2\t>=\t2\tx\n") == b"2\t1\tklen\n"
        assert c.request("2\t>=\t3\tx\ty\n") == b"2\t1\tklen\n"

    @pytest.mark.handlersocket_only("tablesocket has no 'S' op")
    def test_sql_op(self, c):
        # Op 'S' is accepted and answered "not implemented".
        assert c.request("1\tS\t1\tselect 1\n") == b"2\t1\tnotimpl\n"

    @pytest.mark.tablesocket_only("no 'S' op: an unknown op")
    def test_sql_op_is_unknown_ts(self, c):
        assert c.request("1\tS\t1\tselect 1\n") == b"2\t1\top\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_unknown_modify_op_on_read_port_is_readonly(self, c):
        # The read-only check comes before the modify-op check.
        assert c.request("1\t=\t1\t1\t1\t0\tX\n") == b"2\t1\treadonly\n"

    @pytest.mark.tablesocket_only("the parser rejects an unknown modify op before the port is considered")
    def test_unknown_modify_op_on_read_port_is_modop_ts(self, c):
        assert c.request("1\t=\t1\t1\t1\t0\tX\n") == b"2\t1\tmodop\n"
        assert c.request("1\t=\t1\t1\t1\t0\tU!\n") == b"2\t1\tmodop\n"
        assert c.request("1\t=\t1\t1\t1\t0\tDD\n") == b"2\t1\tmodop\n"
        # A well-formed one is still readonly here.
        assert c.request("1\t=\t1\t1\t1\t0\tD\n") == b"2\t1\treadonly\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_token_after_filters_is_a_modify_op(self, c):
        # Anything after the options that is not F/W is taken as a modify op -> readonly here.
        assert c.request("1\t>=\t1\t1\t10\t0\tX\n") == b"2\t1\treadonly\n"
        assert c.request("1\t>=\t1\t1\t10\t0\tF\t=\t0\tx\tZ\t1\n") == b"2\t1\treadonly\n"

    @pytest.mark.tablesocket_only("a token after the filters that is no modify op is modop")
    def test_token_after_filters_is_modop_ts(self, c):
        assert c.request("1\t>=\t1\t1\t10\t0\tX\n") == b"2\t1\tmodop\n"
        assert c.request("1\t>=\t1\t1\t10\t0\tF\t=\t0\tx\tZ\t1\n") == b"2\t1\tmodop\n"

    @pytest.mark.handlersocket_only("tablesocket reads a NUL IN value as NULL, like a NUL key value")
    def test_in_values_are_never_null(self, c):
        # A NUL IN value is the 1-byte string 0x00, not NULL (a NUL key value is NULL).
        assert c.request("2\t=\t2\ty\t\x00\t10\t0\n") == rows(4)
        assert c.request("2\t=\t2\ty\t\t10\t0\t@\t1\t2\tp\t\x00\n") == rows(3)

    @pytest.mark.tablesocket_only("a NUL IN value is NULL, like a NUL key value")
    def test_in_value_nul_is_null_ts(self, c):
        assert c.request("2\t=\t2\ty\t\x00\t10\t0\n") == rows(4)
        assert c.request("2\t=\t2\ty\t\t10\t0\t@\t1\t2\tp\t\x00\n") == rows(3, 4)
        assert c.request("2\t=\t1\t\t10\t0\t@\t0\t2\t\x00\tx\n") == rows(6, 1)

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_in_column_beyond_key_values_repeats_the_lookup(self, c):
        # An IN column >= vlen is never substituted: the same lookup is repeated once per value.
        assert c.request("1\t=\t1\t1\t10\t0\t@\t5\t3\ta\tb\tc\n") == rows(1, 1, 1)

    @pytest.mark.tablesocket_only("the IN column must be one of the key values sent")
    def test_in_column_beyond_key_values_is_invalueskp_ts(self, c):
        assert c.request("1\t=\t1\t1\t10\t0\t@\t5\t3\ta\tb\tc\n") == b"2\t1\tinvalueskp\n"
        assert c.request("1\t=\t1\t1\t10\t0\t@\t1\t3\ta\tb\tc\n") == b"2\t1\tinvalueskp\n"
        assert c.request("2\t=\t1\tx\t10\t0\t@\t1\t2\tp\tq\n") == b"2\t1\tinvalueskp\n"

    @pytest.mark.handlersocket_only(HS_LAX)
    def test_unknown_filter_ops(self, c):
        ALL = "1\t>=\t1\t1\t10\t0"
        # One-char unknown ops and two-char ops ending in '=' other than >= <= != are always false.
        assert c.request(f"{ALL}\tF\t!\t2\t30\n") == b"0\t4\n"
        assert c.request(f"{ALL}\tF\t==\t2\t30\n") == b"0\t4\n"
        assert c.request(f"{ALL}\tF\tx\t2\t30\n") == b"0\t4\n"
        assert c.request(f"{ALL}\tW\t==\t2\t30\n") == b"0\t4\n"
        # Any other op (two chars not ending in '=', or longer) is always TRUE.
        assert c.request(f"{ALL}\tF\t<>\t2\t30\n") == rows(1, 2, 3, 4, 5, 6)
        assert c.request(f"{ALL}\tF\t>>\t2\t30\n") == rows(1, 2, 3, 4, 5, 6)
        assert c.request(f"{ALL}\tF\t!==\t2\t30\n") == rows(1, 2, 3, 4, 5, 6)

    @pytest.mark.tablesocket_only("an unknown filter op is filterop")
    def test_unknown_filter_ops_are_filterop_ts(self, c):
        ALL = "1\t>=\t1\t1\t10\t0"
        for f, op in (("F", "!"), ("F", "=="), ("F", "x"), ("W", "=="), ("F", "<>"), ("F", ">>"),
                      ("F", "!=="), ("F", ""), ("W", "=<")):
            assert c.request(f"{ALL}\t{f}\t{op}\t2\t30\n") == b"2\t1\tfilterop\n", (f, op)
        # A bad op in a later filter fails the whole request too.
        assert c.request(f"{ALL}\tF\t=\t0\tx\tF\t<>\t2\t30\n") == b"2\t1\tfilterop\n"
        assert c.request(f"{ALL}\tF\t!=\t2\t30\n") == rows(1, 2, 4, 5, 6)

    def test_null_filter_on_blob_column_is_accepted(self, hs, make_table):
        t = make_table("id int primary key, tx text", [(1, "a"), (2, None)])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tid\ttx\n") == b"0\t1\n"
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t=\t0\ta\n") == b"2\t1\tfilterblob\n"
        # A NULL value is not stored into the column, so the BLOB check is not reached.
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t!=\t0\t\x00\n") == b"0\t1\t1\n"
        assert conn.request("1\t>=\t1\t0\t10\t0\tF\t=\t0\t\x00\n") == b"0\t1\t2\n"

    @pytest.fixture
    def kv(self, hs, make_table):
        # The last three rows hold what tablesocket decodes the bad escapes below to.
        t = make_table("k varbinary(10) not null primary key, v varchar(5)",
                       [(b"nu", "N"), (b"?", "Q"), (b"n", "n"),
                        (b"nu\xf0ll", "W"), (b"nu\x01", "T"), (b"n\xc1A", "C")])
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
        return conn

    def test_unescape_any_byte_from_0x40(self, kv):
        # 0x01 followed by any byte >= 0x40 decodes to byte-0x40: 0x01 0x7f is '?'.
        assert kv.request(b"1\t=\t1\t\x01\x7f\n") == b"0\t2\t?\tQ\n"

    @pytest.mark.handlersocket_only("tablesocket decodes a bad escape (wrapping) instead of truncating")
    def test_unescape_bad_escape_truncates(self, kv):
        # 0x01 followed by a byte < 0x40, or at the end, cuts the value there.
        assert kv.request(b"1\t=\t1\tnu\x01\x30ll\n") == b"0\t2\tnu\tN\n"
        assert kv.request(b"1\t=\t1\tnu\x01\n") == b"0\t2\tnu\tN\n"
        assert kv.request(b"1\t=\t1\tn\x01\x01\x41\n") == b"0\t2\tn\tn\n"

    @pytest.mark.tablesocket_only("a malformed escape fails the request (HandlerSocket cuts the value)")
    def test_a_malformed_escape_is_refused(self, kv, hs, server):
        # 0x01 before a byte < 0x40, or at the end of a value, is `2 1 escape`: neither the cut value
        # (HandlerSocket's) nor a wrapped byte (tablesocket's before) is looked up or written.
        for line in (b"1\t=\t1\tnu\x01\x30ll\n", b"1\t=\t1\tnu\x01\n", b"1\t=\t1\tn\x01\x01\x41\n",
                     b"1\t=\t1\tnu\t1\t0\tF\t=\t1\tN\x01\n", b"1\t=\t1\tn\t1\t0\t@\t0\t2\tn\tnu\x01\n"):
            assert kv.request(line) == b"2\t1\tescape\n", line
        assert kv.request(b"1\t=\t1\tnu\n") == b"0\t2\tnu\tN\n"  # the connection goes on
        w = hs(wr=True)
        t = server.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'test' "
                       "AND table_name LIKE '%malformed_escape%'")[0][0]
        assert w.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
        assert w.request(b"1\t+\t2\tnew\tab\x01 c\n") == b"2\t1\tescape\n"
        assert w.request(b"1\t=\t1\tnu\t1\t0\tU\tnu\tx\x01\n") == b"2\t1\tescape\n"
        assert server.sql(f"SELECT k, v FROM test.{t} WHERE k IN ('new', 'nu')") == [("nu", "N")]

    @pytest.mark.handlersocket_only("tablesocket has no in-band control bytes")
    def test_slash_closes_the_connection(self, hs, main):
        # '/' as the first byte of what one read() returns: the connection is closed, no reply.
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        conn.send(b"/\n")
        assert conn.is_closed_by_peer(timeout=3)
        assert conn.buf == b""

    @pytest.mark.tablesocket_only("no in-band control bytes: '/' and 'Q' are bad commands")
    def test_slash_and_q_are_bad_commands_ts(self, hs, main):
        conn = hs()
        assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
        for line in (b"/\n", b"Q\n", b"/\t1\n", b"Q\t1\n"):
            assert conn.request(line) == b"2\t1\tcmd\n", line
            assert conn.request("1\t=\t1\t1\n") == b"0\t1\t1\n"
        # Also as the first bytes of a fresh connection's first read.
        for line in (b"/\n", b"Q\n"):
            other = hs()
            assert other.request(line) == b"2\t1\tcmd\n"
            assert not other.is_closed_by_peer(timeout=0.3)
            assert other.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
            assert other.request("1\t=\t1\t2\n") == b"0\t1\t2\n"
        # The listener keeps accepting.
        assert hs().request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"


# ---------------------------------------------------------------------------------------------------
# behaviour tablesocket changes on purpose (HS misbehaves here)


@pytest.mark.tablesocket_only("HS's 'Q' as the first byte of a read shuts the whole listener down")
def test_q_does_not_stop_the_listener(server, hs, main):
    conn = hs()
    conn.send(b"Q\n")
    assert conn.recv_all(timeout=0.5) == b"2\t1\tcmd\n"
    conn.close()
    other = hs()
    assert other.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
    assert other.request("1\t=\t1\t1\n") == b"0\t1\t1\n"


@pytest.mark.tablesocket_only("HS allocates <vlen> key slots on the stack before reading them: a huge "
                              "vlen crashes mariadbd")
def test_huge_vlen_does_not_crash(server, hs, main):
    conn = hs()
    assert conn.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
    conn.send(b"1\t=\t4000000000\t1\n")
    try:
        reply = conn.recv_line(timeout=5)
    except EOFError:
        reply = b""
    assert reply.startswith(b"2\t1\t") or reply == b""
    assert server.running()
    other = hs()
    assert other.request(f"P\t1\ttest\t{main}\tPRIMARY\tid\n") == b"0\t1\n"
