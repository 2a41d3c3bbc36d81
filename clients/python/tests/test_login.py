"""MariaDB-account logins (A 2 / A 3 challenge-response, A 4 cleartext), code-3 errors and
the index cache across logins: the pure pieces, then the blocking and the asyncio client
against fake peers that deliver replies split at every byte boundary, and the pool."""

import asyncio
import hashlib
import socket

import pytest

import tablesocket as ts
from tablesocket import protocol as P
from tablesocket.auth import parse_nonce, resolve_auth

from fakes import (
    AccountServer,
    FakePeer,
    FakeStreamReader,
    FakeStreamWriter,
    FakeTransport,
    LoopbackServer,
    SILENT,
    ScriptedServer,
    bytewise,
    fake_async_client,
    fake_client,
    split_at,
    whole,
)

CHUNKERS = [whole, bytewise, split_at(1), split_at(5), split_at(20), split_at(47)]
NONCE = bytes(range(1, 21))
NONCE_HEX = NONCE.hex().encode()


def sha1(b):
    return hashlib.sha1(b).digest()


def expected_token(password: bytes, nonce: bytes) -> bytes:
    """SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))), written independently of the client."""
    if not password:
        return b""
    a = int.from_bytes(sha1(password), "big")
    b = int.from_bytes(sha1(nonce + sha1(sha1(password))), "big")
    return (a ^ b).to_bytes(20, "big")


def native_line(user: bytes, password: bytes, nonce: bytes = NONCE) -> bytes:
    return b"A\t3\t" + user + b"\t" + expected_token(password, nonce).hex().encode()


# ---- the pure pieces --------------------------------------------------------------------------


def test_password_hash_is_mariadb_password():
    # MariaDB: SELECT PASSWORD('secret') -> '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'
    assert "*" + hashlib.sha1(sha1(b"secret")).hexdigest().upper() == \
        "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"


# Vectors computed with PyMySQL's independent implementation
# (pymysql._auth.scramble_native_password).
KNOWN = [
    (b"secret", bytes(range(1, 21)), "b32bb3a583e1340c0a1108d58b1be49781ad8c2f"),
    ("pässwörd", bytes.fromhex("5a0b7e1c9d3f00ff8811223344556677889900aa"),
     "afbf0e52c23a0e25b5d96f5a06f156140ac17e9c"),
]


@pytest.mark.parametrize("password,nonce,token", KNOWN)
def test_token_known_vectors(password, nonce, token):
    assert ts.native_password_token(password, nonce).hex() == token
    pw = password.encode() if isinstance(password, str) else password
    assert expected_token(pw, nonce).hex() == token


@pytest.mark.parametrize("password", [b"pw", b"x" * 100, "ünïcødé", b"\x00\t\n", b"secret"])
@pytest.mark.parametrize("nonce", [bytes(20), b"\xff" * 20, NONCE, sha1(b"n")])
def test_token_matches_formula_and_server_check(password, nonce):
    pw = password.encode() if isinstance(password, str) else password
    token = ts.native_password_token(password, nonce)
    assert token == expected_token(pw, nonce) and len(token) == 20
    # what the server does with only SHA1(SHA1(pw)) stored:
    stage2 = sha1(sha1(pw))
    stage1 = bytes(a ^ b for a, b in zip(token, sha1(nonce + stage2)))
    assert sha1(stage1) == stage2
    assert ts.NativePassword("u", password).token(nonce) == token


def test_token_empty_password_and_bad_nonce():
    assert ts.native_password_token("", NONCE) == b""
    assert ts.native_password_token(b"", NONCE) == b""
    assert ts.NativePassword("u").token(NONCE) == b""
    assert ts.NativePassword("u", "").token(NONCE) == b""
    for bad in (b"", NONCE[:19], NONCE + b"x", "x" * 20):
        with pytest.raises(ts.ClientError):
            ts.native_password_token("pw", bad)
    with pytest.raises(ts.ClientError):
        ts.native_password_token(123, NONCE)


