"""Timelines: the k-way merge ops `M-` (newest first) and `M+` (oldest first), a tablesocket extension.

    <idx> M- <vlen> 0 [<bound...>] <limit> <offset> @ 0 <k> <g1..gk>          explicit groups
    <idx> M- <vlen> 0 [<bound...>] <limit> <offset> @ 0 ^ <idx2> <n> <k1..kn> <max>
                                                   groups = first column of idx2's `=` rows

The index's first key part is the group (the IN list, key part 0); the key values after the first
(ignored) one are an EXCLUSIVE bound on the following key parts ("older than X" for M-, "newer than
X" for M+). Everything is checked against a brute-force Python model or against the equivalent SQL.

The tests at the end are regressions for server bugs found while writing this file; each one turned
into a failure (XPASS) once the server is fixed, so the marker gets removed then.
"""

from __future__ import annotations

import random
import threading
import time
from typing import NamedTuple, Optional, Sequence

import pytest

from tsserver import HSConn, MariaDBServer, hs_line

pytestmark = pytest.mark.tablesocket_only("M- / M+ (timelines) are a tablesocket extension")

NCOLS = 3  # every index below is opened with columns id,user_id,body


# ---------------------------------------------------------------------------------------------------
# helpers


def hs_unescape(token: bytes) -> Optional[bytes]:
    if token == b"\x00":
        return None
    out, i = bytearray(), 0
    while i < len(token):
        b = token[i]
        if b == 0x01 and i + 1 < len(token):
            out.append(token[i + 1] - 0x40)
            i += 2
        else:
            out.append(b)
            i += 1
    return bytes(out)


def parse_rows(reply: bytes, ncols: int = NCOLS) -> list[tuple]:
    """The rows of a successful find reply (values unescaped, NULL as None)."""
    toks = reply.rstrip(b"\n").split(b"\t")
    assert toks[:2] == [b"0", b"%d" % ncols], reply[:200]
    vals = [hs_unescape(t) for t in toks[2:]]
    assert len(vals) % ncols == 0, reply[:200]
    return [tuple(vals[i:i + ncols]) for i in range(0, len(vals), ncols)]


def merge_line(idx: int, op: str, groups: Sequence, limit: int, offset: int = 0,
               bound: Sequence = (), filters: Sequence = ()) -> bytes:
    """`<idx> M± <1+len(bound)> 0 <bound..> <limit> <offset> @ 0 <k> <groups..> [F|W op col val]..`"""
    toks: list = [idx, op, 1 + len(bound), 0, *bound, limit, offset, "@", 0, len(groups), *groups]
    for f in filters:
        toks.extend(f)
    return hs_line(*toks)


def source_line(idx: int, op: str, src: int, src_keys: Sequence, max_groups: int, limit: int,
                offset: int = 0, bound: Sequence = ()) -> bytes:
    """The one-round-trip form: the groups are the first column of index `src`'s `=` rows."""
    return hs_line(idx, op, 1 + len(bound), 0, *bound, limit, offset, "@", 0, "^", src,
                   len(src_keys), *src_keys, max_groups)


