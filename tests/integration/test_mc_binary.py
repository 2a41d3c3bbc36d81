"""memcached's binary protocol on tablesocket's memcached port, byte for byte against a private
memcached 1.6 (Debian's package; the reference): every test runs on both, with the same expected
responses (CAS values differ by nature: checked for being nonzero and consistent, not equal).
Tablesocket-only tests check the rows in SQL, containers and flush. The real clients that speak
it (Dalli, pylibmc binary=True, PHP Memcached OPT_BINARY_PROTOCOL) are in test_mc_clients.py;
SASL logins with MariaDB accounts in test_security.py."""

from __future__ import annotations

import itertools
import time
import socket
import struct
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_memcached import target  # noqa: E402,F401 - the fixture: tablesocket and memcached-ref
from ts_mc import McConn  # noqa: E402

TS_ONLY = pytest.mark.tablesocket_only("the memcached front door is tablesocket's")

GET, SET, ADD, REPLACE, DELETE, INCR, DECR, QUIT, FLUSH, GETQ, NOOP, VERSION, GETK, GETKQ, APPEND, \
    PREPEND, STAT, SETQ, ADDQ, REPLACEQ, DELETEQ, INCRQ, DECRQ, QUITQ, FLUSHQ, APPENDQ, PREPENDQ = range(0x1b)
TOUCH, GAT, GATQ, GATK, GATKQ = 0x1C, 0x1D, 0x1E, 0x23, 0x24
SASL_LIST, SASL_AUTH = 0x20, 0x21

OK, ENOENT, EEXISTS, E2BIG, EINVAL, NOT_STORED, DELTA_BADVAL = range(7)
UNKNOWN = 0x81
NO_CREATE = 0xFFFFFFFF


def request(op: int, extras: bytes = b"", key: bytes | str = b"", value: bytes = b"", cas: int = 0,
            opaque: int = 0, body: int | None = None) -> bytes:
    key = key.encode() if isinstance(key, str) else key
    n = len(extras) + len(key) + len(value) if body is None else body
    return struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, n, opaque, cas) + extras + key + value


def set_extras(flags: int = 0, exptime: int = 0) -> bytes:
    return struct.pack(">II", flags, exptime)


def incr_extras(delta: int, initial: int = 0, exptime: int = 0) -> bytes:
    return struct.pack(">QQI", delta, initial, exptime)


class Resp:
    def __init__(self, header: bytes, body: bytes):
        magic, self.opcode, keylen, extlen, self.datatype, self.status, n, self.opaque, self.cas = \
            struct.unpack(">BBHBBHIIQ", header)
        assert magic == 0x81, header
        assert len(body) == n
        self.extras, self.key, self.value = body[:extlen], body[extlen:extlen + keylen], body[extlen + keylen:]

    def shape(self) -> tuple:
        """Everything but the CAS (which differs between servers by nature)."""
        return (self.opcode, self.status, self.opaque, self.extras, self.key, self.value)

    def __repr__(self) -> str:
        return f"Resp{self.shape() + (self.cas,)}"


class BinConn:
    def __init__(self, port: int):
        self.c = McConn(port)

    def send(self, data: bytes) -> None:
        self.c.send(data)

    def resp(self) -> Resp:
        h = self.c.read_exact(24)
        n = struct.unpack(">I", h[8:12])[0]
        return Resp(h, self.c.read_exact(n) if n else b"")

    def call(self, op: int, *a, **kw) -> Resp:
        self.send(request(op, *a, **kw))
        return self.resp()

    def close(self) -> None:
        self.c.close()


def err(op: int, status: int, msg: bytes, opaque: int = 0) -> tuple:
    return (op, status, opaque, b"", b"", msg)


def ok(op: int, extras: bytes = b"", key: bytes = b"", value: bytes = b"", opaque: int = 0) -> tuple:
    return (op, OK, opaque, extras, key, value)


@pytest.fixture
def bc(target):
    """bc() -> a new binary connection to the target."""
    conns: list[BinConn] = []

    def make() -> BinConn:
        conns.append(BinConn(target.port))
        return conns[-1]
    yield make
    for c in conns:
        c.close()