def test_parse_nonce():
    assert parse_nonce(P.parse_reply(b"0\t1\t" + NONCE_HEX)) == NONCE
    assert parse_nonce(P.parse_reply(b"0\t1\t" + NONCE_HEX.upper())) == NONCE
    for bad in (b"0\t1", b"0\t1\t" + NONCE_HEX[:-2], b"0\t1\t" + NONCE_HEX + b"00",
                b"0\t1\t" + NONCE_HEX + b"\tx", b"0\t2\t" + NONCE_HEX,
                b"0\t1\t" + b"g" * 40):
        with pytest.raises(ts.ProtocolError):
            parse_nonce(P.parse_reply(bad))
    with pytest.raises(ts.AuthError) as ei:
        parse_nonce(P.parse_reply(b"3\t1\tauthtype"))
    assert ei.value.message == "authtype" and not isinstance(ei.value, ts.PermissionDenied)
    assert "no MariaDB-account logins" in str(ei.value)


def test_methods_keep_no_password_in_sight():
    n = ts.NativePassword("bob", "hunter2")
    c = ts.CleartextPassword("bob", "hunter2")
    for m in (n, c):
        assert "hunter2" not in repr(m) and "bob" in repr(m)
    # the native method keeps SHA1(password) only, not the password
    assert all(b"hunter2" not in v for v in vars(n).values() if isinstance(v, bytes))
    assert n.changes_account and c.changes_account and not ts.SharedSecret("s").changes_account


def test_error_classes_for_code_3():
    rows = P.Request(b"0\t=\t1\t1\n", P.ReplyKind.ROWS, ncols=1)
    with pytest.raises(ts.PermissionDenied) as ei:
        rows.interpret(P.parse_reply(b"3\t1\tSELECT command denied to user 'u'@'localhost'"))
    assert ei.value.code == 3 and ei.value.message.startswith("SELECT command denied")
    assert isinstance(ei.value, ts.AuthError) and isinstance(ei.value, ts.ServerError)
    with pytest.raises(ts.AuthError) as ei:
        rows.interpret(P.parse_reply(b"3\t1\tunauth"))  # not logged in: the login is at fault
    assert not isinstance(ei.value, ts.PermissionDenied)
    with pytest.raises(ts.AuthError) as ei:
        P.parse_reply(b"3\t1\tAccess denied").raise_for_error()
    assert not isinstance(ei.value, ts.PermissionDenied)
    assert type(P.error_for(1, "121", login=False)) is ts.ServerError
    assert type(P.error_for(3, "x", login=True)) is ts.AuthError
    assert type(P.error_for(3, "x", login=False)) is ts.PermissionDenied


def test_resolve_auth_arguments():
    conn, login = resolve_auth(None, "bob", "pw", None)
    assert conn is None and isinstance(login, ts.NativePassword)
    conn, login = resolve_auth("native", "bob", None, "s")
    assert isinstance(conn, ts.SharedSecret) and isinstance(login, ts.NativePassword)
    _, login = resolve_auth("cleartext", "bob", "pw", None)
    assert isinstance(login, ts.CleartextPassword)
    conn, login = resolve_auth("legacy-secret", None, None, None)  # auth=<secret>, as before
    assert isinstance(conn, ts.SharedSecret) and login is None
    conn, login = resolve_auth(ts.NativePassword("x"), None, None, None)
    assert conn is None and isinstance(login, ts.NativePassword)
    assert resolve_auth(None, None, None, None) == (None, None)
    for bad in [("native", None, None, None),            # a method name without user=
                ("cleartext", None, "pw", None),
                (None, None, "pw", None),                # password without user
                ("nope", "bob", "pw", None),             # unknown method with user=
                (ts.NativePassword("x"), "bob", None, None),
                ("secret", None, None, "secret2"),       # two secrets
                (None, "", "pw", None),                  # empty user
                (None, 5, None, None),
                (None, "bob", 5, None),
                (5, None, None, None)]:
        with pytest.raises(ts.ClientError):
            resolve_auth(*bad)


