"""Integration tests against a running server: tablesocket, or MariaDB's HandlerSocket.

Environment:
  TABLESOCKET_HS_HOST      listener address (default 127.0.0.1)
  TABLESOCKET_HS_PORT_WR   the read-write port (required, else every test is skipped)
  TABLESOCKET_SQL_SOCKET   the server's Unix socket, for creating tables with the mariadb
                           CLI (required); TABLESOCKET_MARIADB_CLI overrides the binary
  TABLESOCKET_EXTENSIONS=1 also run the tablesocket-only tests (ops L, +=, M- and M+)
  TABLESOCKET_EXPECT_SECURITY=1
                           fail, rather than skip, the MariaDB-account login and TLS tests
                           when the server does not support them (see below)

The login tests create MariaDB accounts and skip, saying why, when the server answers
'A 2' with anything but a challenge (e.g. '3 1 authtype' from a server without account
logins). The TLS tests start a second private server (tests/integration/tsserver.py,
plugin tablesocket only) with --tablesocket-ssl-cert/--tablesocket-ssl-key and a
certificate made with the openssl CLI, and skip when that is not possible or the server
does not complete a TLS handshake.

TS_HS_HOST, TS_HS_PORT_WR and TS_SQL_SOCKET (as set by
`tests/integration/tsserver.py serve -- CMD`) are used when the TABLESOCKET_* names are unset.

Each test creates its own tables in database `test` (names unique per run) and the
session drops them at the end.
"""

import asyncio
import hashlib
import itertools
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

import tablesocket as ts
from tablesocket import Filter


def _env(name, default=None):
    return os.environ.get(f"TABLESOCKET_{name}") or os.environ.get(f"TS_{name}") or default


HOST = _env("HS_HOST", "127.0.0.1")
PORT_WR = _env("HS_PORT_WR")
SQL_SOCKET = _env("SQL_SOCKET")
MARIADB = os.environ.get("TABLESOCKET_MARIADB_CLI", "mariadb")
EXTENSIONS = os.environ.get("TABLESOCKET_EXTENSIONS") == "1"

if not PORT_WR:
    pytest.skip("integration tests need a server: set TABLESOCKET_HS_PORT_WR (and "
                "TABLESOCKET_SQL_SOCKET, TABLESOCKET_HS_HOST)", allow_module_level=True)
if not SQL_SOCKET:
    pytest.skip("integration tests need TABLESOCKET_SQL_SOCKET (the server's Unix socket) "
                "to create tables with the mariadb CLI", allow_module_level=True)
if shutil.which(MARIADB) is None:
    pytest.skip(f"integration tests need the {MARIADB!r} CLI to create tables",
                allow_module_level=True)

PORT = int(PORT_WR)
DB = "test"
extensions = pytest.mark.skipif(
    not EXTENSIONS, reason="tablesocket extension (L, +=, M-/M+); set TABLESOCKET_EXTENSIONS=1")

_RUN = f"{os.getpid()}_{int(time.time()) % 100000}"
_counter = itertools.count()
_created = []


