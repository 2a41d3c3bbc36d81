"""The blocking client: :class:`Client`, its index handles (:class:`Index`) and
:class:`Pipeline`."""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time
from typing import (
    Any,
    Callable,
    Iterable,
    List,
    Literal,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
    overload,
)

from . import errors
from ._core import (
    Batch,
    Bound,
    IndexBase,
    InSpec,
    Operation,
    PipelineBase,
    Session,
    as_tablesocket_error,
    check_max_reply,
    check_timeouts,
    make_spec,
    resolve_ssl,
)
from .auth import AuthMethod, as_auth_method, login_method, resolve_auth
from .errors import ClientError, TablesocketError
from .protocol import DecodeSpec, Filter, LineReader, ReplyKind, Request, Row, Value

__all__ = ["Client", "Index", "Pipeline", "Transport", "SocketTransport"]

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_REPLY = 64 * 1024 * 1024
_SEND_CHUNK = 256 * 1024
_RECV_SIZE = 256 * 1024


class Transport(Protocol):
    """What the client needs from a connection. :class:`SocketTransport` is the real
    one; tests inject fakes through ``Client(transport_factory=...)``."""

    def send(self, data: memoryview) -> int:
        """Send some of ``data`` (the transport said it is writable); return bytes sent."""

    def recv(self, size: int) -> Optional[bytes]:
        """Return up to ``size`` bytes (the transport said it is readable), b"" at EOF,
        or ``None`` if nothing can be read yet (e.g. only TLS records without data)."""

    def wait(self, read: bool, write: bool, timeout: Optional[float]) -> Tuple[bool, bool]:
        """Wait up to ``timeout`` seconds until readable and/or writable."""

    def close(self) -> None:
        """Close the connection (idempotent)."""