# ---- blocking client --------------------------------------------------------------------------

OPEN = b"P\t0\tdb\tt\tPRIMARY\tk,v"
FIND = b"0\t=\t1\t1"


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_native_login_on_connect(chunker):
    c = fake_client([
        (b"A\t2", b"0\t1\t" + NONCE_HEX),
        (native_line(b"bob", b"pw"), b"0\t1"),
        (OPEN, b"0\t1"),
        (FIND, b"0\t2\t1\ta"),
    ], chunker=chunker, user="bob", password="pw")
    idx = c.open_index("db", "t", columns=["k", "v"])
    assert idx.find("=", [1]) == [(b"1", b"a")]
    assert c.server.done() and c.user == "bob"
    assert b"pw" not in c.transports[0].sent  # only the token went out
    assert b"A\t4" not in c.transports[0].sent


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_native_login_empty_password(chunker):
    c = fake_client([(b"A\t2", b"0\t1\t" + NONCE_HEX), (b"A\t3\tbob\t", b"0\t1")] * 3,
                    chunker=chunker, user="bob")
    c.login("bob")
    c.login("bob", "", method="native")
    assert c.server.done() and c.transports[0].sent == b"A\t2\nA\t3\tbob\t\n" * 3


def test_login_user_is_escaped():
    c = fake_client([(b"A\t2", b"0\t1\t" + NONCE_HEX),
                     (b"A\t3\tb\x01\x49o\x01\x4ab\t" + expected_token(b"pw", NONCE).hex().encode(),
                      b"0\t1")])
    c.login("b\to\nb", b"pw")
    assert c.server.done()


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_refused_login_keeps_the_connection(chunker):
    c = fake_client([
        (OPEN, b"0\t1"),
        (b"A\t2", b"0\t1\t" + NONCE_HEX),
        (native_line(b"bob", b"wrong"), b"3\t1\tAccess denied for user 'bob'@'localhost'"),
        (OPEN, b"0\t1"),  # indexes are re-opened: the server may have dropped them
        (FIND, b"0\t2\t1\ta"),
        (b"A\t2", b"3\t1\tauthtype"),  # a server without account logins
        (OPEN, b"0\t1"),
        (FIND, b"0\t2\t1\ta"),
    ], chunker=chunker)
    idx = c.open_index("db", "t", columns=["k", "v"])
    with pytest.raises(ts.AuthError) as ei:
        c.login("bob", "wrong")
    assert ei.value.code == 3 and ei.value.message == "Access denied for user 'bob'@'localhost'"
    assert ei.value.request is None  # the request (with its token) is not kept
    assert not isinstance(ei.value, ts.PermissionDenied)
    assert not c.closed
    assert idx.find("=", [1]) == [(b"1", b"a")]
    with pytest.raises(ts.AuthError, match="authtype"):
        c.login("bob", "pw")
    assert idx.find("=", [1]) == [(b"1", b"a")]
    assert c.server.done() and len(c.transports) == 1 and c.user is None


def test_refused_login_on_connect_closes():
    with pytest.raises(ts.AuthError):
        fake_client([(b"A\t2", b"0\t1\t" + NONCE_HEX), (None, b"3\t1\tAccess denied")],
                    user="bob", password="x")
    c = fake_client([(b"A\t2", b"0\t1\t" + NONCE_HEX), (None, b"0\t1"),
                     (b"A\t2", b"0\t1\t" + NONCE_HEX), (None, b"3\t1\tAccess denied")],
                    user="bob", password="x")
    with pytest.raises(ts.AuthError):
        c.reconnect()
    assert c.closed and c.transports[1].closed


