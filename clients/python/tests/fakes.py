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
    writes, one thread per connection, ``sndbuf`` shrinks the send buffer."""

    def __init__(self, handler: Callable[[bytes], Optional[bytes]], *, ssl_context=None,
                 sndbuf: Optional[int] = None, read_chunk: int = 65536) -> None:
        self.handler = handler
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
            buf = b""
            while True:
                data = conn.recv(self.read_chunk)
                if not data:
                    return
                buf += data
                *lines, buf = buf.split(b"\n")
                out = []
                for line in lines:
                    reply = self.handler(line)
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