_seq = itertools.count(1)


@pytest.fixture
def key(request):
    base = request.node.name[:30].replace("[", "_").replace("]", "_").replace("-", "_")
    run = uuid.uuid4().hex[:6]
    return lambda name="k": f"b_{base}:{run}:{next(_seq)}:{name}".encode()


# --------------------------------------------------------------------------------------------------


def test_set_then_get_getk_return_flags_value_and_the_set_cas(bc, key):
    c, k = bc(), key()
    r = c.call(SET, set_extras(0xDEADBEEF), k, b"hello\r\nworld\0", opaque=7)
    assert r.shape() == ok(SET, opaque=7) and r.cas != 0
    g = c.call(GET, key=k, opaque=8)
    assert g.shape() == ok(GET, struct.pack(">I", 0xDEADBEEF), b"", b"hello\r\nworld\0", opaque=8)
    assert g.cas == r.cas
    gk = c.call(GETK, key=k, opaque=9)
    assert gk.shape() == ok(GETK, struct.pack(">I", 0xDEADBEEF), k, b"hello\r\nworld\0", opaque=9)


def test_misses_get_not_found_getk_echoes_the_key(bc, key):
    c, k = bc(), key()
    assert c.call(GET, key=k, opaque=1).shape() == err(GET, ENOENT, b"Not found", 1)
    assert c.call(GETK, key=k, opaque=2).shape() == (GETK, ENOENT, 2, b"", k, b"")
    assert c.call(DELETE, key=k).shape() == err(DELETE, ENOENT, b"Not found")
    assert c.call(REPLACE, set_extras(), k, b"v").shape() == err(REPLACE, ENOENT, b"Not found")
    assert c.call(APPEND, key=k, value=b"v").shape() == err(APPEND, NOT_STORED, b"Not stored.")
    assert c.call(PREPEND, key=k, value=b"v").shape() == err(PREPEND, NOT_STORED, b"Not stored.")
    assert c.call(TOUCH, struct.pack(">I", 10), k).shape() == err(TOUCH, ENOENT, b"Not found")
    assert c.call(INCR, incr_extras(1, 0, NO_CREATE), k).shape() == err(INCR, ENOENT, b"Not found")


def test_quiet_requests_answer_only_errors_and_hits(bc, key):
    """GETQ/GETKQ: a miss is silent, a hit answered; SETQ & co.: success is silent, an error is
    answered; NOOP answers and shows where the pipeline ends."""
    c = bc()
    k1, k2, k3 = key("a"), key("b"), key("c")
    c.send(request(SETQ, set_extras(1), k1, b"one", opaque=1)
           + request(SETQ, set_extras(2), k2, b"two", opaque=2)
           + request(ADDQ, set_extras(), k1, b"dup", opaque=3)   # exists: answered
           + request(GETQ, key=k3, opaque=4)                     # miss: silent
           + request(GETKQ, key=k2, opaque=5)                    # hit: answered
           + request(GETQ, key=k1, opaque=6)                     # hit: answered
           + request(DELETEQ, key=k3, opaque=7)                  # miss: answered
           + request(APPENDQ, key=k1, value=b"+", opaque=8)      # silent
           + request(INCRQ, incr_extras(1, 5), k3, opaque=9)     # creates: silent
           + request(NOOP, opaque=10))
    got = [c.resp().shape() for _ in range(5)]
    assert got[0] == err(ADDQ, EEXISTS, b"Data exists for key.", 3)
    assert got[1] == ok(GETKQ, struct.pack(">I", 2), k2, b"two", opaque=5)
    assert got[2] == ok(GETQ, struct.pack(">I", 1), b"", b"one", opaque=6)
    assert got[3] == err(DELETEQ, ENOENT, b"Not found", 7)
    assert got[4] == ok(NOOP, opaque=10)
    c.c.assert_silent(0.2)
    assert c.call(GET, key=k1).value == b"one+"
    assert c.call(GET, key=k3).value == b"5"