@pytest.mark.parametrize("reply", [b"0\t1", b"0\t1\tnothex", b"0\t1\t" + NONCE_HEX[:10], b"junk"])
def test_bad_challenge_is_a_protocol_error(reply):
    c = fake_client([(OPEN, b"0\t1"), (b"A\t2", reply)])
    c.open_index("db", "t", columns=["k", "v"])
    with pytest.raises(ts.ProtocolError):
        c.login("bob", "pw")
    assert c.closed


def test_unexpected_success_reply_is_a_protocol_error():
    c = fake_client([(b"A\t2", b"0\t1\t" + NONCE_HEX), (None, b"0\t1\textra")])
    with pytest.raises(ts.ProtocolError):
        c.login("bob", "pw")
    assert c.closed


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_relogin_reopens_indexes(chunker):
    """The server forgets the indexes on an account change: the client re-opens them by
    itself, in the same write as the next request that uses them."""
    srv = AccountServer({"alice": "a", "bob": "b"}, {"alice": ["t", "u"], "bob": ["t"]})
    transports = []

    def factory():
        transports.append(FakeTransport(ScriptedServer(handler=srv.connection()), chunker))
        return transports[-1]

    c = ts.Client("fake", 1, transport_factory=factory, user="alice", password="a")
    t = c.open_index("db", "t", columns=["k", "v"])
    u = c.open_index("db", "u", columns=["k", "v"])
    assert t.get(["1"]) == (b"t", b"1") and u.get(["2"]) == (b"u", b"2")
    sent = len(transports[0].sent)
    c.login("bob", "b")
    assert t.get(["3"]) == (b"t", b"3")                  # re-opened transparently
    assert transports[0].sent[sent:].endswith(b"P\t0\tdb\tt\tPRIMARY\tk,v\n0\t=\t1\t3\n")
    with pytest.raises(ts.PermissionDenied) as ei:       # bob may not read u
        u.get(["4"])
    assert "SELECT command denied to user 'bob'" in ei.value.message
    assert not c.closed
    with pytest.raises(ts.PermissionDenied):
        c.open_index("db", "u", columns=["k", "v"])
    assert t.get(["5"]) == (b"t", b"5")                  # no re-open needed now
    c.login("alice", "a")
    assert u.get(["6"]) == (b"u", b"6") and t.get(["7"]) == (b"t", b"7")
    with c.pipeline() as p:
        r1, r2 = p.find(t, "=", ["8"]), p.find(u, "=", ["9"])
    assert r1.value == [(b"t", b"8")] and r2.value == [(b"u", b"9")]
    assert srv.logins == [("alice", "native"), ("bob", "native"), ("alice", "native")]
    assert len(transports) == 1 and b"\ta\n" not in transports[0].sent


def test_shared_secret_keeps_indexes_open():
    c = fake_client([(OPEN, b"0\t1"), (b"A\t1\ts", b"0\t1"), (FIND, b"0\t2")])
    idx = c.open_index("db", "t", columns=["k", "v"])
    c.auth("s")
    assert idx.find("=", [1]) == []
    assert c.server.done()


def test_cleartext_only_when_asked():
    srv = AccountServer({"bob": "hunter2"}, {"bob": ["t"]}, cleartext_ok=True)
    transports = []

    def factory():
        transports.append(FakeTransport(ScriptedServer(handler=srv.connection()), bytewise))
        return transports[-1]

    for auth in (None, "auto", "native"):
        kw = {} if auth is None else {"auth": auth}
        c = ts.Client("fake", 1, transport_factory=factory, user="bob", password="hunter2", **kw)
        c.login("bob", "hunter2")
        c.close()
    assert all(b"hunter2" not in t.sent and b"A\t4" not in t.sent for t in transports)
    c = ts.Client("fake", 1, transport_factory=factory, user="bob", password="hunter2",
                  auth="cleartext")
    assert transports[-1].sent == b"A\t4\tbob\thunter2\n"
    c.login("bob", "hunter2", method="cleartext")
    assert transports[-1].sent == b"A\t4\tbob\thunter2\n" * 2
    assert [m for _, m in srv.logins] == ["native"] * 6 + ["cleartext"] * 2
    with pytest.raises(ts.ClientError):
        c.login("bob", "hunter2", method="plain")