class SocketTransport:
    """A :class:`Transport` over a connected socket (TCP, Unix, or TLS-wrapped, with the
    handshake done). The socket is switched to non-blocking mode; all waiting happens
    in :meth:`wait`."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._ssl = isinstance(sock, ssl.SSLSocket)
        self._sel = selectors.DefaultSelector()
        self._sel.register(sock, selectors.EVENT_READ)
        self._events = selectors.EVENT_READ
        self._closed = False

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        *,
        connect_timeout: Optional[float],
        ssl_context: Optional[ssl.SSLContext] = None,
        server_hostname: Optional[str] = None,
    ) -> "SocketTransport":
        """Open a TCP connection and, with ``ssl_context``, do the TLS handshake before
        anything else is sent (the server tells TLS from the first byte), both within
        ``connect_timeout``."""
        deadline = None if connect_timeout is None else time.monotonic() + connect_timeout
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_context is not None:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise socket.timeout("timed out before the TLS handshake")
                    sock.settimeout(remaining)
                sock = ssl_context.wrap_socket(sock, server_hostname=server_hostname or host)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    def send(self, data: memoryview) -> int:
        try:
            return self.sock.send(data)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return 0  # retried with the same bytes once writable again

    def recv(self, size: int) -> Optional[bytes]:
        try:
            return self.sock.recv(size)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return None  # e.g. a TLS 1.3 session ticket: no application data yet

    def wait(self, read: bool, write: bool, timeout: Optional[float]) -> Tuple[bool, bool]:
        if read and self._ssl and self.sock.pending():  # type: ignore[attr-defined]
            return True, False  # decrypted bytes already buffered inside the SSL object
        events = (selectors.EVENT_READ if read else 0) | (selectors.EVENT_WRITE if write else 0)
        if events != self._events:
            self._sel.modify(self.sock, events)
            self._events = events
        r = w = False
        # At most half a second per wait (the caller loops): a close() from another thread,
        # which may not wake this select, is seen within it.
        if timeout is None or timeout > 0.5:
            timeout = 0.5
        if self._closed:
            raise errors.ConnectionError("the connection was closed (close() from another thread)")
        for _key, ev in self._sel.select(timeout):
            r = r or bool(ev & selectors.EVENT_READ)
            w = w or bool(ev & selectors.EVENT_WRITE)
        return r, w

    def close(self) -> None:
        self._closed = True
        try:
            # Wakes a thread of another call waiting on this socket (it sees the connection
            # closed) before the descriptor goes away and its number can be reused.
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sel.close()
        finally:
            self.sock.close()


def _drive(t: Transport, reader: LineReader, batch: Batch, timeout: Optional[float]) -> None:
    """Send the batch and read its replies, interleaved (a large pipeline cannot
    deadlock on full socket buffers). Raises ConnectionError/TimeoutError/ProtocolError."""
    data = memoryview(batch.data)
    n = len(data)
    sent = 0
    deadline = None if timeout is None else time.monotonic() + timeout
    while not batch.finished:
        line = reader.next_line()
        if line is not None:
            batch.feed_line(line)
            continue
        remaining = None
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.TimeoutError(f"no complete reply within {timeout}s "
                                          f"({batch.remaining} outstanding)")
        r, w = t.wait(True, sent < n, remaining)
        if w and sent < n:
            sent += t.send(data[sent : sent + _SEND_CHUNK])
        if r:
            chunk = t.recv(_RECV_SIZE)
            if chunk is None:
                continue
            if not chunk:
                closing = batch.closing_error()
                if closing is not None:
                    raise closing  # the server closed the connection after this answer
                raise errors.ConnectionError(
                    f"connection closed by the server with {batch.remaining} "
                    f"repl{'y' if batch.remaining == 1 else 'ies'} outstanding")
            reader.feed(chunk)
    if sent < n:
        closing = batch.closing_error()
        if closing is not None:
            raise closing  # e.g. toolong: answered before the rest was sent, then closed
        raise errors.ProtocolError("the server answered requests that were not completely sent")
    closing = batch.closing_error()
    if closing is not None:
        raise closing  # answered, and the server closes the connection after it
    if reader.buffered:
        raise errors.ProtocolError(f"{reader.buffered} unexpected byte(s) after the last reply")


def _check_idle(t: Transport) -> None:
    """Before sending: an idle connection must have nothing to read. Bytes mean the
    stream is out of sync (a stray reply); EOF means the server closed it."""
    r, _ = t.wait(True, False, 0)
    if r:
        data = t.recv(_RECV_SIZE)
        if data is None:
            return  # protocol-level bytes only (TLS)
        if data:
            raise errors.ProtocolError("unexpected bytes received while no request was outstanding")
        raise errors.ConnectionError("connection closed by the server")


class Client:
    """A blocking connection to a tablesocket (or HandlerSocket) listener.

    Connects in the constructor. ``timeout`` bounds every call: sending a request (or
    pipeline) and receiving all of its replies; ``connect_timeout`` (default:
    ``timeout``) bounds the TCP connect and TLS handshake. ``None`` waits forever.

    TLS: ``ssl`` is an :class:`ssl.SSLContext` (load a client certificate into it with
    ``load_cert_chain`` if the server wants one), or ``True`` for
    :func:`ssl.create_default_context`. The socket is wrapped before the first byte is
    sent; ``server_hostname`` (checked against the certificate) defaults to ``host``.
    ``ssl_context`` is the older name of ``ssl``.

    Login, on every (re)connection, before any other request:

    * ``user`` and ``password``: a MariaDB account. ``auth`` names the method:
      ``"auto"`` (default) and ``"native"`` use the challenge-response login, which
      never sends the password; ``"cleartext"`` sends it, for accounts that are not
      ``mysql_native_password`` (use it with TLS).
    * ``secret``: HandlerSocket's shared secret (``A 1``), sent before the login.
    * ``auth`` may also be an :class:`~tablesocket.AuthMethod` (or, as before and
      without ``user``, a shared secret).

    A refused login raises :class:`~tablesocket.AuthError` and closes the connection.

    After a :class:`~tablesocket.ConnectionError` (including timeouts and protocol
    errors) the connection is closed; :meth:`reconnect` opens a new one and index
    handles keep working (they are re-opened automatically). A client serialises
    its calls with a lock, but share one between threads through a
    :class:`~tablesocket.Pool` instead.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        connect_timeout: Optional[float] = None,
        user: Union[str, bytes, None] = None,
        password: Union[str, bytes, None] = None,
        secret: Union[str, bytes, None] = None,
        auth: Union[AuthMethod, str, bytes, None] = None,
        ssl: Union[ssl.SSLContext, bool, None] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        server_hostname: Optional[str] = None,
        max_reply_size: int = DEFAULT_MAX_REPLY,
        transport_factory: Optional[Callable[[], Transport]] = None,
        connect: bool = True,
    ) -> None:
        check_timeouts(timeout=timeout, connect_timeout=connect_timeout)
        check_max_reply(max_reply_size)
        self.host = host
        self.port = port
        self.timeout = timeout
        self.connect_timeout = connect_timeout if connect_timeout is not None else timeout
        self.ssl_context = resolve_ssl(ssl, ssl_context)
        self.server_hostname = server_hostname
        self._auth, self._login = resolve_auth(auth, user, password, secret)
        self._manual_login = False  # login() changed the account the constructor set up
        self._pool: Any = None  # the Pool that made this connection (release() checks it)
        self._transport_factory = transport_factory
        self._transport: Optional[Transport] = None
        self._reader = LineReader(max_reply_size)
        self._session = Session()
        self._lock = threading.RLock()
        if connect:
            self.connect()

    # -- connection -----------------------------------------------------------------

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tablesocket.Client {self.host}:{self.port} {state}>"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._transport is None

    @property
    def user(self) -> Optional[str]:
        """The MariaDB account user this client logs in as (``None``: no login)."""
        login = self._login
        name = getattr(login, "user", None)
        return name.decode("utf-8", "replace") if isinstance(name, bytes) else name

    def connect(self) -> None:
        """Open the connection if it is closed (and log in, if configured)."""
        with self._lock:
            if self._transport is not None:
                return
            where = f"connect to {self.host}:{self.port}"
            try:
                if self._transport_factory is not None:
                    t = self._transport_factory()
                else:
                    t = SocketTransport.connect(
                        self.host, self.port, connect_timeout=self.connect_timeout,
                        ssl_context=self.ssl_context,
                        server_hostname=self.server_hostname)
            except TablesocketError:
                raise
            except Exception as e:
                raise as_tablesocket_error(e, where) from e
            self._transport = t
            self._reader.clear()
            self._session.new_connection()
            try:
                for method in (self._auth, self._login):
                    if method is not None:
                        self._run_auth(method)
            except BaseException:
                self.close()  # never leave a connection that is not logged in as asked
                raise

    def reconnect(self) -> None:
        """Close the connection (if open) and open a new one."""
        with self._lock:
            self.close()
            self.connect()

    def close(self) -> None:
        """Close the connection. Idempotent."""
        t, self._transport = self._transport, None
        self._reader.clear()
        if t is not None:
            try:
                t.close()
            except Exception:
                pass

    def healthy(self) -> bool:
        """True if the connection is open and idle with nothing unexpected to read. A
        connection the server closed (or that received stray bytes) is closed here and
        reported unhealthy. Used by :class:`~tablesocket.Pool` before lending one."""
        with self._lock:
            t = self._transport
            if t is None:
                return False
            try:
                _check_idle(t)
            except Exception:
                self.close()
                return False
            return True

    def auth(self, method: Union[AuthMethod, str, bytes]) -> None:
        """Authenticate this connection: a secret (``str``/``bytes``) means
        :class:`~tablesocket.SharedSecret` (HandlerSocket's ``A 1 <secret>``); other
        methods are :class:`~tablesocket.AuthMethod` objects. On success the method is
        remembered and replayed on reconnect (an account login replaces the previous
        one). Raises :class:`~tablesocket.AuthError` if refused; the connection stays
        open and the previous login stays configured for reconnects."""
        m = as_auth_method(method)
        with self._lock:
            self._require_open()
            if m.changes_account:
                self._manual_login = True
            self._run_auth(m)
            if m.changes_account:
                self._login = m
            else:
                self._auth = m

    def login(self, user: Union[str, bytes], password: Union[str, bytes, None] = None, *,
              method: str = "auto") -> None:
        """Log in as the MariaDB account ``user``: ``method`` is ``"auto"`` or
        ``"native"`` (challenge-response; the password is not sent) or
        ``"cleartext"`` (the password is sent: use TLS). The server then forgets the
        indexes opened before; handles keep working (they are re-opened with the new
        account's privileges on their next use). Replayed on reconnect. Raises
        :class:`~tablesocket.AuthError` if refused; the connection stays usable."""
        self.auth(login_method(user, password, method))

    def _run_auth(self, method: AuthMethod) -> None:
        gen = method.exchange()
        try:
            line = next(gen)
        except StopIteration:
            return
        while True:
            op = Operation(Request(line, ReplyKind.RAW, resets_indexes=method.changes_account))
            self._execute([op])
            try:
                line = gen.send(op.result.result())
            except StopIteration:
                return
            except errors.ConnectionError:  # e.g. ProtocolError: not the reply expected
                self.close()
                raise

    # -- requests -------------------------------------------------------------------

    def _require_open(self) -> Transport:
        t = self._transport
        if t is None:
            raise errors.ConnectionError("the connection is closed (call reconnect())")
        return t

    def _execute(self, ops: Sequence[Operation]) -> None:
        """Send ops in one write and fill their results. Raises only transport/protocol
        errors (after closing the connection); per-request errors go to the results."""
        with self._lock:
            t = self._require_open()
            batch = self._session.batch(ops)
            try:
                _check_idle(t)
                _drive(t, self._reader, batch, self.timeout)
            except TablesocketError as e:
                self.close()
                batch.fail(e)
                raise
            except Exception as e:
                err = as_tablesocket_error(e, f"{self.host}:{self.port}")
                self.close()
                batch.fail(err)
                raise err from e
            except BaseException:  # KeyboardInterrupt etc.: the stream is out of sync
                self.close()
                batch.fail(errors.ConnectionError("interrupted; connection closed"))
                raise

    def _call(self, request: Request) -> Any:
        op = Operation(request)
        self._execute([op])
        return op.result.result()

    def _make_index(self, db: str, table: str, index: str,
                    columns: Union[str, Sequence[str], None],
                    filter_columns: Union[str, Sequence[str], None],
                    decode: DecodeSpec) -> "Index":
        if columns is None:
            raise ClientError("open_index needs columns=[...] (the columns to read/write)")
        spec = make_spec(db, table, index, columns, filter_columns)
        return Index(self, self._session.index_id(spec), spec, decode)

    def open_index(
        self,
        db: str,
        table: str,
        index: str = "PRIMARY",
        columns: Union[str, Sequence[str], None] = None,
        filter_columns: Union[str, Sequence[str], None] = None,
        *,
        decode: DecodeSpec = False,
    ) -> "Index":
        """Open ``db.table`` through ``index`` (``PRIMARY`` or an index name) for
        ``columns``; ``filter_columns`` are the columns usable in filters.

        Values come back as ``bytes`` unless ``decode`` says otherwise: ``True`` (UTF-8
        ``str``), a codec name, a callable (e.g. ``int``), or a list with one such entry
        per column. The client picks the index id; opening the same spec again on the
        same connection costs no round trip. Raises :class:`~tablesocket.ServerError`
        if the server cannot open it.
        """
        handle = self._make_index(db, table, index, columns, filter_columns, decode)
        with self._lock:
            self._require_open()
            if handle.id not in self._session.opened:
                self._call(self._session.open_request(handle.id))
        return handle

    def pipeline(self, *, raise_on_error: bool = True) -> "Pipeline":
        """Collect requests and send them in one write; see :class:`Pipeline`."""
        return Pipeline(self, raise_on_error)