def test_add_replace_append_prepend(bc, key):
    c, k = bc(), key()
    assert c.call(ADD, set_extras(3), k, b"mid").status == OK
    assert c.call(ADD, set_extras(), k, b"x").shape() == err(ADD, EEXISTS, b"Data exists for key.")
    assert c.call(APPEND, key=k, value=b">").status == OK
    assert c.call(PREPEND, key=k, value=b"<").status == OK
    g = c.call(GET, key=k)
    assert (g.extras, g.value) == (struct.pack(">I", 3), b"<mid>")  # append keeps the flags
    assert c.call(REPLACE, set_extras(4), k, b"new").status == OK
    g = c.call(GET, key=k)
    assert (g.extras, g.value) == (struct.pack(">I", 4), b"new")


def test_cas_on_set_replace_append_delete(bc, key):
    c, k = bc(), key()
    cas1 = c.call(SET, set_extras(), k, b"v1").cas
    assert c.call(SET, set_extras(), k, b"x", cas=cas1 + 1).shape() == err(SET, EEXISTS, b"Data exists for key.")
    r = c.call(SET, set_extras(), k, b"v2", cas=cas1)
    assert r.status == OK and r.cas not in (0, cas1)
    cas2 = r.cas
    assert c.call(APPEND, key=k, value=b"!", cas=cas1).shape() == err(APPEND, EEXISTS, b"Data exists for key.")
    r = c.call(APPEND, key=k, value=b"!", cas=cas2)
    assert r.status == OK
    cas3 = r.cas
    assert c.call(GET, key=k).value == b"v2!"
    assert c.call(DELETE, key=k, cas=cas2).shape() == err(DELETE, EEXISTS, b"Data exists for key.")
    assert c.call(REPLACE, set_extras(), key("missing"), b"x", cas=5).shape() == err(REPLACE, ENOENT, b"Not found")
    assert c.call(SET, set_extras(), key("missing"), b"x", cas=5).shape() == err(SET, ENOENT, b"Not found")
    d = c.call(DELETE, key=k, cas=cas3)
    assert d.shape() == ok(DELETE) and d.cas == 0
    assert c.call(GET, key=k).status == ENOENT


def test_incr_decr_create_wrap_floor_and_non_numeric(bc, key):
    c, k = bc(), key()
    r = c.call(INCR, incr_extras(5, 100), k)
    assert r.shape() == ok(INCR, value=struct.pack(">Q", 100)) and r.cas != 0  # created: initial, no delta
    assert c.call(INCR, incr_extras(5, 100), k).value == struct.pack(">Q", 105)
    assert c.call(DECR, incr_extras(1000), k).value == struct.pack(">Q", 0)      # stops at 0
    g = c.call(GET, key=k)
    # memcached pads a shrunk number with spaces in place ("0  "); the number is what counts
    assert (g.extras, g.value.rstrip(b" ")) == (struct.pack(">I", 0), b"0")
    m = key("max")
    c.call(SET, set_extras(), m, b"18446744073709551615")
    assert c.call(INCR, incr_extras(2), m).value == struct.pack(">Q", 1)        # wraps at 2^64
    n = key("nan")
    c.call(SET, set_extras(), n, b"abc")
    assert c.call(INCR, incr_extras(1), n).shape() == \
        err(INCR, DELTA_BADVAL, b"Non-numeric server-side value for incr or decr")
    assert c.call(DECR, incr_extras(1, 0, NO_CREATE), key("none")).shape() == err(DECR, ENOENT, b"Not found")
    # an empty value is non-numeric before its CAS is compared (memcached's order)
    e = key("empty")
    ecas = c.call(SET, set_extras(), e, b"").cas
    assert c.call(INCR, incr_extras(1), e, cas=ecas ^ (1 << 40)).shape() == \
        err(INCR, DELTA_BADVAL, b"Non-numeric server-side value for incr or decr")
    # a CAS on incr: only the current one
    cur = c.call(GET, key=k).cas
    assert c.call(INCR, incr_extras(1), k, cas=cur + 1).shape() == err(INCR, EEXISTS, b"Data exists for key.")
    assert c.call(INCR, incr_extras(1), k, cas=cur).value == struct.pack(">Q", 1)