def test_cleartext_refused_by_the_server():
    srv = AccountServer({"bob": "pw"})
    c = ts.Client("fake", 1, transport_factory=lambda: FakeTransport(
        ScriptedServer(handler=srv.connection())), connect=True)
    with pytest.raises(ts.AuthError, match="need TLS"):
        c.login("bob", "pw", method="cleartext")
    assert not c.closed


def test_secret_then_login_replayed_on_reconnect():
    srv = AccountServer({"bob": "pw"}, {"bob": ["t"]}, secret="s3")
    transports = []

    def factory():
        transports.append(FakeTransport(ScriptedServer(handler=srv.connection()), bytewise))
        return transports[-1]

    c = ts.Client("fake", 1, transport_factory=factory, secret="s3", user="bob", password="pw")
    idx = c.open_index("db", "t", columns=["k", "v"])
    c.reconnect()
    assert idx.get(["x"]) == (b"t", b"x")
    for t in transports:
        assert t.sent.startswith(b"A\t1\ts3\nA\t2\nA\t3\tbob\t")
    # two different nonces: two different tokens
    tokens = [t.sent.split(b"\n")[2] for t in transports]
    assert tokens[0] != tokens[1] and srv.logins == [("bob", "native")] * 2


def test_login_replaces_the_configured_login_for_reconnects():
    srv = AccountServer({"alice": "a", "bob": "b"}, {"alice": ["t"], "bob": ["t"]})
    c = ts.Client("fake", 1, user="alice", password="a",
                  transport_factory=lambda: FakeTransport(ScriptedServer(handler=srv.connection())))
    c.login("bob", "b")
    assert c.user == "bob"
    with pytest.raises(ts.AuthError):
        c.login("alice", "wrong")
    assert c.user == "bob"  # a refused login changes nothing configured
    c.reconnect()
    assert [u for u, _ in srv.logins] == ["alice", "bob", "bob"]


def test_unauth_and_permission_errors_on_requests():
    srv = AccountServer({"bob": "pw"}, {"bob": ["t"]}, require_auth=True)
    c = ts.Client("fake", 1, transport_factory=lambda: FakeTransport(
        ScriptedServer(handler=srv.connection()), bytewise))
    with pytest.raises(ts.AuthError) as ei:
        c.open_index("db", "t", columns=["k", "v"])
    assert ei.value.message == "unauth" and not isinstance(ei.value, ts.PermissionDenied)
    c.login("bob", "pw")
    idx = c.open_index("db", "t", columns=["k", "v"])
    with c.pipeline(raise_on_error=False) as p:
        denied = p.open_index("db", "secret", columns=["k"])
        r1 = p.find(denied, "=", ["1"])
        r2 = p.find(idx, "=", ["2"])
    assert isinstance(r1.exception(), ts.PermissionDenied) and r2.value == [(b"t", b"2")]
    assert not c.closed


def test_constructor_validation():
    for kw in (dict(auth="native"), dict(password="pw"), dict(user="u", auth="bogus"),
               dict(user="u", auth=ts.NativePassword("v")), dict(auth="k", secret="k"),
               dict(ssl="yes"), dict(ssl=True, ssl_context=object())):
        with pytest.raises(ts.ClientError):
            ts.Client("h", 1, connect=False, **kw)
        with pytest.raises(ts.ClientError):
            ts.AsyncClient("h", 1, **kw)


# ---- asyncio ----------------------------------------------------------------------------------


def run(coro):
    return asyncio.run(coro)


