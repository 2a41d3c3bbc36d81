"""tablesocket's memcached front door: the text and meta protocol over InnoDB rows.

Most protocol tests run twice: against tablesocket (the session server's memcached port, the
'default' container = test.kv) and against a private memcached 1.6 from Debian's package
("memcached-ref"), so every expected byte string is memcached's own. Tests of what only a table can
do (SQL visibility, containers, range gets, the binary log, plugin options) run with tablesocket
only. With TS_PLUGIN=handlersocket only the memcached-ref runs remain.

Known tablesocket bugs are `tablesocket_bug` tests (strict xfail with tablesocket; they pass against
memcached, which is what shows the expectation is right).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tsserver import MariaDBServer, ServerError  # noqa: E402
from ts_mc import McConn, MemcachedRef, value_reply, wait_for_container  # noqa: E402

MEMCCAPABLE = shutil.which("memccapable") or "/usr/bin/memccapable"
MEMCCP = shutil.which("memccp") or "/usr/bin/memccp"
MEMCCAT = shutil.which("memccat") or "/usr/bin/memccat"

TS_ONLY = pytest.mark.tablesocket_only("the memcached front door is tablesocket's")


# --------------------------------------------------------------------------------------------------
# fixtures




class Target:
    def __init__(self, name: str, port: int, server: MariaDBServer | None):
        self.name, self.port, self.server = name, port, server

    @property
    def is_ts(self) -> bool:
        return self.name == "tablesocket"


def on_targets(bug: str | None = None):
    """Run a test against tablesocket and memcached; `bug`: a known tablesocket bug breaks it there
    (strict xfail for tablesocket only)."""
    ts_marks = [TS_ONLY] + ([pytest.mark.tablesocket_bug(bug)] if bug else [])
    return pytest.mark.parametrize("target", [pytest.param("tablesocket", marks=ts_marks), "memcached-ref"],
                                   indirect=True)


@pytest.fixture(params=[pytest.param("tablesocket", marks=TS_ONLY), "memcached-ref"])
def target(request) -> Target:
    if request.param == "tablesocket":
        srv = request.getfixturevalue("server")
        if not getattr(srv, "mc_port", None):
            pytest.skip("the test server has no memcached port")
        return Target("tablesocket", srv.mc_port, srv)
    return Target("memcached-ref", request.getfixturevalue("mc_ref").port, None)


@pytest.fixture
def ts(server) -> MariaDBServer:
    """The session server, for tablesocket-only tests."""
    if not getattr(server, "mc_port", None):
        pytest.skip("the test server has no memcached port")
    return server


class ConnFactory:
    def __init__(self, port: int | None):
        self.port = port
        self.conns: list[McConn] = []

    def __call__(self, port: int | None = None, **kw) -> McConn:
        c = McConn(port or self.port, **kw)
        self.conns.append(c)
        return c

    def close_all(self):
        for c in self.conns:
            c.close()
        self.conns.clear()


@pytest.fixture
def mc(target):
    """Raw connections to the target: mc() -> McConn."""
    f = ConnFactory(target.port)
    yield f
    f.close_all()


@pytest.fixture
def tsmc(ts, make_table):
    """Raw connections to tablesocket (closed before make_table drops its tables)."""
    f = ConnFactory(ts.mc_port)
    yield f
    f.close_all()


_seq = itertools.count(1)


@pytest.fixture
def key(request):
    """key("name") -> a key unique to this test run (memcached-safe characters only)."""
    base = re.sub(r"[^0-9A-Za-z_]", "_", request.node.name)[:40]
    run = uuid.uuid4().hex[:6]

    def make(name: str = "k") -> str:
        return f"{base}:{run}:{next(_seq)}:{name}"
    return make


@pytest.fixture
def containers(ts, tsmc):
    """containers(name, table, key_col, value_cols, flags=..., cas=..., exp=...) adds a row to
    innodb_memcache.containers (removed afterwards)."""
    added: list[str] = []

    def add(name, table, key_col, value_cols, flags="0", cas=None, exp=None, db="test", index="PRIMARY"):
        ts.exec_sql("REPLACE INTO innodb_memcache.containers VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    (name, db, table, key_col, value_cols, flags, cas, exp, index), db=None)
        added.append(name)
        return name
    yield add
    for name in added:
        ts.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)


def now() -> int:
    return int(time.time())


# --------------------------------------------------------------------------------------------------
# standard tools


def test_memccapable_ascii_suite_passes_in_full(target):
    if not os.access(MEMCCAPABLE, os.X_OK):
        pytest.skip("memccapable is not installed (libmemcached-tools)")
    r = subprocess.run([MEMCCAPABLE, "-a", "-h", "127.0.0.1", "-p", str(target.port), "-t", "10"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 0, r.stdout
    assert "All tests passed" in r.stdout, r.stdout
    assert "[FAIL]" not in r.stdout, r.stdout
    assert len(re.findall(r"^ascii [a-z ]+\[pass\]$", r.stdout, re.M)) >= 27, r.stdout


def _file_content(kind: str) -> bytes:
    if kind == "binary":
        return bytes(range(256)) * 8 + b"\r\nEND\r\n\x00" + os.urandom(1000)
    if kind == "empty":
        return b""
    return os.urandom(900 * 1024)  # ~900 KB, under the 1 MiB item limit


@pytest.mark.parametrize("kind", ["binary", "empty", "900k"])
def test_memccp_then_memccat_round_trips_a_file_byte_exact(target, tmp_path, kind):
    for tool in (MEMCCP, MEMCCAT):
        if not os.access(tool, os.X_OK):
            pytest.skip(f"{tool} is not installed (libmemcached-tools)")
    name = f"f_{kind}_{uuid.uuid4().hex[:8]}"
    src = tmp_path / "in" / name
    src.parent.mkdir()
    data = _file_content(kind)
    src.write_bytes(data)
    servers = f"--servers=127.0.0.1:{target.port}"
    r = subprocess.run([MEMCCP, servers, str(src)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    out = tmp_path / "out"
    r = subprocess.run([MEMCCAT, servers, f"--file={out}", name], capture_output=True, timeout=60)
    assert r.returncode == 0, r
    got = out.read_bytes()
    assert len(got) == len(data) and hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    if target.is_ts:
        rows = target.server.sql_bytes("SELECT v, flags FROM test.kv WHERE k = %s", (name.encode(),))
        assert rows == [(data, b"0")]
    r = subprocess.run([MEMCCAT, servers, name + "_missing"], capture_output=True, timeout=60)
    assert r.returncode != 0


# --------------------------------------------------------------------------------------------------
# pymemcache


@pytest.fixture
def pmc(target):
    from pymemcache.client.base import Client
    clients = []

    def make(**kw):
        kw.setdefault("connect_timeout", 10)
        kw.setdefault("timeout", 10)
        c = Client(("127.0.0.1", target.port), **kw)
        clients.append(c)
        return c
    yield make
    for c in clients:
        c.close()


def test_pymemcache_default_noreply_writes_keep_replies_in_sync(pmc, key):
    c = pmc()  # default_noreply=True: set/add/replace/append/prepend/delete/touch send "noreply"
    ks = [key(f"n{i}") for i in range(50)]
    for i, k in enumerate(ks):
        assert c.set(k, b"v%d" % i) is True
    # Commands that fail must stay silent too with noreply.
    assert c.add(ks[0], b"dup") is True
    assert c.replace(key("absent"), b"x") is True
    assert c.append(key("absent2"), b"x") is True
    assert c.prepend(ks[1], b"<") is True
    assert c.append(ks[1], b">") is True
    assert c.delete(key("absent3")) is True
    assert c.touch(key("absent4"), 10) is True
    assert c.delete(ks[2]) is True
    got = c.get_many(ks)
    want = {k: b"v%d" % i for i, k in enumerate(ks)}
    want[ks[1]] = b"<v1>"
    del want[ks[2]]
    assert got == want
    assert c.get(ks[0]) == b"v0"
    assert re.fullmatch(rb"\d+\.\d+\.\d+\S*", c.version())


def test_pymemcache_store_commands_report_their_outcome(pmc, key):
    c = pmc(default_noreply=False)
    k, missing = key(), key("missing")
    assert c.add(k, b"1") is True
    assert c.add(k, b"2") is False
    assert c.replace(missing, b"x") is False
    assert c.replace(k, b"3", flags=7) is True
    assert c.append(k, b"4") is True
    assert c.prepend(k, b"2") is True
    assert c.append(missing, b"x") is False
    assert c.prepend(missing, b"x") is False
    assert c.get(k) == b"234"
    assert c.raw_command(f"get {k}".encode(), b"END\r\n") == value_reply(k, b"234", 7)
    assert c.get(missing) is None
    assert c.get(missing, default=b"d") == b"d"
    assert c.delete(k) is True
    assert c.delete(k) is False


def test_pymemcache_gets_and_cas(pmc, key):
    c = pmc(default_noreply=False)
    k = key()
    assert c.gets(k) == (None, None)
    assert c.cas(k, b"x", b"1") is None  # NOT_FOUND
    c.set(k, b"first")
    value, cas = c.gets(k)
    assert value == b"first" and cas.isdigit()
    assert c.cas(k, b"second", cas) is True
    assert c.cas(k, b"third", cas) is False  # EXISTS: the CAS moved with the write
    value2, cas2 = c.gets(k)
    assert (value2, cas2 != cas) == (b"second", True)
    assert c.cas(k, b"third", cas2) is True
    assert c.get(k) == b"third"
    many = c.gets_many([k, key("missing")])
    assert list(many) == [k] and many[k][0] == b"third"


def test_pymemcache_incr_decr(pmc, key):
    from pymemcache.exceptions import MemcacheClientError
    c = pmc(default_noreply=False)
    k = key()
    assert c.incr(k, 1) is None
    assert c.decr(k, 1) is None
    c.set(k, b"10")
    assert c.incr(k, 5) == 15
    assert c.decr(k, 20) == 0
    assert c.incr(k, 2**64 - 1) == 2**64 - 1
    assert c.incr(k, 2) == 1  # wraps at 2^64
    assert c.incr(k, 1, noreply=True) is None
    assert c.get(k).rstrip(b" ") == b"2"
    c.set(k, b"abc")
    with pytest.raises(MemcacheClientError, match="non-numeric"):
        c.incr(k, 1)
    assert c.get(k) == b"abc"  # the connection is still in step


def test_pymemcache_delete_touch_flush_all(pmc, key):
    c = pmc(default_noreply=False)
    k1, k2 = key("a"), key("b")
    c.set(k1, b"1")
    c.set(k2, b"2")
    assert c.touch(k1, 100) is True
    assert c.touch(key("missing"), 100) is False
    assert c.delete(k1) is True
    assert c.get_many([k1, k2]) == {k2: b"2"}
    assert c.flush_all() is True
    assert c.get_many([k1, k2]) == {}
    c.set(k1, b"x")
    assert c.flush_all(noreply=True) is True
    assert c.get(k1) is None


def test_pymemcache_binary_values_and_250_byte_keys(pmc):
    c = pmc(default_noreply=False)
    every_byte = bytes(range(256))
    values = [every_byte, every_byte * 64, b"\r\n", b"\r\nEND\r\n", b"\x00" * 10, b"", os.urandom(200_000)]
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&()*+,-./:;<=>?@[]^_`{|}~"
    tag = uuid.uuid4().hex[:8]
    keys = []
    for i, v in enumerate(values):
        base = f"bin{tag}{i}" + alphabet
        k = (base * 4)[:250]
        keys.append(k)
        assert c.set(k, v) is True
    assert c.get_many(keys) == dict(zip(keys, values))
    # a 250-byte key with '@' at its start would be a range get in tablesocket; the middle is fine
    from pymemcache.exceptions import MemcacheIllegalInputError
    with pytest.raises(MemcacheIllegalInputError):
        c.set("k" * 251, b"x")


# --------------------------------------------------------------------------------------------------
# meta-memcache (RevenueCat's meta-protocol client; installed by scripts/setup.sh when PyPI has it)


def test_meta_memcache_client_sees_what_memcached_gives(target, key):
    """meta-memcache 4.3 speaks only the meta protocol (ms/mg/md/ma with flags, base64 keys,
    leases, recache and stale items) and keeps a CAS in 32 bits: a larger `c` reads as no CAS and
    its CAS-protected set became a plain set (a lost update) before tablesocket's CAS values were
    made small. Every result is memcached's."""
    mm = pytest.importorskip("meta_memcache", reason="meta-memcache is not installed (pip: meta-memcache)")
    c = mm.CacheClient.cache_client_from_servers(
        servers=[mm.ServerAddress(host="127.0.0.1", port=target.port)],
        connection_pool_factory_fn=mm.connection_pool_factory_builder())
    k = key
    values = {"str": "hello world", "bytes": b"\x00\x01\r\n\xff", "int": 42, "neg": -7,
              "dict": {"a": [1, 2], "b": "x"}, "empty": "", "big": "z" * 200000,
              "bin": bytes(range(256)) * 100}
    keys = {name: k(name) for name in values}  # key() is unique per call: keep the names
    for name, v in values.items():
        assert c.set(keys[name], v, ttl=300) is True, name
        got = c.get(keys[name])
        assert got == (b"" if v == "" else v), name  # the serializer stores '' as bytes
    assert c.get(k("absent")) is None
    absent = k("absent")
    got = c.multi_get([keys["str"], keys["int"], absent])
    assert {kk.key: vv for kk, vv in got.items()} == {keys["str"]: "hello world", keys["int"]: 42, absent: None}

    # CAS: a token from before another write conflicts
    v, cas = c.get_cas(keys["str"])
    assert isinstance(cas, int) and 0 < cas < 2 ** 32, cas
    assert c.set(keys["str"], "v2", ttl=300, cas_token=cas) is True
    assert c.set(keys["str"], "v3", ttl=300, cas_token=cas) is False
    assert c.get(keys["str"]) == "v2"
    sc = k("sc")
    t = c.set_cas(sc, "x", ttl=300)
    assert isinstance(t, int)
    assert c.set(sc, "y", ttl=300, cas_token=t) is True
    assert c.set(sc, "z", ttl=300, cas_token=t) is False
    _, cas2 = c.get_cas(sc)
    assert c.delete(sc, cas_token=cas2 + 1) is False
    assert c.delete(sc, cas_token=cas2) is True
    assert c.get(sc) is None and c.delete(sc) is False and c.invalidate(sc) is True

    # set modes
    m = k("m")
    assert c.set(m, "a", ttl=300, set_mode=mm.SetMode.ADD) is True
    assert c.set(m, "b", ttl=300, set_mode=mm.SetMode.ADD) is False
    assert c.set(m, "+", ttl=300, set_mode=mm.SetMode.APPEND) is True
    assert c.set(m, "-", ttl=300, set_mode=mm.SetMode.PREPEND) is True
    assert c.get(m) == "-a+"
    assert c.set(k("nope"), "x", ttl=300, set_mode=mm.SetMode.REPLACE) is False
    assert c.set(m, "r", ttl=300, set_mode=mm.SetMode.REPLACE) is True
    rf = k("rf")
    assert c.refill(m, "f", ttl=300) is False and c.refill(rf, "f", ttl=300) is True

    # counters
    n, n2 = k("n"), k("n2")
    assert c.delta(n, 5) is False
    assert c.delta_initialize(n, 5, initial_value=10, initial_ttl=300) is True
    assert c.delta(n, 3) is True
    assert c.delta_and_get(n, 2) == 15
    assert c.delta_and_get(n, -100) == 0
    assert c.delta_initialize_and_get(n2, 1, initial_value=7, initial_ttl=300) == 7

    # touch, leases, recache, stale deletion
    assert c.touch(m, 1) is True and c.touch(k("zz"), 10) is False
    assert c.get(rf, touch_ttl=300) == "f"
    lp = mm.LeasePolicy(ttl=30, miss_retries=1, miss_retry_wait=0.05, miss_max_retry_wait=0.1)
    lease = k("lease")
    assert c.get_or_lease(lease, lp) is None  # the winner: a miss, it holds the lease
    assert c.get_or_lease(lease, lp) is None  # the loser waits, then gives up
    assert c.set(lease, "filled", ttl=300) is True
    assert c.get_or_lease(lease, lp) == "filled"
    rc = k("rc")
    assert c.set(rc, "old", ttl=20) is True
    assert c.get(rc, recache_policy=mm.RecachePolicy(ttl=60)) is None  # wins the recache
    assert c.get(rc, recache_policy=mm.RecachePolicy(ttl=60)) == "old"
    st = k("st")
    assert c.set(st, "stale-me", ttl=300) is True
    assert c.delete(st, stale_policy=mm.StalePolicy(mark_stale_on_deletion_ttl=30)) is True
    assert c.get(st) is None  # the first reader refreshes
    assert c.get(st) == "stale-me"  # the others see the stale value meanwhile

    # keys memcached cannot hold as they are (meta-memcache hashes long ones, base64s binary ones)
    for name, v in ((k("L" * 300), "long"), (k("ключ ✓"), "unicode")):
        assert c.set(name, v, ttl=300) is True
        assert c.get(name) == v
    time.sleep(2.2)
    assert c.get(m) is None  # touched to 1 s


# python-memcached (Debian's python3-memcache): Debian's python, not the test venv
PYTHON_MEMCACHED_SCRIPT = r'''
import json, sys, memcache, time
port, P = sys.argv[1], sys.argv[2]
c = memcache.Client(["127.0.0.1:" + port], cache_cas=True)
R = {}
def run(n, f):
    try:
        v = f()
        if isinstance(v, bytes): v = "b:" + v.decode("latin-1")
        R[n] = v
    except Exception as e: R[n] = "E:" + type(e).__name__
k = lambda s: P + s
for name, v in [("str", "hello"), ("int", 42), ("long", 2**40), ("float", 1.5), ("dict", {"a": 1}), ("bytes", b"\x00\xff\r\n"), ("empty", ""), ("big", "x" * 500000), ("toobig", "x" * 1100000)]:
    run("set_" + name, lambda: c.set(k(name), v))
    run("get_" + name, lambda: (lambda g: len(g) if isinstance(g, (str, bytes)) and len(g) > 100 else g)(c.get(k(name))))
run("multi", lambda: sorted(c.get_multi(["str", "int", "absent"], key_prefix=P).items()))
run("set_multi", lambda: c.set_multi({"m1": "a", "m2": "b"}, key_prefix=P))
run("get_multi2", lambda: sorted(c.get_multi(["m1", "m2"], key_prefix=P).items()))
run("delete_multi", lambda: c.delete_multi(["m1", "m2"], key_prefix=P))
run("add", lambda: c.add(k("a"), "1")); run("add2", lambda: c.add(k("a"), "2"))
run("replace", lambda: c.replace(k("a"), "3")); run("replace_miss", lambda: c.replace(k("nope"), "3"))
run("append", lambda: c.append(k("a"), "+")); run("prepend", lambda: c.prepend(k("a"), "-")); run("get_a", lambda: c.get(k("a")))
run("incr", lambda: c.incr(k("a"))); run("incr_miss", lambda: c.incr(k("nope")))
run("set_n", lambda: c.set(k("n"), "10")); run("incr_n", lambda: c.incr(k("n"), 5)); run("decr_n", lambda: c.decr(k("n"), 100))
run("gets", lambda: c.gets(k("str"))); run("cas", lambda: c.cas(k("str"), "new"))
c2 = memcache.Client(["127.0.0.1:" + port], cache_cas=True)
run("gets2", lambda: c2.gets(k("str"))); run("other_set", lambda: c.set(k("str"), "other")); run("cas_stale", lambda: c2.cas(k("str"), "mine"))
run("after", lambda: c.get(k("str")))
run("touch", lambda: c.touch(k("str"), 1)); run("delete", lambda: c.delete(k("int"))); run("delete_miss", lambda: c.delete(k("int")))
run("long_key", lambda: c.set(k("L" * 260), "x"))
run("space_key", lambda: c.set(k("a b"), "x"))
run("stats", lambda: sorted(set(c.get_stats()[0][1].keys()) >= {"pid", "uptime", "curr_connections", "get_hits"} and ["ok"]))
time.sleep(2.1)
run("expired", lambda: c.get(k("str")))
print(json.dumps(R))
'''


