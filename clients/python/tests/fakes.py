"""Fake peers for unit tests: a scripted server and transports (sync and asyncio) that
deliver its replies in chunks chosen by the test, down to one byte."""

from __future__ import annotations

import asyncio
import collections
from typing import Callable, Deque, List, Optional, Sequence, Tuple

# Special replies for the scripted server.
CLOSE = object()   # the server closes the connection instead of replying
SILENT = object()  # the server never replies (the client must time out)

Chunker = Callable[[bytes], List[bytes]]


def whole(stream: bytes) -> List[bytes]:
    return [stream] if stream else []


def bytewise(stream: bytes) -> List[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


def split_at(k: int) -> Chunker:
    def chunker(stream: bytes) -> List[bytes]:
        return [c for c in (stream[:k], stream[k:]) if c]
    return chunker


class ScriptedServer:
    """Expects requests in order and answers each with a scripted reply.

    ``script`` is a list of ``(request_line, reply)`` where request_line is bytes without
    the LF (or ``None`` to accept anything) and reply is bytes (a line without LF), raw
    bytes via ``("raw", b"...")``, ``CLOSE`` or ``SILENT``. A callable ``handler(line)``
    may be given instead of a script.
    """

    def __init__(self, script: Optional[Sequence[Tuple[Optional[bytes], object]]] = None,
                 handler: Optional[Callable[[bytes], object]] = None) -> None:
        self.script = list(script or [])
        self.handler = handler
        self.received: List[bytes] = []
        self.pos = 0

    def answer(self, line: bytes) -> object:
        self.received.append(line)
        if self.handler is not None:
            return self.handler(line)
        assert self.pos < len(self.script), f"unexpected request {line!r}"
        expected, reply = self.script[self.pos]
        self.pos += 1
        if expected is not None:
            assert line == expected, f"request {self.pos - 1}: {line!r} != {expected!r}"
        return reply

    def done(self) -> bool:
        return self.pos == len(self.script)


class FakePeer:
    """Turns bytes written by the client into reply chunks."""

    def __init__(self, server: ScriptedServer, chunker: Chunker = whole) -> None:
        self.server = server
        self.chunker = chunker
        self.sent = bytearray()
        self._pending = bytearray()
        self.eof = False

    def feed(self, data: bytes) -> List[bytes]:
        self.sent += data
        self._pending += data
        stream = bytearray()
        while not self.eof:
            i = self._pending.find(b"\n")
            if i < 0:
                break
            line = bytes(self._pending[:i])
            del self._pending[: i + 1]
            reply = self.server.answer(line)
            if reply is CLOSE:
                self.eof = True
            elif reply is SILENT:
                continue
            elif isinstance(reply, tuple) and reply[0] == "raw":
                stream += reply[1]
            else:
                assert isinstance(reply, bytes)
                stream += reply + b"\n"
        return self.chunker(bytes(stream))


class FakeTransport:
    """A :class:`tablesocket.Transport` whose peer is a :class:`ScriptedServer`."""

    def __init__(self, server: ScriptedServer, chunker: Chunker = whole,
                 max_send: Optional[int] = None) -> None:
        self.peer = FakePeer(server, chunker)
        self.chunks: Deque[bytes] = collections.deque()
        self.closed = False
        self.max_send = max_send
        self.recv_calls = 0

    @property
    def sent(self) -> bytes:
        return bytes(self.peer.sent)

    def send(self, data: memoryview) -> int:
        assert not self.closed, "send on a closed transport"
        data = bytes(data[: self.max_send] if self.max_send else data)
        self.chunks.extend(self.peer.feed(data))
        return len(data)

    def recv(self, size: int) -> bytes:
        assert not self.closed, "recv on a closed transport"
        self.recv_calls += 1
        if self.chunks:
            c = self.chunks.popleft()
            if len(c) > size:
                self.chunks.appendleft(c[size:])
                c = c[:size]
            return c
        assert self.peer.eof, "recv() while not readable"
        return b""

    def wait(self, read: bool, write: bool, timeout: Optional[float]) -> Tuple[bool, bool]:
        r = read and (bool(self.chunks) or self.peer.eof)
        return r, write  # (False, False) == the timeout expired

    def close(self) -> None:
        self.closed = True


def fake_client(script=None, *, handler=None, chunker: Chunker = whole, **kwargs):
    """A tablesocket.Client connected to a scripted fake server; returns (client, transports)."""
    import tablesocket

    server = ScriptedServer(script, handler)
    transports: List[FakeTransport] = []
    max_send = kwargs.pop("max_send", None)

    def factory() -> FakeTransport:
        t = FakeTransport(server, chunker, max_send)
        transports.append(t)
        return t

    c = tablesocket.Client("fake", 1, transport_factory=factory, **kwargs)
    c.server = server  # type: ignore[attr-defined]
    c.transports = transports  # type: ignore[attr-defined]
    return c


# ---- asyncio ---------------------------------------------------------------------------


class FakeStreamReader:
    def __init__(self) -> None:
        self.chunks: Deque[bytes] = collections.deque()
        self.eof = False
        self._event = asyncio.Event()

    def push(self, chunks: List[bytes], eof: bool) -> None:
        self.chunks.extend(chunks)
        self.eof = self.eof or eof
        self._event.set()

    async def read(self, n: int) -> bytes:
        while not self.chunks and not self.eof:
            self._event.clear()
            await self._event.wait()
        if self.chunks:
            c = self.chunks.popleft()
            if len(c) > n:
                self.chunks.appendleft(c[n:])
                c = c[:n]
            await asyncio.sleep(0)  # let other tasks run between chunks
            return c
        return b""


class FakeStreamWriter:
    def __init__(self, peer: FakePeer, reader: FakeStreamReader) -> None:
        self.peer = peer
        self.reader = reader
        self.closed = False
        self.writes: List[bytes] = []

    def write(self, data: bytes) -> None:
        assert not self.closed, "write on a closed writer"
        self.writes.append(bytes(data))
        self.reader.push(self.peer.feed(bytes(data)), self.peer.eof)

    def close(self) -> None:
        self.closed = True

    async def wait_closed(self) -> None:
        return None


def fake_async_client(script=None, *, handler=None, chunker: Chunker = whole, **kwargs):
    import tablesocket

    server = ScriptedServer(script, handler)
    writers: List[FakeStreamWriter] = []

    async def factory():
        reader = FakeStreamReader()
        writer = FakeStreamWriter(FakePeer(server, chunker), reader)
        writers.append(writer)
        return reader, writer

    c = tablesocket.AsyncClient("fake", 1, stream_factory=factory, **kwargs)
    c.server = server  # type: ignore[attr-defined]
    c.writers = writers  # type: ignore[attr-defined]
    return c


# ---- a real loopback server (threads) ----------------------------------------------------

import socket
import threading


class LoopbackServer:
    """A tiny line server on 127.0.0.1 for tests that need a real socket. ``handler(line)``
    returns the reply line (without LF), or None to stay silent. Blocking reads and
    writes, one thread per connection, ``sndbuf`` shrinks the send buffer. With
    ``per_connection=True``, ``handler()`` is called for each connection and returns
    that connection's line handler (for servers with per-connection state)."""

    def __init__(self, handler: Callable[..., Optional[bytes]], *, ssl_context=None,
                 sndbuf: Optional[int] = None, read_chunk: int = 65536,
                 per_connection: bool = False) -> None:
        self.handler = handler
        self.per_connection = per_connection
        self.ssl_context = ssl_context
        self.sndbuf = sndbuf
        self.read_chunk = read_chunk
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns: List[socket.socket] = []
        self.errors: List[BaseException] = []
        self._stop = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.sndbuf:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.ssl_context is not None:
                conn = self.ssl_context.wrap_socket(conn, server_side=True)
            self.conns.append(conn)
            handler = self.handler() if self.per_connection else self.handler
            buf = b""
            while True:
                data = conn.recv(self.read_chunk)
                if not data:
                    return
                buf += data
                *lines, buf = buf.split(b"\n")
                out = []
                for line in lines:
                    reply = handler(line)
                    if reply is not None:
                        out.append(reply + b"\n")
                if out:
                    conn.sendall(b"".join(out))
        except OSError:
            pass
        except BaseException as e:  # pragma: no cover - reported by the test
            self.errors.append(e)
        finally:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def echo_handler(line: bytes) -> Optional[bytes]:
    """A toy HandlerSocket: P -> '0 1'; '<id> = 1 <k>' -> one row (k, k*len); A -> ok."""
    if line.startswith(b"P\t") or line.startswith(b"A\t"):
        return b"0\t1"
    parts = line.split(b"\t")
    if len(parts) >= 4 and parts[1] == b"=":
        key = parts[3]
        size = int(parts[4]) if len(parts) > 4 and parts[4].isdigit() else 1
        return b"0\t2\t" + key + b"\t" + b"v" * size
    return b"2\t1\top"


# ---- a fake server with MariaDB accounts ----------------------------------------------------

import hashlib


def _sha1(data: bytes) -> bytes:
    return hashlib.sha1(data).digest()


class AccountServer:
    """The server side of the account logins, written from the protocol description
    (not from the client's code), with per-connection state:

    * ``A 1 <secret>``; ``A 2`` -> ``0 1 <nonce>``; ``A 3 <user> <token>`` checked the
      way MariaDB checks a mysql_native_password scramble against the stored
      ``SHA1(SHA1(password))`` only; ``A 4 <user> <password>`` if ``cleartext_ok``.
      A successful ``A 3``/``A 4`` forgets the connection's indexes.
    * ``P <id> <db> <table> ...`` -> ``3 1 SELECT command denied ...`` if the logged-in
      user has no grant on the table (anyone may open anything before a login).
    * ``<id> = 1 <k>`` -> ``0 2 <table> <k>``; ``2 1 stmtnum`` if ``<id>`` is not open.

    Use :meth:`connection` for one connection's line handler.
    """

    def __init__(self, accounts, grants=None, *, secret=None, cleartext_ok=False,
                 require_auth=False):
        self.stage2 = {u.encode(): _sha1(_sha1(p.encode())) if p else b""
                       for u, p in accounts.items()}
        self.passwords = {u.encode(): p.encode() for u, p in accounts.items()}
        self.grants = {u.encode(): set(t.encode() for t in ts) for u, ts in (grants or {}).items()}
        self.secret = secret
        self.cleartext_ok = cleartext_ok
        self.require_auth = require_auth
        self.nonces = 0
        self.logins = []      # (user, method) of every successful login
        self.lines = []       # every request line received, over all connections
        self.lock = threading.Lock()

    def _nonce(self) -> bytes:
        with self.lock:
            self.nonces += 1
            return hashlib.sha256(b"nonce%d" % self.nonces).digest()[:20]

    def connection(self):
        state = {"user": None, "nonce": None, "opened": {}}

        def handle(line: bytes) -> Optional[bytes]:
            with self.lock:
                self.lines.append(line)
            t = line.split(b"\t")
            if t[0] == b"A":
                return self._auth(state, t)
            if self.require_auth and state["user"] is None:
                return b"3\t1\tunauth"
            if t[0] == b"P":
                user = state["user"]
                if user is not None and t[3] not in self.grants.get(user, ()):
                    return (b"3\t1\tSELECT command denied to user '" + user +
                            b"'@'localhost' for table '" + t[3] + b"'")
                state["opened"][t[1]] = t[3]
                return b"0\t1"
            if len(t) >= 4 and t[1] == b"=":
                if t[0] not in state["opened"]:
                    return b"2\t1\tstmtnum"
                return b"0\t2\t" + state["opened"][t[0]] + b"\t" + t[3]
            return b"2\t1\top"

        return handle

    def _auth(self, state, t) -> bytes:
        kind = t[1] if len(t) > 1 else b""
        if kind == b"1" and len(t) == 3:
            return b"0\t1" if self.secret is not None and t[2] == self.secret.encode() else b"3\t1\tunauth"
        if kind == b"2" and len(t) == 2:
            state["nonce"] = self._nonce()
            return b"0\t1\t" + state["nonce"].hex().encode()
        if kind == b"3" and len(t) == 4:
            nonce, state["nonce"] = state["nonce"], None
            user, token = t[2], t[3]
            stage2 = self.stage2.get(user)
            ok = False
            if nonce is not None and stage2 is not None:
                if stage2 == b"":
                    ok = token == b""
                elif len(token) == 40:
                    mask = _sha1(nonce + stage2)
                    stage1 = bytes(a ^ b for a, b in zip(bytes.fromhex(token.decode()), mask))
                    ok = _sha1(stage1) == stage2
            return self._login(state, user, ok, "native")
        if kind == b"4" and len(t) == 4:
            if not self.cleartext_ok:
                return b"3\t1\tcleartext passwords need TLS"
            user, pw = t[2], t[3]
            return self._login(state, user, self.passwords.get(user) == pw, "cleartext")
        return b"3\t1\tauthtype"

    def _login(self, state, user, ok, method) -> bytes:
        if not ok:
            return b"3\t1\tAccess denied for user '" + user + b"'@'localhost'"
        state["user"] = user
        state["opened"].clear()
        with self.lock:
            self.logins.append((user.decode(), method))
        return b"0\t1"