def test_touch_gat_gatk_gatq(bc, key):
    c, k = bc(), key()
    cas = c.call(SET, set_extras(9), k, b"val").cas
    t = c.call(TOUCH, struct.pack(">I", 100), k)
    assert t.shape() == ok(TOUCH, struct.pack(">I", 9)) and t.cas == cas  # flags only, no value
    g = c.call(GAT, struct.pack(">I", 100), k)
    assert g.shape() == ok(GAT, struct.pack(">I", 9), b"", b"val")
    g = c.call(GATK, struct.pack(">I", 100), k)
    assert g.shape() == ok(GATK, struct.pack(">I", 9), k, b"val")
    c.send(request(GATQ, struct.pack(">I", 100), key("missing"), opaque=1)
           + request(GATKQ, struct.pack(">I", 100), k, opaque=2) + request(NOOP, opaque=3))
    assert c.resp().shape() == ok(GATKQ, struct.pack(">I", 9), k, b"val", opaque=2)
    assert c.resp().shape() == ok(NOOP, opaque=3)
    # a past time expires it
    e = key("exp")
    c.call(SET, set_extras(0, 1), e, b"soon")
    assert c.call(TOUCH, struct.pack(">I", 1), e).status == OK

    time.sleep(2.2)
    assert c.call(GET, key=e).status == ENOENT


def test_touch_and_gat_count_as_touches_hit_or_miss(bc, key):
    """As memcached: a binary TOUCH or GAT counts in cmd_touch and touch_hits/touch_misses (a miss
    too), not in the get figures."""
    c = bc()
    k, gone = key("t"), key("gone")
    assert c.call(SET, set_extras(), k, b"v").status == OK
    assert c.call(STAT, key=b"reset").status == OK
    assert c.call(TOUCH, struct.pack(">I", 100), gone).status == ENOENT
    assert c.call(TOUCH, struct.pack(">I", 100), k).status == OK
    assert c.call(GAT, struct.pack(">I", 100), k).status == OK
    assert c.call(GAT, struct.pack(">I", 100), gone).status == ENOENT
    c.send(request(STAT))
    got = {}
    while (r := c.resp()).key:
        got[r.key] = r.value
    assert {n: int(got[n]) for n in (b"cmd_touch", b"touch_hits", b"touch_misses", b"cmd_get")} == \
        {b"cmd_touch": 4, b"touch_hits": 2, b"touch_misses": 2, b"cmd_get": 0}, got


def test_item_figures_count_as_memcached_counts_them(bc, key):
    """total_items: a set, and an incr whose number outgrows the stored value (memcached links a new
    item then; in place when it fits). A too-large binary set is refused without counting in
    store_too_large (memcached's binary protocol does not count it; its text protocol does)."""
    c = bc()
    n = key("n")
    assert c.call(STAT, key=b"reset").status == OK
    assert c.call(SET, set_extras(), n, b"9").status == OK
    assert c.call(INCR, incr_extras(1), n).status == OK   # 9 -> 10: longer
    assert c.call(INCR, incr_extras(5), n).status == OK   # 10 -> 15: in place
    assert c.call(DECR, incr_extras(3), n).status == OK   # 15 -> 12: in place
    assert c.call(SET, set_extras(), key("big"), b"x" * (1024 * 1024 + 1)).status == E2BIG
    c.send(request(STAT))
    got = {}
    while (r := c.resp()).key:
        got[r.key] = r.value
    assert {k: int(got[k]) for k in (b"total_items", b"store_too_large")} == \
        {b"total_items": 2, b"store_too_large": 0}, got