def test_python_memcached_client_sees_what_memcached_gives(target, key, tmp_path):
    """python-memcached 1.59 (text protocol, pickled types by flags, gets/cas with cache_cas,
    multi-key commands with a prefix, key checks on the client side): every result is memcached's."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import memcache"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("python-memcached is not installed (Debian: python3-memcache)")
    script = tmp_path / "pym.py"
    script.write_text(PYTHON_MEMCACHED_SCRIPT)
    prefix = key("p") + "_"
    r = subprocess.run([py, str(script), str(target.port), prefix], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    want = {
        "set_str": True, "get_str": "hello", "set_int": True, "get_int": 42, "set_long": True,
        "get_long": 2 ** 40, "set_float": True, "get_float": 1.5, "set_dict": True, "get_dict": {"a": 1},
        "set_bytes": True, "get_bytes": "b:\x00\xff\r\n", "set_empty": True, "get_empty": "",
        "set_big": True, "get_big": 500000, "set_toobig": 0, "get_toobig": None,  # over 1 MiB: SERVER_ERROR
        "multi": [["int", 42], ["str", "hello"]], "set_multi": [], "get_multi2": [["m1", "a"], ["m2", "b"]],
        "delete_multi": 1, "add": True, "add2": False, "replace": True, "replace_miss": False,
        "append": True, "prepend": True, "get_a": "-3+",
        "incr": "E:ValueError",  # '-3+' is not a number: CLIENT_ERROR, which the client raises
        "incr_miss": None, "set_n": True, "incr_n": 15, "decr_n": 0,
        "gets": "hello", "cas": True, "gets2": "new", "other_set": True, "cas_stale": False, "after": "other",
        "touch": 1, "delete": 1, "delete_miss": 1,
        "long_key": "E:MemcachedKeyLengthError", "space_key": "E:MemcachedKeyCharacterError",
        "stats": ["ok"], "expired": None,
    }
    assert got == want


@TS_ONLY
def test_cas_values_fit_in_32_bits_and_a_rows_cas_only_grows(ts, tsmc, key):
    """CAS values are small, as memcached's counter from 1 (32-bit clients: meta-memcache), and a
    write never gives a row a cas at or below the one it had, even one from before a restart
    (emulated: SQL sets a cas above the counter), without lifting later values over 2^32."""
    c = tsmc()
    k, high, sqlrow = key(), key("high"), key("sql")
    c.set(k, b"one")
    first = c.gets_cas(k)
    assert 0 < first < 2 ** 32
    c.request(f"mg {k} c\r\n", b"HD c%d\r\n" % first)
    c.set(k, b"two")
    assert first < c.gets_cas(k) < 2 ** 32
    ts.exec_sql("INSERT INTO test.kv (k, v, flags, cas, exp) VALUES (%s, 'h', 0, 5000000000, 0), "
                "(%s, 's', 0, 0, 0)", (high.encode(), sqlrow.encode()))
    c.set(high, b"h2")
    assert c.gets_cas(high) == 5000000002  # the next even value above the row's
    c.request(f"cas {high} 0 0 1 5000000000\r\nx\r\n", b"EXISTS\r\n")
    c.request(f"md {high} I T30\r\n", b"HD\r\n")  # invalidate: a new cas, above the row's too
    assert c.gets_cas(high) == 5000000004
    c.set(k, b"three")
    assert c.gets_cas(k) < 2 ** 32  # one huge cas does not lift the others
    # a row SQL wrote with cas 0: its content hash, 32 bits too, and odd, where every value the
    # counter stores is even: a token from the hash can never match a later version of the row
    # (a tester advanced the counter to such a hash: a stale cas then overwrote a newer write)
    hashed = c.gets_cas(sqlrow)
    assert 0 < hashed < 2 ** 32 and hashed % 2 == 1
    assert first % 2 == 0 and c.gets_cas(k) % 2 == 0
    c.set(sqlrow, b"s2")
    assert c.gets_cas(sqlrow) % 2 == 0
    # deleted and written again: a new value
    old = c.gets_cas(k)
    c.request(f"delete {k}\r\n", b"DELETED\r\n")
    c.set(k, b"four")
    assert c.gets_cas(k) != old
    c.request(f"cas {k} 0 0 1 {old}\r\nx\r\n", b"EXISTS\r\n")


# --------------------------------------------------------------------------------------------------
# raw protocol: classic commands


def test_classic_store_commands_answer_stored_not_stored_exists_not_found(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.request(f"add {k} 1 0 3\r\nabc\r\n", b"STORED\r\n")
    c.request(f"add {k} 1 0 3\r\nxyz\r\n", b"NOT_STORED\r\n")
    c.request(f"replace {m} 0 0 1\r\nz\r\n", b"NOT_STORED\r\n")
    c.request(f"replace {k} 2 0 3\r\ndef\r\n", b"STORED\r\n")
    c.request(f"append {k} 9 0 2\r\ngh\r\n", b"STORED\r\n")    # append/prepend keep the flags
    c.request(f"prepend {k} 9 0 2\r\nab\r\n", b"STORED\r\n")
    c.request(f"append {m} 0 0 1\r\nz\r\n", b"NOT_STORED\r\n")
    c.request(f"prepend {m} 0 0 1\r\nz\r\n", b"NOT_STORED\r\n")
    c.request(f"get {k} {m} {k}\r\n",
              value_reply(k, b"abdefgh", 2) + value_reply(k, b"abdefgh", 2) + b"END\r\n")
    c.request(f"get {m}\r\n", b"END\r\n")
    cas = c.gets_cas(k)
    c.request(f"cas {k} 3 0 1 {cas + 1}\r\nq\r\n", b"EXISTS\r\n")
    c.request(f"cas {m} 3 0 1 {cas}\r\nq\r\n", b"NOT_FOUND\r\n")
    c.request(f"cas {k} 3 0 1 {cas}\r\nq\r\n", b"STORED\r\n")
    c.request(f"cas {k} 4 0 1 {cas}\r\nr\r\n", b"EXISTS\r\n")  # the store moved the CAS
    cas2 = c.gets_cas(k)
    assert cas2 != cas
    c.request(f"gets {k}\r\n", value_reply(k, b"q", 3, cas2) + b"END\r\n")
    c.request(f"set {k} 5 0 0\r\n\r\n", b"STORED\r\n")
    c.request(f"get {k}\r\n", value_reply(k, b"", 5) + b"END\r\n")
    c.request(f"touch {k} 0\r\n", b"TOUCHED\r\n")
    c.request(f"touch {m} 0\r\n", b"NOT_FOUND\r\n")
    c.request(f"delete {k}\r\n", b"DELETED\r\n")
    c.request(f"delete {k}\r\n", b"NOT_FOUND\r\n")
    c.request(f"delete {k} 0\r\n", b"NOT_FOUND\r\n")
    c.request(f"delete {k} 5\r\n",
              b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")
    c.request("verbosity 1\r\n", b"OK\r\n")
    c.send("version\r\n")
    assert re.fullmatch(rb"VERSION 1\.6\.\d+\r\n", c.recv_line())
    c.request("bogus\r\n", b"ERROR\r\n")
    c.request("\r\n", b"ERROR\r\n")
    c.assert_silent()


def test_incr_wraps_at_2_64_and_decr_stops_at_zero(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.set(k, b"18446744073709551615")
    c.request(f"incr {k} 1\r\n", b"0\r\n")
    c.request(f"incr {k} 5\r\n", b"5\r\n")
    c.request(f"decr {k} 100\r\n", b"0\r\n")
    c.request(f"incr {k} 18446744073709551615\r\n", b"18446744073709551615\r\n")
    c.request(f"incr {k} 18446744073709551615\r\n", b"18446744073709551614\r\n")
    c.request(f"decr {k} 18446744073709551614\r\n", b"0\r\n")
    c.set(k, b"10")
    c.request(f"decr {k} 3\r\n", b"7\r\n")
    c.request(f"incr {m} 1\r\n", b"NOT_FOUND\r\n")
    c.request(f"decr {m} 1\r\n", b"NOT_FOUND\r\n")
    c.request(f"incr {k} 18446744073709551616\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n")
    c.request(f"incr {k} abc\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n")
    c.request(f"decr {k} -1\r\n", b"CLIENT_ERROR invalid numeric delta argument\r\n")
    # memcached pads a shrunk number with spaces in place ("7 "); the number is what counts
    r = c.get(k)
    m_ = re.fullmatch(rb"VALUE (\S+) 0 (\d+)\r\n(.*)\r\nEND\r\n", r, re.S)
    assert m_ and m_.group(3).rstrip(b" ") == b"7", r


def test_incr_of_a_non_numeric_value_is_a_client_error(mc, key):
    c = mc()
    k = key()
    for v in (b"abc", b"12a", b"", b"-5", b"1" * 21):
        c.set(k, v)
        c.request(f"incr {k} 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
        c.request(f"decr {k} 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
        c.request(f"get {k}\r\n", value_reply(k, v) + b"END\r\n")


def test_incr_reads_a_value_as_memcached_does(mc, key):
    """memcached's safe_strtoull: leading whitespace and '+' skipped, whitespace may follow."""
    c = mc()
    k = key()
    for v, n in ((b" 12", 13), (b"12 ", 13), (b"+7", 8), (b"12 ab", 13), (b"\t5", 6)):
        c.set(k, v)
        c.request(f"incr {k} 1\r\n", f"{n}\r\n".encode())
        c.request(f"decr {k} 1\r\n", f"{n - 1}\r\n".encode())


def test_noreply_commands_never_answer_even_when_they_fail(mc, key):
    c = mc()
    k, n, m = key("k"), key("n"), key("missing")
    pipeline = (
        f"set {k} 0 0 1 noreply\r\na\r\n"
        f"add {k} 0 0 1 noreply\r\nX\r\n"              # NOT_STORED, silenced
        f"replace {m} 0 0 1 noreply\r\nX\r\n"          # NOT_STORED, silenced
        f"append {k} 0 0 1 noreply\r\nb\r\n"
        f"prepend {k} 0 0 1 noreply\r\nc\r\n"
        f"cas {k} 0 0 1 18446744073709551615 noreply\r\nX\r\n"  # EXISTS, silenced
        f"cas {m} 0 0 1 18446744073709551615 noreply\r\nX\r\n"  # NOT_FOUND, silenced
        f"incr {k} 1 noreply\r\n"                      # non-numeric CLIENT_ERROR, silenced
        f"set {n} 0 0 1 noreply\r\n5\r\n"
        f"incr {n} 3 noreply\r\n"
        f"decr {n} 1 noreply\r\n"
        f"incr {m} 1 noreply\r\n"
        f"delete {m} noreply\r\n"
        f"touch {k} 100 noreply\r\n"
        f"touch {m} 100 noreply\r\n"
        f"set {k}x 0 0 x noreply\r\n"                  # bad command line format, silenced (no data)
        "verbosity 1 noreply\r\n"
        f"mg {m} v q\r\n"                              # meta q: EN silenced
        f"ms {n}m 1 q\r\nz\r\n"                        # HD silenced
        f"md {n}m q\r\n"                               # HD silenced
        f"ma {n} q\r\n"                                # HD silenced
    )
    c.send(pipeline.encode() * 3)  # many, in one write
    c.send(b"mn\r\n")
    c.expect(b"MN\r\n")
    c.send(b"version\r\n")
    assert c.recv_line().startswith(b"VERSION ")
    c.request(f"get {k} {n}\r\n", value_reply(k, b"cab") + value_reply(n, b"8") + b"END\r\n")
    c.assert_silent()


def test_flags_and_exptimes_past_32_bits_get_one_reply(mc, key, target):
    """memcached cuts such numbers down and stores the item; tablesocket refuses them (flags and
    exptimes are 32-bit, never silently changed), and skips the data block as memcached reads it:
    either way one reply per command, so a pipelining client stays in step (memcachio, sending
    flags of 2**32, was one reply behind for good)."""
    c = mc()
    k = key()
    c.send(f"set {k} 4294967301 0 5\r\nhello\r\nadd {k}x 0 2147483648 2\r\nhi\r\n"
           f"set {k}y 4294967296 0 2 noreply\r\nhi\r\nmn\r\n".encode())
    if target.is_ts:
        c.expect(b"CLIENT_ERROR bad command line format\r\n" * 2 + b"MN\r\n")
        c.request(f"get {k} {k}x {k}y\r\n", b"END\r\n")
    else:
        c.expect(b"STORED\r\nSTORED\r\nMN\r\n")
        c.request(f"get {k}\r\n", b"VALUE %s 5 5\r\nhello\r\nEND\r\n" % k.encode())
    c.assert_silent()