def account_async_client(srv, chunker=bytewise, **kwargs):
    writers = []

    async def factory():
        reader = FakeStreamReader()
        writer = FakeStreamWriter(FakePeer(ScriptedServer(handler=srv.connection()), chunker), reader)
        writers.append(writer)
        return reader, writer

    c = ts.AsyncClient("fake", 1, stream_factory=factory, **kwargs)
    c.writers = writers
    return c


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_async_native_login(chunker):
    async def main():
        c = fake_async_client([
            (b"A\t2", b"0\t1\t" + NONCE_HEX),
            (native_line(b"bob", b"pw"), b"0\t1"),
            (OPEN, b"0\t1"),
            (FIND, b"0\t2\t1\ta"),
            (b"A\t2", b"0\t1\t" + NONCE_HEX),
            (b"A\t3\tbob\t", b"3\t1\tAccess denied"),
            (OPEN, b"0\t1"),
            (FIND, b"0\t2\t1\tb"),
        ], chunker=chunker, user="bob", password="pw")
        await c.connect()
        assert c.user == "bob"
        idx = await c.open_index("db", "t", columns=["k", "v"])
        assert await idx.find("=", [1]) == [(b"1", b"a")]
        with pytest.raises(ts.AuthError) as ei:
            await c.login("bob", "")
        assert not isinstance(ei.value, ts.PermissionDenied) and not c.closed
        assert await idx.find("=", [1]) == [(b"1", b"b")]
        assert c.server.done()
    run(main())


def test_async_login_cancelled_midway_closes_the_connection():
    """The A 3 is sent when the task is cancelled: the server may have switched accounts, so the
    connection is closed (it stayed open as the old account, while the server acted as the new)."""
    async def main():
        c = fake_async_client([
            (b"A\t2", b"0\t1\t" + NONCE_HEX),
            (native_line(b"bob", b"pw"), SILENT),
        ])
        await c.connect()
        task = asyncio.ensure_future(c.login("bob", "pw"))
        await asyncio.sleep(0.05)  # the challenge answered, A 3 sent: its reply never comes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert c.closed and c.user is None
        with pytest.raises(ts.ConnectionError, match="closed"):
            await c.open_index("db", "t", columns=["k"])
    run(main())


def test_async_relogin_reopens_indexes_with_concurrent_tasks():
    async def main():
        srv = AccountServer({"alice": "a", "bob": "b"}, {"alice": ["t"], "bob": ["t"]})
        c = account_async_client(srv, user="alice", password="a")
        await c.connect()
        idx = await c.open_index("db", "t", columns=["k", "v"], decode=True)

        async def finds(n):
            return [await idx.get([f"{n}-{i}"]) for i in range(20)]

        results = await asyncio.gather(finds(0), c.login("bob", "b"), finds(1),
                                       c.login("alice", "a"), finds(2))
        for n in (0, 2, 4):
            assert results[n] == [("t", f"{n // 2}-{i}") for i in range(20)]
        assert [u for u, _ in srv.logins] == ["alice", "bob", "alice"]
        assert len(c.writers) == 1
    run(main())


def test_async_cleartext_only_when_asked_and_reconnect():
    async def main():
        srv = AccountServer({"bob": "hunter2"}, {"bob": ["t"]}, cleartext_ok=True)
        c = account_async_client(srv, user="bob", password="hunter2")
        await c.connect()
        idx = await c.open_index("db", "t", columns=["k", "v"])
        await c.reconnect()
        assert await idx.get(["1"]) == (b"t", b"1")
        assert all(b"hunter2" not in b"".join(w.writes) for w in c.writers)
        await c.login("bob", "hunter2", method="cleartext")
        assert c.writers[-1].writes[-1] == b"A\t4\tbob\thunter2\n"
        await c.close()
        c = account_async_client(srv, user="bob", password="hunter2", auth="cleartext")
        await c.connect()
        assert c.writers[0].writes == [b"A\t4\tbob\thunter2\n"]
        assert [m for _, m in srv.logins] == ["native", "native", "cleartext", "cleartext"]
    run(main())


