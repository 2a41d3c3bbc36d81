"""How ssl= reaches the socket, without certificates: a recording SSLContext whose
wrap_socket returns the plain socket, a patched asyncio.open_connection, and handshake
timeouts against a listener that never answers."""

import asyncio
import socket
import ssl
import time

import pytest

import tablesocket as ts

from fakes import AccountServer, FakePeer, FakeStreamReader, FakeStreamWriter, LoopbackServer
from fakes import ScriptedServer


class RecordingContext(ssl.SSLContext):
    """Records each wrap_socket call and returns the socket unwrapped (the test server
    speaks plain text)."""

    def __new__(cls, *args, **kwargs):
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, server=None):
        self.calls = []
        self.server = server

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True,
                    suppress_ragged_eofs=True, server_hostname=None, session=None):
        lines = list(self.server.lines) if self.server is not None else None
        self.calls.append(dict(peer=sock.getpeername(), server_hostname=server_hostname,
                               timeout=sock.gettimeout(), lines_before=lines))
        return sock


def account_loopback():
    srv = AccountServer({"bob": "pw"}, {"bob": ["t"]})
    return srv, LoopbackServer(srv.connection, per_connection=True)


def test_blocking_wraps_before_the_first_byte():
    srv, ls = account_loopback()
    with ls:
        ctx = RecordingContext(srv)
        with ts.Client("127.0.0.1", ls.port, ssl=ctx, user="bob", password="pw",
                       connect_timeout=3) as c:
            assert c.open_index("db", "t", columns=["k", "v"]).get(["1"]) == (b"t", b"1")
            c.reconnect()
        assert len(ctx.calls) == 2
        for call in ctx.calls:
            assert call["peer"][1] == ls.port and call["server_hostname"] == "127.0.0.1"
            assert 0 < call["timeout"] <= 3  # the handshake is bounded by connect_timeout
        assert ctx.calls[0]["lines_before"] == []  # wrapped before anything was sent
        assert len(srv.logins) == 2

        ctx2 = RecordingContext()
        ts.Client("127.0.0.1", ls.port, ssl_context=ctx2, server_hostname="db.example").close()
        assert ctx2.calls[0]["server_hostname"] == "db.example"


def test_ssl_true_uses_a_default_context(monkeypatch):
    made = []

    def fake_default_context(*args, **kwargs):
        made.append(RecordingContext())
        return made[-1]

    monkeypatch.setattr(ssl, "create_default_context", fake_default_context)
    with LoopbackServer(lambda line: b"0\t1") as ls:
        c = ts.Client("127.0.0.1", ls.port, ssl=True)
        assert c.ssl_context is made[0] and len(made[0].calls) == 1
        c.close()
        for off in (None, False):
            c = ts.Client("127.0.0.1", ls.port, ssl=off)
            assert c.ssl_context is None
            c.close()
        assert len(made) == 1
        a = ts.AsyncClient("127.0.0.1", ls.port, ssl=True)
        assert a.ssl_context is made[1]


def test_pool_passes_ssl_and_login_to_every_connection():
    srv, ls = account_loopback()
    with ls:
        ctx = RecordingContext(srv)
        with ts.Pool("127.0.0.1", ls.port, size=2, ssl=ctx, user="bob", password="pw",
                     timeout=5) as pool:
            with pool.connection() as a, pool.connection() as b:
                for c in (a, b):
                    c.open_index("db", "t", columns=["k", "v"]).get(["x"])
        assert len(ctx.calls) == 2 and len(srv.logins) == 2


def test_async_passes_ssl_to_open_connection(monkeypatch):
    calls = []
    srv = AccountServer({"bob": "pw"}, {"bob": ["t"]})

    async def fake_open_connection(host, port, **kwargs):
        calls.append((host, port, kwargs))
        reader = FakeStreamReader()
        return reader, FakeStreamWriter(FakePeer(ScriptedServer(handler=srv.connection())), reader)

    monkeypatch.setattr(asyncio, "open_connection", fake_open_connection)
    ctx = ssl.create_default_context()

    async def main():
        async with ts.AsyncClient("db.example", 9, ssl=ctx, user="bob", password="pw") as c:
            idx = await c.open_index("db", "t", columns=["k", "v"])
            assert await idx.get(["1"]) == (b"t", b"1")
        async with ts.AsyncClient("10.0.0.1", 9, ssl_context=ctx, server_hostname="h") as c:
            pass
        async with ts.AsyncClient("10.0.0.1", 9) as c:
            pass
    asyncio.run(main())
    assert calls == [("db.example", 9, dict(ssl=ctx, server_hostname="db.example")),
                     ("10.0.0.1", 9, dict(ssl=ctx, server_hostname="h")),
                     ("10.0.0.1", 9, dict(ssl=None, server_hostname=None))]
    assert srv.logins == [("bob", "native")]


@pytest.fixture
def mute_listener():
    """Accepts TCP connections (in the kernel's backlog) and never sends a byte."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def test_handshake_timeout_blocking(mute_listener):
    t0 = time.monotonic()
    with pytest.raises(ts.TimeoutError):
        ts.Client("127.0.0.1", mute_listener, ssl=ssl.create_default_context(),
                  connect_timeout=0.3, timeout=30)
    assert time.monotonic() - t0 < 3


def test_handshake_timeout_async(mute_listener):
    async def main():
        t0 = time.monotonic()
        with pytest.raises(ts.TimeoutError):
            await ts.AsyncClient("127.0.0.1", mute_listener, ssl=ssl.create_default_context(),
                                 connect_timeout=0.3, timeout=30).connect()
        assert time.monotonic() - t0 < 3
    asyncio.run(main())