def test_cache_memlimit_answers_once_or_not_at_all(mc, target):
    """memcached's cache_memlimit: tablesocket cannot apply it (items are InnoDB rows, cached in
    its buffer pool) and says so with memcached's MEMLIMIT_ADJUST_FAILED; noreply silences it.
    It was an unknown command, whose ERROR a client that sent noreply (emcache) took for the
    reply to its next request."""
    c = mc()
    c.send(b"cache_memlimit 100 noreply\r\nversion\r\n")
    assert c.recv_line().startswith(b"VERSION ")
    c.request("cache_memlimit 7\r\n", b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n")
    c.request("cache_memlimit 1000000001\r\n", b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n")
    if target.is_ts:
        c.request("cache_memlimit 100\r\n", b"MEMLIMIT_ADJUST_FAILED items are rows of InnoDB tables: "
                                            b"their memory is innodb_buffer_pool_size\r\n")
    c.assert_silent()


def test_a_too_large_value_is_refused_and_its_data_skipped(mc, key):
    c = mc()
    k = key()
    big = b"x" * 2_000_000
    c.send(b"set %s 0 0 2000000\r\n%s\r\nversion\r\n" % (k.encode(), big))
    c.expect(b"SERVER_ERROR object too large for cache\r\n")
    assert c.recv_line().startswith(b"VERSION ")
    c.send(b"set %s 0 0 2000000 noreply\r\n%s\r\nmn\r\n" % (k.encode(), big))
    c.expect(b"MN\r\n")
    c.send(b"ms %s 2000000 q\r\n%s\r\nmn\r\n" % (k.encode(), big))
    c.expect(b"SERVER_ERROR object too large for cache\r\nMN\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")
    c.set(k, b"small")  # still in step
    c.request(f"get {k}\r\n", value_reply(k, b"small") + b"END\r\n")
    c.assert_silent()


@on_targets()
def test_a_multiget_larger_than_the_output_buffer_is_streamed(mc, key):
    """30 values of 900 kB (27 MB, over tablesocket_max_output_buffer's 16 MiB) in one get and one
    gets: every value comes, in order, then END, as memcached streams them; meanwhile another
    connection is answered, and the reply is read slowly at first (the server waits for the
    client rather than buffering it all)."""
    c, other = mc(), mc()
    keys = [key(f"big{i}") for i in range(30)]
    values = {k: (b"%02d" % i) * 450_000 for i, k in enumerate(keys)}
    for k in keys:
        c.request(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(values[k]), values[k]), b"STORED\r\n")
    small = key("small")
    other.set(small, b"s")
    for cmd in (b"get", b"gets"):
        c.send(cmd + b" " + b" ".join(k.encode() for k in keys) + b"\r\n")
        time.sleep(0.3)  # the client reads nothing for a while
        other.request(f"get {small}\r\n", value_reply(small, b"s") + b"END\r\n")
        for k in keys:
            head = c.recv_line(timeout=30)
            parts = head.split()
            assert parts[:4] == [b"VALUE", k.encode(), b"0", str(len(values[k])).encode()], head[:200]
            assert len(parts) == (5 if cmd == b"gets" else 4), head
            assert c.read_exact(len(values[k]) + 2, timeout=30) == values[k] + b"\r\n"
        assert c.recv_line(timeout=30) == b"END\r\n"
    c.request(f"get {small}\r\n", value_reply(small, b"s") + b"END\r\n")  # still in step
    c.assert_silent()


@on_targets()
def test_a_too_large_set_removes_the_old_item(mc, key):
    c = mc()
    k, k2 = key("set"), key("ms")
    c.set(k, b"old")
    c.set(k2, b"old")
    big = b"x" * 2_000_000
    c.send(b"set %s 0 0 2000000\r\n%s\r\n" % (k.encode(), big))
    c.expect(b"SERVER_ERROR object too large for cache\r\n")
    c.send(b"ms %s 2000000\r\n%s\r\n" % (k2.encode(), big))
    c.expect(b"SERVER_ERROR object too large for cache\r\n")
    c.request(f"get {k} {k2}\r\n", b"END\r\n")


@pytest.mark.parametrize("cmd", ["append {k} 0 0 2000000", "prepend {k} 0 0 2000000", "replace {k} 0 0 2000000",
                                 "add {k} 0 0 2000000", "cas {k} 0 0 2000000 1"])
def test_a_too_large_store_other_than_set_keeps_the_old_item(mc, key, cmd):
    """memcached unlinks the old item only when a set (or an ms, in any mode) is refused as too large."""
    c, k = mc(), key()
    c.set(k, b"old")
    c.send(cmd.format(k=k).encode() + b"\r\n" + b"x" * 2_000_000 + b"\r\n")
    c.expect(b"SERVER_ERROR object too large for cache\r\n")
    c.request(f"get {k}\r\n", f"VALUE {k} 0 3\r\nold\r\nEND\r\n".encode())


def test_a_bad_data_chunk_is_a_client_error_and_stores_nothing(mc, key):
    c = mc()
    k = key()
    c.set(k, b"old")
    # 5 bytes where 3 were announced: the 3 + CRLF slot holds "abcde"; memcached then reads the
    # CRLF left over as an empty command line (ERROR).
    c.send(f"set {k} 0 0 3\r\nabcde\r\n")
    c.expect(b"CLIENT_ERROR bad data chunk\r\nERROR\r\n")
    c.request(f"get {k}\r\n", value_reply(k, b"old") + b"END\r\n")
    c.send(f"ms {k} 3\r\nabcde\r\n")
    c.expect(b"CLIENT_ERROR bad data chunk\r\nERROR\r\n")
    c.request(f"get {k}\r\n", value_reply(k, b"old") + b"END\r\n")
    c.assert_silent()


def test_keys_up_to_250_bytes(mc):
    c = mc()
    k = ("K" + uuid.uuid4().hex) * 10
    k250, k251 = k[:250], k[:251]
    c.set(k250, b"v")
    c.request(f"get {k250}\r\n", value_reply(k250, b"v") + b"END\r\n")
    c.request(f"mg {k250} v\r\n", b"VA 1\r\nv\r\n")
    # too long: the line is an error, and its data block is then just a bad command (ERROR)
    c.request(f"set {k251} 0 0 1\r\nv\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n")
    c.request(f"get {k251}\r\n", b"CLIENT_ERROR bad command line format\r\n")
    c.request(f"delete {k250}\r\n", b"DELETED\r\n")
    c.assert_silent()


def test_a_multiget_line_may_be_longer_than_2048_bytes(mc, key):
    c = mc()
    keys = [key(f"{i:03d}") + "y" * 150 for i in range(300)]
    c.set(keys[7], b"seven")
    c.set(keys[299], b"last")
    c.request(f"get {' '.join(keys)}\r\n",
              value_reply(keys[7], b"seven") + value_reply(keys[299], b"last") + b"END\r\n")


def test_a_command_line_over_2048_bytes_without_lf_closes_the_connection(mc):
    c = mc()
    c.send(b"set " + b"x" * 3000)
    assert c.closed_by_peer() == b""


def test_binary_values_with_every_byte_value_round_trip(mc, key):
    c = mc()
    k = key()
    v = bytes(range(256)) * 4 + b"\r\nEND\r\nVALUE x 0 1\r\n"
    c.request(b"set %s 123 0 %d\r\n%s\r\n" % (k.encode(), len(v), v), b"STORED\r\n")
    c.request(f"get {k}\r\n", value_reply(k, v, 123) + b"END\r\n")
    c.request(f"mg {k} v f s\r\n", b"VA %d f123 s%d\r\n%s\r\n" % (len(v), len(v), v))


def test_quit_closes_the_connection(mc):
    c = mc()
    c.send(b"version\r\nquit\r\nversion\r\n")
    rest = c.closed_by_peer()
    assert rest is not None, "connection still open after quit"
    assert re.fullmatch(rb"VERSION \S+\r\n", rest), rest


def test_a_later_line_starting_with_0x80_is_an_unknown_text_command(mc):
    """Only a connection's first byte chooses the protocol, as in memcached."""
    c = mc()
    c.request(b"mn\r\n", b"MN\r\n")
    c.request(b"\x80abc\r\nmn\r\n", b"ERROR\r\nMN\r\n")


def test_gat_and_gats_return_and_touch(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.set(k, b"g", flags=4, exptime=100)
    c.request(f"gat 0 {k} {m}\r\n", value_reply(k, b"g", 4) + b"END\r\n")
    cas = c.gets_cas(k)
    c.request(f"gats 1000 {k}\r\n", value_reply(k, b"g", 4, cas) + b"END\r\n")
    c.send(f"mg {k} t\r\n")
    t = int(re.fullmatch(rb"HD t(\d+)\r\n", c.recv_line()).group(1))
    assert 995 <= t <= 1002
    c.request("gat 0\r\n", b"END\r\n")
    c.request("gat\r\n", b"ERROR\r\n")


def test_a_gat_line_of_many_keys_over_2048_bytes_is_answered(mc, key):
    """A client batching touches sends a long gat/gats line: memcached answers it when it arrives
    in one read (as here), tablesocket always (like a long get line)."""
    c = mc()
    ks = [key(f"g{i}") for i in range(150)]  # about 8 KB of keys
    for k in ks[:3]:
        c.set(k, b"v")
    line = f"gat 100 {' '.join(ks)}\r\n"
    assert 2048 < len(line) < 16000
    c.request(line, b"".join(value_reply(k, b"v") for k in ks[:3]) + b"END\r\n")
    c.send(f"mg {ks[0]} t\r\n")
    assert 95 <= int(re.fullmatch(rb"HD t(\d+)\r\n", c.recv_line()).group(1)) <= 100
    c.request(f"mn\r\n", b"MN\r\n")


def test_gat_that_ends_the_item_returns_it_for_the_first_of_repeated_keys_only(mc, key):
    # memcached takes the keys one after the other: the touch with a past exptime ends the item,
    # so a repeated key misses (tablesocket returned the item for every copy of the key).
    c = mc()
    k, k2 = key(), key("other")
    c.set(k, b"v", flags=1)
    c.set(k2, b"w", flags=2)
    c.request(f"gat -1 {k} {k} {k2} {k}\r\n", value_reply(k, b"v", 1) + value_reply(k2, b"w", 2) + b"END\r\n")
    c.request(f"get {k} {k2}\r\n", b"END\r\n")
    c.set(k, b"v", flags=1)
    c.request(f"gat 0 {k} {k}\r\n", value_reply(k, b"v", 1) * 2 + b"END\r\n")  # not ended: both


# --------------------------------------------------------------------------------------------------
# raw protocol: meta commands


def test_mn_answers_mn(mc):
    c = mc()
    c.request("mn\r\n", b"MN\r\n")
    c.request("mn\r\nmn\r\n", b"MN\r\nMN\r\n")


def test_mg_flags(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.request(f"mg {m} v\r\n", b"EN\r\n")
    c.request(f"mg {m} v k O123\r\n", f"EN k{m} O123\r\n".encode())
    c.request(f"mg {m} v q\r\nmn\r\n", b"MN\r\n")
    c.request(f"ms {k} 2 F7 T0\r\nhi\r\n", b"HD\r\n")
    cas = c.gets_cas(k)
    c.request(f"mg {k}\r\n", b"HD\r\n")
    c.request(f"mg {k} v\r\n", b"VA 2\r\nhi\r\n")
    c.request(f"mg {k} s v f t c k Oab q\r\n", f"VA 2 s2 f7 t-1 c{cas} k{k} Oab\r\nhi\r\n".encode())
    c.request(f"mg {k} k f c\r\n", f"HD k{k} f7 c{cas}\r\n".encode())
    c.request(f"mg {k} q k\r\nmn\r\n", f"HD k{k}\r\nMN\r\n".encode())  # q hides only a miss
    # T updates the TTL; t reports the remaining seconds
    c.send(f"mg {k} T300 t\r\n")
    t = int(re.fullmatch(rb"HD t(\d+)\r\n", c.recv_line()).group(1))
    assert 295 <= t <= 302
    c.send(f"mg {k} t v\r\n")
    m_ = re.fullmatch(rb"VA 2 t(\d+)\r\nhi\r\n", c.recv_until())
    assert m_ and 295 <= int(m_.group(1)) <= 302
    c.request(f"mg {k} c\r\n", f"HD c{cas}\r\n".encode())  # touching keeps the CAS
    c.request(f"mg {k} zz\r\n", b"CLIENT_ERROR invalid flag\r\n")
    c.assert_silent()


def test_ms_modes_and_flags(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.request(f"ms {k} 2 ME\r\nhi\r\n", b"HD\r\n")           # E: add
    c.request(f"ms {k} 2 ME\r\nho\r\n", b"NS\r\n")
    c.request(f"ms {k} 1 MA\r\nA\r\n", b"HD\r\n")            # A: append
    c.request(f"ms {k} 1 MP\r\nP\r\n", b"HD\r\n")            # P: prepend
    c.request(f"mg {k} v\r\n", b"VA 4\r\nPhiA\r\n")
    c.request(f"ms {m} 1 MA\r\nx\r\n", b"NS\r\n")
    c.request(f"ms {m} 1 MP\r\nx\r\n", b"NS\r\n")
    c.request(f"ms {m} 1 MR\r\nx\r\n", b"NS\r\n")            # R: replace
    c.request(f"ms {k} 1 MR F9\r\nR\r\n", b"HD\r\n")
    c.request(f"ms {k} 1 MS F3 T0\r\nS\r\n", b"HD\r\n")      # S: set
    c.request(f"mg {k} v f\r\n", b"VA 1 f3\r\nS\r\n")
    c.request(f"mg {m} v\r\n", b"EN\r\n")
    # C: compare and swap
    cas = c.gets_cas(k)
    c.request(f"ms {k} 1 C{cas + 1}\r\nX\r\n", b"EX\r\n")
    c.request(f"ms {m} 1 C{cas}\r\nX\r\n", b"NF\r\n")
    c.send(f"ms {k} 1 C{cas} c\r\nY\r\n")
    new = int(re.fullmatch(rb"HD c(\d+)\r\n", c.recv_line()).group(1))
    assert new != cas
    c.request(f"mg {k} c v\r\n", f"VA 1 c{new}\r\nY\r\n".encode())
    # T: TTL; q: HD hidden, NS shown; k and O echoed
    c.request(f"ms {k} 1 T500 q\r\nT\r\nmn\r\n", b"MN\r\n")
    c.send(f"mg {k} t v\r\n")
    m_ = re.fullmatch(rb"VA 1 t(\d+)\r\nT\r\n", c.recv_until())
    assert m_ and 495 <= int(m_.group(1)) <= 502
    c.request(f"ms {k} 1 ME q k O77\r\nE\r\n", f"NS k{k} O77\r\n".encode())
    c.request(f"ms {k} 1 k O77\r\nE\r\n", f"HD k{k} O77\r\n".encode())
    # I (invalidate) without C changes nothing about a plain set
    c.request(f"ms {k} 1 I\r\nI\r\n", b"HD\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1\r\nI\r\n")
    c.request(f"ms {k} 1 MX\r\nZ\r\n", b"CLIENT_ERROR invalid mode for ms M token\r\n")
    c.request(f"ms {k} 1 F-1\r\nZ\r\n", b"CLIENT_ERROR bad command line format\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1\r\nI\r\n")
    c.assert_silent()


def test_ms_invalidate_with_an_older_cas_stores_a_stale_item(mc, key):
    c = mc()
    k = key()
    c.request(f"ms {k} 1\r\n0\r\n", b"HD\r\n")  # twice: on a fresh memcached the first CAS is 1,
    c.request(f"ms {k} 1\r\n1\r\n", b"HD\r\n")  # and C0 below would mean "no CAS"
    cas = c.gets_cas(k)
    c.request(f"ms {k} 1 I C{cas - 1}\r\n2\r\n", b"HD\r\n")
    c.send(f"mg {k} v\r\n")
    assert re.fullmatch(rb"VA 1 X W\r\n2\r\n", c.recv_until())


def test_ms_invalidate_with_an_older_cas_keeps_the_ttl_and_a_win_already_handed_out(mc, key):
    c = mc()
    k = key()
    c.request(f"ms {k} 1 T100\r\nx\r\n", b"HD\r\n")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    c.send(f"mg {k} v c\r\n")                   # the stale item's one win token goes here
    m = re.fullmatch(rb"VA 1 c(\d+) X W\r\nx\r\n", c.recv_until())
    cas = int(m.group(1))
    c.request(f"ms {k} 1 C{cas - 1} I T50\r\ny\r\n", b"HD\r\n")  # an older CAS: stored, still stale
    c.send(f"mg {k} v t\r\n")                   # the old TTL (not T50), and no second W
    m = re.fullmatch(rb"VA 1 t(\d+) Z X\r\ny\r\n", c.recv_until())
    assert m and 95 <= int(m.group(1)) <= 100
    c.request(f"ms {k} 1\r\nz\r\n", b"HD\r\n")   # a plain set: fresh again
    c.request(f"mg {k} v\r\n", b"VA 1\r\nz\r\n")


def test_mg_applies_a_ttl_before_a_recache_that_follows_it(mc, key):
    c = mc()
    k, m = key(), key()
    c.request(f"ms {k} 1\r\nx\r\n", b"HD\r\n")
    c.request(f"ms {m} 1\r\nx\r\n", b"HD\r\n")
    c.request(f"mg {k} T1000 R2000\r\n", b"HD W\r\n")  # T first: R sees 1000 s left, under 2000
    c.request(f"mg {k}\r\n", b"HD Z\r\n")
    c.request(f"mg {m} R2000 T1000\r\n", b"HD\r\n")    # R first: no TTL yet, nothing to recache
    c.request(f"mg {m} R2000\r\n", b"HD W\r\n")        # now 1000 s left


@pytest.mark.parametrize("cmd,flags,first,then", [
    ("mg", "t N30", b"HD t-1 W", b"HD t30 Z"),     # t before the item exists
    ("mg", "T100 t N30", b"HD t100 W", b"HD t30 Z"),  # N after T: N's TTL
    ("mg", "N30 T100 t", b"HD t100 W", b"HD t100 Z"),  # T after N: T's
    ("mg", "N30 t T100", b"HD t30 W", b"HD t100 Z"),
    ("ma", "t N30", b"HD t-1", b"HD t30"),
    ("ma", "T100 N30 t", b"HD t30", b"HD t30"),
    ("ma", "N30 T100 t", b"HD t100", b"HD t100"),
])
def test_meta_t_and_n_apply_in_the_order_sent(mc, key, cmd, flags, first, then):
    """memcached applies T and N in the order sent (the later sets the TTL) and `t` shows the TTL
    where it stands among them; a differential fuzz found tablesocket applying T last."""
    c = mc()
    k = key()
    c.request(f"{cmd} {k} {flags}\r\n", first + b"\r\n")
    c.request(f"mg {k} t\r\n", then + b"\r\n")


@pytest.mark.parametrize("cmd", ["mg", "ma"])
def test_meta_t_before_t_shows_the_ttl_the_item_had(mc, key, cmd):
    c = mc()
    k = key()
    c.request(f"set {k} 0 50 1\r\n1\r\n", b"STORED\r\n")
    c.request(f"{cmd} {k} t T100\r\n", b"HD t50\r\n")
    c.request(f"mg {k} t\r\n", b"HD t100\r\n")


def test_mg_recache_token_over_30_days_is_a_unix_time(mc, key):
    """R's token is read as an exptime: over 30 days a unix time; one in the past never wins."""
    c = mc()
    k = key()
    c.request(f"set {k} 0 1000 1\r\na\r\n", b"STORED\r\n")
    c.request(f"mg {k} R5000000 t\r\n", b"HD t1000\r\n")
    c.request(f"mg {k} R{int(time.time()) + 2000} t\r\n", b"HD t1000 W\r\n")


def test_ms_invalidate_with_cas_0_is_exists(mc, key):
    c = mc()
    k = key()
    c.request(f"set {k} 0 0 3\r\n387\r\n", b"STORED\r\n")
    c.request(f"ms {k} 1 C0 I\r\ny\r\n", b"EX\r\n")
    c.request(f"mg {k} v\r\n", b"VA 3\r\n387\r\n")


def test_incr_reads_the_number_up_to_a_nul_or_a_space(mc, key):
    c = mc()
    k, m = key(), key()
    c.request(f"set {k} 0 0 3\r\n1\x002\r\n", b"STORED\r\n")
    c.request(f"incr {k} 1\r\n", b"2\r\n")
    c.request(f"set {m} 0 0 5\r\n7 345\r\n", b"STORED\r\n")
    c.request(f"incr {m} 1\r\n", b"8\r\n")


def test_mg_autovivify_creates_the_missing_item(mc, key):
    c = mc()
    k = key()
    c.send(f"mg {k} N30 v t\r\n")
    assert re.fullmatch(rb"VA 0 t30 W\r\n\r\n", c.recv_until())
    c.send(f"mg {k} N30 v\r\n")
    assert re.fullmatch(rb"VA 0 Z\r\n\r\n", c.recv_until())


def test_the_win_token_goes_to_one_client_until_the_item_is_set(mc, key):
    a, b = mc(), mc()
    k = key()
    a.send(f"mg {k} N30 v c\r\n")
    assert re.fullmatch(rb"VA 0 c\d+ W\r\n\r\n", a.recv_until())
    b.send(f"mg {k} N30 v\r\n")                      # another client: someone is on it
    assert re.fullmatch(rb"VA 0 Z\r\n\r\n", b.recv_until())
    a.request(f"ms {k} 5 T60\r\nfresh\r\n", b"HD\r\n")   # the winner fills it
    b.request(f"mg {k} v\r\n", b"VA 5\r\nfresh\r\n")   # an ordinary hit again
    b.request(f"mg {k} N30 v\r\n", b"VA 5\r\nfresh\r\n")


def test_mg_recache_hands_out_one_win_when_the_ttl_runs_low(mc, key):
    c = mc()
    k = key()
    c.request(f"ms {k} 1 T10\r\nv\r\n", b"HD\r\n")
    c.request(f"mg {k} v R5\r\n", b"VA 1\r\nv\r\n")      # 10 s left: no need yet
    c.send(f"mg {k} v R30\r\n")                           # under 30 s left: this one wins
    assert re.fullmatch(rb"VA 1 W\r\nv\r\n", c.recv_until())
    c.send(f"mg {k} v R30\r\n")
    assert re.fullmatch(rb"VA 1 Z\r\nv\r\n", c.recv_until())


def test_md_invalidate_marks_the_item_stale_instead_of_deleting_it(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.request(f"ms {k} 1\r\nv\r\n", b"HD\r\n")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    c.send(f"mg {k} v\r\n")
    assert re.fullmatch(rb"VA 1 X W\r\nv\r\n", c.recv_until())
    c.send(f"mg {k} v\r\n")
    assert re.fullmatch(rb"VA 1 Z X\r\nv\r\n", c.recv_until())
    c.request(f"ms {k} 1\r\nw\r\n", b"HD\r\n")          # a new value: fresh again
    c.request(f"mg {k} v\r\n", b"VA 1\r\nw\r\n")
    c.request(f"md {m} I\r\n", b"NF\r\n")


def test_an_incr_in_place_keeps_the_items_stale_and_win_state(mc, key):
    """memcached rewrites a number in place when the result is no longer than the old one: the
    same item, its stale and win bits kept (a helper's meta-memcache run: tablesocket cleared
    them, and a recache handed out a second W, the stampede it exists to prevent). A longer
    number is a new item in memcached: fresh."""
    c = mc()
    k, r, g = key("stale"), key("recache"), key("grows")
    c.request(f"ms {k} 1\r\n5\r\n", b"HD\r\n")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    c.request(f"ma {k} v\r\n", b"VA 1\r\n6\r\n")
    c.send(f"mg {k} v\r\n")
    assert re.fullmatch(rb"VA 1 X W\r\n6\r\n", c.recv_until())
    c.send(f"mg {k} v\r\n")
    assert re.fullmatch(rb"VA 1 Z X\r\n6\r\n", c.recv_until())
    c.request(f"ms {r} 1 T10\r\n5\r\n", b"HD\r\n")
    c.send(f"mg {r} R30 v\r\n")
    assert re.fullmatch(rb"VA 1 W\r\n5\r\n", c.recv_until())
    c.request(f"ma {r} v\r\n", b"VA 1\r\n6\r\n")
    c.send(f"mg {r} R30 v\r\n")
    assert re.fullmatch(rb"VA 1 Z\r\n6\r\n", c.recv_until())  # the win stays handed out
    c.request(f"ms {g} 1\r\n9\r\n", b"HD\r\n")
    c.request(f"md {g} I\r\n", b"HD\r\n")
    c.request(f"ma {g} v\r\n", b"VA 2\r\n10\r\n")
    c.request(f"mg {g} v\r\n", b"VA 2\r\n10\r\n")


def test_md_invalidate_gives_the_item_a_new_cas_and_ttl(mc, key):
    """As memcached: md I bumps the CAS (a CAS taken before no longer matches) and T<ttl> sets the
    TTL; the item keeps its value."""
    c = mc()
    k = key()
    c.request(f"ms {k} 1\r\nv\r\n", b"HD\r\n")
    c.send(f"mg {k} c\r\n")
    before = int(re.fullmatch(rb"HD c(\d+)\r\n", c.recv_line()).group(1))
    c.request(f"md {k} I T30\r\n", b"HD\r\n")
    c.send(f"mg {k} c t v\r\n")
    m = re.fullmatch(rb"VA 1 c(\d+) t(\d+) X W\r\nv\r\n", c.recv_until())
    assert m, "md I T30 did not keep the value with a new CAS and a TTL"
    assert int(m.group(1)) != before
    assert 25 <= int(m.group(2)) <= 30
    c.request(f"ms {k} 1 C{before}\r\nx\r\n", b"EX\r\n")
    c.request(f"ms {k} 1 C{int(m.group(1))}\r\nx\r\n", b"HD\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1\r\nx\r\n")


@TS_ONLY
def test_a_write_through_sql_ends_an_items_stale_state(ts, tsmc, key):
    c = tsmc()
    k = key()
    c.request(f"ms {k} 1\r\nv\r\n", b"HD\r\n")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    ts.exec_sql("UPDATE test.kv SET v = 'sql', cas = cas + 1 WHERE k = %s", (k.encode(),))
    c.request(f"mg {k} v\r\n", b"VA 3\r\nsql\r\n")


def test_md_with_q_and_c(mc, key):
    c = mc()
    k, m = key(), key("missing")
    c.request(f"md {m}\r\n", b"NF\r\n")
    c.request(f"md {m} q\r\n", b"NF\r\n")                   # q hides HD only
    c.request(f"md {m} k O5\r\n", f"NF k{m} O5\r\n".encode())
    c.set(k, b"v")
    cas = c.gets_cas(k)
    c.request(f"md {k} C{cas + 1}\r\n", b"EX\r\n")
    c.request(f"get {k}\r\n", value_reply(k, b"v") + b"END\r\n")
    c.request(f"md {k} C{cas} k\r\n", f"HD k{k}\r\n".encode())
    c.request(f"md {k} C{cas}\r\n", b"NF\r\n")
    c.set(k, b"v")
    c.request(f"md {k} q\r\nmn\r\n", b"MN\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")
    c.assert_silent()


def test_ms_append_and_ma_with_a_cas_change_the_item_only_if_it_matches(mc, key):
    c, k = mc(), key()
    c.set(k, b"5")
    c.request(f"ms {k} 1 MA C1\r\nz\r\n", b"EX\r\n")
    c.request(f"ms {k} 1 MP C1\r\nz\r\n", b"EX\r\n")
    c.request(f"ma {k} C1 v\r\n", b"EX\r\n")
    c.request(f"ma {k} C1 MD\r\n", b"EX\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1\r\n5\r\n")
    cas = c.gets_cas(k)
    c.request(f"ma {k} C{cas} v\r\n", b"VA 1\r\n6\r\n")
    c.request(f"ma {k} C{cas} v\r\n", b"EX\r\n")  # the CAS changed with the increment
    cas = c.gets_cas(k)
    c.request(f"ms {k} 1 MA C{cas}\r\n!\r\n", b"HD\r\n")
    c.request(f"mg {k} v\r\n", b"VA 2\r\n6!\r\n")
    n = key("n")
    c.set(n, b"abc")
    c.request(f"ma {n} C1\r\n", b"EX\r\n")  # the CAS is checked before the value is read


def test_a_store_that_fails_keeps_the_items_stale_and_win_state(mc, key):
    c, k = mc(), key()
    c.set(k, b"1")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    c.request(f"add {k} 0 0 1\r\n2\r\n", b"NOT_STORED\r\n")
    c.request(f"ms {k} 1 C1\r\n3\r\n", b"EX\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1 X W\r\n1\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1 Z X\r\n1\r\n")
    v = key("viv")
    c.request(f"mg {v} N30 v\r\n", b"VA 0 W\r\n\r\n")
    c.request(f"cas {v} 0 0 1 1\r\nx\r\n", b"EXISTS\r\n")
    c.request(f"incr {v} 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
    c.request(f"mg {v} v\r\n", b"VA 0 Z\r\n\r\n")


def test_ma_t_reports_the_items_ttl(mc, key):
    c, k = mc(), key()
    c.set(k, b"5", exptime=100)
    c.send(f"ma {k} t\r\n")
    line = c.recv_line()
    assert re.fullmatch(rb"HD t(99|100)\r\n", line), line
    c.send(f"ma {k} T50 t\r\n")
    line = c.recv_line()
    assert re.fullmatch(rb"HD t(49|50)\r\n", line), line
    n = key("n")
    c.send(f"ma {n} N30 t\r\n")
    line = c.recv_line()
    assert re.fullmatch(rb"HD t(29|30)\r\n", line), line
    c.set(key("forever"), b"1")
    c.request(f"ma {key('none')} t\r\n", b"NF\r\n")


def test_ma_modes_autovivify_and_value(mc, key):
    c = mc()
    k, m, v = key(), key("missing"), key("vivify")
    c.request(f"ma {m}\r\n", b"NF\r\n")
    c.request(f"ma {m} q\r\n", b"NF\r\n")
    c.request(f"ma {v} N0 J13 v\r\n", b"VA 2\r\n13\r\n")       # created with J, delta not applied
    c.request(f"ma {v} N0 J13 v\r\n", b"VA 2\r\n14\r\n")
    c.request(f"ma {v} MD D20 v\r\n", b"VA 1\r\n0\r\n")        # decrement stops at 0
    c.request(f"ma {v} M+ D5 v\r\n", b"VA 1\r\n5\r\n")
    c.request(f"ma {v} MI v\r\n", b"VA 1\r\n6\r\n")
    c.request(f"ma {v} M- D2 v\r\n", b"VA 1\r\n4\r\n")
    c.request(f"ma {v} Md D1 v\r\n", b"CLIENT_ERROR invalid mode for ma M token\r\n")
    c.request(f"ma {v}\r\n", b"HD\r\n")
    c.request(f"ma {v} q\r\nmn\r\n", b"MN\r\n")
    c.request(f"ma {v} D0 v\r\n", b"VA 1\r\n6\r\n")  # (mg would show memcached's space padding)
    c.request(f"ma {v} D18446744073709551615 v\r\n", b"VA 1\r\n5\r\n")  # wraps
    c.send(f"ma {v} t c v\r\n")
    m_ = re.fullmatch(rb"VA 1 t-1 c(\d+)\r\n6\r\n", c.recv_until())
    assert m_, "ma t c"
    c.request(f"mg {v} c\r\n", b"HD c%s\r\n" % m_.group(1))
    c.set(k, b"nan")
    c.request(f"ma {k}\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
    c.request(f"ma {k} MX\r\n", b"CLIENT_ERROR invalid mode for ma M token\r\n")
    c.request(f"ma {k} Dx\r\n", b"CLIENT_ERROR invalid or duplicate flag\r\n")
    c.request(f"ma {m} N0 q\r\n", b"HD\r\n")                    # an autovivified item answers
    c.request(f"mg {m} v\r\n", b"VA 1\r\n0\r\n")
    c.assert_silent()


@on_targets()
def test_ma_q_with_v_is_silent_on_success(mc, key):
    c = mc()
    k = key()
    c.set(k, b"10")
    c.request(f"ma {k} q v\r\nmn\r\n", b"MN\r\n")
    c.request(f"mg {k} v\r\n", b"VA 2\r\n11\r\n")


def test_ma_autovivify_returns_the_items_cas(mc, key):
    c = mc()
    k = key()
    c.send(f"ma {k} N0 J7 c v\r\n")
    m_ = re.fullmatch(rb"VA 1 c(\d+)\r\n7\r\n", c.recv_until())
    assert m_
    c.request(f"mg {k} c\r\n", b"HD c%s\r\n" % m_.group(1))


def test_meta_base64_keys_address_binary_keys(target, mc):
    c = mc()
    raw = b"bin key\x00\xff:" + uuid.uuid4().hex[:8].encode()
    b64 = base64.b64encode(raw).decode()
    c.request(f"ms {b64} 2 b F3\r\nhi\r\n", b"HD\r\n")
    c.send(f"mg {b64} b v k f c\r\n")
    assert re.fullmatch(rb"VA 2 k%s b f3 c\d+\r\nhi\r\n" % re.escape(b64.encode()), c.recv_until())
    c.request(f"ma {b64} b\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
    if target.is_ts:
        assert target.server.sql_bytes("SELECT v, flags FROM test.kv WHERE k = %s", (raw,)) == [(b"hi", b"3")]
    c.request(f"md {b64} b q\r\nmg {b64} b k\r\n", f"EN k{b64} b\r\n".encode())
    c.request(f"mg {b64}x b v\r\n", b"CLIENT_ERROR error decoding key\r\n")


def test_concurrent_incr_and_add_from_many_connections_lose_nothing(mc, key):
    import threading
    k, a = key("counter"), key("add")
    c0 = mc()
    c0.set(k, b"0")
    conns = [mc() for _ in range(8)]
    per_conn = 200
    results: list[list[int]] = [[] for _ in conns]
    add_replies: list[bytes] = [b""] * len(conns)
    errors: list[BaseException] = []

    def work(i: int, c: McConn):
        try:
            c.send(f"add {a} 0 0 1\r\n{i}\r\n")
            add_replies[i] = c.recv_line()
            for start in range(0, per_conn, 50):
                c.send(f"incr {k} 1\r\n" * 50)
                results[i] += [int(c.recv_line()) for _ in range(50)]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    every = sorted(v for r in results for v in r)
    assert every == list(range(1, len(conns) * per_conn + 1))  # each increment seen exactly once
    c0.request(f"get {k}\r\n", value_reply(k, str(len(conns) * per_conn).encode()) + b"END\r\n")
    assert sorted(add_replies) == [b"NOT_STORED\r\n"] * (len(conns) - 1) + [b"STORED\r\n"]


def test_stats_lists_stat_lines_then_end(mc):
    c = mc()
    c.send("stats\r\n")
    r = c.recv_until()
    lines = r.split(b"\r\n")
    assert lines[-2:] == [b"END", b""]
    stats = {}
    for line in lines[:-2]:
        m = re.fullmatch(rb"STAT (\S+) (.+)", line)
        assert m, line
        stats[m.group(1)] = m.group(2)
    for name in (b"pid", b"time", b"version", b"curr_connections", b"total_connections"):
        assert name in stats, stats
    assert abs(int(stats[b"time"]) - now()) <= 5
    c.send("stats settings\r\n")
    assert c.recv_until().endswith(b"END\r\n")
    c.request("stats reset\r\n", b"RESET\r\n")


def test_stats_counts_every_connection(target, mc):
    others = [mc() for _ in range(6)]
    for o in others:
        o.request("mn\r\n", b"MN\r\n")
    c = mc()
    c.send("stats\r\n")
    stats = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    assert int(stats[b"curr_connections"]) >= len(others) + 1, stats
    assert int(stats[b"total_connections"]) >= int(stats[b"curr_connections"]), stats



def test_stats_count_keys_hits_and_misses(mc, key):
    c = mc()
    hit, miss = key("hit"), key("miss")
    c.set(hit, b"v")

    def stats():
        c.send("stats\r\n")
        st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
        return {k: int(st[k.encode()]) for k in ("cmd_get", "get_hits", "get_misses")}
    s0 = stats()
    c.request(f"get {hit} {miss} {miss}\r\n", value_reply(hit, b"v") + b"END\r\n")
    c.request(f"mg {hit} v\r\n", b"VA 1\r\nv\r\n")
    c.request(f"mg {miss} v\r\n", b"EN\r\n")
    s1 = stats()
    assert {k: s1[k] - s0[k] for k in s0} == {"cmd_get": 5, "get_hits": 2, "get_misses": 3}

def test_stats_count_items_stored_expired_gets_and_no_evictions(mc, key):
    """total_items counts stores that stored, get_expired the keys asked for that had expired (they
    are misses too), evictions stays 0: monitoring (Telegraf, Datadog) graphs these three."""
    c = mc()
    a, b, gone = key("a"), key("b"), key("gone")

    def stats():
        c.send("stats\r\n")
        st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
        return {k: int(st[k.encode()]) for k in ("total_items", "get_expired", "get_misses", "evictions")}
    s0 = stats()
    c.request(f"set {a} 0 0 1\r\n1\r\n", b"STORED\r\n")
    c.request(f"add {a} 0 0 1\r\n2\r\n", b"NOT_STORED\r\n")
    c.request(f"append {a} 0 0 1\r\n3\r\n", b"STORED\r\n")
    c.request(f"replace {b} 0 0 1\r\n4\r\n", b"NOT_STORED\r\n")
    c.request(f"set {gone} 0 -1 1\r\n5\r\n", b"STORED\r\n")
    c.request(f"incr {a} 1\r\n", b"14\r\n")
    c.request(f"get {gone} {b}\r\n", b"END\r\n")
    s1 = stats()
    assert {k: s1[k] - s0[k] for k in s0} == {"total_items": 3, "get_expired": 1, "get_misses": 2, "evictions": 0}
    assert s1["evictions"] == 0


METADUMP_LINE = re.compile(rb"key=(\S+) exp=(-?\d+) la=(\d+) cas=(\d+) fetch=(yes|no) cls=(\d+) size=(\d+)")


def metadump(c: McConn, classes: str = "all", timeout: float = 60) -> tuple[list[dict], bytes]:
    """`lru_crawler metadump <classes>`: its item lines (key URL-decoded) and the line that ended it."""
    c.send(f"lru_crawler metadump {classes}\r\n")
    raw = c.recv_line(timeout=timeout)  # item lines end in LF only: all of them, through END's CRLF
    *lines, last = raw.split(b"\n")[:-1]
    items = []
    for line in lines:
        m = METADUMP_LINE.fullmatch(line)
        assert m, line
        items.append({"key": urllib.parse.unquote_to_bytes(m.group(1)), "exp": int(m.group(2)),
                      "la": int(m.group(3)), "cas": int(m.group(4)), "fetch": m.group(5).decode(),
                      "cls": int(m.group(6)), "size": int(m.group(7))})
    return items, last + b"\n"


def test_metadump_lists_every_live_item_as_memcached_does(target, mc, key):
    """memcached-tool's dump and keys read `lru_crawler metadump all`: a line per item (its key
    URL-encoded, expiry, cas, size as memcached counts it), LF-terminated, then END; expired and
    deleted items are not listed; a class list without the items' class lists nothing."""
    c = mc()
    t0 = now()
    plain, timed, odd, flagged, gone, expired = (key(n) for n in ("plain", "timed", "odd%/+", "flagged", "gone",
                                                                      "expired"))
    c.set(plain, b"v1")
    c.set(timed, b"value2", exptime=1000)
    c.set(odd, b"")
    c.set(flagged, b"xyz", flags=7)
    c.set(gone, b"g")
    c.request(f"delete {gone}\r\n", b"DELETED\r\n")
    c.request(f"set {expired} 0 -1 1\r\nx\r\n", b"STORED\r\n")
    prefix = plain.rsplit(":", 2)[0].encode() + b":"  # this test's keys
    items, end = metadump(c)
    assert end == b"END\r\n"
    mine = {it["key"]: it for it in items if it["key"].startswith(prefix)}
    assert set(mine) == {k.encode() for k in (plain, timed, odd, flagged)}, mine
    values = {plain: b"v1", timed: b"value2", odd: b"", flagged: b"xyz"}
    for k, v in values.items():
        it = mine[k.encode()]
        assert it["cas"] == c.gets_cas(k), it  # (memcached marks it fetched from here on)
        assert it["size"] == 48 + len(k) + 1 + len(v) + 2 + 8 + (4 if k == flagged else 0), it
        assert t0 - 1 <= it["la"] <= now() + 1, it
        if target.is_ts:
            assert it["fetch"] == "no" and it["cls"] == 1, it  # tables keep no fetched bit; one class
    assert mine[plain.encode()]["exp"] == -1
    assert t0 + 1000 - 1 <= mine[timed.encode()]["exp"] <= now() + 1000 + 1
    # the key is URL-encoded as memcached encodes it (everything but [A-Za-z0-9._~-])
    c.send("lru_crawler metadump all\r\n")
    assert re.sub(r"[^A-Za-z0-9._~-]", lambda m: "%%%02X" % ord(m.group(0)), odd).encode() in c.recv_line(timeout=60)
    # a class list without the items' classes (memcached's: by size, 1 or 2 here; tablesocket's: 1)
    items, end = metadump(c, "2,3" if target.is_ts else "62,63")
    assert end == b"END\r\n" and not [it for it in items if it["key"].startswith(prefix)]
    for bad in ("0", "64", "1,x", "ALL"):
        c.request(f"lru_crawler metadump {bad}\r\n", b"BADCLASS invalid class id\r\n")
    for bad in ("lru_crawler metadump", "lru_crawler metadump all x", "lru_crawler metadump 1 noreply"):
        c.request(bad + "\r\n", b"ERROR\r\n")
    c.request(f"get {plain}\r\n", value_reply(plain, b"v1") + b"END\r\n")  # still in step


@TS_ONLY
def test_metadump_of_a_large_table_streams_in_index_order(ts, tsmc, make_table, containers):
    """60,000 rows written through SQL (about 4.5 MB of dump lines, over the output high water):
    every live row exactly once, in key order, written as the client reads (another connection is
    answered while this one does not read; the commands pipelined behind it come after END);
    rows SQL wrote with a past expiry are not listed; an item's cas without a cas value is its
    content's, as gets shows it."""
    t = make_table("k VARCHAR(64) PRIMARY KEY, v VARCHAR(200), fl INT UNSIGNED NOT NULL DEFAULT 0, "
                   "ex INT UNSIGNED NOT NULL DEFAULT 0")
    n = 60_000
    ts.exec_sql(f"INSERT INTO test.{t} SELECT CONCAT('row', LPAD(seq, 6, '0')), REPEAT('v', seq % 150), seq % 5, "
                f"IF(seq % 1000 = 7, 1000, 0) FROM seq_1_to_{n}")
    name = containers(f"mc_{uuid.uuid4().hex[:8]}", t, "k", "v", "fl", None, "ex")
    c, other = tsmc(), tsmc()
    wait_for_container(c, name)
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    other.request(f"set @@{name}.zzz 0 0 1\r\nz\r\n", b"STORED\r\n")
    c.send("lru_crawler metadump all\r\nget row000003\r\n")
    time.sleep(0.5)  # the client reads nothing for a while
    other.request(f"get @@{name}.zzz\r\n", value_reply(f"@@{name}.zzz", b"z") + b"END\r\n")
    raw = c.recv_line(timeout=120)
    assert raw.endswith(b"\nEND\r\n")
    keys = [m.group(1) for m in re.finditer(rb"^key=(\S+) ", raw, re.M)]
    want = [b"row%06d" % i for i in range(1, n + 1) if i % 1000 != 7] + [b"zzz"]
    assert keys == want
    c.expect(value_reply("row000003", b"vvv", 3) + b"END\r\n")
    line = re.search(rb"^key=row000004 .*$", raw, re.M).group(0)
    assert int(METADUMP_LINE.fullmatch(line).group(4)) == c.gets_cas("row000004")


def test_a_metadump_cut_short_by_drop_table_ends_with_an_error_and_the_connection_goes_on(
        ts, tsmc, make_table, containers):
    """DDL during a streaming dump: a client starts a metadump of 300,000 rows (24 MB, far more
    than the socket buffers hold) and reads none of it while the table is dropped. The DROP is not
    held up by the dump (the worker closes the table between pages); the client then gets the
    lines written so far and a SERVER_ERROR in place of END, never a hang, and its next command is
    answered."""
    t = make_table("k VARCHAR(64) PRIMARY KEY, v VARCHAR(200)")
    ts.exec_sql(f"INSERT INTO test.{t} SELECT CONCAT('row', LPAD(seq, 6, '0')), REPEAT('v', seq % 150) "
                f"FROM seq_1_to_300000")
    name = containers(f"mc_{uuid.uuid4().hex[:8]}", t, "k", "v", "0", None, None)
    c = tsmc()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # the dump waits for the client soon
    wait_for_container(c, name)
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.send("lru_crawler metadump all\r\nversion\r\n")
    time.sleep(0.3)  # the first parts are written; the client reads nothing
    t0 = time.monotonic()
    ts.exec_sql(f"DROP TABLE test.{t}")
    took = time.monotonic() - t0
    assert took < 5, "the DROP waited for the dump"
    raw = c.recv_line(timeout=60)  # the dump's lines end in LF, its last line in CRLF
    lines = raw[:-2].split(b"\n")
    assert all(line.startswith(b"key=") for line in lines[:-1])
    assert lines[-1].startswith(b"SERVER_ERROR cannot open the container's table"), lines[-1]
    assert len(lines) - 1 < 300_000
    assert re.match(rb"^VERSION ", c.recv_line(timeout=30)), "the connection did not go on"
    c.request("mn\r\n", b"MN\r\n")


@pytest.mark.parametrize("which", [pytest.param("tablesocket", marks=TS_ONLY), "memcached-ref"])
def test_memcached_tool_dump_and_keys_list_the_items(which, request):
    """Debian's memcached-tool (memcached's own script): `dump` lists every item as add commands
    (flags, expiry, value) and `keys` lists the keys, both from lru_crawler metadump. On a server of
    its own (the tool sends each key back in a get: another test's key with a space would put it
    out of step): tablesocket's with the mcopts server's default container emptied, memcached's a
    private instance."""
    tool = shutil.which("memcached-tool") or "/usr/share/memcached/scripts/memcached-tool"
    if not os.path.exists(tool) or not shutil.which("perl"):
        pytest.skip("memcached-tool is not installed (memcached)")
    ref = None
    if which == "tablesocket":
        srv = request.getfixturevalue("opts_server")
        srv.exec_sql("DELETE FROM test.kv_alt")
        port = srv.mc_port
    else:
        if not MemcachedRef.available():
            pytest.skip("memcached is not installed")
        ref = MemcachedRef().start()
        port = ref.port
    try:
        c = McConn(port)
        items = {b"alpha": (3, 0, b"one"), b"b%2Fx:y": (0, now() + 5000, b"two\r\nlines"), b"empty": (0, 0, b"")}
        for k, (flags, exp, v) in items.items():
            c.request(b"set %s %d %d %d\r\n%s\r\n" % (k, flags, exp, len(v), v), b"STORED\r\n")
        c.close()
        dump = subprocess.run(["perl", tool, f"127.0.0.1:{port}", "dump"], capture_output=True, timeout=120)
        assert dump.returncode == 0, dump.stderr
        assert len(re.findall(rb"^add \S+ \d+ \d+ \d+\r\n", dump.stdout, re.M)) == len(items), dump.stdout
        for k, (flags, exp, v) in items.items():
            head = re.search(rb"add %s %d (\d+) %d\r\n" % (re.escape(k), flags, len(v)), dump.stdout)
            assert head and abs(int(head.group(1)) - exp) <= 2, dump.stdout
            assert dump.stdout[head.end():head.end() + len(v) + 2] == v + b"\r\n"
        keys = subprocess.run(["perl", tool, f"127.0.0.1:{port}", "keys"], capture_output=True, timeout=120)
        assert keys.returncode == 0, keys.stderr
        listed = {urllib.parse.unquote_to_bytes(m.group(1)) for m in re.finditer(rb"^key=(\S+) ", keys.stdout, re.M)}
        assert listed == set(items), keys.stdout
    finally:
        if ref:
            ref.stop()


def test_stats_detail_is_accepted_and_dumps_nothing(mc):
    """memcached's t/binary.t and stats tests turn per-prefix statistics on and dump them."""
    c = mc()
    c.request("stats detail on\r\n", b"OK\r\n")
    c.request("stats detail dump\r\n", b"END\r\n")
    c.request("stats detail off\r\n", b"OK\r\n")


def test_stats_sizes_says_the_histogram_is_off(mc):
    """memcached keeps no item size histogram unless started with it, and says so (tablesocket
    listed nothing, which a client reading the figure finds missing)."""
    mc().request("stats sizes\r\n", b"STAT sizes_status disabled\r\nEND\r\n")


def test_stats_reset_zeroes_the_counters_clients_see(mc, key):
    """As memcached's t/issue_104.t: after `stats reset` the get/set counters count from zero
    (tablesocket's SHOW STATUS keeps its own totals); `uptime` is listed."""
    c = mc()
    k = key()
    c.request("stats reset\r\n", b"RESET\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")
    c.set(k, b"v")
    c.request(f"get {k}\r\n", value_reply(k, b"v") + b"END\r\n")
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    assert {n: int(st[n.encode()]) for n in ("cmd_get", "get_hits", "get_misses", "cmd_set")} == \
        {"cmd_get": 2, "get_hits": 1, "get_misses": 1, "cmd_set": 1}, st
    assert int(st[b"uptime"]) >= 0


def test_stats_count_hits_and_misses_per_command(mc, key):
    """The per-command figures monitoring reads (Prometheus' memcached_exporter needs the cas ones
    to report the server up): touch, cas, delete, incr, decr hits and misses, cmd_touch, cmd_flush."""
    c = mc()
    k, n, gone = key("k"), key("n"), key("gone")
    c.set(k, b"v")
    c.set(n, b"5")
    c.request("stats reset\r\n", b"RESET\r\n")
    c.request(f"touch {k} 100\r\n", b"TOUCHED\r\n")
    c.request(f"touch {gone} 100\r\n", b"NOT_FOUND\r\n")
    c.request(f"cas {gone} 0 0 1 1\r\nx\r\n", b"NOT_FOUND\r\n")
    c.send(f"gets {k}\r\n")
    cas = int(re.match(rb"VALUE \S+ 0 1 (\d+)\r\n", c.recv_until()).group(1))
    c.request(f"cas {k} 0 0 1 {cas}\r\nw\r\n", b"STORED\r\n")
    c.request(f"cas {k} 0 0 1 {cas}\r\nz\r\n", b"EXISTS\r\n")
    c.request(f"gat 100 {k} {gone}\r\n", value_reply(k, b"w") + b"END\r\n")  # touches, not gets
    c.request(f"mg {k} T100\r\n", b"HD\r\n")
    c.request(f"mg {gone} T100\r\n", b"EN\r\n")
    c.request(f"incr {n} 2\r\n", b"7\r\n")
    c.request(f"incr {gone} 2\r\n", b"NOT_FOUND\r\n")
    c.request(f"decr {n} 1\r\n", b"6\r\n")
    c.request(f"decr {gone} 1\r\n", b"NOT_FOUND\r\n")
    c.request(f"delete {n}\r\n", b"DELETED\r\n")
    c.request(f"delete {gone}\r\n", b"NOT_FOUND\r\n")
    c.request(f"delete {gone}\r\n", b"NOT_FOUND\r\n")
    c.request("flush_all\r\n", b"OK\r\n")
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    names = ("cmd_get", "get_hits", "cmd_touch", "touch_hits", "touch_misses", "cas_hits", "cas_badval",
             "cas_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses", "delete_hits", "delete_misses",
             "cmd_flush")
    assert {n: int(st[n.encode()]) for n in names} == \
        dict(zip(names, (2, 1, 5, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1))), st  # (mg T's miss is a get miss)


def test_stats_count_meta_commands_as_memcached_does(mc, key):
    """The meta commands' figures (an audit against memcached 1.6.18 found them apart): md with C
    or I that deletes nothing is a delete miss (md I that marks an item is no delete hit); ms I
    with an older CAS stores, a cas hit; ma N and mg N creating the item are a stored item and a
    get hit, not misses. (get_expired is left out: memcached's LRU crawler may reap an expired
    item first, making it a plain miss.)"""
    c = mc()
    k, k2, gone, ctr, viv, old = key("k"), key("k2"), key("gone"), key("ctr"), key("viv"), key("old")
    c.set(k, b"v")
    c.set(k2, b"v")
    c.request(f"set {old} 0 1 1\r\no\r\n", b"STORED\r\n")  # expires in a second
    c.send(f"gets {k2}\r\n")
    first_cas = int(re.match(rb"VALUE \S+ 0 1 (\d+)\r\n", c.recv_until()).group(1))
    c.set(k2, b"w")
    time.sleep(2.1)
    c.request("stats reset\r\n", b"RESET\r\n")
    c.request(f"md {gone} C123\r\n", b"NF\r\n")
    c.request(f"md {k} C123\r\n", b"EX\r\n")
    c.request(f"md {gone} I\r\n", b"NF\r\n")
    c.request(f"md {k} I\r\n", b"HD\r\n")
    c.request(f"ms {k2} 1 I C{first_cas}\r\nx\r\n", b"HD\r\n")
    c.request(f"ma {ctr} N0 J5 v\r\n", b"VA 1\r\n5\r\n")
    c.send(f"mg {viv} N30 v\r\n")
    assert c.recv_line(5.0).startswith(b"VA 0 W"), "mg N wins the new item"
    c.recv_line(5.0)
    c.request(f"gat 100 {old}\r\n", b"END\r\n")
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    names = ("delete_hits", "delete_misses", "cas_hits", "cas_badval", "incr_misses", "incr_hits", "get_hits",
             "get_misses", "total_items", "touch_misses", "store_too_large")
    assert {n: int(st[n.encode()]) for n in names} == \
        dict(zip(names, (0, 3, 1, 0, 0, 0, 1, 0, 3, 1, 0))), st


def test_an_incr_that_outgrows_the_value_counts_a_new_item(mc, key):
    """memcached rewrites a number in place when it fits the old value and links a new item
    (total_items) when it does not: 9 -> 10 and 99 -> 100 count, 10 -> 15 and decr do not."""
    c = mc()
    n, m = key("n"), key("m")
    c.request("stats reset\r\n", b"RESET\r\n")
    c.set(n, b"9")
    c.request(f"incr {n} 1\r\n", b"10\r\n")
    c.request(f"incr {n} 5\r\n", b"15\r\n")
    c.request(f"decr {n} 3\r\n", b"12\r\n")
    c.set(m, b"99")
    c.request(f"ma {m} v\r\n", b"VA 3\r\n100\r\n")
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    assert int(st[b"total_items"]) == 4, st


def test_me_prints_exp_as_memcached_does(mc, key):
    """memcached prints exp as now minus the expiry: -30 for an item with 30 s to live."""
    c = mc()
    k = key()
    c.request(f"set {k} 0 30 1\r\na\r\n", b"STORED\r\n")
    c.send(f"me {k}\r\n")
    assert re.match(rb"ME \S+ exp=-(30|29) ", c.recv_line(5.0))


def test_an_append_past_the_size_limit_is_not_store_too_large(mc, key):
    c = mc()
    k = key()
    big = b"x" * 600_000
    c.request(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(big), big), b"STORED\r\n")
    c.request("stats reset\r\n", b"RESET\r\n")
    c.send(b"append %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(big), big))
    assert c.recv_line(5.0) != b"STORED\r\n"
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    assert int(st[b"store_too_large"]) == 0, st


@TS_ONLY
def test_a_get_line_over_the_request_size_counts_as_an_error(ts, tsmc, key):
    import ts_harness as h
    c = tsmc()
    st0 = h.status(ts)
    c.send(b"get " + b" ".join(b"k%07d" % i for i in range(140_000)) + b"\r\n")
    assert c.recv_line(5.0).startswith(b"SERVER_ERROR get line too long")
    st1 = h.status(ts)
    assert st1["tablesocket_errors"] - st0["tablesocket_errors"] == 1, (st0, st1)
    assert st1["tablesocket_protocol_errors"] - st0["tablesocket_protocol_errors"] == 1, (st0, st1)


@TS_ONLY
def test_rows_read_and_written_count_what_clients_got_and_changed(ts, tsmc, key):
    """Tablesocket_rows_read counts the rows a memcached read returned (each hit was counted
    twice, and the plugin's own reads of its configuration counted too); rows_written counts rows
    changed (a miss, NOT_STORED or a bad CAS counted one)."""
    import ts_harness as h
    c = tsmc()
    k, gone = key("k"), key("gone")
    c.set(k, b"v")
    st0 = h.status(ts)
    c.request(f"get {k} {gone}\r\n", value_reply(k, b"v") + b"END\r\n")
    c.request(f"mg {k} v\r\n", b"VA 1\r\nv\r\n")
    c.request(f"add {k} 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    c.request(f"replace {gone} 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    c.request(f"delete {gone}\r\n", b"NOT_FOUND\r\n")
    c.request(f"incr {k} 1\r\n", b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")
    c.request(f"cas {k} 0 0 1 1\r\nx\r\n", b"EXISTS\r\n")
    st1 = h.status(ts)
    assert st1["tablesocket_rows_read"] - st0["tablesocket_rows_read"] == 2, (st0, st1)
    assert st1["tablesocket_rows_written"] - st0["tablesocket_rows_written"] == 0, (st0, st1)
    assert st1["tablesocket_errors"] - st0["tablesocket_errors"] == 1, (st0, st1)
    c.set(k, b"w")
    c.request(f"delete {k}\r\n", b"DELETED\r\n")
    st2 = h.status(ts)
    assert st2["tablesocket_rows_written"] - st1["tablesocket_rows_written"] == 2, (st1, st2)


def test_stats_count_bytes_too_large_items_and_cpu(mc, key):
    """bytes_read / bytes_written, store_too_large and rusage_* (memcached's format), which
    dashboards chart."""
    c = mc()
    k = key()
    c.request("stats reset\r\n", b"RESET\r\n")
    big = b"x" * 2_000_000
    c.send(b"set %s 0 0 2000000\r\n%s\r\n" % (k.encode(), big))
    c.expect(b"SERVER_ERROR object too large for cache\r\n")
    c.set(k, b"small")
    c.request(f"get {k}\r\n", value_reply(k, b"small") + b"END\r\n")
    c.send("stats\r\n")
    st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
    assert int(st[b"store_too_large"]) == 1, st
    assert 2_000_000 < int(st[b"bytes_read"]) < 2_010_000, st
    assert 20 < int(st[b"bytes_written"]) < 10_000, st
    for name in (b"rusage_user", b"rusage_system"):
        assert re.fullmatch(rb"\d+\.\d{6}", st[name]), st


def test_stats_curr_items_follows_stores_and_deletes(mc, key):
    """curr_items (what memcached_exporter graphs as memcached_current_items) grows by one per new
    item and shrinks by one per deleted item; bytes is listed as a number. On tablesocket both come
    from the containers' tables' own row counts (a background statistics recount of a large table
    can move them meanwhile: the measurement is taken again, with new keys, before failing)."""
    c = mc()

    def stats():
        c.send("stats\r\n")
        st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
        assert st[b"bytes"].isdigit(), st
        return int(st[b"curr_items"])
    deltas = []
    for _ in range(3):
        a, b, d = key("a"), key("b"), key("d")
        s0 = stats()
        for k in (a, b, d):
            c.set(k, b"v")
        c.set(a, b"again")  # replaces: no new item
        s1 = stats()
        c.request(f"delete {d}\r\n", b"DELETED\r\n")
        c.request(f"delete {d}\r\n", b"NOT_FOUND\r\n")
        s2 = stats()
        deltas.append((s1 - s0, s2 - s0))
        if deltas[-1] == (3, 2):
            break
    assert deltas[-1] == (3, 2), deltas


@pytest.mark.tablesocket_only("tables' row counts")
def test_stats_curr_items_and_bytes_are_the_container_tables_counts(ts, tsmc, containers, make_table, key):
    """curr_items and bytes sum every configured container's table, each table once, as SHOW TABLE
    STATUS (information_schema.TABLES) gives their Rows and Data_length."""
    t = make_table("k VARCHAR(64) PRIMARY KEY, v VARCHAR(64)")
    ts.exec_sql(f"INSERT INTO {t} SELECT CONCAT('r', seq), 'v' FROM seq_1_to_37")
    containers("items_count_1", t, "k", "v")
    containers("items_count_2", t, "k", "v")  # the same table again: counted once
    c = tsmc()
    wait_for_container(c, "items_count_1")
    wait_for_container(c, "items_count_2")
    tables = "SELECT DISTINCT db_schema, db_table FROM innodb_memcache.containers"

    def both():
        c.send("stats\r\n")
        st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
        sql = ts.sql(f"SELECT COALESCE(SUM(t.TABLE_ROWS), 0), COALESCE(SUM(t.DATA_LENGTH), 0) FROM "
                     f"information_schema.TABLES t JOIN ({tables}) c "
                     f"ON t.TABLE_SCHEMA = c.db_schema AND t.TABLE_NAME = c.db_table", db=None)[0]
        return (int(st[b"curr_items"]), int(st[b"bytes"])), (int(sql[0]), int(sql[1]))
    for _ in range(3):  # a statistics recount between the two reads moves one of them
        got, want = both()
        if got == want:
            break
    assert got == want
    assert ts.sql(f"SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'test' "
                  f"AND TABLE_NAME = '{t}'", db=None) == [("37",)]
    before = got[0]
    ts.exec_sql(f"DELETE FROM {t} WHERE k LIKE 'r1%'")  # r1, r10..r19: 11 rows, through SQL
    got, _ = both()
    assert got[0] == before - 11


# --------------------------------------------------------------------------------------------------
# expiry


def test_items_expire_unless_touch_or_gat_extends_them(mc, key):
    c = mc()
    short, touched, gat, mgt, absolute = key("short"), key("touched"), key("gat"), key("mgT"), key("abs")
    for k in (short, touched, gat, mgt):
        c.set(k, b"v", exptime=1)
    c.set(absolute, b"v", exptime=now() + 1)  # > 30 days: a unix time
    c.request(f"get {short}\r\n", value_reply(short, b"v") + b"END\r\n")
    c.request(f"touch {touched} 100\r\n", b"TOUCHED\r\n")
    c.request(f"gat 100 {gat}\r\n", value_reply(gat, b"v") + b"END\r\n")
    c.request(f"mg {mgt} T100\r\n", b"HD\r\n")
    time.sleep(2.2)
    c.request(f"get {short} {absolute}\r\n", b"END\r\n")
    c.request(f"mg {short} v\r\n", b"EN\r\n")
    c.request(f"touch {short} 100\r\n", b"NOT_FOUND\r\n")
    c.request(f"incr {short} 1\r\n", b"NOT_FOUND\r\n")
    c.request(f"append {short} 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
    c.request(f"add {short} 0 0 1\r\nn\r\n", b"STORED\r\n")     # an expired item is absent
    c.request(f"get {short} {touched} {gat} {mgt}\r\n",
              value_reply(short, b"n") + value_reply(touched, b"v") + value_reply(gat, b"v")
              + value_reply(mgt, b"v") + b"END\r\n")


def test_a_negative_exptime_is_an_immediate_miss(mc, key):
    c = mc()
    k, k2 = key(), key("ms")
    c.request(f"set {k} 0 -1 1\r\nv\r\n", b"STORED\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")
    c.request(f"gets {k}\r\n", b"END\r\n")
    c.request(f"replace {k} 0 0 1\r\nr\r\n", b"NOT_STORED\r\n")
    c.request(f"delete {k}\r\n", b"NOT_FOUND\r\n")
    c.request(f"ms {k2} 1 T-1\r\nv\r\n", b"HD\r\n")
    c.request(f"mg {k2} v\r\n", b"EN\r\n")
    c.set(k, b"v")
    c.request(f"touch {k} -1\r\n", b"TOUCHED\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")


def test_an_exptime_over_30_days_is_a_unix_time(mc, key):
    c = mc()
    rel, abs_past, abs_future = key("rel"), key("past"), key("future")
    c.set(rel, b"r", exptime=30 * 24 * 3600)          # the largest relative exptime
    c.set(abs_past, b"p", exptime=30 * 24 * 3600 + 1)  # a unix time in 1970: already expired
    c.set(abs_future, b"f", exptime=now() + 3600)
    c.request(f"get {rel} {abs_past} {abs_future}\r\n", value_reply(rel, b"r") + value_reply(abs_future, b"f")
              + b"END\r\n")
    c.send(f"mg {rel} t\r\nmg {abs_future} t\r\n")
    t1 = int(re.fullmatch(rb"HD t(\d+)\r\n", c.recv_line()).group(1))
    t2 = int(re.fullmatch(rb"HD t(\d+)\r\n", c.recv_line()).group(1))
    # (memcached's coarse clock can report a second or two more)
    assert 30 * 24 * 3600 - 5 <= t1 <= 30 * 24 * 3600 + 2 and 3595 <= t2 <= 3602, (t1, t2)
    c.request(f"touch {rel} abc\r\n", b"CLIENT_ERROR invalid exptime argument\r\n")


def test_flush_all_with_a_delay_expires_everything_later(mc, key):
    c = mc()
    k = key()
    c.set(k, b"v")
    c.request("flush_all 3\r\n", b"OK\r\n")  # (memcached's coarse clock may flush a second early)
    c.request(f"get {k}\r\n", value_reply(k, b"v") + b"END\r\n")
    time.sleep(4.1)
    c.request(f"get {k}\r\n", b"END\r\n")
    c.set(k, b"w")
    c.request(f"get {k}\r\n", value_reply(k, b"w") + b"END\r\n")
    c.request("flush_all\r\n", b"OK\r\n")
    c.request(f"get {k}\r\n", b"END\r\n")


@on_targets()
def test_flush_all_with_a_delay_also_flushes_what_is_stored_during_the_delay(mc, key):
    """As memcached's t/flush-all.t: at the deadline everything stored before it goes, what was
    set, added, touched or incremented during the delay included (the absolute-time form too);
    what is stored after the deadline stays."""
    c = mc()
    before, new, added, touched, counted, after = (key(n) for n in ("bf", "nw", "ad", "to", "ct", "af"))
    c.set(before, b"b")
    c.set(touched, b"t")
    # memcached's coarse clock flushes up to a second early (oldest_live = deadline - 1) and
    # int(time.time()) is up to a second behind: 5 s leaves the reads below inside the delay on
    # both targets even on a loaded machine (3 s failed once with memcached)
    c.request(f"flush_all {int(time.time()) + 5}\r\n", b"OK\r\n")
    c.set(new, b"n")
    c.set(before, b"b2", exptime=3600)
    c.request(f"add {added} 0 0 1\r\na\r\n", b"STORED\r\n")
    c.request(f"touch {touched} 3600\r\n", b"TOUCHED\r\n")
    c.request(f"ma {counted} N0 J5\r\n", b"HD\r\n")
    c.request(f"get {before} {new} {added}\r\n",
              value_reply(before, b"b2") + value_reply(new, b"n") + value_reply(added, b"a") + b"END\r\n")
    time.sleep(6.1)
    c.request(f"get {before} {new} {added} {touched} {counted}\r\n", b"END\r\n")
    c.set(after, b"a")
    c.request(f"get {after}\r\n", value_reply(after, b"a") + b"END\r\n")
    c.request("flush_all\r\n", b"OK\r\n")


@on_targets()
def test_flush_all_without_a_delay_cancels_a_pending_deadline(mc, key):
    """memcached keeps one flush time: a later flush_all replaces a pending one, so what is stored
    after an immediate flush_all is not flushed at the earlier deadline."""
    c = mc()
    k = key()
    c.request("flush_all 2\r\n", b"OK\r\n")
    c.request("flush_all\r\n", b"OK\r\n")
    c.set(k, b"v")
    time.sleep(3.1)
    c.request(f"get {k}\r\n", value_reply(k, b"v") + b"END\r\n")
    c.request("flush_all\r\n", b"OK\r\n")


@on_targets()
def test_flush_all_with_a_delay_does_not_revive_expired_items(mc, key):
    c = mc()
    dead, soon = key("dead"), key("soon")
    c.request(f"set {dead} 0 -1 1\r\nd\r\n", b"STORED\r\n")
    c.set(soon, b"s", exptime=1)
    c.request("flush_all 100\r\n", b"OK\r\n")
    c.request(f"get {dead}\r\n", b"END\r\n")
    time.sleep(2.2)
    c.request(f"get {dead} {soon}\r\n", b"END\r\n")
    c.request("flush_all\r\n", b"OK\r\n")


# --------------------------------------------------------------------------------------------------
# tablesocket only: the rows behind the items


def _kv_row(srv, k: str):
    rows = srv.sql_bytes("SELECT v, flags, cas, exp FROM test.kv WHERE k = %s", (k.encode(),))
    return rows[0] if rows else None


@TS_ONLY
def test_memcached_writes_are_rows_in_sql_at_once(ts, tsmc, key):
    c = tsmc()
    k, k2, n = key(), key("abs"), key("n")
    v = bytes(range(256))
    t0 = now()
    c.request(b"set %s 4294967295 1000 %d\r\n%s\r\n" % (k.encode(), len(v), v), b"STORED\r\n")
    cas = c.gets_cas(k)
    val, flags, cas_col, exp = _kv_row(ts, k)
    assert (val, flags, int(cas_col)) == (v, b"4294967295", cas)
    assert t0 + 1000 <= int(exp) <= now() + 1000
    c.set(k2, b"a", flags=1, exptime=2_000_000_000)  # absolute
    assert _kv_row(ts, k2)[1:] == (b"1", str(c.gets_cas(k2)).encode(), b"2000000000")
    c.request(f"append {k2} 9 0 1\r\nb\r\n", b"STORED\r\n")
    assert _kv_row(ts, k2)[:2] == (b"ab", b"1")
    c.set(n, b"41")
    c.request(f"incr {n} 1\r\n", b"42\r\n")
    assert _kv_row(ts, n)[0] == b"42"
    c.request(f"touch {n} 0\r\n", b"TOUCHED\r\n")
    assert _kv_row(ts, n)[3] == b"0"
    c.request(f"delete {n}\r\n", b"DELETED\r\n")
    assert _kv_row(ts, n) is None
    c.request(f"ms {n} 2 F5 T0\r\nms\r\n", b"HD\r\n")
    assert _kv_row(ts, n)[:2] == (b"ms", b"5")
    c.request(f"md {n}\r\n", b"HD\r\n")
    assert _kv_row(ts, n) is None


@TS_ONLY
def test_rows_inserted_by_sql_are_items_with_their_flags_and_cas(ts, tsmc, key):
    c = tsmc()
    k, past, future = key(), key("past"), key("future")
    ts.exec_sql("INSERT INTO test.kv (k, v, flags, cas, exp) VALUES (%s, %s, 77, 4242, 0), "
                "(%s, 'p', 0, 1, UNIX_TIMESTAMP() - 10), (%s, 'f', 0, 2, UNIX_TIMESTAMP() + 100)",
                (k.encode(), b"sql\x00value", past.encode(), future.encode()))
    c.request(f"gets {k}\r\n", value_reply(k, b"sql\x00value", 77, 4242) + b"END\r\n")
    c.request(f"mg {k} f c s v\r\n", b"VA 9 f77 c4242 s9\r\nsql\x00value\r\n")
    c.request(f"get {past} {future}\r\n", value_reply(future, b"f") + b"END\r\n")
    c.request(f"cas {k} 1 0 1 4241\r\nx\r\n", b"EXISTS\r\n")
    c.request(f"cas {k} 1 0 1 4242\r\nx\r\n", b"STORED\r\n")
    # and SQL sees memcached's write at once, SQL's update is seen by memcached at once
    assert _kv_row(ts, k)[:2] == (b"x", b"1")
    ts.exec_sql("UPDATE test.kv SET v = 'y', flags = 3, cas = 99 WHERE k = %s", (k.encode(),))
    c.request(f"gets {k}\r\n", value_reply(k, b"y", 3, 99) + b"END\r\n")


@TS_ONLY
def test_the_cas_gets_reports_for_an_sql_row_without_cas_works(ts, tsmc, key):
    """A row SQL wrote with cas=0: gets reports a content hash, and cas / ms C / md C accept it."""
    c = tsmc()
    k, k2, k3 = key(), key("ms"), key("md")
    ts.exec_sql("INSERT INTO test.kv (k, v) VALUES (%s, 'hello'), (%s, 'hello'), (%s, 'hello')",
                (k.encode(), k2.encode(), k3.encode()))
    cas = c.gets_cas(k)
    assert cas != 0
    c.request(f"cas {k} 0 0 1 {cas + 1}\r\nX\r\n", b"EXISTS\r\n")
    c.request(f"cas {k} 0 0 1 {cas}\r\nX\r\n", b"STORED\r\n")
    c.request(f"ms {k2} 1 C{c.gets_cas(k2)}\r\nX\r\n", b"HD\r\n")
    c.request(f"md {k3} C{c.gets_cas(k3)}\r\n", b"HD\r\n")
    assert ts.sql("SELECT v FROM test.kv WHERE k IN (%s, %s, %s) ORDER BY v", (k, k2, k3)) == [("X",), ("X",)]


@TS_ONLY
def test_a_multi_column_container_joins_and_splits_values_at_the_separator(ts, tsmc, make_table,
                                                                          containers, key):
    t = make_table("k VARCHAR(64) PRIMARY KEY, c2 VARCHAR(100), c3 VARCHAR(100), "
                   "fl INT UNSIGNED NOT NULL DEFAULT 0, cs BIGINT UNSIGNED NOT NULL DEFAULT 0, "
                   "ex INT UNSIGNED NOT NULL DEFAULT 0",
                   [("sqlrow", "left", "right", 3, 55, 0)])
    name = containers(f"mc_{uuid.uuid4().hex[:8]}", t, "k", "c2,c3", "fl", "cs", "ex")
    c = tsmc()
    wait_for_container(c, name)
    c.request(f"gets @@{name}.sqlrow\r\n", value_reply(f"@@{name}.sqlrow", b"left|right", 3, 55) + b"END\r\n")
    c.request(f"set @@{name}.m2 6 0 7\r\nab|cd|e\r\n", b"STORED\r\n")
    assert ts.sql(f"SELECT c2, c3, fl FROM test.{t} WHERE k = 'm2'") == [("ab", "cd|e", "6")]
    c.request(f"get @@{name}.m2\r\n", value_reply(f"@@{name}.m2", b"ab|cd|e", 6) + b"END\r\n")
    c.request(f"append @@{name}.m2 0 0 2\r\n|f\r\n", b"STORED\r\n")
    assert ts.sql(f"SELECT c2, c3 FROM test.{t} WHERE k = 'm2'") == [("ab", "cd|e|f")]
    # "get @@name" makes it the connection's container
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.request("get sqlrow m2\r\n", value_reply("sqlrow", b"left|right", 3)
              + value_reply("m2", b"ab|cd|e|f", 6) + b"END\r\n")
    c.request("set m3 0 0 3\r\nx|y\r\n", b"STORED\r\n")
    assert ts.sql(f"SELECT c2, c3 FROM test.{t} WHERE k = 'm3'") == [("x", "y")]
    # other connections still use 'default'
    c2 = tsmc()
    c2.request("get sqlrow m3\r\n", b"END\r\n")
    c.request("get @@default\r\n", value_reply("@@default", b"test/kv") + b"END\r\n")
    c.request("get m3\r\n", b"END\r\n")


@TS_ONLY
def test_the_demo_container_aaa_maps_to_demo_test(ts, tsmc, key):
    c = tsmc()
    k = key()[-30:]  # c1 is VARCHAR(32)
    c.request(f"set @@aaa.{k} 9 0 4\r\ndemo\r\n", b"STORED\r\n")
    rows = ts.sql("SELECT c2, c3, c5 FROM test.demo_test WHERE c1 = %s", (k,))
    assert rows == [("demo", "9", "0")]
    cas = c.gets_cas(f"@@aaa.{k}")
    assert ts.sql("SELECT c4 FROM test.demo_test WHERE c1 = %s", (k,)) == [(str(cas),)]
    c.request(f"get {k}\r\n", b"END\r\n")  # not in the default container
    c.request(f"delete @@aaa.{k}\r\n", b"DELETED\r\n")
    # flush_all empties the connection's container only
    c.set(k, b"in kv")
    c.request(f"set @@aaa.{k} 0 0 1\r\nd\r\n", b"STORED\r\n")
    c.request("get @@aaa\r\n", value_reply("@@aaa", b"test/demo_test") + b"END\r\n")
    c.request("flush_all\r\n", b"OK\r\n")
    assert ts.sql("SELECT COUNT(*) FROM test.demo_test") == [("0",)]
    c.request(f"get @@default.{k}\r\n", value_reply(f"@@default.{k}", b"in kv") + b"END\r\n")


@TS_ONLY
def test_containers_table_changes_apply_without_restart(ts, tsmc, make_table, containers):
    t = make_table("id VARBINARY(100) PRIMARY KEY, val BLOB", [(b"k1", b"from sql")])
    c = tsmc()
    name = f"new_{uuid.uuid4().hex[:8]}"
    c.send(f"get @@{name}.k1\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR ")  # not configured yet
    containers(name, t, "id", "val")
    time.sleep(1.2)
    c.request(f"get @@{name}.k1\r\n", value_reply(f"@@{name}.k1", b"from sql") + b"END\r\n")
    # no flags/cas/exp columns: flags 0, CAS from the content
    cas = c.gets_cas(f"@@{name}.k1")
    c.request(f"cas @@{name}.k1 0 0 3 {cas}\r\nnew\r\n", b"STORED\r\n")
    assert ts.sql(f"SELECT val FROM test.{t}") == [("new",)]
    # a change of the row: the container now maps to another value column
    ts.exec_sql(f"ALTER TABLE test.{t} ADD COLUMN other VARCHAR(10) DEFAULT 'o'")
    ts.exec_sql("UPDATE innodb_memcache.containers SET value_columns = 'other' WHERE name = %s", (name,),
                db=None)
    time.sleep(1.2)
    c.request(f"get @@{name}.k1\r\n", value_reply(f"@@{name}.k1", b"o") + b"END\r\n")
    ts.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)
    # a container whose table does not exist: an error for its keys, the connection goes on
    containers(name + "_bad", t + "_missing", "id", "val")
    time.sleep(1.2)
    c.send(f"get @@{name}.k1\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR ")
    c.send(f"set @@{name}_bad.k1 0 0 1\r\nx\r\nget @@{name}_bad.k1\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR ")
    assert c.recv_line().startswith(b"SERVER_ERROR ")
    c.request("mn\r\n", b"MN\r\n")


@TS_ONLY
def test_a_connection_whose_container_leaves_the_configuration_gets_an_error_not_the_default(
        ts, tsmc, make_table, containers, key):
    """A connection switched with `get @@name`: once that container's row is deleted, its commands
    answer SERVER_ERROR (as `get @@name` does on a new connection) until it switches again; they
    went to the default container (test.kv) before: a set answered STORED into another table."""
    t = make_table("k VARCHAR(100) PRIMARY KEY, v TEXT")
    name = containers(f"gone_{uuid.uuid4().hex[:8]}", t, "k", "v")
    c = tsmc()
    wait_for_container(c, name)
    c.set("before", b"1")
    k = key("after")
    ts.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (name,), db=None)
    time.sleep(1.2)  # the configuration is reread once a second
    for cmd in (f"set {k} 0 0 1\r\nx\r\n", f"get {k}\r\n", f"mg {k} v\r\n", f"delete {k}\r\n"):
        c.send(cmd)
        assert c.recv_line() == (f"SERVER_ERROR no such container '{name}' (see the containers table in "
                                 "innodb_memcache)\r\n").encode(), cmd
    assert ts.sql("SELECT COUNT(*) FROM test.kv WHERE k = %s", (k,)) == [("0",)]
    assert ts.sql(f"SELECT k FROM test.{t}") == [("before",)]
    c.send(f"get @@{name}\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR no such container (")
    c.request("get @@default\r\n", b"VALUE @@default 0 7\r\ntest/kv\r\nEND\r\n")
    c.set(k, b"y")  # switched again: the default container
    assert ts.sql("SELECT v FROM test.kv WHERE k = %s", (k,)) == [("y",)]


@TS_ONLY
def test_a_failed_container_switch_leaves_the_connection_on_the_container_it_asked_for(
        ts, tsmc, make_table, containers, key):
    """`get @@name` that fails (no such container; its table cannot be opened) leaves the
    connection on that container: its next keys are answered its SERVER_ERROR, not served from the
    container it had (a client that reads the get's SERVER_ERROR as a miss went on writing into
    test.kv). A successful switch ends it. (The binary protocol's: test_mc_binary.py.)"""
    nopk = make_table("k VARCHAR(100), v TEXT")  # no index at all: the table cannot be used
    bad = containers(f"nopk_{uuid.uuid4().hex[:8]}", nopk, "k", "v")
    k = key("k")
    for target in ("no_such_container", bad):
        c = tsmc()
        c.set(k, b"default")  # on the default container
        c.send(f"get @@{target}\r\n")
        first = c.recv_line()
        assert first.startswith(b"SERVER_ERROR "), first
        for cmd in (f"set {k} 0 0 1\r\nx\r\n", f"get {k}\r\n", f"mg {k} v\r\n", f"delete {k}\r\n"):
            c.send(cmd)
            line = c.recv_line()
            assert line.startswith(b"SERVER_ERROR "), (target, cmd, line)
            if target == "no_such_container":
                assert line == (f"SERVER_ERROR no such container '{target}' (see the containers table in "
                                "innodb_memcache)\r\n").encode()
        assert ts.sql("SELECT v FROM test.kv WHERE k = %s", (k,)) == [("default",)]
        c.request("get @@default\r\n", b"VALUE @@default 0 7\r\ntest/kv\r\nEND\r\n")
        c.request(f"get {k}\r\n", value_reply(k, b"default") + b"END\r\n")


@TS_ONLY
def test_connections_stop_using_a_configuration_whose_table_is_dropped_or_broken(ts, tsmc, key):
    """DROP TABLE of the containers table (or a copy without keys, or without a column): every
    connection answers SERVER_ERROR saying what is wrong, as a new connection does (connections
    open before kept the old configuration forever); loading the schema again serves them all."""
    c = tsmc()
    k = key()
    c.set(k, b"1")
    cases = [
        ("DROP TABLE innodb_memcache.containers", "missing, or without a PRIMARY KEY"),
        # an operator's copy: CREATE TABLE ... AS SELECT keeps the rows, not the key
        ("CREATE TABLE innodb_memcache.c_copy AS SELECT * FROM innodb_memcache.containers; "
         "DROP TABLE innodb_memcache.containers; "
         "RENAME TABLE innodb_memcache.c_copy TO innodb_memcache.containers", "missing, or without a PRIMARY KEY"),
        ("ALTER TABLE innodb_memcache.containers DROP COLUMN cas_column", "a column is missing"),
    ]
    try:
        for ddl, why in cases:
            for stmt in ddl.split("; "):
                ts.exec_sql(stmt, db=None)
            time.sleep(1.2)  # the configuration is reread once a second
            want = (f"SERVER_ERROR no memcached configuration: innodb_memcache.containers: {why} "
                    "(load sql/memcached_schema.sql)\r\n").encode()
            for conn in (c, tsmc()):
                conn.send(f"get {k}\r\nset {k} 0 0 1\r\n2\r\n")
                assert conn.recv_line() == want, ddl
                assert conn.recv_line() == want, ddl
            ts.exec_sql("DROP TABLE IF EXISTS innodb_memcache.containers", db=None)
            ts.load_mc_schema()
            c.request(f"get {k}\r\n", value_reply(k, b"1") + b"END\r\n")
    finally:
        ts.exec_sql("DROP TABLE IF EXISTS innodb_memcache.c_copy", db=None)
        if ts.sql("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = 'innodb_memcache' "
                  "AND table_name = 'containers' AND column_name = 'cas_column'", db=None) != [("1",)]:
            ts.exec_sql("DROP TABLE IF EXISTS innodb_memcache.containers", db=None)
        ts.load_mc_schema()


@TS_ONLY
def test_new_connections_are_served_while_the_containers_table_is_locked(ts, tsmc, key):
    """LOCK TABLES innodb_memcache.containers WRITE (or a DDL running on it) keeps the configuration
    connections read before, for the connections that open meanwhile too: they are served at once
    instead of waiting for the lock (up to tablesocket_lock_wait_timeout, 50 s)."""
    import pymysql
    c = tsmc()
    k = key()
    c.set(k, b"before")
    time.sleep(1.1)  # a reread after the set: the configuration others use is current
    c.request(f"get {k}\r\n", value_reply(k, b"before") + b"END\r\n")
    sql = pymysql.connect(unix_socket=ts.socket, user="root", password="", autocommit=True)
    try:
        with sql.cursor() as cur:
            cur.execute("LOCK TABLES innodb_memcache.containers WRITE")
            time.sleep(1.2)  # past the next reread of the connections open before
            for conn in (c, tsmc(), tsmc()):
                t0 = time.monotonic()
                conn.request(f"get {k} @@aaa\r\n",
                             value_reply(k, b"before") + value_reply("@@aaa", b"test/demo_test") + b"END\r\n")
                assert time.monotonic() - t0 < 1.0
            cur.execute("UNLOCK TABLES")
    finally:
        sql.close()
    tsmc().request(f"get {k}\r\n", value_reply(k, b"before") + b"END\r\n")


@TS_ONLY
def test_new_keys_in_a_table_with_an_auto_increment_id_get_the_next_ids(ts, tsmc, make_table, containers):
    """A container on `id AUTO_INCREMENT PRIMARY KEY, k ... UNIQUE`: new keys get ids as SQL's
    inserts do (the first was stored with id 0 and every later one failed as a duplicate);
    a container whose key column is the AUTO_INCREMENT one stores the key it is given."""
    t = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(32) NOT NULL, v TEXT, UNIQUE KEY uk(k)")
    name = containers(f"ai_{uuid.uuid4().hex[:8]}", t, "k", "v", index="uk")
    c = tsmc()
    wait_for_container(c, name)
    c.request("set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nadd c 0 0 1\r\n3\r\n", b"STORED\r\n" * 3)
    c.send("ms d 1 MS\r\n4\r\n")
    assert c.recv_line() == b"HD\r\n"
    ts.exec_sql(f"INSERT INTO test.{t} (k, v) VALUES ('sql', '5')")
    c.request("set a 0 0 2\r\n11\r\n", b"STORED\r\n")  # an update keeps its id
    assert ts.sql(f"SELECT id, k, v FROM test.{t} ORDER BY id") == \
        [("1", "a", "11"), ("2", "b", "2"), ("3", "c", "3"), ("4", "d", "4"), ("5", "sql", "5")]
    t2 = make_table("id INT AUTO_INCREMENT PRIMARY KEY, v TEXT")
    name2 = containers(f"aik_{uuid.uuid4().hex[:8]}", t2, "id", "v")
    wait_for_container(c, name2)
    c.request("set 7 0 0 1\r\nx\r\nset 0 0 0 1\r\nz\r\n", b"STORED\r\n" * 2)
    c.request("get 7 0\r\n", b"VALUE 7 0 1\r\nx\r\nVALUE 0 0 1\r\nz\r\nEND\r\n")
    assert ts.sql(f"SELECT id, v FROM test.{t2} ORDER BY id") == [("0", "z"), ("7", "x")]


@TS_ONLY
def test_concurrent_adds_of_new_keys_with_an_auto_increment_id_all_store(ts, make_table, containers):
    """16 clients adding new keys at once to a container whose table has an AUTO_INCREMENT id:
    every add stores (with two workers, some failed with 'storage engine error 166': the write ran
    as an UPDATE, for which InnoDB takes the table's AUTO-INC lock until the statement ends)."""
    t = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64) NOT NULL, v TEXT, UNIQUE KEY uk(k)")
    name = containers(f"aic_{uuid.uuid4().hex[:8]}", t, "k", "v", index="uk")
    wait_for_container(McConn(ts.mc_port), name)
    replies: dict[bytes, int] = {}
    lock = threading.Lock()

    def adds(i: int) -> None:
        c = McConn(ts.mc_port)
        try:
            wait_for_container(c, name)
            for j in range(100):
                c.send(f"add a{i}_{j} 0 0 1\r\nx\r\n")
                r = c.recv_line()
                with lock:
                    replies[r] = replies.get(r, 0) + 1
        finally:
            c.close()
    ths = [threading.Thread(target=adds, args=(i,)) for i in range(16)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(120)
    assert replies == {b"STORED\r\n": 1600}
    assert ts.sql(f"SELECT COUNT(*), COUNT(DISTINCT id) FROM test.{t}") == [("1600", "1600")]


@TS_ONLY
def test_a_container_without_cas_column_reports_one_cas(ts, tsmc, make_table, containers):
    t = make_table("k VARCHAR(100) PRIMARY KEY, v TEXT, f INT UNSIGNED NOT NULL DEFAULT 0")
    name = containers(f"nocas_{uuid.uuid4().hex[:8]}", t, "k", "v", "f")
    c = tsmc()
    wait_for_container(c, name)
    c.send(f"ms @@{name}.a 2 c\r\nhi\r\n")
    cas = int(re.fullmatch(rb"HD c(\d+)\r\n", c.recv_line()).group(1))
    c.request(f"mg @@{name}.a c\r\n", b"HD c%d\r\n" % cas)
    c.request(f"ms @@{name}.a 2 C{cas}\r\nho\r\n", b"HD\r\n")


@TS_ONLY
def test_a_container_without_cas_column_supports_gets_and_cas(ts, tsmc, make_table, containers):
    t = make_table("k VARCHAR(100) PRIMARY KEY, v TEXT, f INT UNSIGNED NOT NULL DEFAULT 0")
    name = containers(f"nocas_{uuid.uuid4().hex[:8]}", t, "k", "v", "f")
    c = tsmc()
    wait_for_container(c, name)
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.set("a", b"one", flags=2)
    cas = c.gets_cas("a")
    c.request(f"cas a 2 0 3 {cas + 1}\r\ntwo\r\n", b"EXISTS\r\n")
    c.request(f"cas a 2 0 3 {cas}\r\ntwo\r\n", b"STORED\r\n")
    c.request(f"cas a 2 0 3 {cas}\r\nsix\r\n", b"EXISTS\r\n")
    assert ts.sql(f"SELECT k, v, f FROM test.{t}") == [("a", "two", "2")]
    cas2 = c.gets_cas("a")
    c.request(f"md a C{cas2}\r\n", b"HD\r\n")


@TS_ONLY
def test_a_key_column_indexed_by_a_prefix_finds_only_its_own_key(ts, tsmc, make_table, containers):
    # UNIQUE KEY(k(4)): 'abcd1' and 'abcd2' share one index entry's worth of key
    t = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(100) NOT NULL, v TEXT, "
                   "UNIQUE KEY uk(k(4))")
    name = containers(f"pfx_{uuid.uuid4().hex[:8]}", t, "k", "v", index="uk")
    c = tsmc()
    wait_for_container(c, name)
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.set("abcd1", b"one")
    c.request("get abcd2\r\n", b"END\r\n")
    c.request("get abcd1 abcd2 abcd\r\n", value_reply("abcd1", b"one") + b"END\r\n")
    c.request("delete abcd2\r\n", b"NOT_FOUND\r\n")
    c.request("incr abcd2 1\r\n", b"NOT_FOUND\r\n")
    c.request("replace abcd2 0 0 3\r\ntwo\r\n", b"NOT_STORED\r\n")
    # storing 'abcd2' needs the index entry 'abcd1' holds: refused, 'abcd1' untouched
    c.send("set abcd2 0 0 3\r\ntwo\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR"), "a duplicate on the unique prefix"
    assert ts.sql(f"SELECT k, v FROM test.{t}") == [("abcd1", "one")]
    c.request("delete abcd1\r\n", b"DELETED\r\n")
    c.set("abcd2", b"two")
    c.request("get abcd1 abcd2\r\n", value_reply("abcd2", b"two") + b"END\r\n")


@TS_ONLY
@pytest.mark.parametrize("index", ["kk", "PRIMARY", "kv2"])
def test_a_container_whose_index_is_not_unique_on_its_key_column_is_refused(ts, tsmc, make_table, containers,
                                                                              index):
    # kk: not UNIQUE (a key could name two rows: delete said DELETED and get still found one);
    # PRIMARY: on another column (get missed rows that exist); kv2: UNIQUE on (k, v), not k alone.
    t = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k VARBINARY(20), v VARBINARY(20), "
                   "KEY kk(k), UNIQUE KEY kv2(k, v)")
    ts.exec_sql(f"INSERT INTO test.{t} (k, v) VALUES ('a', 'first'), ('a', 'second'), ('b', 'bee')")
    name = containers(f"bad_{uuid.uuid4().hex[:8]}", t, "k", "v", index=index)
    c = tsmc()
    want = (b"SERVER_ERROR the container's index (unique_idx_name_on_key) must be a UNIQUE index on "
            b"exactly its key column\r\n")
    deadline = time.monotonic() + 4
    while True:  # selecting the container opens it: refused once the configuration is seen
        c.send(f"get @@{name}\r\n")
        got = c.recv_until()
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == want
    p = f"@@{name}."  # the container named in the key
    for cmd in (f"get {p}a\r\n", f"get {p}3\r\n", f"delete {p}a\r\n", f"add {p}a 0 0 1\r\nz\r\n",
                f"set {p}b 0 0 1\r\nz\r\n", f"mg {p}a v\r\n"):
        c.request(cmd, want)
    assert ts.sql(f"SELECT id, k, v FROM test.{t} ORDER BY id") == [
        ("1", "a", "first"), ("2", "a", "second"), ("3", "b", "bee")]


@TS_ONLY
@pytest.mark.parametrize("cols, problem", [
    (("k", "v", "0", "v", "e"), "column v is both its value columns and its cas column"),
    (("k", "v", "0", None, "K"), "column k is both its key column and its expire_time column"),
    (("k", "v|e|V", "0", None, None), "column v is named twice in its value columns"),
    (("k", "v", "e", "c", "e"), "column e is both its flags column and its expire_time column"),
])
def test_a_container_naming_one_column_for_two_purposes_is_refused(ts, tsmc, make_table, containers,
                                                                  cols, problem):
    """A container whose expiry column was its key column was served: a set stored the expiry
    (0) as the key and the cas as the value, answering STORED (found by a helper)."""
    t = make_table("k VARBINARY(64) PRIMARY KEY, v VARBINARY(64), c BIGINT UNSIGNED, e INT UNSIGNED")
    name = containers(f"ovl_{uuid.uuid4().hex[:8]}", t, *cols)
    c = tsmc()
    want = f"SERVER_ERROR container {name}: {problem}".encode()
    deadline = time.monotonic() + 4
    while True:  # refused once the configuration is seen
        c.send(f"get @@{name}\r\n")
        got = c.recv_until()
        if got.startswith(want) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got.startswith(want), got
    line = got
    for cmd in (f"set @@{name}.foo 0 0 5\r\nhello\r\n", f"get @@{name}.foo\r\n", f"ms @@{name}.x 1\r\ny\r\n"):
        c.request(cmd, line)
    assert ts.sql(f"SELECT COUNT(*) FROM test.{t}") == [("0",)]


@TS_ONLY
def test_a_memory_table_container_serves_keys_but_refuses_ranges(ts, tsmc, make_table, containers):
    t = make_table("k VARCHAR(50) PRIMARY KEY")
    ts.exec_sql(f"DROP TABLE test.{t}")
    ts.exec_sql(f"CREATE TABLE test.{t} (k VARCHAR(50), v VARCHAR(100), PRIMARY KEY USING HASH (k)) ENGINE=MEMORY")
    name = containers(f"mem_{uuid.uuid4().hex[:8]}", t, "k", "v")
    c = tsmc()
    wait_for_container(c, name)
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.set("a", b"one")
    c.request("get a b\r\n", value_reply("a", b"one") + b"END\r\n")
    c.send("get @>=a\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR the container's index cannot serve this lookup")
    c.request("delete a\r\n", b"DELETED\r\n")


@TS_ONLY
def test_a_row_locked_by_sql_delays_only_the_request_that_needs_it(ts, tsmc, key):
    import pymysql
    k, other = key("locked"), key("free")
    c, d = tsmc(), tsmc()
    c.set(k, b"before")
    sql = pymysql.connect(unix_socket=ts.socket, user="root", password="", database="test",
                          autocommit=False)
    try:
        with sql.cursor() as cur:
            cur.execute("SELECT v FROM test.kv WHERE k = %s FOR UPDATE", (k.encode(),))
            # the set waits for the row lock; what the connection sent after it waits behind it
            c.send(f"set {k} 0 0 2\r\nmc\r\nget {other}\r\nincr {k} 1\r\n")
            c.assert_silent(0.5)
            t0 = time.monotonic()
            d.set(other, b"x")    # others are served meanwhile
            d.request(f"get {other}\r\n", value_reply(other, b"x") + b"END\r\n")
            assert time.monotonic() - t0 < 2
            cur.execute("UPDATE test.kv SET v = 'sql' WHERE k = %s", (k.encode(),))
        sql.commit()
    finally:
        sql.close()
    c.expect(b"STORED\r\n" + value_reply(other, b"x") + b"END\r\n"
             + b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", timeout=10)
    c.request(f"get {k}\r\n", value_reply(k, b"mc") + b"END\r\n")


# --------------------------------------------------------------------------------------------------
# tablesocket only: range gets


@TS_ONLY
def test_range_gets_return_exactly_the_keys_in_range_in_index_order(ts, tsmc, make_table, containers):
    rows = [(k, f"v{k}") for k in ("k05", "k10", "k12", "k15", "k19", "k20", "k25", "k1", "k100")]
    t = make_table("k VARBINARY(64) PRIMARY KEY, v VARCHAR(20), exp INT UNSIGNED NOT NULL DEFAULT 0",
                   [(k.encode(), v, 0) for k, v in rows])
    ts.exec_sql(f"INSERT INTO test.{t} VALUES ('k13', 'expired', 1)")
    # keys no text reply can carry (SQL or the binary protocol can store them): not listed
    ts.exec_sql(f"INSERT INTO test.{t} VALUES ('k11 sp', 'x', 0), ('k11\\nlf', 'x', 0), ('k11\\rcr', 'x', 0)")
    name = containers(f"rng_{uuid.uuid4().hex[:8]}", t, "k", "v", exp="exp")
    c = tsmc()
    wait_for_container(c, name)

    def items(*ks):
        return b"".join(value_reply(k, f"v{k}".encode()) for k in ks) + b"END\r\n"
    c.request(f"get @@{name}.@>=k10@<k20\r\n", items("k10", "k100", "k12", "k15", "k19"))
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    c.request("get @>=k10@<k20\r\n", items("k10", "k100", "k12", "k15", "k19"))
    c.request("get @>k10@<=k20\r\n", items("k100", "k12", "k15", "k19", "k20"))
    c.request("get @<k20@>=k15\r\n", items("k15", "k19"))
    c.request("get @>k20\r\n", items("k25"))
    c.request("get @>=k25\r\n", items("k25"))
    c.request("get @<k1\r\n", items("k05"))
    c.request("get @<=k1\r\n", items("k05", "k1"))
    c.request("get @>k25\r\n", b"END\r\n")
    c.request("get @>=k2@<k2\r\n", b"END\r\n")
    c.request("get k05 @>=k19@<k25 k1\r\n", items("k05", "k19", "k20", "k1"))
    c.request("get @x\r\n", b"END\r\n")  # not range syntax: a key like any other
    c.request("set @x 0 0 1\r\nv\r\n", b"STORED\r\n")
    c.request("get @x\r\n", value_reply("@x", b"v") + b"END\r\n")
    c.request("get @>k1@x\r\n", b"CLIENT_ERROR bad range in key\r\n")
    c.request("get @@default\r\n", value_reply("@@default", b"test/kv") + b"END\r\n")


@TS_ONLY
def test_range_get_skips_expired_rows_without_counting_them(ts, tsmc, make_table, containers):
    # 2500 expired rows come first in the range (more than tablesocket_mc_max_range_rows, 1000):
    # they are misses, and the live rows after them are still returned
    t = make_table("k VARBINARY(64) PRIMARY KEY, v VARCHAR(20), exp INT UNSIGNED NOT NULL DEFAULT 0")
    ts.exec_sql(f"INSERT INTO test.{t} SELECT CONCAT('a', LPAD(seq, 5, '0')), 'old', 1 FROM seq_1_to_2500")
    ts.exec_sql(f"INSERT INTO test.{t} VALUES ('b1', 'live1', 0), ('b2', 'live2', 0)")
    name = containers(f"rngx_{uuid.uuid4().hex[:8]}", t, "k", "v", exp="exp")
    c = tsmc()
    wait_for_container(c, name)
    c.request(f"get @@{name}.@>=a\r\n", value_reply("b1", b"live1") + value_reply("b2", b"live2") + b"END\r\n")
    c.request(f"get @@{name}.@>=a@<b2\r\n", value_reply("b1", b"live1") + b"END\r\n")


@TS_ONLY
def test_ranges_and_metadump_start_at_the_first_row_and_skip_keys_no_client_can_name(ts, tsmc, make_table,
                                                                                      containers):
    """An INT key's negative rows come before 0: a range without a lower bound and a metadump start
    at the index's first row, not at the key '' (0). A UNIQUE key allows NULL, and SQL may write
    '': no memcached key names them, so neither a range nor a dump lists them (no `VALUE  0 1`)."""
    t = make_table("id INT PRIMARY KEY, v VARCHAR(20)", [(-5, "m5"), (-1, "m1"), (0, "z"), (3, "p3")])
    name = containers(f"neg_{uuid.uuid4().hex[:8]}", t, "id", "v")
    t2 = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(20) NULL, v VARCHAR(20), UNIQUE KEY uk(k)",
                    [(1, None, "null"), (2, "", "empty"), (3, "a", "A"), (4, None, "null2"), (5, "b", "B")])
    name2 = containers(f"nul_{uuid.uuid4().hex[:8]}", t2, "k", "v", index="uk")
    c = tsmc()
    wait_for_container(c, name)
    wait_for_container(c, name2)
    c.request(f"get @@{name}.@<1\r\n", value_reply("-5", b"m5") + value_reply("-1", b"m1") + value_reply("0", b"z")
              + b"END\r\n")
    c.request(f"get @@{name}\r\n", value_reply(f"@@{name}", f"test/{t}".encode()) + b"END\r\n")
    items, end = metadump(c)
    assert [it["key"] for it in items] == [b"-5", b"-1", b"0", b"3"] and end == b"END\r\n"
    c.request(f"get @@{name2}.@<z\r\n", value_reply("a", b"A") + value_reply("b", b"B") + b"END\r\n")
    c.request(f"get @@{name2}\r\n", value_reply(f"@@{name2}", f"test/{t2}".encode()) + b"END\r\n")
    items, end = metadump(c)
    assert [it["key"] for it in items] == [b"a", b"b"] and end == b"END\r\n"
    # more NULL keys than a page (a dump's first, a range's 1,000 rows): the next page starts after
    # the NULLs, not after the number '' reads as (0)
    t3 = make_table("id INT AUTO_INCREMENT PRIMARY KEY, k INT NULL, v VARCHAR(20), UNIQUE KEY uk(k)")
    ts.exec_sql(f"INSERT INTO test.{t3} (k, v) SELECT NULL, 'null' FROM seq_1_to_1100")
    ts.exec_sql(f"INSERT INTO test.{t3} (k, v) VALUES (-3, 'm3'), (-2, 'm2'), (5, 'p5')")
    name3 = containers(f"nun_{uuid.uuid4().hex[:8]}", t3, "k", "v", index="uk")
    wait_for_container(c, name3)
    c.request(f"get @@{name3}.@<10\r\n", value_reply("-3", b"m3") + value_reply("-2", b"m2") + value_reply("5", b"p5")
              + b"END\r\n")
    c.request(f"get @@{name3}\r\n", value_reply(f"@@{name3}", f"test/{t3}".encode()) + b"END\r\n")
    items, end = metadump(c)
    assert [it["key"] for it in items] == [b"-3", b"-2", b"5"] and end == b"END\r\n"


@TS_ONLY
def test_range_get_gets_reports_the_same_cas_as_a_key_get(ts, tsmc, make_table, containers):
    t = make_table("k VARBINARY(64) PRIMARY KEY, v VARCHAR(20), cas BIGINT UNSIGNED NOT NULL DEFAULT 0",
                   [(b"a1", "x", 0)])
    name = containers(f"rngc_{uuid.uuid4().hex[:8]}", t, "k", "v", cas="cas")
    c = tsmc()
    wait_for_container(c, name)
    cas = c.gets_cas(f"@@{name}.a1")
    c.request(f"gets @@{name}.@>=a\r\n", value_reply("a1", b"x", 0, cas) + b"END\r\n")


# --------------------------------------------------------------------------------------------------
# tablesocket only: a server with the memcached options, the binary log and a unix socket


@pytest.fixture(scope="module")
def opts_server(request, plugin):
    """A private tablesocket server: --log-bin, a memcached unix socket, a 4 KiB value limit, 8 KiB
    request lines and the
    configuration in schema mcconf (its default container: test.kv_alt)."""
    if plugin != "tablesocket":
        pytest.skip("tablesocket only")
    srv = MariaDBServer("tablesocket", name="mcopts",
                        extra_args=["--log-bin=binlog", "--server-id=1", "--binlog-format=STATEMENT",
                                    "--tablesocket-mc-max-value-size=4096",
                                    "--tablesocket-max-request-size=8192",
                                    "--tablesocket-lock-wait-timeout=1000",
                                    "--tablesocket-mc-config-schema=mcconf"])
    srv.mc_unix = str(Path(srv.rundir) / "mc.sock")
    srv.extra_args.append(f"--tablesocket-mc-socket={srv.mc_unix}")
    failed_before = request.session.testsfailed
    try:
        srv.start()
    except ServerError as e:
        srv.stop()
        pytest.fail(f"could not start the mcopts server: {e}", pytrace=False)
    try:
        srv.exec_sql("CREATE DATABASE mcconf", db=None)
        srv.exec_sql("CREATE TABLE mcconf.containers LIKE innodb_memcache.containers", db=None)
        srv.exec_sql("CREATE TABLE test.kv_alt LIKE test.kv")
        srv.exec_sql("INSERT INTO mcconf.containers VALUES "
                     "('default', 'test', 'kv_alt', 'k', 'v', 'flags', 'cas', 'exp', 'PRIMARY')", db=None)
        yield srv
    finally:
        alive = srv.running()
        srv.stop()
        if request.session.testsfailed > failed_before or not alive or os.environ.get("TS_KEEP_VAR"):
            sys.stderr.write(f"\n[test_memcached] mcopts run directory kept: {srv.rundir}\n"
                             f"--- tail of {srv.log_path} ---\n{srv.log_tail(40)}\n")
        else:
            shutil.rmtree(srv.rundir, ignore_errors=True)


def _wait_ready(c: McConn, timeout: float = 4.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        c.send(b"get @@default\r\n")
        r = c.recv_until()
        if r.startswith(b"VALUE"):
            return
        assert time.monotonic() < deadline, r
        time.sleep(0.1)


@TS_ONLY
def test_the_config_schema_option_selects_the_containers_table(opts_server):
    with McConn(opts_server.mc_port) as c:
        _wait_ready(c)
        c.request("get @@default\r\n", value_reply("@@default", b"test/kv_alt") + b"END\r\n")
        c.set("cfg", b"alt")
    assert opts_server.sql("SELECT v FROM test.kv_alt WHERE k = 'cfg'") == [("alt",)]
    assert opts_server.sql("SELECT v FROM test.kv WHERE k = 'cfg'") == []


@TS_ONLY
def test_the_memcached_protocol_answers_on_the_unix_socket(opts_server):
    with McConn(unix_path=opts_server.mc_unix) as u, McConn(opts_server.mc_port) as c:
        u.request("version\r\n", b"VERSION 1.6.18\r\n")
        _wait_ready(u)
        u.set("unix", b"via socket", flags=5)
        c.request("get unix\r\n", value_reply("unix", b"via socket", 5) + b"END\r\n")
        c.set("unix", b"via tcp")
        u.request("mg unix v\r\n", b"VA 7\r\nvia tcp\r\n")
        u.send("quit\r\n")
        assert u.closed_by_peer() == b""
    from pymemcache.client.base import Client
    p = Client(opts_server.mc_unix, default_noreply=False, timeout=10)
    try:
        assert p.get("unix") == b"via tcp"
    finally:
        p.close()


@TS_ONLY
def test_the_max_value_size_option_bounds_values(opts_server):
    with McConn(opts_server.mc_port) as c:
        _wait_ready(c)
        ok = os.urandom(4096)
        c.request(b"set big 0 0 4096\r\n%s\r\n" % ok, b"STORED\r\n")
        c.request(b"set big 0 0 4097\r\n%s\r\n" % os.urandom(4097),
                  b"SERVER_ERROR object too large for cache\r\n")
        c.request(b"ms big2 4097\r\n%s\r\n" % os.urandom(4097), b"SERVER_ERROR object too large for cache\r\n")
        # As memcached: the refused set unlinks the old item, so no reader sees stale data.
        c.request("get big big2\r\n", b"END\r\n")
        c.request(b"set big 0 0 4096\r\n%s\r\n" % ok, b"STORED\r\n")
        c.request("get big\r\n", value_reply("big", ok) + b"END\r\n")


@TS_ONLY
def test_the_max_request_size_option_bounds_multiget_lines(opts_server):
    """A get line may pass memcached's 2048 bytes, up to tablesocket_max_request_size (8 KiB here);
    longer, the client is told why (memcached has no such limit) and the connection is closed."""
    with McConn(opts_server.mc_port) as c:
        _wait_ready(c)
        c.request(b"set mk1 0 0 2\r\nv1\r\n", b"STORED\r\n")
        keys = " ".join(f"mk{i}" + "x" * 40 for i in range(2, 170))  # ~7.5 KB
        c.request(f"get mk1 {keys}\r\n", value_reply("mk1", b"v1") + b"END\r\n")
        c.send(f"get mk1 {keys} {keys}\r\n")
        assert c.closed_by_peer() == b"SERVER_ERROR get line too long (tablesocket_max_request_size)\r\n"


@TS_ONLY
def test_a_lock_wait_timeout_is_a_server_error_and_the_connection_goes_on(opts_server):
    import pymysql
    with McConn(opts_server.mc_port) as c:
        _wait_ready(c)
        c.set("lockme", b"a")
        sql = pymysql.connect(unix_socket=opts_server.socket, user="root", password="", database="test",
                              autocommit=False)
        try:
            with sql.cursor() as cur:
                cur.execute("SELECT v FROM test.kv_alt WHERE k = 'lockme' FOR UPDATE")
                t0 = time.monotonic()
                c.send("incr lockme 1\r\nset lockme 0 0 1 noreply\r\nb\r\nmn\r\n")
                c.expect(b"SERVER_ERROR lock wait timeout\r\n", timeout=10)
                assert 0.9 <= time.monotonic() - t0 < 5
                c.expect(b"MN\r\n", timeout=10)  # the noreply set timed out silently
            sql.rollback()
        finally:
            sql.close()
        c.request("get lockme\r\n", value_reply("lockme", b"a") + b"END\r\n")
        c.set("lockme", b"c")


@TS_ONLY
def test_append_cannot_grow_a_value_past_the_max_value_size(opts_server):
    """memcached 1.6.18 refuses an append/prepend whose result does not fit in an item with NOT_STORED
    (ms MA/MP: NS) and keeps the old value (checked with -I 1m: set 1048000 bytes, append 2000)."""
    with McConn(opts_server.mc_port) as c:
        _wait_ready(c)
        full = b"f" * 4096
        c.set("full", full)
        c.request("append full 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
        c.request("prepend full 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
        c.request("ms full 1 MA\r\nx\r\n", b"NS\r\n")
        c.request("ms full 1 MP\r\nx\r\n", b"NS\r\n")
        c.request("get full\r\n", value_reply("full", full) + b"END\r\n")


def _binlog_events(srv, since: tuple[str, int]) -> list[tuple[str, str]]:
    """(Event_type, Info) of every binlog event after `since` (file, pos)."""
    out = []
    files = [r[0] for r in srv.sql("SHOW BINARY LOGS", db=None)]
    for f in files[files.index(since[0]):]:
        q = f"SHOW BINLOG EVENTS IN '{f}'" + (f" FROM {since[1]}" if f == since[0] else "")
        out += [(r[2], r[5]) for r in srv.sql(q, db=None)]
    return out


def _binlog_pos(srv) -> tuple[str, int]:
    r = srv.sql("SHOW MASTER STATUS", db=None)[0]
    return r[0], int(r[1])


@TS_ONLY
def test_memcached_writes_reach_the_binary_log_as_row_events(opts_server):
    srv = opts_server
    assert srv.sql("SELECT @@log_bin, @@binlog_format", db=None) == [("1", "STATEMENT")]
    with McConn(srv.mc_port) as c:
        _wait_ready(c)

        def events_of(cmd: bytes, want: bytes):
            pos = _binlog_pos(srv)
            c.request(cmd, want)  # the reply comes after the commit
            ev = _binlog_events(srv, pos)
            return [t for t, info in ev if t.endswith("_rows_v1") or t.endswith("_rows")], ev
        rows, ev = events_of(b"set bl 3 0 2\r\nv1\r\n", b"STORED\r\n")
        assert rows == ["Write_rows_v1"], ev
        assert any(t == "Table_map" and "test.kv_alt" in info for t, info in ev), ev
        rows, ev = events_of(b"set bl 3 0 2\r\nv2\r\n", b"STORED\r\n")
        assert rows == ["Update_rows_v1"], ev
        rows, ev = events_of(b"add bl 0 0 1\r\nx\r\n", b"NOT_STORED\r\n")
        assert rows == [], ev
        rows, ev = events_of(b"ms bl 1 MA\r\n3\r\n", b"HD\r\n")
        assert rows == ["Update_rows_v1"], ev
        rows, ev = events_of(b"delete bl\r\n", b"DELETED\r\n")
        assert rows == ["Delete_rows_v1"], ev
        c.set("f1", b"1")
        c.set("f2", b"2")
        rows, ev = events_of(b"flush_all\r\n", b"OK\r\n")
        assert rows and set(rows) == {"Delete_rows_v1"}, ev
    assert srv.sql("SELECT COUNT(*) FROM test.kv_alt") == [("0",)]


@TS_ONLY
def test_the_session_server_binlog_gets_row_events_for_memcached_writes(ts, tsmc, key):
    """The same on the session server, when it runs with a binary log (it normally does not)."""
    if ts.sql("SELECT @@log_bin", db=None) != [("1",)]:
        pytest.skip("the session server runs without --log-bin (see the mcopts server test)")
    c = tsmc()
    pos = _binlog_pos(ts)
    c.set(key(), b"v")
    ev = _binlog_events(ts, pos)
    assert any(t.startswith("Write_rows") for t, _ in ev) and any("test.kv" in i for _, i in ev), ev


@TS_ONLY
def test_touch_and_invalidate_keep_on_update_columns_current(ts, tsmc, make_table, containers):
    """A touch (and md I) changes the row, so `ON UPDATE CURRENT_TIMESTAMP` columns move, as for an
    SQL UPDATE of the expiry column."""
    t = make_table("k VARCHAR(100) PRIMARY KEY, v TEXT, f INT UNSIGNED NOT NULL DEFAULT 0, "
                   "c BIGINT UNSIGNED NOT NULL DEFAULT 0, e INT UNSIGNED NOT NULL DEFAULT 0, "
                   "changed TIMESTAMP(6) NOT NULL DEFAULT '2001-01-01' ON UPDATE CURRENT_TIMESTAMP(6)")
    name = containers(f"onupd_{uuid.uuid4().hex[:8]}", t, "k", "v", "f", "c", "e")
    c = tsmc()
    wait_for_container(c, name)
    ts.exec_sql(f"INSERT INTO test.{t} (k, v) VALUES ('a', 'x'), ('b', 'y')")
    c.request(f"touch @@{name}.a 100\r\n", b"TOUCHED\r\n")
    c.request(f"md @@{name}.b I T100\r\n", b"HD\r\n")
    rows = ts.sql(f"SELECT k, changed > '2001-01-01', e > 0 FROM test.{t} ORDER BY k")
    assert rows == [("a", "1", "1"), ("b", "1", "1")], rows


def test_noreply_writes_sent_before_a_reset_are_all_stored(ts, key):
    """500 `set ... noreply` in one write, then the connection reset (SO_LINGER 0): every set the
    server received runs, as memcached runs them (and as after a plain close). Before, the worker
    dropped what its first batch (256 requests) had not reached when the reset was reported."""
    import socket as socketlib
    import struct
    prefix = key("rst")
    s = socketlib.create_connection(("127.0.0.1", ts.mc_port))
    s.sendall(b"".join(b"set %s:%d 0 0 3 noreply\r\nabc\r\n" % (prefix.encode(), i) for i in range(500)))
    s.setsockopt(socketlib.SOL_SOCKET, socketlib.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    deadline = time.monotonic() + 5
    while True:
        (n,), = ts.sql("SELECT COUNT(*) FROM kv WHERE k LIKE %s", (prefix + ":%",))
        if int(n) == 500 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert int(n) == 500, f"{n} of 500 sets sent before the reset were stored"


@TS_ONLY
def test_a_long_lived_connection_gives_up_the_tables_of_containers_that_left_the_configuration(
        ts, tsmc, make_table, containers):
    """A connection kept every container it had used open (a table handle, a table-cache entry
    and a metadata lock each) until it closed, even once the container's row was deleted: pooled
    connections with rotating containers held every table they ever touched (found by a
    resource-leak helper: +1 open table per container, without end). Now they go at the first
    request after the configuration changes; the ones still configured stay open."""
    import ts_harness

    def open_tables() -> int:
        return ts_harness.status(ts)["tablesocket_open_tables"]

    tables = [make_table("k VARCHAR(32) PRIMARY KEY, v TEXT") for _ in range(12)]
    run = uuid.uuid4().hex[:6]
    names = [containers(f"rot_{run}_{i}", t, "k", "v") for i, t in enumerate(tables)]
    c = tsmc()
    wait_for_container(c, names[-1])
    before = open_tables()
    for n in names:
        c.request(f"set @@{n}.k 0 0 1\r\nx\r\n", b"STORED\r\n")
    assert open_tables() >= before + 11
    with_all = open_tables()
    for n in names[2:]:
        ts.exec_sql("DELETE FROM innodb_memcache.containers WHERE name = %s", (n,), db=None)
    time.sleep(1.2)  # the configuration is reread once a second
    c.request(f"get @@{names[0]}.k\r\n", value_reply(f"@@{names[0]}.k", b"x") + b"END\r\n")
    deadline = time.monotonic() + 5
    while open_tables() > with_all - 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert open_tables() <= with_all - 10, (before, with_all, open_tables())
    # the two still configured keep working, and a removed one is an error, as on a new connection
    c.request(f"get @@{names[1]}.k\r\n", value_reply(f"@@{names[1]}.k", b"x") + b"END\r\n")
    c.send(f"get @@{names[5]}.k\r\n")
    assert c.recv_line().startswith(b"SERVER_ERROR ")


@TS_ONLY
def test_a_connection_holds_at_most_max_open_indexes_containers(ts, tsmc, make_table, containers):
    """tablesocket_max_open_indexes bounds what one connection keeps open, memcached containers
    as HandlerSocket indexes: past it, they are given up between requests and reopened on use."""
    import ts_harness

    tables = [make_table("k VARCHAR(32) PRIMARY KEY, v TEXT") for _ in range(6)]
    run = uuid.uuid4().hex[:6]
    names = [containers(f"cap_{run}_{i}", t, "k", "v") for i, t in enumerate(tables)]
    c = tsmc()
    wait_for_container(c, names[-1])
    before = ts_harness.status(ts)["tablesocket_open_tables"]
    old = ts_harness.variable(ts, "tablesocket_max_open_indexes")
    ts.exec_sql("SET GLOBAL tablesocket_max_open_indexes = 4", db=None)
    try:
        for n in names:
            c.request(f"set @@{n}.k 0 0 1\r\ny\r\n", b"STORED\r\n")
        # the fifth set's run found five open, over four: all given up; the sixth is open. (A table
        # no one refers to any more is closed a second later: reconnecting clients reuse it.)
        deadline = time.monotonic() + 5
        while ts_harness.status(ts)["tablesocket_open_tables"] > before + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ts_harness.status(ts)["tablesocket_open_tables"] <= before + 1
        for n in names:
            c.request(f"get @@{n}.k\r\n", value_reply(f"@@{n}.k", b"y") + b"END\r\n")
    finally:
        ts.exec_sql(f"SET GLOBAL tablesocket_max_open_indexes = {old}", db=None)