def test_async_refused_login_on_connect_closes_and_hides_the_connection():
    async def main():
        srv = AccountServer({"bob": "pw"})
        c = account_async_client(srv, user="bob", password="wrong")
        with pytest.raises(ts.AuthError):
            await c.connect()
        assert c.closed and c.writers[0].closed
        srv = AccountServer({"bob": "pw"})
        c = account_async_client(srv, user="bob", password="pw")
        seen = []

        async def other():  # runs while connect() waits for the login replies
            while b"A\t2" not in srv.lines:
                await asyncio.sleep(0)
            seen.append(c.closed)
            with pytest.raises(ts.ConnectionError):
                await c.open_index("db", "t", columns=["k"])
        await asyncio.gather(c.connect(), other())
        assert seen == [True] and not c.closed and srv.lines[:2] == [b"A\t2", srv.lines[1]]
        assert len(srv.lines) == 2 and srv.lines[1].startswith(b"A\t3\tbob\t")
    run(main())


def test_async_bad_challenge_closes():
    async def main():
        c = fake_async_client([(OPEN, b"0\t1"), (b"A\t2", b"0\t1\tnothex")], chunker=bytewise)
        await c.connect()
        await c.open_index("db", "t", columns=["k", "v"])
        with pytest.raises(ts.ProtocolError):
            await c.login("bob", "pw")
        assert c.closed and c.writers[0].closed
    run(main())


def test_async_unauth_and_permission_denied():
    async def main():
        srv = AccountServer({"bob": "pw"}, {"bob": ["t"]}, require_auth=True)
        c = account_async_client(srv)
        await c.connect()
        with pytest.raises(ts.AuthError, match="unauth"):
            await c.open_index("db", "t", columns=["k"])
        await c.login("bob", "pw")
        await c.open_index("db", "t", columns=["k"])
        with pytest.raises(ts.PermissionDenied):
            await c.open_index("db", "nope", columns=["k"])
        assert not c.closed
    run(main())


# ---- pool -------------------------------------------------------------------------------------


def test_pool_logs_in_every_connection_and_again_after_reconnect():
    srv = AccountServer({"bob": "pw", "eve": "e"}, {"bob": ["t"], "eve": ["t"]})

    def handler():
        h = srv.connection()

        def line(l):
            return b"junk" if b"\tbreak" in l else h(l)
        return line

    with LoopbackServer(handler, per_connection=True) as ls, \
            ts.Pool("127.0.0.1", ls.port, size=2, timeout=5, user="bob", password="pw") as pool:
        with pool.connection() as c1, pool.connection() as c2:
            for c in (c1, c2):
                assert c.open_index("db", "t", columns=["k", "v"]).get(["x"]) == (b"t", b"x")
        assert srv.logins == [("bob", "native")] * 2
        with pytest.raises(ts.ProtocolError):
            with pool.connection() as c:
                c.open_index("db", "t", columns=["k", "v"]).get(["break"])
        assert c.closed and pool.total == 1
        with pool.connection() as c3, pool.connection() as c4:  # the replacement logs in too
            assert c not in (c3, c4)
            for x in (c3, c4):
                assert x.open_index("db", "t", columns=["k", "v"]).get(["y"]) == (b"t", b"y")
        assert len(srv.logins) == 3
        c3.reconnect()  # a client's own reconnect logs in again
        assert len(srv.logins) == 4
        with pool.connection() as c6:
            c6.login("eve", "e")  # the borrower changed the account:
        assert c6.closed          # not lent out again
        assert pool.total == 1
        with pool.connection() as c5:
            assert c5 is not c6 and c5.user == "bob"
        assert [u for u, _ in srv.logins] == ["bob"] * 4 + ["eve"]


def test_pool_refused_login_frees_the_slot():
    srv = AccountServer({"bob": "pw"})
    with LoopbackServer(srv.connection, per_connection=True) as ls, \
            ts.Pool("127.0.0.1", ls.port, size=1, timeout=5, user="bob", password="no") as pool:
        for _ in range(2):
            with pytest.raises(ts.AuthError):
                pool.acquire()
        assert pool.total == 0