def test_version_noop_stat(bc):
    c = bc()
    assert c.call(VERSION, opaque=5).shape() == ok(VERSION, value=b"1.6.18", opaque=5)
    assert c.call(NOOP, opaque=6).shape() == ok(NOOP, opaque=6)
    c.send(request(STAT, opaque=7))
    names = []
    while True:
        r = c.resp()
        assert (r.opcode, r.status, r.opaque) == (STAT, OK, 7)
        if not r.key:
            assert r.value == b""
            break
        names.append(r.key)
    assert {b"pid", b"version", b"curr_connections", b"get_hits"} <= set(names)
    c.send(request(STAT, key=b"settings"))
    got = {}
    while (r := c.resp()).key:
        got[r.key] = r.value
    assert got[b"item_size_max"] == b"1048576"
    assert c.call(STAT, key=b"nonsense").shape() == err(STAT, ENOENT, b"Not found")
    # The text protocol's own groups are unknown to binary stats (memjs reports "Key not found").
    for key in (b"conns", b"cachedump 1 1"):
        assert c.call(STAT, key=key).shape() == err(STAT, ENOENT, b"Not found"), key
    c.send(request(STAT, key=b"sizes", opaque=8))
    assert c.resp().shape() == ok(STAT, key=b"sizes_status", value=b"disabled", opaque=8)
    assert c.resp().shape() == ok(STAT, opaque=8)
    for key in (b"detail on", b"detail off", b"reset"):  # memcached's t/binary.t: no figures, no error
        assert c.call(STAT, key=key, opaque=9).shape() == ok(STAT, opaque=9), key
    c.send(request(STAT, key=b"detail dump", opaque=9))  # the (empty) dump as one figure
    assert c.resp().shape() == ok(STAT, key=b"detailed", value=b"END\r\n", opaque=9)
    assert c.resp().shape() == ok(STAT, opaque=9)


def test_quit_answers_then_closes_quitq_closes_silently(bc):
    c = bc()
    assert c.call(QUIT, opaque=3).shape() == ok(QUIT, opaque=3)
    assert c.c.closed_by_peer() == b""
    c = bc()
    c.send(request(QUITQ))
    assert c.c.closed_by_peer() == b""


def test_an_unknown_opcode_is_answered_and_the_connection_goes_on(bc, key):
    c, k = bc(), key()
    c.send(request(0x3D, opaque=11) + request(0x1B, opaque=12) + request(SET, set_extras(), k, b"after", opaque=13))
    assert c.resp().shape() == err(0x3D, UNKNOWN, b"Unknown command", 11)
    assert c.resp().shape() == err(0x1B, UNKNOWN, b"Unknown command", 12)  # verbosity: not in 1.6
    assert c.resp().shape() == ok(SET, opaque=13)
    assert c.call(GET, key=k).value == b"after"


@TS_ONLY
def test_an_unknown_opcodes_body_is_skipped_exactly(ts_server, key):
    """memcached skips an unknown command's body counted from after its extras and key, eating the
    start of the next request; tablesocket skips exactly the body (documented difference)."""
    c, k = BinConn(ts_server.mc_port), key()
    try:
        c.send(request(0x3D, b"ex", b"key", b"value", opaque=11) + request(SET, set_extras(), k, b"after", opaque=12))
        assert c.resp().shape() == err(0x3D, UNKNOWN, b"Unknown command", 11)
        assert c.resp().shape() == ok(SET, opaque=12)
        assert c.call(GET, key=k).value == b"after"
    finally:
        c.close()


def test_a_too_large_value_is_refused_skipped_and_a_set_drops_the_old_item(bc, key):
    c, k = bc(), key()
    c.call(SET, set_extras(), k, b"old")
    big = b"x" * (1024 * 1024 + 1)
    c.send(request(SET, set_extras(), k, big, opaque=1) + request(NOOP, opaque=2))
    assert c.resp().shape() == err(SET, E2BIG, b"Too large.", 1)
    assert c.resp().shape() == ok(NOOP, opaque=2)
    assert c.call(GET, key=k).status == ENOENT  # the stale value did not survive the refused set
    c.call(SET, set_extras(), k, b"keep")
    assert c.call(APPEND, key=k, value=big).shape() == err(APPEND, E2BIG, b"Too large.")
    assert c.call(GET, key=k).value == b"keep"
    # a chunk that fits, whose result would not: "Not stored." (xmemcached throws on "Too large.")
    c.call(SET, set_extras(), k, b"y" * 1_000_000)
    for op in (APPEND, PREPEND):
        assert c.call(op, key=k, value=b"z" * 100_000).shape() == err(op, NOT_STORED, b"Not stored.")
    assert c.call(GET, key=k).value == b"y" * 1_000_000