def sql(statement):
    subprocess.run([MARIADB, f"--socket={SQL_SOCKET}", "-uroot", DB, "-e", statement],
                   check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session", autouse=True)
def _drop_tables_at_end():
    yield
    if _created:
        # lock_wait_timeout: never hang if a listener still holds a table open
        stmt = "SET SESSION lock_wait_timeout=5; " + " ".join(
            f"DROP TABLE IF EXISTS `{t}`;" for t in _created)
        try:
            sql(stmt)
        except (subprocess.SubprocessError, OSError):
            pass


def make_table(body, engine="InnoDB"):
    name = f"pyclient_{_RUN}_{next(_counter)}"
    sql(f"CREATE TABLE `{name}` ({body}) ENGINE={engine} DEFAULT CHARSET=utf8mb4")
    _created.append(name)
    return name


USERS = ("id INT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(64) NULL, "
         "data VARBINARY(600) NULL, score INT NULL, UNIQUE KEY uk_name(name), KEY k_score(score)")
# HandlerSocket (MariaDB 10.11) answers '1 1 167' to an explicit id in an AUTO_INCREMENT
# column once ids were generated: tables with AUTO_INCREMENT only get generated ids here.
USERS_AI = USERS.replace("NOT NULL PRIMARY KEY", "AUTO_INCREMENT PRIMARY KEY")
EVENTS = "user INT NOT NULL, ts INT NOT NULL, what VARCHAR(32), PRIMARY KEY(user, ts)"


@pytest.fixture
def client():
    c = ts.Client(HOST, PORT, timeout=10)
    yield c
    c.close()


@pytest.fixture
def users(client):
    t = make_table(USERS)
    return client.open_index(DB, t, "PRIMARY", ["id", "name", "data", "score"], ["score", "name"])


def test_insert_returns_auto_increment_id(client):
    idx = client.open_index(DB, make_table(USERS_AI), columns=["id", "name"])
    assert idx.insert([None, "a"]) == 1
    assert idx.insert([None, "b"]) == 2
    assert idx.find(">=", [0], 10) == [(b"1", b"a"), (b"2", b"b")]
    plain = client.open_index(DB, make_table(USERS), columns=["id", "name"])
    assert plain.insert([5, "x"]) is None  # no AUTO_INCREMENT column: '0 1'


def test_insert_find_and_values(users):
    assert users.insert([1, "alice", b"\x00\x01\tbin\n", 10]) is None
    assert users.insert([2, "bob", None, None]) is None
    assert users.insert([3, "", b"", 0]) is None
    assert users.insert([7, "héllo ☃", None, -5]) is None
    assert users.find("=", [1]) == [(b"1", b"alice", b"\x00\x01\tbin\n", b"10")]
    assert users.get([2]) == (b"2", b"bob", None, None)           # NULL vs
    assert users.get([3]) == (b"3", b"", b"", b"0")               # empty string
    assert users.get([99]) is None
    assert users.find(">=", [2], limit=10) == [
        (b"2", b"bob", None, None), (b"3", b"", b"", b"0"), (b"7", "héllo ☃".encode(), None, b"-5")]
    assert [r[0] for r in users.find(">", [0], limit=2, offset=1)] == [b"2", b"3"]
    assert [r[0] for r in users.find("<=", [7], limit=10)] == [b"7", b"3", b"2", b"1"]
    assert [r[0] for r in users.find("<", [7], limit=1)] == [b"3"]


def test_all_byte_values_round_trip(client, users):
    blob = bytes(range(256)) * 2
    users.insert([1, "blob", blob, None])
    assert users.get([1])[2] == blob
    for b in range(256):  # each byte value alone, as a value and as a key
        users.update("=", [1], [1, "blob", bytes([b]), b])
        assert users.get([1])[2:] == (bytes([b]), str(b).encode())
    by_name = client.open_index(DB, users.table, "uk_name", ["id", "name"])
    users.update("=", [1], [1, "\x01\x00\x0f\t\n", None, None])
    assert by_name.get(["\x01\x00\x0f\t\n"]) == (b"1", b"\x01\x00\x0f\t\n")


def test_decode(client):
    t = make_table(USERS)
    idx = client.open_index(DB, t, columns=["id", "name", "data", "score"],
                            decode=[int, True, False, int])
    idx.insert([1, "zoë", b"\xff", None])
    assert idx.find("=", [1]) == [(1, "zoë", b"\xff", None)]
    as_text = client.open_index(DB, t, columns=["data"], decode=True)
    with pytest.raises(ts.ClientError):
        as_text.find("=", [1])
    assert idx.get([1]) == (1, "zoë", b"\xff", None)  # the connection is fine


def test_modify(users):
    for i in range(1, 6):
        users.insert([i, f"u{i}", None, i * 10])
    assert users.update("=", [1], [1, "one", b"x", 11]) == 1
    assert users.get([1]) == (b"1", b"one", b"x", b"11")
    assert users.update("=", [1], [1, "uno", None, 12], returning=True) == [
        (b"1", b"one", b"x", b"11")]
    assert users.update("=", [42], [42, "none", None, 0]) == 0
    assert users.increment("=", [2], [None, None, None, 5]) == 1
    assert users.increment("=", [2], [0, None, None, 1], returning=True) == [
        (b"2", b"u2", None, b"25")]
    assert users.get([2]) == (b"2", b"u2", None, b"26")
    assert users.decrement("=", [3], [None, None, None, 4]) == 1
    assert users.get([3])[3] == b"26"
    assert users.decrement("=", [3], [None, None, None, 100]) == 0  # sign change: untouched
    assert users.delete(">=", [4], limit=10) == 2
    assert users.delete("=", [3], returning=True) == [(b"3", b"u3", None, b"26")]
    assert [r[0] for r in users.find(">=", [0], limit=10)] == [b"1", b"2"]


def test_filters_and_in(users):
    for i in range(1, 11):
        users.insert([i, f"u{i}", None, i % 3])
    ids = lambda rows: [int(r[0]) for r in rows]  # noqa: E731
    assert ids(users.find(">=", [0], 100, filters=[Filter("F", "=", 0, 0)])) == [3, 6, 9]
    assert ids(users.find(">=", [0], 100, filters=[Filter("F", "!=", "score", 0),
                                                   Filter("F", ">", "name", "u5")])) == [7, 8]
    assert ids(users.find(">=", [0], 100, filters=[Filter("W", "<", 0, 2)])) == [1]
    assert ids(users.find(">=", [0], 2, 1, filters=[Filter("F", "=", 0, 1)])) == [4, 7]
    assert ids(users.find("=", [], 10, in_=(0, [9, 2, 42, 5]))) == [9, 2, 5]
    assert ids(users.find("=", [], 10, in_=(0, [1, 2, 3]),
                          filters=[Filter("F", ">", 0, 0)])) == [1, 2]
    assert users.delete("=", [], 10, in_=(0, [1, 2])) == 2
    assert users.increment("=", [], [None, None, None, 100], 10, in_=(0, [3, 4]),
                           filters=[Filter("F", "=", 0, 0)]) == 1
    assert users.get([3])[3] == b"100"


def test_composite_key(client):
    t = make_table(EVENTS)
    ev = client.open_index(DB, t, "PRIMARY", ["user", "ts", "what"], decode=[int, int, True])
    for user in (1, 2):
        for ts_ in (10, 20, 30):
            ev.insert([user, ts_, f"e{user}-{ts_}"])
    assert ev.find("=", [1], limit=10) == [(1, 10, "e1-10"), (1, 20, "e1-20"), (1, 30, "e1-30")]
    assert ev.find("=", [2, 20]) == [(2, 20, "e2-20")]
    assert ev.find(">", [1, 20], limit=2) == [(1, 30, "e1-30"), (2, 10, "e2-10")]
    assert ev.find("<", [2, 0], limit=1) == [(1, 30, "e1-30")]


def test_server_errors(client, users):
    with pytest.raises(ts.ServerError) as ei:
        client.open_index(DB, "pyclient_no_such_table", columns=["a"])
    assert ei.value.code == 1 and ei.value.message == "open_table"
    with pytest.raises(ts.ServerError) as ei:
        client.open_index(DB, users.table, columns=["no_such_column"])
    assert ei.value.code == 2 and ei.value.message == "fld"
    with pytest.raises(ts.ServerError) as ei:
        client.open_index(DB, users.table, "no_such_index", ["id"])
    assert ei.value.code == 2 and ei.value.message == "idxnum"
    users.insert([1, "dup", None, None])
    with pytest.raises(ts.ServerError) as ei:
        users.insert([2, "dup", None, None])
    assert ei.value.code == 1 and ei.value.is_duplicate_key
    with pytest.raises(ts.ServerError) as ei:
        users.find("=", [1, 2])  # more key parts than the index has
    assert ei.value.code == 2 and ei.value.message == "kpnum"
    assert users.get([1]) == (b"1", b"dup", None, None)  # still in sync
    assert not client.closed


def test_auth_with_wrong_secret_is_refused(client, users):
    with pytest.raises(ts.AuthError) as ei:
        client.auth("definitely-not-the-secret")
    assert ei.value.code == 3
    assert not client.closed


def test_pipeline(client, users):
    with client.pipeline(raise_on_error=False) as p:
        ins = [p.insert(users, [i, f"p{i}", None, i]) for i in range(1, 101)]
        dup = p.insert(users, [500, "p5", None, 0])
        upd = p.update(users, "=", [1], [1, "first", None, 0])
        rows = p.find(users, ">=", [0], 1000)
        dele = p.delete(users, ">", [90], 100, returning=True)
    assert [r.value for r in ins] == [None] * 100
    assert dup.exception().is_duplicate_key
    assert upd.value == 1
    assert len(rows.value) == 100 and rows.value[0][1] == b"first"
    assert [int(r[0]) for r in dele.value] == list(range(91, 101))
    assert len(users.find(">=", [0], 1000)) == 90


def test_pipeline_open_and_many_finds(client):
    t = make_table(USERS)
    with client.pipeline() as p:
        idx = p.open_index(DB, t, columns=["id", "name"], decode=True)
        for i in range(1, 2001):
            p.insert(idx, [i, f"n{i}"])
    with client.pipeline() as p:
        got = [p.find(idx, "=", [i]) for i in range(1, 2001)]
    assert all(r.value == [(str(i), f"n{i}")] for i, r in zip(range(1, 2001), got))


def test_reconnect_reopens_indexes(client, users):
    users.insert([1, "x", None, None])
    client.reconnect()
    assert users.get([1]) == (b"1", b"x", None, None)
    client.close()
    with pytest.raises(ts.ConnectionError):
        users.get([1])
    client.connect()
    assert users.get([1]) == (b"1", b"x", None, None)


def test_async_client():
    t = make_table(USERS_AI)

    async def main():
        async with ts.AsyncClient(HOST, PORT, timeout=10) as c:
            idx = await c.open_index(DB, t, columns=["id", "name", "data", "score"],
                                     decode=[int, True, False, int])
            ids = await asyncio.gather(*(idx.insert([None, f"a{i}", None, i]) for i in range(200)))
            assert len(set(ids)) == 200 and all(isinstance(i, int) for i in ids)
            rows = await asyncio.gather(*(idx.get([i]) for i in ids))
            assert [r[1] for r in rows] == [f"a{i}" for i in range(200)]
            first, last = min(ids), sorted(ids)[100]
            async with c.pipeline(raise_on_error=False) as p:
                a = p.update(idx, "=", [first], [first, "A", b"\x00", 1], returning=True)
                b = p.insert(idx, [None, "A", None, None])
                d = p.delete(idx, ">=", [last], 1000)
            assert a.value[0][1] == "a0" and b.exception().is_duplicate_key and d.value == 100
            with pytest.raises(ts.ServerError):
                await c.open_index(DB, "pyclient_no_such_table", columns=["a"])
            assert await idx.get([first]) == (first, "A", b"\x00", 1)

    asyncio.run(main())


def test_pool_threads():
    t = make_table(USERS)
    errors = []
    with ts.Pool(HOST, PORT, size=4, timeout=10) as pool:
        def worker(w):
            try:
                for i in range(50):
                    with pool.connection() as c:
                        idx = c.open_index(DB, t, columns=["id", "name"], decode=True)
                        key = w * 1000 + i + 1
                        idx.insert([key, f"w{key}"])
                        assert idx.get([key]) == (str(key), f"w{key}")
            except Exception as e:  # pragma: no cover
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert pool.total <= 4
    assert not errors


# ---- tablesocket extensions ------------------------------------------------------------------


@extensions
def test_last(client):
    t = make_table(EVENTS)
    ev = client.open_index(DB, t, "PRIMARY", ["user", "ts", "what"], ["what"],
                           decode=[int, int, True])
    for user in (1, 2, 3):
        for ts_ in (10, 20, 30, 40):
            ev.insert([user, ts_, f"e{user}-{ts_}"])
    assert ev.last([2], 2) == [(2, 40, "e2-40"), (2, 30, "e2-30")]
    assert ev.last([2], 2, 1) == [(2, 30, "e2-30"), (2, 20, "e2-20")]
    assert ev.last([2], 100) == [(2, t_, f"e2-{t_}") for t_ in (40, 30, 20, 10)]
    assert ev.last([2]) == [(2, 40, "e2-40")]
    assert ev.last([9], 5) == []
    assert ev.last([3], 10, filters=[Filter("F", "!=", 0, "e3-30")]) == [
        (3, 40, "e3-40"), (3, 20, "e3-20"), (3, 10, "e3-10")]
    assert ev.last([1], 10, filters=[Filter("W", ">", 0, "e1-25")]) == [
        (1, 40, "e1-40"), (1, 30, "e1-30")]
    with client.pipeline() as p:
        r = [p.last(ev, [u], 1) for u in (1, 2, 3)]
    assert [x.value for x in r] == [[(u, 40, f"e{u}-40")] for u in (1, 2, 3)]


@extensions
def test_upsert_auto_increment(client):
    idx = client.open_index(DB, make_table(USERS_AI), columns=["id", "name", "score"])
    first = idx.upsert([None, "u", 1])
    assert isinstance(first, int)
    idx.upsert([first, "u", 2])
    assert idx.find(">=", [0], 10) == [(str(first).encode(), b"u", b"2")]


@extensions
def test_upsert(client, users):
    assert users.upsert([1, "carol", b"v1", 1]) is None
    assert users.upsert([2, "dave", None, 2]) is None
    users.upsert([1, "carol", b"v2", 5])  # same primary key: update
    assert users.get([1]) == (b"1", b"carol", b"v2", b"5")
    by_name = client.open_index(DB, users.table, "uk_name", ["name", "score"])
    by_name.upsert(["dave", 9])  # same unique key: update
    assert users.get([2]) == (b"2", b"dave", None, b"9")
    assert len(users.find(">=", [0], 10)) == 2


# ---- timelines (M- / M+) ---------------------------------------------------------------------

MESSAGES = ("id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, body VARCHAR(40), "
            "KEY by_user(user_id, id)")
FOLLOWERS = "user_id INT NOT NULL, follower_id INT NOT NULL, PRIMARY KEY(follower_id, user_id)"


def _timeline_tables(client, nmsg=600, nusers=30):
    import random

    rng = random.Random(42)
    m, f = make_table(MESSAGES), make_table(FOLLOWERS)
    rows = [(i, rng.randint(1, nusers), f"m{i}") for i in rng.sample(range(1, 10 * nmsg), nmsg)]
    follows = sorted({(rng.randint(1, nusers + 5), u) for u in range(1, 11) for _ in range(8)})
    w = client.open_index(DB, m, "PRIMARY", ["id", "user_id", "body"])
    fw = client.open_index(DB, f, "PRIMARY", ["user_id", "follower_id"])
    with client.pipeline() as p:
        for r in rows:
            p.insert(w, list(r))
        for fr in follows:
            p.insert(fw, list(fr))
    return m, f, rows, follows


def _model(rows, groups, newest_first=True, limit=10 ** 9, bound=None):
    g = set(groups)
    sel = sorted((r for r in rows if r[1] in g and (
        bound is None or (r[0] < bound if newest_first else r[0] > bound))), reverse=newest_first)
    return sel[:limit]


@extensions
def test_merge(client):
    m, _, rows, _ = _timeline_tables(client)
    msgs = client.open_index(DB, m, "by_user", ["id", "user_id", "body"], ["body"],
                             decode=[int, int, True])
    groups = [1, 2, 3, 5, 8, 13, 21, 3, 99]        # a duplicate and a user without messages
    assert msgs.merge(groups, 20) == _model(rows, groups, True, 20)
    assert msgs.merge(groups, 20, newest_first=False) == _model(rows, groups, False, 20)
    assert msgs.merge(groups, 5, offset=3) == _model(rows, groups, True, 8)[3:]
    assert msgs.merge([99, 100], 5) == []
    # page through everything with the bound, both ways
    for newest_first in (True, False):
        walked, bound = [], None
        for _ in range(100):
            kw = {"before" if newest_first else "after": bound} if bound is not None else {}
            page = msgs.merge(groups, 17, newest_first=newest_first, **kw)
            if not page:
                break
            walked += page
            bound = page[-1][0]
        assert walked == _model(rows, groups, newest_first)
    # filters: F skips rows
    assert msgs.merge(groups, 50, filters=[Filter("F", "!=", "body", "m7")]) == [
        r for r in _model(rows, groups, True) if r[2] != "m7"][:50]
    # pipelined
    with client.pipeline() as p:
        r = [p.merge(msgs, [u], 3) for u in range(1, 6)]
    assert [x.value for x in r] == [_model(rows, [u], True, 3) for u in range(1, 6)]


@extensions
def test_timeline(client):
    m, f, rows, follows = _timeline_tables(client)
    msgs = client.open_index(DB, m, "by_user", ["id", "user_id", "body"], decode=[int, int, True])
    followees = client.open_index(DB, f, "PRIMARY", ["user_id"])

    def of(u):
        return sorted(v for v, w in follows if w == u)

    for u in range(1, 13):                 # 11 and 12 follow nobody: []
        assert msgs.timeline(followees, [u], 20) == _model(rows, of(u), True, 20)
        assert msgs.timeline(followees, [u], 7, newest_first=False) == _model(rows, of(u), False, 7)
        assert msgs.timeline(followees, [u], 20, max_groups=2) == _model(rows, of(u)[:2], True, 20)
        first = msgs.timeline(followees, [u], 10)
        if first:
            assert msgs.timeline(followees, [u], 10, before=first[-1][0]) == _model(
                rows, of(u), True, 10, first[-1][0])
    client.reconnect()                      # both indexes are re-opened by themselves
    assert msgs.timeline(followees, [1], 5) == _model(rows, of(1), True, 5)
    with client.pipeline() as p:
        r = [p.timeline(msgs, followees, [u], 5) for u in range(1, 11)]
    assert [x.value for x in r] == [_model(rows, of(u), True, 5) for u in range(1, 11)]


@extensions
def test_timeline_async(client):
    m, f, rows, follows = _timeline_tables(client)

    async def main():
        async with ts.AsyncClient(HOST, PORT, timeout=10) as c:
            msgs = await c.open_index(DB, m, "by_user", ["id", "user_id", "body"],
                                      decode=[int, int, True])
            followees = await c.open_index(DB, f, "PRIMARY", ["user_id"])
            got = await asyncio.gather(*(msgs.timeline(followees, [u], 10) for u in range(1, 11)))
            assert got == [_model(rows, sorted(v for v, w in follows if w == u), True, 10)
                           for u in range(1, 11)]
            assert await msgs.merge([1, 2], 4, newest_first=False, after=0) == _model(
                rows, [1, 2], False, 4)
            async with c.pipeline() as p:
                a = p.merge(msgs, [3], 2)
                b = p.timeline(msgs, followees, [1], 2)
            assert a.value == _model(rows, [3], True, 2)
            assert b.value == _model(rows, sorted(v for v, w in follows if w == 1), True, 2)

    asyncio.run(main())



# ---- MariaDB accounts and TLS ----------------------------------------------------------------

EXPECT_SECURITY = os.environ.get("TABLESOCKET_EXPECT_SECURITY") == "1"


def _unavailable(reason):
    if EXPECT_SECURITY:
        pytest.fail(f"{reason} (TABLESOCKET_EXPECT_SECURITY=1)")
    pytest.skip(reason)


def sql_value(statement, socket_path=None):
    r = subprocess.run([MARIADB, f"--socket={socket_path or SQL_SOCKET}", "-uroot", "-N", "-B",
                        DB, "-e", statement], check=True, capture_output=True, timeout=60)
    return r.stdout.decode("utf-8").strip()


def _login_unsupported(host, port, ctx=None):
    """None if the server answers 'A 2' with a challenge, else why not."""
    try:
        s = socket.create_connection((host, port), timeout=10)
        with (ctx.wrap_socket(s, server_hostname="localhost") if ctx else s) as s:
            s.sendall(b"A\t2\n")
            buf = b""
            while b"\n" not in buf:
                data = s.recv(4096)
                if not data:
                    return "the server closed the connection on 'A 2'"
                buf += data
    except OSError as e:
        return f"'A 2' failed: {e}"
    line = buf.split(b"\n")[0]
    if re.fullmatch(rb"0\t1\t[0-9a-fA-F]{40}", line):
        return None
    return f"the server does not support MariaDB-account logins yet ('A 2' -> {line!r})"


def _create_account(run_sql, user, password, grants):
    """user@localhost and user@127.0.0.1 (the server matches the connection's address)."""
    for host in ("localhost", "127.0.0.1"):
        run_sql(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}'")
        for privs, table in grants:
            run_sql(f"GRANT {privs} ON `{DB}`.`{table}` TO '{user}'@'{host}'")


def _drop_accounts(run_sql, users):
    for user in users:
        for host in ("localhost", "127.0.0.1"):
            try:
                run_sql(f"DROP USER IF EXISTS '{user}'@'{host}'")
            except Exception:
                pass


@pytest.fixture(scope="module")
def accounts():
    """Accounts u1 ('pw': SELECT on t1), u2 ('pw2': SELECT, INSERT on t2) and uempty (no
    password: SELECT on t1); t1 holds (1, 'one'), (2, 'two')."""
    why = _login_unsupported(HOST, PORT)
    if why:
        _unavailable(why)
    a = types.SimpleNamespace(u1=f"tsu1_{_RUN}", u2=f"tsu2_{_RUN}", uempty=f"tsue_{_RUN}",
                              t1=make_table(USERS), t2=make_table(USERS))
    sql(f"INSERT INTO `{a.t1}` (id, name) VALUES (1, 'one'), (2, 'two')")
    try:
        _create_account(sql, a.u1, "pw", [("SELECT", a.t1)])
        _create_account(sql, a.u2, "pw2", [("SELECT, INSERT", a.t2)])
        _create_account(sql, a.uempty, "", [("SELECT", a.t1)])
        yield a
    finally:
        _drop_accounts(sql, [a.u1, a.u2, a.uempty])


def test_password_hash_is_the_servers():
    for pw in ("secret", "S3cr3t!x"):
        expect = "*" + hashlib.sha1(hashlib.sha1(pw.encode()).digest()).hexdigest().upper()
        assert sql_value(f"SELECT PASSWORD('{pw}')") == expect
    assert sql_value("SELECT PASSWORD('secret')") == "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"


def test_login_then_find(accounts):
    a = accounts
    with ts.Client(HOST, PORT, timeout=10, user=a.u1, password="pw") as c:
        assert c.user == a.u1
        idx = c.open_index(DB, a.t1, columns=["id", "name"], decode=[int, True])
        assert idx.find(">=", [0], 10) == [(1, "one"), (2, "two")]
        c.reconnect()  # logs in again
        assert idx.get([2]) == (2, "two")


def test_login_refused(accounts):
    a = accounts
    with pytest.raises(ts.AuthError) as ei:
        ts.Client(HOST, PORT, timeout=10, user=a.u1, password="wrong")
    assert ei.value.code == 3 and not isinstance(ei.value, ts.PermissionDenied)
    with ts.Client(HOST, PORT, timeout=10) as c:
        for user, pw in ((a.u1, "wrong"), (a.u1, ""), (f"nobody_{_RUN}", "pw")):
            with pytest.raises(ts.AuthError) as ei:
                c.login(user, pw)
            assert ei.value.code == 3 and not c.closed
        c.login(a.u1, "pw")  # the connection is still in sync
        assert c.open_index(DB, a.t1, columns=["id"], decode=int).get([1]) == (1,)


def test_empty_password(accounts):
    a = accounts
    with ts.Client(HOST, PORT, timeout=10, user=a.uempty) as c:
        assert c.open_index(DB, a.t1, columns=["id"], decode=int).get([2]) == (2,)
        with pytest.raises(ts.AuthError):
            c.login(a.uempty, "x")


def test_privileges(accounts):
    a = accounts
    with ts.Client(HOST, PORT, timeout=10, user=a.u1, password="pw") as c:
        with pytest.raises(ts.PermissionDenied) as ei:
            c.open_index(DB, a.t2, columns=["id"])
        assert ei.value.code == 3
        t1 = c.open_index(DB, a.t1, columns=["id", "name"])
        with pytest.raises(ts.PermissionDenied):
            t1.insert([9, "nine"])
        assert t1.get([1]) == (b"1", b"one") and not c.closed
        assert sql_value(f"SELECT COUNT(*) FROM `{a.t1}`") == "2"


def test_relogin_reopens_indexes(accounts):
    a = accounts
    with ts.Client(HOST, PORT, timeout=10, user=a.u1, password="pw") as c:
        t1 = c.open_index(DB, a.t1, columns=["id", "name"])
        assert t1.get([1]) == (b"1", b"one")
        c.login(a.u2, "pw2")  # the server forgets t1; the client re-opens it as u2
        with pytest.raises(ts.PermissionDenied):
            t1.get([1])
        t2 = c.open_index(DB, a.t2, columns=["id", "name"])
        assert t2.insert([5, "five"]) is None
        assert t2.get([5]) == (b"5", b"five")
        c.login(a.u1, "pw")
        assert t1.get([2]) == (b"2", b"two")
        with pytest.raises(ts.PermissionDenied):
            t2.get([5])


def test_cleartext_over_tcp_needs_the_admins_consent(accounts):
    a = accounts
    allowed = sql_value("SELECT @@tablesocket_allow_cleartext_passwords") == "1"
    with ts.Client(HOST, PORT, timeout=10) as c:
        if allowed:
            c.login(a.u1, "pw", method="cleartext")
        else:
            with pytest.raises(ts.AuthError):
                c.login(a.u1, "pw", method="cleartext")
            assert not c.closed
            c.login(a.u1, "pw")
        assert c.open_index(DB, a.t1, columns=["id"], decode=int).get([1]) == (1,)


def test_async_login(accounts):
    a = accounts

    async def main():
        async with ts.AsyncClient(HOST, PORT, timeout=10, user=a.u1, password="pw") as c:
            idx = await c.open_index(DB, a.t1, columns=["id", "name"], decode=[int, True])
            assert await asyncio.gather(idx.get([1]), idx.get([2])) == [(1, "one"), (2, "two")]
            with pytest.raises(ts.AuthError):
                await c.login(a.u2, "wrong")
            await c.login(a.u2, "pw2")
            with pytest.raises(ts.PermissionDenied):
                await idx.get([1])
        with pytest.raises(ts.AuthError):
            await ts.AsyncClient(HOST, PORT, timeout=10, user=a.u1, password="x").connect()

    asyncio.run(main())


def test_pool_login(accounts):
    a = accounts
    with ts.Pool(HOST, PORT, size=2, timeout=10, user=a.u1, password="pw") as pool:
        for _ in range(3):
            with pool.connection() as c:
                idx = c.open_index(DB, a.t1, columns=["id"], decode=int)
                assert idx.get([1]) == (1,)
                c.reconnect()  # logs in again
                assert idx.get([2]) == (2,)
        with pool.connection() as c:
            c.login(a.u2, "pw2")
        assert c.closed  # not lent out with u2's privileges


# -- TLS: a second private server with a certificate ----------------------------------------------


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if os.environ.get("TS_PLUGIN", "tablesocket") != "tablesocket":
        pytest.skip("TLS is a tablesocket feature (TS_PLUGIN is not tablesocket)")
    if shutil.which("openssl") is None:
        _unavailable("the TLS tests need the openssl CLI to make a certificate")
    here = Path(__file__).resolve().parents[3] / "tests" / "integration"
    if not (here / "tsserver.py").is_file():
        _unavailable(f"the TLS tests start a server with {here / 'tsserver.py'}, not found")
    sys.path.insert(0, str(here))
    try:
        import tsserver
    finally:
        sys.path.remove(str(here))
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    os.chmod(d, 0o755)
    srv = tsserver.MariaDBServer("tablesocket", name="pyclient-tls", extra_args=[
        f"--tablesocket-ssl-cert={crt}", f"--tablesocket-ssl-key={key}"])
    try:
        srv.start()
    except Exception as e:
        srv.cleanup()
        _unavailable(f"could not start a server with --tablesocket-ssl-cert: {str(e)[:1500]}")
    ctx = ssl.create_default_context(cafile=str(crt))
    try:
        ts.Client(tsserver.LOOPBACK, srv.hs_port_wr, ssl=ctx, connect_timeout=5).close()
    except ts.ConnectionError as e:
        srv.cleanup()
        _unavailable(f"the server does not complete a TLS handshake on its HS port yet: {e}")
    srv.exec_sql(f"CREATE TABLE IF NOT EXISTS {DB}.tls_t (id INT PRIMARY KEY, name VARCHAR(20))")
    srv.exec_sql(f"INSERT INTO {DB}.tls_t VALUES (1, 'one'), (2, 'two')")
    try:
        yield types.SimpleNamespace(srv=srv, host=tsserver.LOOPBACK, port=srv.hs_port_wr,
                                    ctx=ctx, cert=str(crt))
    finally:
        srv.cleanup()


def test_tls_find(tls_server):
    t = tls_server
    with ts.Client(t.host, t.port, timeout=10, ssl=t.ctx) as c:
        idx = c.open_index(DB, "tls_t", columns=["id", "name"], decode=[int, True])
        assert idx.find(">=", [0], 10) == [(1, "one"), (2, "two")]
        with c.pipeline() as p:
            rs = [p.find(idx, "=", [i % 2 + 1]) for i in range(3000)]
        assert all(r.value == [(i % 2 + 1, ["one", "two"][i % 2])] for i, r in enumerate(rs))
        c.reconnect()
        assert idx.get([2]) == (2, "two")

    async def main():
        async with ts.AsyncClient(t.host, t.port, timeout=10, ssl=t.ctx) as c:
            idx = await c.open_index(DB, "tls_t", columns=["id"], decode=int)
            assert await asyncio.gather(*(idx.get([i % 2 + 1]) for i in range(200))) == \
                [(i % 2 + 1,) for i in range(200)]
    asyncio.run(main())
    with ts.Pool(t.host, t.port, size=2, timeout=10, ssl=t.ctx) as pool:
        with pool.connection() as c:
            assert c.open_index(DB, "tls_t", columns=["id"], decode=int).get([1]) == (1,)
    with pytest.raises(ts.ConnectionError):  # an untrusted certificate
        ts.Client(t.host, t.port, timeout=10, ssl=True)
    with pytest.raises(ts.ConnectionError):  # a name the certificate does not have
        ts.Client(t.host, t.port, timeout=10, ssl=t.ctx, server_hostname="other.example")


def test_tls_logins(tls_server):
    t = tls_server
    why = _login_unsupported(t.host, t.port, t.ctx)
    if why:
        _unavailable(why)
    user = f"tstls_{_RUN}"
    _create_account(lambda q: t.srv.exec_sql(q, db=None), user, "pw", [("SELECT", "tls_t")])
    try:
        for method in ("cleartext", "native"):  # cleartext: accepted because of TLS
            with ts.Client(t.host, t.port, timeout=10, ssl=t.ctx, user=user, password="pw",
                           auth=method) as c:
                assert c.open_index(DB, "tls_t", columns=["id"], decode=int).get([1]) == (1,)
                with pytest.raises(ts.AuthError):
                    c.login(user, "wrong", method=method)

        async def main():
            async with ts.AsyncClient(t.host, t.port, timeout=10, ssl=t.ctx, user=user,
                                      password="pw", auth="cleartext") as c:
                idx = await c.open_index(DB, "tls_t", columns=["id"], decode=int)
                assert await idx.get([2]) == (2,)
        asyncio.run(main())
        with ts.Pool(t.host, t.port, size=2, timeout=10, ssl=t.ctx, user=user, password="pw",
                     auth="cleartext") as pool:
            with pool.connection() as c:
                assert c.open_index(DB, "tls_t", columns=["id"], decode=int).get([2]) == (2,)
        with ts.Client(t.host, t.port, timeout=10) as plain:  # same server, no TLS
            with pytest.raises(ts.AuthError):
                plain.login(user, "pw", method="cleartext")
            plain.login(user, "pw")
    finally:
        _drop_accounts(lambda q: t.srv.exec_sql(q, db=None), [user])



def test_a_request_over_the_servers_size_limit_raises_its_error(client, users):
    """The server answers `toolong` (before the rest of the request was even sent) and closes
    the connection: the caller gets that ServerError, not a ProtocolError, and the client is
    closed (reconnect() goes on)."""
    with pytest.raises(ts.ServerError) as e:
        users.insert([1, "x" * (8 << 20), "e"])
    assert e.value.message == "toolong"
    assert client.closed
    client.reconnect()
    assert users.find("=", [1]) == []  # nothing was written