def tok(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def open_index(conn, idx: int, table: str, index: str, columns: str = "id,user_id,body",
               fcolumns: str = "") -> None:
    line = f"P\t{idx}\ttest\t{table}\t{index}\t{columns}" + (f"\t{fcolumns}" if fcolumns else "") + "\n"
    assert conn.request(line) == b"0\t1\n"


def pipelined(conn, lines: Sequence[bytes]) -> list[bytes]:
    conn.send(b"".join(lines))
    return conn.recv_lines(len(lines), timeout=60)


class Msg(NamedTuple):
    id: int
    group: object   # int or str
    body: str

    def wire(self) -> tuple:
        return (tok(self.id), tok(self.group), self.body.encode())


def model(rows: Sequence[Msg], groups: Sequence, desc: bool, limit: int, offset: int = 0,
          bound: Optional[int] = None) -> list[tuple]:
    """Brute force: every row of any listed group, beyond the exclusive bound, in id order."""
    gs = set(groups)
    sel = [r for r in rows if r.group in gs
           and (bound is None or (r.id < bound if desc else r.id > bound))]
    sel.sort(key=lambda r: r.id, reverse=desc)
    return [r.wire() for r in sel[offset:offset + max(limit, 1)]]


BODY_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 \t\x01é"


def random_body(rng: random.Random) -> str:
    return "".join(rng.choice(BODY_CHARS) for _ in range(rng.randint(0, 12)))


# ---------------------------------------------------------------------------------------------------
# correctness against the model, random data


# Layouts of the message table: (DDL, index to open, kind of group value)
LAYOUTS = {
    # the classic: id is the primary key, (user_id, id) a secondary index
    "secondary": ("id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, body VARCHAR(40), "
                  "KEY by_user(user_id, id)", "by_user", int),
    # clustered: the timeline index is the primary key itself
    "clustered": ("user_id INT NOT NULL, id BIGINT NOT NULL, body VARCHAR(40), PRIMARY KEY(user_id, id)",
                  "PRIMARY", int),
    # a non-unique index whose rows InnoDB extends with another primary key column
    "extended": ("pk INT NOT NULL AUTO_INCREMENT PRIMARY KEY, id BIGINT NOT NULL, user_id INT NOT NULL, "
                 "body VARCHAR(40), KEY by_user(user_id, id)", "by_user", int),
    # string groups
    "varchar": ("id BIGINT NOT NULL PRIMARY KEY, user_id VARCHAR(12) NOT NULL, body VARCHAR(40), "
                "KEY by_user(user_id, id)", "by_user", str),
    # (partitioned tables: merges are refused, see test_first_request_on_a_partitioned_table)
}
TABLE_OPTIONS: dict[str, str] = {}


def random_dataset(rng: random.Random, kind) -> tuple[list[Msg], list, list]:
    """Rows, the groups that have rows, and group values without rows."""
    ngroups = rng.randint(3, 80)
    if kind is int:
        values = rng.sample(range(-1000, 100000), ngroups + 30)
    else:
        values = [f"u{v:05d}" for v in rng.sample(range(100000), ngroups + 30)]
    present, absent = values[:ngroups], values[ngroups:]
    id_base = rng.choice([0, 0, 2 ** 40])
    total = rng.randint(50, 2500)
    # skewed: a few big groups, many with only a handful of rows (fewer than N)
    weights = [rng.paretovariate(1.2) for _ in present]
    groups_of_rows = rng.choices(present, weights, k=total)
    ids = rng.sample(range(1, 10 * total + 10), total)
    rows = [Msg(id_base + i, g, random_body(rng)) for i, g in zip(ids, groups_of_rows)]
    return rows, present, absent


@pytest.mark.parametrize("seed", range(24))
def test_merge_matches_model(seed, hs, make_table):
    rng = random.Random(seed)
    layout = list(LAYOUTS)[seed % len(LAYOUTS)]
    ddl, index, kind = LAYOUTS[layout]
    rows, present, absent = random_dataset(rng, kind)
    if layout == "extended":
        t = make_table(ddl, [(None, r.id, r.group, r.body) for r in rows])
    elif layout in ("clustered", "partitioned"):
        t = make_table(ddl, [(r.group, r.id, r.body) for r in rows], options=TABLE_OPTIONS.get(layout, ""))
    else:
        t = make_table(ddl, [(r.id, r.group, r.body) for r in rows])
    conn = hs()
    open_index(conn, 1, t, index)
    all_ids = [r.id for r in rows]
    lines, expected, seen = [], [], set()
    for q in range(60):
        desc = rng.random() < 0.5
        limit = rng.randint(1, 50)
        k = rng.randint(1, 60)
        pool = present + absent
        groups = [rng.choice(pool) for _ in range(k)]          # duplicates and row-less groups
        if rng.random() < 0.3:
            groups += rng.sample(groups, rng.randint(1, len(groups)))  # explicit repeats
        offset = 0 if rng.random() < 0.7 else rng.randint(1, 10)
        bound = None
        if rng.random() < 0.5:
            bound = rng.choice(all_ids) if rng.random() < 0.6 else rng.randint(min(all_ids) - 5,
                                                                                max(all_ids) + 5)
        want = model(rows, groups, desc, limit, offset, bound)
        lines.append(merge_line(1, "M-" if desc else "M+", groups, limit, offset,
                                () if bound is None else (bound,)))
        expected.append(want)
        seen.add(("desc" if desc else "asc", bound is not None, 0 < len(want) < limit))
    for line, reply, want in zip(lines, pipelined(conn, lines), expected):
        assert parse_rows(reply) == want, line[:300]
    # the random queries covered both directions, with and without a bound, and short results
    assert {s[:2] for s in seen} == {("desc", False), ("desc", True), ("asc", False), ("asc", True)}
    assert any(s[2] for s in seen)


def test_merge_edge_cases(hs, make_table):
    rows = [Msg(i, g, f"m{i}") for i, g in [(1, 1), (2, 2), (3, 1), (4, 3), (5, 2), (6, 1)]]
    t = make_table(LAYOUTS["secondary"][0], [(r.id, r.group, r.body) for r in rows])
    c = hs()
    open_index(c, 1, t, "by_user")
    cases = [
        # (op, groups, limit, offset, bound)
        ("M-", [1, 2, 3], 10, 0, ()),
        ("M+", [1, 2, 3], 10, 0, ()),
        ("M-", [1, 1, 1, 2], 10, 0, ()),       # a group listed thrice contributes once
        ("M-", [7, 8, 9], 10, 0, ()),          # only row-less groups: empty
        ("M-", [9, 1, 8], 2, 0, ()),
        ("M-", [1, 2, 3], 1, 0, ()),
        ("M-", [1, 2, 3], 2, 5, ()),           # offset past the end: short
        ("M-", [1, 2, 3], 2, 6, ()),           # offset = row count: empty
        ("M-", [1, 2, 3], 10, 0, (6,)),        # exclusive: 6 itself is not returned
        ("M-", [1, 2, 3], 10, 0, (1,)),        # nothing older than the oldest
        ("M+", [1, 2, 3], 10, 0, (1,)),
        ("M+", [1, 2, 3], 10, 0, (6,)),        # nothing newer than the newest
        ("M-", [1, 2, 3], 10, 0, (100,)),
        ("M+", [1, 2, 3], 10, 0, (-100,)),
        ("M-", [1, 2, 3], 2, 1, (6,)),         # bound and offset together
    ]
    for op, groups, limit, offset, bound in cases:
        want = model(rows, groups, op == "M-", limit, offset, bound[0] if bound else None)
        got = parse_rows(c.request(merge_line(1, op, groups, limit, offset, bound)))
        assert got == want, (op, groups, limit, offset, bound)
    # spot checks of the model itself
    assert [r[0] for r in model(rows, [1, 2, 3], True, 10)] == [b"6", b"5", b"4", b"3", b"2", b"1"]
    assert [r[0] for r in model(rows, [1, 2], True, 10, 0, 5)] == [b"3", b"2", b"1"]
    # the reply is a find reply: exactly the documented bytes
    assert c.request(merge_line(1, "M-", [2, 3], 10)) == b"0\t3\t5\t2\tm5\t4\t3\tm4\t2\t2\tm2\n"
    assert c.request(merge_line(1, "M+", [1], 2, 0, (1,))) == b"0\t3\t3\t1\tm3\t6\t1\tm6\n"
    assert c.request(merge_line(1, "M-", [42], 10)) == b"0\t3\n"


def test_many_groups(hs, make_table):
    """A 5000-value IN list: most groups are row-less; duplicates count once."""
    rng = random.Random(99)
    rows = [Msg(i, rng.randrange(0, 20000, 7), f"b{i}") for i in range(1, 3001)]
    t = make_table(LAYOUTS["secondary"][0], [(r.id, r.group, r.body) for r in rows])
    c = hs()
    open_index(c, 1, t, "by_user")
    groups = rng.sample(range(20000), 4000) + [r.group for r in rng.sample(rows, 1000)]
    for op in ("M-", "M+"):
        got = parse_rows(c.request(merge_line(1, op, groups, 200), timeout=60))
        assert got == model(rows, groups, op == "M-", 200)


def test_merge_with_filters_matches_model(hs, make_table):
    """F skips failing rows; W ends the walk of the group whose row failed (the other groups go on);
    the offset counts rows that passed."""
    rng = random.Random(5)
    rows = [(i, rng.randint(1, 12), rng.randint(0, 4)) for i in rng.sample(range(1, 5000), 700)]
    t = make_table("id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, flag INT NOT NULL, "
                   "KEY by_user(user_id, id)", rows)
    c = hs()
    open_index(c, 1, t, "by_user", "id,user_id,flag", "flag")

    def passes(op, v, x):
        return {"=": v == x, "!=": v != x, "<": v < x, "<=": v <= x, ">": v > x, ">=": v >= x}[op]

    def expect(groups, desc, limit, offset, bound, ftype, fop, fval):
        per_group = []
        for g in set(groups):
            mine = sorted((r for r in rows if r[1] == g
                           and (bound is None or (r[0] < bound if desc else r[0] > bound))),
                          reverse=desc)
            kept = []
            for r in mine:
                if passes(fop, r[2], fval):
                    kept.append(r)
                elif ftype == "W":
                    break
            per_group += kept
        per_group.sort(reverse=desc)
        return [tuple(tok(v) for v in r) for r in per_group[offset:offset + limit]]

    lines, wants = [], []
    for _ in range(80):
        groups = [rng.randint(1, 15) for _ in range(rng.randint(1, 10))]
        desc = rng.random() < 0.5
        limit, offset = rng.randint(1, 60), rng.choice([0, 0, 0, 3])
        bound = rng.choice([None, rng.randint(1, 5000)])
        ftype, fop, fval = rng.choice("FW"), rng.choice(["=", "!=", "<", "<=", ">", ">="]), rng.randint(0, 4)
        lines.append(merge_line(1, "M-" if desc else "M+", groups, limit, offset,
                                () if bound is None else (bound,), [(ftype, fop, 0, fval)]))
        wants.append(expect(groups, desc, limit, offset, bound, ftype, fop, fval))
    for line, reply, want in zip(lines, pipelined(c, lines), wants):
        assert parse_rows(reply) == want, line


# ---------------------------------------------------------------------------------------------------
# paging with the bound while rows arrive


MSG_DDL = LAYOUTS["secondary"][0]


def _seed_messages(rng: random.Random, n: int, users: int) -> list[Msg]:
    return [Msg(i, rng.randint(1, users), f"m{i}") for i in range(1, n + 1)]


class Inserter(threading.Thread):
    """Inserts new messages (ids above every existing one, so the newest) through the write port,
    one committed insert at a time, until stopped."""

    def __init__(self, conn, table: str, first_id: int, users: int, max_rows: int = 4000):
        super().__init__(daemon=True)
        self.conn, self.next_id, self.users, self.max_rows = conn, first_id, users, max_rows
        open_index(conn, 1, table, "PRIMARY")
        self.stop_event = threading.Event()
        self.inserted: list[Msg] = []
        self.error: Optional[BaseException] = None
        self.rng = random.Random(1234)

    def run(self) -> None:
        try:
            while not self.stop_event.is_set() and len(self.inserted) < self.max_rows:
                m = Msg(self.next_id, self.rng.randint(1, self.users), f"new{self.next_id}")
                reply = self.conn.request(hs_line(1, "+", 3, m.id, m.group, m.body))
                assert reply == b"0\t1\n", reply
                self.inserted.append(m)   # committed: the reply comes after the commit
                self.next_id += 1
        except BaseException as e:  # pragma: no cover - reported by the test
            self.error = e

    def wait_for_more(self, than: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.inserted) <= than and time.monotonic() < deadline and self.is_alive():
            time.sleep(0.001)

    def finish(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()
        assert self.error is None, self.error


def test_paging_newest_first_is_stable_under_concurrent_inserts(hs, make_table):
    """Walk a whole timeline newest first, page by page with the bound "older than the last id",
    while another connection keeps inserting newer messages: the pages are disjoint, strictly
    descending, and together exactly the rows that existed when the walk began; no new row
    (they all have higher ids) ever shows up in a later page."""
    rng = random.Random(11)
    rows = _seed_messages(rng, 6000, 60)
    t = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    groups = list(range(1, 41)) + [1000, 1001]          # 40 users with rows, 2 without
    reader = hs()
    open_index(reader, 1, t, "by_user")
    writer = Inserter(hs(wr=True), t, first_id=6001, users=60)
    page_size = 37
    before = model(rows, groups, True, len(rows))
    pages = [parse_rows(reader.request(merge_line(1, "M-", groups, page_size)))]
    writer.start()
    try:
        for _ in range(len(before) // page_size + 5):   # bounded walk
            writer.wait_for_more(len(writer.inserted))  # interleave: an insert before every page
            last = int(pages[-1][-1][0])
            page = parse_rows(reader.request(merge_line(1, "M-", groups, page_size, 0, (last,))))
            if not page:
                break
            pages.append(page)
        else:
            pytest.fail("the walk did not end")
        during = len(writer.inserted)
    finally:
        writer.finish()
    walked = [r for p in pages for r in p]
    ids = [int(r[0]) for r in walked]
    assert all(a > b for a, b in zip(ids, ids[1:])), "pages must be strictly descending, and disjoint"
    assert walked == before
    assert all(len(p) == page_size for p in pages[:-1])
    new_in_groups = [m for m in writer.inserted if m.group in set(groups)]
    assert during >= len(pages) - 1 and new_in_groups, "the inserts did not interleave with the walk"
    # the new rows are there: a fresh first page starts with them
    now = model(rows + writer.inserted, groups, True, page_size)
    assert parse_rows(reader.request(merge_line(1, "M-", groups, page_size))) == now
    assert now[0] == new_in_groups[-1].wire()


def test_paging_oldest_first_sees_every_row_once_under_concurrent_inserts(hs, make_table):
    """The same walk oldest first ("newer than the last id"): rows inserted during the walk are newer
    than anything seen, so they come in later pages; every row comes exactly once, in order."""
    rng = random.Random(12)
    rows = _seed_messages(rng, 3000, 30)
    t = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    groups = list(range(1, 21)) + [500]
    reader = hs()
    open_index(reader, 1, t, "by_user")
    writer = Inserter(hs(wr=True), t, first_id=3001, users=30, max_rows=3000)
    page_size = 29
    pages = [parse_rows(reader.request(merge_line(1, "M+", groups, page_size)))]
    writer.start()
    stopped = False
    try:
        # Bounded: each turn waits for another insert while the writer runs (3000 at most), then
        # the pages left (6000 rows / 29). The walk ends at the first empty page, which comes soon
        # once the reader has caught up, unless the writer adds several rows per turn (found: 400
        # turns, the former bound, were not enough when it added ~5 per turn).
        for _ in range(3000 + 6000 // page_size + 10):
            writer.wait_for_more(len(writer.inserted))
            last = int(pages[-1][-1][0])
            page = parse_rows(reader.request(merge_line(1, "M+", groups, page_size, 0, (last,))))
            if page:
                pages.append(page)
            elif stopped:
                break
            else:   # caught up with the writer: stop it, then read what it added last
                writer.finish()
                stopped = True
        else:
            pytest.fail("the walk did not end")
    finally:
        writer.finish()
    walked = [r for p in pages for r in p]
    ids = [int(r[0]) for r in walked]
    assert all(a < b for a, b in zip(ids, ids[1:]))
    assert walked == model(rows + writer.inserted, groups, False, 10 ** 6)
    assert any(m.group in set(groups) for m in writer.inserted)


def test_offset_paging_is_not_stable_but_bound_paging_is(hs, make_table):
    """Why the bound: with OFFSET, a row inserted between two pages shifts the next page, so a row
    is returned twice; with the bound it is not."""
    rows = [Msg(i, i % 3, f"m{i}") for i in range(1, 31)]
    t = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    r, w = hs(), hs(wr=True)
    open_index(r, 1, t, "by_user")
    open_index(w, 1, t, "PRIMARY")
    p1 = parse_rows(r.request(merge_line(1, "M-", [0, 1, 2], 10)))
    assert w.request(hs_line(1, "+", 3, 31, 1, "m31")) == b"0\t1\n"
    by_offset = parse_rows(r.request(merge_line(1, "M-", [0, 1, 2], 10, 10)))
    by_bound = parse_rows(r.request(merge_line(1, "M-", [0, 1, 2], 10, 0, (int(p1[-1][0]),))))
    assert by_offset[0] == p1[-1]                        # seen twice
    assert [int(x[0]) for x in by_bound] == list(range(20, 10, -1))


# ---------------------------------------------------------------------------------------------------
# the one-round-trip form: groups from another index (followees)


FOLLOWER_DDL = "user_id INT NOT NULL, follower_id INT NOT NULL, PRIMARY KEY(follower_id, user_id)"
JOIN_SQL = ("SELECT m.id, m.user_id, m.body FROM {f} f JOIN {m} m ON m.user_id = f.user_id "
            "WHERE f.follower_id = %s {extra} ORDER BY m.id {order} LIMIT %s")


@pytest.fixture
def sql_conn(server):
    """One SQL connection for many queries (rows as tuples of bytes)."""
    conn = server._connect()
    try:
        def query(q: str, params=None) -> list[tuple]:
            with conn.cursor() as cur:
                cur.execute(q, params)
                return [tuple(v if v is None or isinstance(v, bytes) else str(v).encode() for v in r)
                        for r in cur.fetchall()]
        yield query
    finally:
        conn.close()


@pytest.mark.parametrize("seed", range(3))
def test_followee_timeline_equals_sql_join(seed, sql_conn, hs, make_table):
    rng = random.Random(100 + seed)
    nusers = 80
    rows = [Msg(i, rng.randint(1, nusers), random_body(rng)) for i in rng.sample(range(1, 40000), 4000)]
    m = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    follows = set()
    for u in range(1, 61):   # users 61..80 follow nobody; some followees (81..99) have no messages
        for v in rng.sample(range(1, 100), rng.choice([0, 1, 2, 5, 20, 43, 60])):
            follows.add((v, u))
    f = make_table(FOLLOWER_DDL, sorted(follows))
    c = hs()
    open_index(c, 1, m, "by_user")
    open_index(c, 3, f, "PRIMARY", "user_id")
    checked = 0
    for u in list(range(1, 81)) + [12345]:
        n = rng.choice([1, 5, 20, 50])
        for op, order in (("M-", "DESC"), ("M+", "ASC")):
            got = parse_rows(c.request(source_line(1, op, 3, [u], 1000, n)))
            want = sql_conn(JOIN_SQL.format(f=f, m=m, extra="", order=order), (u, n))
            assert got == want, (u, op, n)
            checked += bool(want)
        # next page: older than the last row of the first page
        first = parse_rows(c.request(source_line(1, "M-", 3, [u], 1000, n)))
        if first:
            x = int(first[-1][0])
            got = parse_rows(c.request(source_line(1, "M-", 3, [u], 1000, n, 0, (x,))))
            want = sql_conn(JOIN_SQL.format(f=f, m=m, extra="AND m.id < %s", order="DESC"), (u, x, n))
            assert got == want
    assert checked > 60
    # no followees: an empty result, not an error
    assert c.request(source_line(1, "M-", 3, [12345], 1000, 20)) == b"0\t3\n"


def test_followee_timeline_max_groups_and_source_details(hs, make_table):
    """<max> caps the groups at the first rows of the source index (here: the smallest followee
    ids); a multi-column source uses its first column; the source may use a longer key; the same
    works on the read port and in a pipeline."""
    rows = [Msg(i, 1 + i % 10, f"m{i}") for i in range(1, 201)]
    m = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    f = make_table(FOLLOWER_DDL, [(v, 7) for v in (2, 4, 6, 8, 10)] + [(3, 8)])
    for c in (hs(), hs(wr=True)):
        open_index(c, 1, m, "by_user")
        open_index(c, 3, f, "PRIMARY", "user_id")
        open_index(c, 4, f, "PRIMARY", "user_id,follower_id")
        for k in range(1, 7):
            want = model(rows, [2, 4, 6, 8, 10][:k], True, 15)
            assert parse_rows(c.request(source_line(1, "M-", 3, [7], k, 15))) == want
            assert parse_rows(c.request(source_line(1, "M-", 4, [7], k, 15))) == want
        assert parse_rows(c.request(source_line(1, "M+", 3, [7, 6], 10, 5))) == model(rows, [6], False, 5)
        assert c.request(source_line(1, "M-", 3, [7, 5], 10, 5)) == b"0\t3\n"
        lines = [source_line(1, "M-", 3, [u], 100, 3) for u in (7, 8, 9, 7)]
        got = [parse_rows(x) for x in pipelined(c, lines)]
        assert got == [model(rows, g, True, 3) for g in ([2, 4, 6, 8, 10], [3], [], [2, 4, 6, 8, 10])]


# ---------------------------------------------------------------------------------------------------
# non-unique timeline index: equal keys


EV_DDL = ("id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, ts INT NOT NULL, "
          "KEY by_ts(user_id, ts)")


def _events(rng: random.Random, n: int, users: int, distinct_ts: int) -> list[tuple[int, int, int]]:
    return [(i, rng.randint(1, users), rng.randint(1, distinct_ts)) for i in rng.sample(range(1, 10 * n), n)]


@pytest.mark.parametrize("page_size", [1, 7, 50])
def test_non_unique_index_offset_paging_returns_each_row_once(page_size, hs, make_table):
    """On (user_id, ts) with many equal ts values InnoDB orders equal keys by the primary key, so
    the merge order is (ts, id); paging by OFFSET returns every row exactly once in that order."""
    rng = random.Random(page_size)
    ev = _events(rng, 400, 12, 4)
    t = make_table(EV_DDL, ev)
    c = hs()
    open_index(c, 1, t, "by_ts", "id,user_id,ts")
    groups = list(range(1, 10)) + [3, 3, 77]
    mine = [e for e in ev if e[1] in set(groups)]
    for op, desc in (("M-", True), ("M+", False)):
        want = [tuple(tok(v) for v in e) for e in sorted(mine, key=lambda e: (e[2], e[0]), reverse=desc)]
        pages = []
        for p in range(len(want) // page_size + 2):
            page = parse_rows(c.request(merge_line(1, op, groups, page_size, p * page_size)))
            if not page:
                break
            pages.append(page)
        walked = [r for p in pages for r in p]
        assert len({r[0] for r in walked}) == len(walked) == len(mine)
        assert walked == want
        # the whole timeline in one request is the same
        assert parse_rows(c.request(merge_line(1, op, groups, 10000))) == want


def test_non_unique_index_bound_on_ts(hs, make_table):
    """A bound on ts alone is exclusive on ts: every row with an older (newer) ts, all of its equal
    siblings included."""
    rng = random.Random(3)
    ev = _events(rng, 300, 6, 5)
    t = make_table(EV_DDL, ev)
    c = hs()
    open_index(c, 1, t, "by_ts", "id,user_id,ts")
    groups = [1, 2, 3, 4]
    for x in range(0, 7):
        for op, desc in (("M-", True), ("M+", False)):
            sel = [e for e in ev if e[1] in groups and (e[2] < x if desc else e[2] > x)]
            want = [tuple(tok(v) for v in e) for e in sorted(sel, key=lambda e: (e[2], e[0]), reverse=desc)]
            assert parse_rows(c.request(merge_line(1, op, groups, 1000, 0, (x,)))) == want, (op, x)


def test_cost_is_about_groups_plus_n(server, hs, make_table):
    """The merge touches about groups + N index entries, however many rows the groups hold (the
    server's Handler_read_* counters include the plugin's reads)."""
    rows = [(i, i % 50, "x") for i in range(1, 20001)]     # 50 groups of 400 interleaved rows
    t = make_table(MSG_DDL, rows)
    c = hs()
    open_index(c, 1, t, "by_user")

    def reads() -> int:
        got = dict(server.sql("SHOW GLOBAL STATUS LIKE 'Handler_read%'"))
        return sum(int(got[k]) for k in ("Handler_read_key", "Handler_read_next", "Handler_read_prev",
                                          "Handler_read_first", "Handler_read_last"))

    groups = list(range(50)) * 3                            # duplicates cost nothing extra
    for op, n in (("M-", 20), ("M+", 20), ("M-", 200)):
        r0 = reads()
        got = parse_rows(c.request(merge_line(1, op, groups, n)))
        spent = reads() - r0
        assert len(got) == n
        assert spent <= 2 * (50 + n) + 10, (op, n, spent)
    # the same with the bound in the middle of the data
    r0 = reads()
    assert len(parse_rows(c.request(merge_line(1, "M-", groups, 20, 0, (10000,))))) == 20
    assert reads() - r0 <= 2 * (50 + 20) + 10


# ---------------------------------------------------------------------------------------------------
# errors


def test_errors(hs, make_table):
    t = make_table(MSG_DDL, [(1, 1, "a"), (2, 2, "b")])
    for c in (hs(), hs(wr=True)):
        open_index(c, 1, t, "by_user")
        open_index(c, 3, t, "PRIMARY", "user_id")
        cases = [
            (hs_line(1, "M-", 1, 0, 10, 0), b"2\t1\tmerge\n"),                       # no IN list
            (hs_line(1, "M+", 1, 0), b"2\t1\tmerge\n"),
            (hs_line(1, "M-", 2, 0, 0, 10, 0, "@", 1, 1, 5), b"2\t1\tmerge\n"),     # IN on key part 1
            (hs_line(1, "M-", 1, 0, 10, 0, "@", 1, "^", 3, 1, 1, 10), b"2\t1\tmerge\n"),
            (hs_line(1, "M-", 1, 0, 10, 0, "@", 0, "^", 9, 1, 1, 10), b"2\t1\tinsource\n"),  # unknown idx2
            (hs_line(1, "M-", 1, 0, 10, 0, "@", 0, "^", 3, 1, 1, 0), b"2\t1\tinsource\n"),   # max 0
            (hs_line(1, "M-", 1, 0, 10, 0, "@", 0, "^", 3, 1, 1), b"2\t1\tinsource\n"),      # no max
            (hs_line(1, "M-", 1, 0, 10, 0, "@", 0, "^", 3, 0, 1, 5), b"2\t1\tinsource\n"),   # no keys
            (hs_line(1, "M-", 3, 0, 1, 2, 10, 0, "@", 0, 1, 1), b"2\t1\tkpnum\n"),   # bound too long
        ]
        for line, want in cases:
            assert c.request(line) == want, line
        assert c.request(merge_line(1, "M-", [1, 2], 10)) == b"0\t3\t2\t2\tb\t1\t1\ta\n"  # still in sync
    w = hs(wr=True)
    open_index(w, 1, t, "by_user")
    assert w.request(hs_line(1, "M-", 1, 0, 10, 0, "@", 0, 1, 1, "D")) == b"2\t1\tmerge\n"  # no modify
    assert w.request(hs_line(1, "M-", 1, 0, 10, 0, "@", 0, 1, 1, "U", 1, 1, "x")) == b"2\t1\tmerge\n"
    assert w.request(merge_line(1, "M+", [1, 2], 10)) == b"0\t3\t1\t1\ta\t2\t2\tb\n"


# ---------------------------------------------------------------------------------------------------
# regressions: server bugs found while writing these tests, now fixed


@pytest.mark.parametrize("engine", ["MyISAM", "Aria"])
def test_non_unique_index_other_engines_returns_every_row(engine, hs, make_table):
    ev = [(1, 1, 10), (2, 2, 10), (3, 1, 10), (4, 2, 10), (5, 1, 10), (6, 2, 10), (7, 1, 5), (8, 2, 5)]
    t = make_table(EV_DDL, ev, engine=engine)
    c = hs()
    open_index(c, 1, t, "by_ts", "id,user_id,ts")
    for op in ("M-", "M+"):
        got = parse_rows(c.request(merge_line(1, op, [1, 2], 20)))
        assert sorted(int(r[0]) for r in got) == [1, 2, 3, 4, 5, 6, 7, 8], (op, got)


def test_unique_index_with_nulls_returns_every_row(hs, make_table):
    t = make_table("id INT PRIMARY KEY, user_id INT NOT NULL, v INT NULL, UNIQUE KEY uv(user_id, v)",
                   [(1, 1, None), (2, 2, None), (3, 1, None), (4, 2, None), (5, 1, None), (6, 2, 1), (7, 1, 1)])
    c = hs()
    open_index(c, 1, t, "uv", "id,user_id,v")
    for op in ("M-", "M+"):
        got = parse_rows(c.request(merge_line(1, op, [1, 2], 20)))
        assert sorted(int(r[0]) for r in got) == [1, 2, 3, 4, 5, 6, 7], (op, got)


def test_collation_equal_groups_contribute_once(hs, make_table):
    t = make_table("id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, KEY bn(name, id)",
                   [(1, "abc"), (2, "ABC"), (3, "abc"), (4, "xy")])
    c = hs()
    open_index(c, 1, t, "bn", "id,name")
    for groups in (["abc"], ["abc", "abc"], ["abc", "ABC"], ["ABC", "abc "]):
        got = parse_rows(c.request(merge_line(1, "M-", [g.encode() for g in groups], 20)), 2)
        assert [int(r[0]) for r in got] == [3, 2, 1], groups


def test_descending_key_part_is_merged_in_one_order(hs, make_table):
    t = make_table("id INT PRIMARY KEY, user_id INT NOT NULL, KEY by_user(user_id, id DESC)",
                   [(1, 1), (2, 2), (3, 1), (4, 2), (5, 1), (6, 2)])
    c = hs()
    open_index(c, 1, t, "by_user", "id,user_id")
    for op in ("M-", "M+"):
        got = [int(r[0]) for r in parse_rows(c.request(merge_line(1, op, [1, 2], 20)), 2)]
        assert got in ([1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]), (op, got)


def test_pipelined_write_then_merge_sees_the_write(hs, make_table):
    """On the write port a batch is one transaction: a merge after an insert in the same pipeline
    sees the new row."""
    t = make_table(MSG_DDL, [(1, 1, "a"), (2, 2, "b")])
    w = hs(wr=True)
    open_index(w, 1, t, "by_user")
    open_index(w, 2, t, "PRIMARY")
    replies = pipelined(w, [hs_line(2, "+", 3, 10, 1, "x"), merge_line(1, "M-", [1, 2], 5),
                            hs_line(2, "+", 3, 11, 2, "y"), merge_line(1, "M-", [1, 2], 2)])
    assert replies == [b"0\t1\n", b"0\t3\t10\t1\tx\t2\t2\tb\t1\t1\ta\n",
                       b"0\t1\n", b"0\t3\t11\t2\ty\t10\t1\tx\n"]


@pytest.mark.parametrize("op", ["M-", "M+", "L"])
def test_first_request_on_a_partitioned_table(op, hs, make_table):
    """The first request on a freshly opened partitioned table: ha_partition's ordered scan reads
    TABLE::pos_in_table_list, which once pointed into a returned stack frame (signal 11 on M-).
    Merges on a partitioned table are refused (the partition handler loses its place when the
    cursor moves between groups: rows skipped or returned twice); L is served."""
    t = make_table("id INT PRIMARY KEY, v INT", [(1, 1), (2, 2), (3, 3), (4, 4)],
                   options="PARTITION BY HASH(id) PARTITIONS 4")
    conn = hs()
    conn.send(hs_line("P", 1, "test", t, "PRIMARY", "id,v"))
    assert conn.recv_line() == b"0\t1\n"
    if op == "L":
        conn.send(hs_line(1, "L", 1, 2, 10, 0))
        assert conn.recv_line() == b"0\t2\t2\t2\n"
        return
    conn.send(merge_line(1, op, [2], 10))
    assert conn.recv_line() in (b"2\t1\tmerge\n", b"2\t1\top\n")  # HandlerSocket has no merges
    conn.send(hs_line(1, "=", 1, 3))
    assert conn.recv_line() == b"0\t2\t3\t3\n"  # the connection goes on


@pytest.mark.tablesocket_only("M- is tablesocket's")
def test_desc_merge_as_a_fresh_servers_first_request_on_a_partitioned_table():
    """The first request of a fresh server's worker, on a partitioned table: the crash above
    showed there (4 of 4 by hand), while the long-running session server's history hid it."""
    srv = MariaDBServer("tablesocket", name="partmerge", extra_args=["--tablesocket-threads=1"])
    try:
        srv.start()
        srv.exec_sql("CREATE TABLE test.p (id INT PRIMARY KEY, v INT) PARTITION BY HASH(id) PARTITIONS 4")
        srv.exec_sql("INSERT INTO test.p VALUES (1, 1), (2, 2), (3, 3)")
        conn = HSConn(srv.hs_port)
        assert conn.request("P\t1\ttest\tp\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert conn.request(merge_line(1, "M-", [2], 10)) == b"2\t1\tmerge\n"
        assert conn.request(hs_line(1, "L", 1, 2, 10, 0)) == b"0\t2\t2\t2\n"
        conn.close()
        assert srv.running()
    finally:
        srv.cleanup()


@pytest.mark.tablesocket_only("M-/M+ are tablesocket's")
@pytest.mark.parametrize("engine", ["InnoDB", "MyISAM", "Aria"])
def test_a_filtered_merge_over_equal_keys_returns_each_row_once(engine, server, hs, make_table):
    """Walking back onto the run of rows with the key last emitted stops at the first row not
    emitted yet; a filter passing over it must not land on one emitted before (MyISAM, Aria)."""
    t = make_table("id INT PRIMARY KEY, u INT, m INT, f INT, KEY by_um (u, m)", [(75, 2, 1, 0), (76, 2, 1, 2)],
                   engine=engine)
    conn = hs()
    assert conn.request(hs_line("P", 1, "test", t, "by_um", "id,u,m,f", "f")) == b"0\t1\n"
    assert conn.request(merge_line(1, "M-", [2, 3], 50, filters=[("F", "<=", 0, 1)])) == b"0\t4\t75\t2\t1\t0\n"
    assert conn.request(merge_line(1, "M+", [2, 3], 50, filters=[("F", ">=", 0, 1)])) == b"0\t4\t76\t2\t1\t2\n"


def test_a_group_source_over_max_tokens_is_refused_not_cut_short(hs, make_table, server):
    """`^` reads at most tablesocket_max_tokens groups (the most an IN list on the wire may hold):
    a follower of more users was silently merged over the first 10000 only."""
    m = make_table(MSG_DDL)
    f = make_table(FOLLOWER_DDL)
    server.exec_sql(f"INSERT INTO {m} (id, user_id, body) SELECT seq, seq, 'x' FROM seq_1_to_10001")
    server.exec_sql(f"INSERT INTO {f} (user_id, follower_id) SELECT seq, 1 FROM seq_1_to_10001")
    c = hs()
    open_index(c, 1, m, "by_user")
    open_index(c, 4, f, "PRIMARY", "user_id,follower_id")
    assert c.request(source_line(1, "M-", 4, [1], 20000, 3)) == b"1\t1\tinsource_too_many\n"
    server.exec_sql(f"DELETE FROM {f} WHERE user_id = 1")  # 10000 now: served, newest first
    assert parse_rows(c.request(source_line(1, "M-", 4, [1], 20000, 3))) == [
        (b"10001", b"10001", b"x"), (b"10000", b"10000", b"x"), (b"9999", b"9999", b"x")]
    # A smaller <max> cuts the list as asked.
    assert parse_rows(c.request(source_line(1, "M-", 4, [1], 2, 3))) == [(b"3", b"3", b"x"), (b"2", b"2", b"x")]


def test_a_group_its_column_cannot_hold_contributes_no_rows(hs, make_table):
    """A group value with a character the group column's character set lacks would be '?' in the
    key image and merge the rows of group '?' (found for = by a differential helper)."""
    t = make_table("id int primary key, g varchar(8) character set latin1, body varchar(8), key by_g(g, id)",
                   [(1, "?", "q1"), (2, "a", "a2"), (3, "?", "q3")])
    c = hs()
    assert c.request(f"P\t1\ttest\t{t}\tby_g\tid,g,body\n") == b"0\t1\n"
    assert c.request(merge_line(1, "M-", ["\U0001F600", "a"], 10)) == b"0\t3\t2\ta\ta2\n"
    assert c.request(merge_line(1, "M-", ["?", "\U0001F600"], 10)) == b"0\t3\t3\t?\tq3\t1\t?\tq1\n"


def test_writes_take_their_in_list_from_another_index(hs, make_table, server):
    """`U`, `U?`, `D`, `D?` with `@ 0 ^ <idx2> ...`: the IN list is the first column of idx2's rows,
    as for a read, and each value finds its first row, as an IN value on the wire does. A write with
    `^` dereferenced an IN list that was never looked up (found by a helper running the plugin
    under ASan/UBSan: a null Datum in build_key, a crash)."""
    rows = [Msg(i, 1 + i % 10, f"m{i}") for i in range(1, 101)]
    m = make_table(MSG_DDL, [(r.id, r.group, r.body) for r in rows])
    f = make_table(FOLLOWER_DDL, [(v, 7) for v in (2, 4, 6)] + [(3, 8), (9, 9)])
    c = hs(wr=True)
    open_index(c, 1, m, "by_user")
    open_index(c, 2, m, "by_user", "body")
    open_index(c, 3, f, "PRIMARY", "user_id")

    def src(idx, user, *tail):
        return hs_line(idx, "=", 1, 0, 1000, 0, "@", 0, "^", 3, 1, user, 100, *tail)

    def ids(sql):
        return [int(r[0]) for r in server.sql_bytes(sql)]

    # the read first: the rows the writes below change
    assert c.request(src(1, 7)) == b"0\t3\t1\t2\tm1\t3\t4\tm3\t5\t6\tm5\n"
    assert c.request(src(2, 7, "U", "new")) == b"0\t1\t3\n"
    assert ids(f"SELECT id FROM {m} WHERE body = 'new' ORDER BY id") == [1, 3, 5]
    assert c.request(src(2, 8, "U?", "three")) == b"0\t1\tm2\n"
    assert ids(f"SELECT id FROM {m} WHERE body = 'three'") == [2]
    assert c.request(src(1, 9, "D")) == b"0\t1\t1\n"
    assert ids(f"SELECT id FROM {m} WHERE id = 8") == []
    assert c.request(src(1, 7, "D?")) == b"0\t3\t1\t2\tnew\t3\t4\tnew\t5\t6\tnew\n"
    assert ids(f"SELECT COUNT(*) FROM {m}") == [96]
    # a source that finds nothing: nothing changed, answered as a write that found nothing
    assert c.request(src(1, 12345, "D")) == b"0\t1\t0\n"
    assert c.request(src(1, 12345, "D?")) == b"0\t3\n"
    assert c.request(src(2, 12345, "U", "x")) == b"0\t1\t0\n"
    # an unknown source, as for a read; an insert takes no IN list
    assert c.request(hs_line(1, "=", 1, 0, 10, 0, "@", 0, "^", 9, 1, 7, 10, "D")) == b"2\t1\tinsource\n"
    assert c.request(hs_line(1, "+", 3, 500, 1, "x", "@", 0, "^", 3, 1, 7, 10)).startswith(b"2\t1\t")
    assert ids(f"SELECT COUNT(*) FROM {m}") == [96]
    # the read port refuses the write
    r = hs()
    open_index(r, 1, m, "by_user")
    open_index(r, 3, f, "PRIMARY", "user_id")
    assert r.request(src(1, 4, "D")) == b"2\t1\treadonly\n"  # user 4 follows nobody: refused anyway
    assert r.request(src(1, 8, "D")) == b"2\t1\treadonly\n"
    assert ids(f"SELECT COUNT(*) FROM {m}") == [96]


# A BLOB column: InnoDB then fetches rows one by one (no prefetch cache to serve the next row from).
@pytest.mark.parametrize("ddl,index", [
    ("id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, body VARCHAR(8), f BLOB", "PRIMARY"),
    ("id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, body VARCHAR(8), f BLOB, UNIQUE KEY u(user_id)", "u"),
    ("id INT NOT NULL PRIMARY KEY, user_id INT NOT NULL, body VARCHAR(8), f BLOB, UNIQUE KEY u(user_id, body)", "u"),
])
@pytest.mark.parametrize("first", ["one group", "filtered", "after"])
def test_a_merge_over_a_unique_index(hs, make_table, ddl, index, first):
    """A group that is a whole unique key holds one row at most. InnoDB keeps no place after a
    unique exact lookup, and the merge's next step from there (the next row, or past a row a
    filter skipped) stopped the server on an InnoDB assertion (old_rec) — any client of the read
    port, with one request on a table just opened (found by a helper running the plugin under
    ASan). A unique key with a nullable part re-positioned the same way."""
    t = make_table(ddl, [(1, 10, "a", "x"), (2, 20, "b", None), (3, 30, "c", "z")])
    c = hs()
    open_index(c, 1, t, index, "id,user_id,body", "body")
    g = (1, 2, 3, 9) if index == "PRIMARY" else (10, 20, 30, 90)
    rows = [(b"1", b"10", b"a"), (b"2", b"20", b"b"), (b"3", b"30", b"c")]
    # the first request on the table: its handler has never kept a place
    if first == "one group":
        assert parse_rows(c.request(merge_line(1, "M+", [g[0]], 10))) == [rows[0]]
    elif first == "filtered":
        assert parse_rows(c.request(merge_line(1, "M+", [g[0]], 10, filters=[("F", "!=", 0, "a")]))) == []
    else:
        assert parse_rows(c.request(merge_line(1, "M+", [g[0], g[1]], 10))) == rows[0:2]
    for op, order in (("M+", [0, 1, 2]), ("M-", [2, 1, 0])):
        assert parse_rows(c.request(merge_line(1, op, list(g), 10))) == [rows[i] for i in order]
        assert parse_rows(c.request(merge_line(1, op, [g[1]], 10))) == [rows[1]]
        assert parse_rows(c.request(merge_line(1, op, [g[3]], 10))) == []
        assert parse_rows(c.request(merge_line(1, op, list(g), 10, filters=[("F", "!=", 0, "b")]))) == \
            [rows[i] for i in order if i != 1]
    assert parse_rows(c.request(merge_line(1, "M+", list(g), 2, 1))) == rows[1:3]
    assert c.request(b"1\t=\t1\t" + str(g[1]).encode() + b"\n").startswith(b"0\t3\t2\t")  # still serving