@pytest.mark.parametrize("what,data", [
    ("get with extras", request(GET, b"abcd", b"k")),
    ("set without extras", request(SET, b"", b"k", b"v")),
    ("incr without its 20 bytes of extras", request(INCR, b"12345678", b"k")),
    ("noop with a body", request(NOOP, value=b"x")),
    ("a 251-byte key", request(GET, key=b"k" * 251)),
])
def test_a_malformed_request_is_invalid_arguments_and_closes(bc, what, data):
    c = bc()
    c.send(data)
    assert c.resp().shape()[1:] == (EINVAL, 0, b"", b"", b"Invalid arguments"), what
    assert c.c.closed_by_peer() == b"", what


def test_key_and_extras_longer_than_the_body_is_unknown_and_closes(bc):
    c = bc()
    c.send(request(GET, key=b"key", body=1))
    assert c.resp().shape() == err(GET, UNKNOWN, b"Unknown command")
    assert c.c.closed_by_peer() == b""


def test_250_byte_and_binary_keys(bc, key):
    c = bc()
    k = (key() + b"\x00 \r\n\x01" + b"z" * 250)[:250]
    assert c.call(SET, set_extras(), k, b"v").status == OK
    assert c.call(GETK, key=k).key == k


def test_requests_split_anywhere_and_pipelined(bc, key):
    c = bc()
    keys = [key(str(i)) for i in range(50)]
    data = b"".join(request(SETQ, set_extras(i), k, b"v%d" % i) for i, k in enumerate(keys))
    data += b"".join(request(GETK, key=k, opaque=i) for i, k in enumerate(keys))
    for i in range(0, len(data), 7):
        c.send(data[i:i + 7])
    for i, k in enumerate(keys):
        assert c.resp().shape() == ok(GETK, struct.pack(">I", i), k, b"v%d" % i, opaque=i)


def test_sasl_without_login_required(target, bc):
    """SASL is offered (PLAIN); with memcached-ref (no -S) it is an unknown command."""
    c = bc()
    r = c.call(SASL_LIST)
    if target.is_ts:
        assert r.shape() == ok(SASL_LIST, value=b"PLAIN")
    else:
        assert r.shape() == err(SASL_LIST, UNKNOWN, b"Unknown command")


# ---- tablesocket only: rows -----------------------------------------------------------------------


@TS_ONLY
def test_binary_writes_are_rows_and_sql_rows_are_items(ts_server, key):
    srv = ts_server
    c = BinConn(srv.mc_port)
    try:
        k = key()
        cas = c.call(SET, set_extras(42, 0), k, b"from binary").cas
        assert srv.sql_bytes("SELECT v, flags, cas FROM test.kv WHERE k = %s", (k,)) == \
            [(b"from binary", b"42", str(cas).encode())]
        s = key("sql")
        srv.exec_sql("INSERT INTO test.kv (k, v, flags, cas, exp) VALUES (%s, 'by sql', 5, 0, 0)", (s,))
        g = c.call(GET, key=s)
        assert (g.status, g.extras, g.value) == (OK, struct.pack(">I", 5), b"by sql") and g.cas != 0
        # the content CAS of a row without one works for a CAS set
        assert c.call(SET, set_extras(), s, b"swapped", cas=g.cas).status == OK
        assert srv.sql("SELECT v FROM test.kv WHERE k = %s", (s,)) == [("swapped",)]
        assert c.call(INCR, incr_extras(2, 40), key("n")).value == struct.pack(">Q", 40)
        assert c.call(DELETE, key=k).status == OK
        assert srv.sql("SELECT COUNT(*) FROM test.kv WHERE k = %s", (k,)) == [("0",)]
    finally:
        c.close()