class Index(IndexBase):
    """A handle on an opened index of a :class:`Client`. Rows are tuples in the order
    of ``columns``; keys are values of the index's key parts, in order."""

    _client: Client

    def find(self, op: str, keys: Sequence[Value], limit: int = 1, offset: int = 0, *,
             in_: InSpec = None, filters: Iterable[Filter] = ()) -> List[Row]:
        """Rows whose key compares to ``keys`` by ``op`` (``= > >= < <=``), at most
        ``limit`` after skipping ``offset``. ``in_=(key_pos, values)`` looks up each of
        ``values`` at key part ``key_pos``; ``filters`` are :class:`Filter` clauses."""
        return self._client._call(self._find_req(op, keys, limit, offset, in_, filters))  # type: ignore[no-any-return]

    def get(self, keys: Sequence[Value]) -> Optional[Row]:
        """The first row whose key equals ``keys``, or ``None``."""
        rows = self.find("=", keys)
        return rows[0] if rows else None

    def last(self, prefix: Sequence[Value] = (), limit: int = 1, offset: int = 0, *,
             filters: Iterable[Filter] = ()) -> List[Row]:
        """tablesocket extension ``L``: the last ``limit`` rows whose leading key parts
        equal ``prefix``, highest key first (not supported by HandlerSocket)."""
        return self._client._call(self._last_req(prefix, limit, offset, filters))  # type: ignore[no-any-return]

    def merge(self, groups: Sequence[Value], limit: int, *, offset: int = 0,
              newest_first: bool = True, before: Optional[Bound] = None,
              after: Optional[Bound] = None, filters: Iterable[Filter] = ()) -> List[Row]:
        """tablesocket extension ``M-``/``M+``: a timeline over many groups.

        The index's first key part is the group (e.g. ``user_id`` of an index
        ``(user_id, id)``). Returns the ``limit`` rows of all ``groups`` that come first
        in the order of the index's other key parts: newest (highest) first, or oldest
        first with ``newest_first=False``. A group listed twice counts once; a group
        without rows contributes nothing.

        Page with an exclusive bound on the key parts after the group: ``before=`` (the
        key of the last row seen, e.g. its id; rows strictly older) for newest-first,
        ``after=`` (strictly newer) for oldest-first. Unlike ``offset``, a bound is
        stable while rows are inserted. A bound is one value, or a list of values for
        several key parts. ``filters`` apply per row; a ``W`` filter ends the walk of
        the group whose row failed. Not supported by HandlerSocket."""
        return self._client._call(self._merge_req(  # type: ignore[no-any-return]
            groups, limit, offset, newest_first, before, after, filters))

    def timeline(self, source: "Index", source_keys: Sequence[Value], limit: int, *,
                 offset: int = 0, newest_first: bool = True, before: Optional[Bound] = None,
                 after: Optional[Bound] = None, max_groups: int = 1000,
                 filters: Iterable[Filter] = ()) -> List[Row]:
        """tablesocket extension: :meth:`merge` over the groups that another index
        gives, in one round trip. The groups are the first opened column of the rows
        ``source`` finds with ``=`` for ``source_keys`` (at most ``max_groups`` of them,
        in the source index's order). For example, with ``follows`` opened on
        ``follower(user_id, follower_id, PRIMARY KEY(follower_id, user_id))`` for the
        column ``user_id``, ``messages.timeline(follows, [me], 20)`` is the newest 20
        messages of the users ``me`` follows. No groups: ``[]``. ``source`` must come
        from the same client; it is (re)opened as needed like any index."""
        return self._client._call(self._timeline_req(  # type: ignore[no-any-return]
            source, source_keys, limit, offset, newest_first, before, after, max_groups,
            filters))

    def insert(self, values: Sequence[Value]) -> Optional[int]:
        """Insert a row (values for the first ``len(values)`` opened columns; the rest
        get their defaults). Returns the generated AUTO_INCREMENT id, or ``None``."""
        return self._client._call(self._insert_req(values, "+"))  # type: ignore[no-any-return]

    def upsert(self, values: Sequence[Value]) -> Optional[int]:
        """tablesocket extension ``+=``: insert, or update the row with the same unique
        key. Returns like :meth:`insert` (not supported by HandlerSocket)."""
        return self._client._call(self._insert_req(values, "+="))  # type: ignore[no-any-return]

    @overload
    def update(self, op: str, keys: Sequence[Value], values: Sequence[Value], limit: int = ...,
               offset: int = ..., *, in_: InSpec = ..., filters: Iterable[Filter] = ...,
               returning: Literal[False] = ...) -> int: ...
    @overload
    def update(self, op: str, keys: Sequence[Value], values: Sequence[Value], limit: int = ...,
               offset: int = ..., *, in_: InSpec = ..., filters: Iterable[Filter] = ...,
               returning: Literal[True]) -> List[Row]: ...
    def update(self, op: str, keys: Sequence[Value], values: Sequence[Value], limit: int = 1,
               offset: int = 0, *, in_: InSpec = None, filters: Iterable[Filter] = (),
               returning: bool = False) -> Union[int, List[Row]]:
        """Set the opened columns of the matching rows to ``values`` (one per opened
        column). Returns the number of rows changed, or with ``returning=True`` the rows
        as they were before the change."""
        return self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "U", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                  filters: Iterable[Filter] = ..., returning: Literal[False] = ...) -> int: ...
    @overload
    def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                  filters: Iterable[Filter] = ..., returning: Literal[True]) -> List[Row]: ...
    def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = 1, offset: int = 0, *, in_: InSpec = None,
                  filters: Iterable[Filter] = (), returning: bool = False) -> Union[int, List[Row]]:
        """Add ``values`` to the matching rows: one integer per opened column, ``None``
        (or leaving trailing values out) to leave a column unchanged. Note that a 0 is
        not a no-op for HandlerSocket on a non-numeric column (it stores the column's
        numeric value). Returns the count, or the pre-image rows with ``returning=True``."""
        return self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "+", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                  filters: Iterable[Filter] = ..., returning: Literal[False] = ...) -> int: ...
    @overload
    def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                  filters: Iterable[Filter] = ..., returning: Literal[True]) -> List[Row]: ...
    def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                  limit: int = 1, offset: int = 0, *, in_: InSpec = None,
                  filters: Iterable[Filter] = (), returning: bool = False) -> Union[int, List[Row]]:
        """Subtract ``values`` from the matching rows (as :meth:`increment`;
        HandlerSocket leaves a row unchanged if a column would change sign). Returns the
        count, or the pre-image rows with ``returning=True``."""
        return self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "-", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    def delete(self, op: str, keys: Sequence[Value], limit: int = ..., offset: int = ..., *,
               in_: InSpec = ..., filters: Iterable[Filter] = ...,
               returning: Literal[False] = ...) -> int: ...
    @overload
    def delete(self, op: str, keys: Sequence[Value], limit: int = ..., offset: int = ..., *,
               in_: InSpec = ..., filters: Iterable[Filter] = ...,
               returning: Literal[True]) -> List[Row]: ...
    def delete(self, op: str, keys: Sequence[Value], limit: int = 1, offset: int = 0, *,
               in_: InSpec = None, filters: Iterable[Filter] = (),
               returning: bool = False) -> Union[int, List[Row]]:
        """Delete the matching rows. Returns the count, or the deleted rows with
        ``returning=True``."""
        return self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "D", op, keys, (), limit, offset, in_, filters, returning))


class Pipeline(PipelineBase):
    """Requests queued inside ``with client.pipeline() as p:`` are written in one go
    when the block exits; the :class:`~tablesocket.Result` each method returned is then
    filled in, in order. Example::

        with client.pipeline() as p:
            a = p.find(idx, "=", [1])
            b = p.insert(idx, [2, "x"])
        a.value, b.value

    Per-request server errors land in their result; unless ``raise_on_error=False``
    the first of them is also raised when the block exits (after all results are
    filled). If the block raises, nothing is sent. A connection error closes the
    connection, fails the unanswered results and propagates.
    """

    _client: Client

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._abort()
            return
        self.execute()

    def execute(self) -> List[Any]:
        """Send the queued requests now (``with`` does this on exit). Returns the
        values, with the exception object in place of each failed request's value
        (when ``raise_on_error=False``)."""
        ops = self._begin_execute()
        if ops:
            self._client._execute(ops)
        self._finish()
        return [r.result() if r.exception() is None else r.exception() for r in self.results]