@TS_ONLY
def test_containers_and_flush_of_the_connections_container(ts_server, make_table):
    srv = ts_server
    name = make_table("k VARBINARY(250) PRIMARY KEY, v BLOB, flags INT UNSIGNED NOT NULL DEFAULT 0, "
                      "cas BIGINT UNSIGNED NOT NULL DEFAULT 0, exp INT UNSIGNED NOT NULL DEFAULT 0")
    srv.exec_sql("REPLACE INTO innodb_memcache.containers VALUES (%s, 'test', %s, 'k', 'v', 'flags', 'cas', "
                 "'exp', 'PRIMARY')", (name, name), db=None)
    c = BinConn(srv.mc_port)
    try:
        import time
        deadline = time.monotonic() + 10
        while (r := c.call(GET, key=b"@@" + name.encode())).status != OK:
            assert time.monotonic() < deadline, r
            time.sleep(0.1)
        assert r.value == b"test/" + name.encode()
        assert c.call(SET, set_extras(), b"@@" + name.encode() + b".x", b"in container").status == OK
        assert c.call(SET, set_extras(), b"y", b"current container").status == OK
        assert srv.sql(f"SELECT k, v FROM test.`{name}` ORDER BY k") == [("x", "in container"), ("y", "current container")]
        assert c.call(FLUSH).shape() == ok(FLUSH)
        assert srv.sql(f"SELECT COUNT(*) FROM test.`{name}`") == [("0",)]
        assert c.call(SET, set_extras(), b"@@" + name.encode(), b"v").shape() == \
            err(SET, EINVAL, b"Invalid arguments")  # a container name is not a row
    finally:
        c.close()
        srv.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)


@TS_ONLY
def test_a_failed_container_switch_leaves_the_connection_on_the_container_it_asked_for(ts_server, key):
    """GET of "@@name" that fails leaves the connection on that container: its next keys get that
    error until a switch succeeds, as over the text protocol (test_memcached.py), instead of going
    to the container it had."""
    k = key("k")
    c = BinConn(ts_server.mc_port)
    try:
        assert c.call(SET, set_extras(), k, b"default").status == OK
        r = c.call(GET, key=k)
        assert (r.status, r.value) == (OK, b"default")
        assert c.call(GET, key=b"@@no_such_container").status != OK
        r = c.call(GET, key=k)
        assert r.status != OK and b"no such container 'no_such_container'" in r.value, r
        r = c.call(GET, key=b"@@default")
        assert (r.status, r.value) == (OK, b"test/kv")
        r = c.call(GET, key=k)
        assert (r.status, r.value) == (OK, b"default")
    finally:
        c.close()


@pytest.fixture
def ts_server(server):
    if not getattr(server, "mc_port", None):
        pytest.skip("the test server has no memcached port")
    return server


@TS_ONLY
def test_after_a_fatal_error_the_client_can_still_send_and_reads_the_answer(ts_server):
    """The server closes a connection after a request it cannot go on from (here a 300-byte key,
    refused from its header); the client may still be sending the rest. The socket is shut for
    writing and kept open a moment, draining, so the client's sends do not fail (EPIPE, a reset)
    before it has read the answer that explains the close."""
    s = socket.create_connection(("127.0.0.1", ts_server.mc_port))
    try:
        key = b"k" * 300
        data = request(GET, key=key, opaque=7)
        s.sendall(data[:60])
        time.sleep(0.2)  # answered and closed meanwhile
        for _ in range(4):
            s.sendall(data[60:] + b"x" * 1000)  # no BrokenPipeError / ConnectionResetError
            time.sleep(0.05)
        s.settimeout(5)
        got = b""
        while chunk := s.recv(4096):
            got += chunk
        assert Resp(got[:24], got[24:]).shape() == err(GET, EINVAL, b"Invalid arguments", 7)
    finally:
        s.close()
