"""The asyncio client: :class:`AsyncClient`, :class:`AsyncIndex` and
:class:`AsyncPipeline`. Same protocol core and semantics as the blocking client.

Any number of tasks may use one :class:`AsyncClient` at once: each call writes its
request(s) immediately and a single reader task matches replies to requests in
order. A task that is cancelled while waiting leaves the connection in sync (its
reply is read and dropped)."""

from __future__ import annotations

import asyncio
import collections
import ssl
from typing import (
    Any,
    Awaitable,
    Callable,
    Deque,
    Iterable,
    List,
    Literal,
    Optional,
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
from .client import DEFAULT_MAX_REPLY, DEFAULT_TIMEOUT
from .errors import ClientError, TablesocketError
from .protocol import DecodeSpec, Filter, LineReader, ReplyKind, Request, Row, Value

__all__ = ["AsyncClient", "AsyncIndex", "AsyncPipeline"]

_RECV_SIZE = 256 * 1024

StreamFactory = Callable[[], Awaitable[Tuple[Any, Any]]]


class _Conn:
    """One connection: its streams, reader task and requests awaiting replies."""

    __slots__ = ("reader", "writer", "task", "inflight", "lines", "closed")

    def __init__(self, reader: Any, writer: Any, max_reply: int) -> None:
        self.reader = reader
        self.writer = writer
        self.task: Optional["asyncio.Task[None]"] = None
        self.inflight: Deque[Tuple[Batch, "asyncio.Future[Optional[BaseException]]"]] = (
            collections.deque())
        self.lines = LineReader(max_reply)
        self.closed = False


class AsyncClient:
    """An asyncio connection to a tablesocket (or HandlerSocket) listener.

    Create it, then ``await client.connect()`` or use ``async with AsyncClient(...) as
    client``. Arguments are those of :class:`~tablesocket.Client` (``user``,
    ``password``, ``auth``, ``secret``: log in on every connection; ``ssl``: TLS,
    passed to :func:`asyncio.open_connection`, whose handshake ``connect_timeout``
    bounds). ``stream_factory`` (for tests) is an async callable returning a
    ``(reader, writer)`` pair.

    The login runs before :meth:`connect` returns; until then other tasks see the
    client as closed. While :meth:`login` runs, requests that other tasks send go out
    in order with the login: those sent before it run as the previous account.
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
        stream_factory: Optional[StreamFactory] = None,
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
        self._stream_factory = stream_factory
        self._max_reply = max_reply_size
        self._session = Session()
        self._conn: Optional[_Conn] = None
        self._connect_lock: Optional[asyncio.Lock] = None
        self._auth_lock: Optional[asyncio.Lock] = None  # one login exchange at a time

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tablesocket.AsyncClient {self.host}:{self.port} {state}>"

    async def __aenter__(self) -> "AsyncClient":
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._conn is None

    @property
    def user(self) -> Optional[str]:
        """The MariaDB account user this client logs in as (``None``: no login)."""
        name = getattr(self._login, "user", None)
        return name.decode("utf-8", "replace") if isinstance(name, bytes) else name

    # -- connection -----------------------------------------------------------------

    async def connect(self) -> None:
        """Open the connection if it is closed (and log in, if configured)."""
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        async with self._connect_lock:
            if self._conn is not None:
                return
            try:
                if self._stream_factory is not None:
                    opener: Awaitable[Tuple[Any, Any]] = self._stream_factory()
                else:
                    opener = asyncio.open_connection(
                        self.host, self.port, ssl=self.ssl_context,
                        server_hostname=(self.server_hostname or self.host)
                        if self.ssl_context is not None else None)
                reader, writer = await asyncio.wait_for(opener, self.connect_timeout)
            except TablesocketError:
                raise
            except asyncio.TimeoutError as e:
                raise errors.TimeoutError(
                    f"connect to {self.host}:{self.port}: timed out") from e
            except Exception as e:
                raise as_tablesocket_error(e, f"connect to {self.host}:{self.port}") from e
            conn = _Conn(reader, writer, self._max_reply)
            self._session.new_connection()
            conn.task = asyncio.get_running_loop().create_task(self._read_loop(conn))
            # Published only once logged in: until then other tasks see a closed client
            # rather than sending requests that would run before the login.
            try:
                for method in (self._auth, self._login):
                    if method is not None:
                        await self._run_auth(method, conn)
            except BaseException:
                # never leave a connection that is not logged in as asked
                await self._close_conn(conn, errors.ConnectionError("login failed; connection closed"))
                raise
            self._conn = conn

    async def reconnect(self) -> None:
        """Close the connection (if open) and open a new one."""
        await self.close()
        await self.connect()

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with ConnectionError."""
        conn = self._conn
        if conn is None:
            return
        await self._close_conn(conn, errors.ConnectionError("connection closed by the client"))

    async def _close_conn(self, conn: _Conn, err: BaseException) -> None:
        self._drop(conn, err)
        task = conn.task
        if task is not None and task is not asyncio.current_task():
            await asyncio.gather(task, return_exceptions=True)
        wait_closed = getattr(conn.writer, "wait_closed", None)
        if wait_closed is not None:
            try:
                await asyncio.wait_for(wait_closed(), 1.0)
            except (Exception, asyncio.TimeoutError):
                pass

    def _drop(self, conn: _Conn, err: BaseException) -> None:
        """Close ``conn`` and fail everything waiting on it (synchronous, idempotent)."""
        if self._conn is conn:
            self._conn = None
        if conn.closed:
            return
        conn.closed = True
        task = conn.task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
        try:
            conn.writer.close()
        except Exception:
            pass
        while conn.inflight:
            batch, fut = conn.inflight.popleft()
            batch.fail(err)
            if not fut.done():
                fut.set_result(err)

    async def _read_loop(self, conn: _Conn) -> None:
        try:
            while True:
                data = await conn.reader.read(_RECV_SIZE)
                if not data:
                    n = sum(b.remaining for b, _ in conn.inflight)
                    raise errors.ConnectionError(
                        f"connection closed by the server with {n} repl"
                        f"{'y' if n == 1 else 'ies'} outstanding")
                conn.lines.feed(data)
                while True:
                    line = conn.lines.next_line()
                    if line is None:
                        break
                    if not conn.inflight:
                        raise errors.ProtocolError("received a reply with no request outstanding")
                    batch, fut = conn.inflight[0]
                    batch.feed_line(line)
                    if batch.finished:
                        conn.inflight.popleft()
                        if not fut.done():
                            fut.set_result(None)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._drop(conn, as_tablesocket_error(e, f"{self.host}:{self.port}"))

    async def auth(self, method: Union[AuthMethod, str, bytes]) -> None:
        """Authenticate (see :meth:`tablesocket.Client.auth`)."""
        m = as_auth_method(method)
        self._require_open()
        if self._auth_lock is None:
            self._auth_lock = asyncio.Lock()
        async with self._auth_lock:  # two exchanges at once would mix up their replies
            conn = self._require_open()
            try:
                await self._run_auth(m, conn)
            except asyncio.CancelledError:
                # Cancelled mid-exchange: the server may have switched accounts (its reply is read
                # and dropped), so the connection goes, as the blocking client's does when
                # interrupted: nothing runs under an account the client does not know of.
                self._drop(conn, errors.ConnectionError(
                    "authentication was cancelled; the connection was closed (call reconnect())"))
                raise
        if m.changes_account:
            self._login = m
        else:
            self._auth = m

    async def login(self, user: Union[str, bytes], password: Union[str, bytes, None] = None,
                    *, method: str = "auto") -> None:
        """Log in as a MariaDB account (see :meth:`tablesocket.Client.login`)."""
        await self.auth(login_method(user, password, method))

    async def _run_auth(self, method: AuthMethod, conn: _Conn) -> None:
        gen = method.exchange()
        try:
            line = next(gen)
        except StopIteration:
            return
        while True:
            op = Operation(Request(line, ReplyKind.RAW, resets_indexes=method.changes_account))
            await self._execute([op], conn)
            try:
                line = gen.send(op.result.result())
            except StopIteration:
                return
            except errors.ConnectionError as e:  # e.g. ProtocolError: not the reply expected
                self._drop(conn, e)
                raise

    # -- requests -------------------------------------------------------------------

    def _require_open(self) -> _Conn:
        conn = self._conn
        if conn is None:
            raise errors.ConnectionError("the connection is closed (call reconnect())")
        return conn

    async def _execute(self, ops: Sequence[Operation], conn: Optional[_Conn] = None) -> None:
        if conn is None:
            conn = self._require_open()
        elif conn.closed:  # e.g. dropped between the steps of a login
            raise errors.ConnectionError("the connection is closed (call reconnect())")
        batch = self._session.batch(ops)
        fut: "asyncio.Future[Optional[BaseException]]" = (
            asyncio.get_running_loop().create_future())
        conn.inflight.append((batch, fut))
        try:
            conn.writer.write(batch.data)
        except Exception as e:
            write_err = as_tablesocket_error(e, f"{self.host}:{self.port}")
            self._drop(conn, write_err)
            raise write_err from e
        try:
            failure = await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            timeout_err = errors.TimeoutError(
                f"no complete reply within {self.timeout}s ({batch.remaining} outstanding)")
            self._drop(conn, timeout_err)
            raise timeout_err from None
        if failure is not None:
            raise failure

    async def _call(self, request: Request) -> Any:
        op = Operation(request)
        await self._execute([op])
        return op.result.result()

    def _make_index(self, db: str, table: str, index: str,
                    columns: Union[str, Sequence[str], None],
                    filter_columns: Union[str, Sequence[str], None],
                    decode: DecodeSpec) -> "AsyncIndex":
        if columns is None:
            raise ClientError("open_index needs columns=[...] (the columns to read/write)")
        spec = make_spec(db, table, index, columns, filter_columns)
        return AsyncIndex(self, self._session.index_id(spec), spec, decode)

    async def open_index(
        self,
        db: str,
        table: str,
        index: str = "PRIMARY",
        columns: Union[str, Sequence[str], None] = None,
        filter_columns: Union[str, Sequence[str], None] = None,
        *,
        decode: DecodeSpec = False,
    ) -> "AsyncIndex":
        """Open an index (see :meth:`tablesocket.Client.open_index`)."""
        handle = self._make_index(db, table, index, columns, filter_columns, decode)
        self._require_open()
        if handle.id not in self._session.opened:
            await self._call(self._session.open_request(handle.id))
        return handle

    def pipeline(self, *, raise_on_error: bool = True) -> "AsyncPipeline":
        """``async with client.pipeline() as p:`` -- see :class:`AsyncPipeline`."""
        return AsyncPipeline(self, raise_on_error)


class AsyncIndex(IndexBase):
    """A handle on an opened index of an :class:`AsyncClient`; the methods are those
    of :class:`tablesocket.Index`, as coroutines."""

    _client: AsyncClient

    async def find(self, op: str, keys: Sequence[Value], limit: int = 1, offset: int = 0, *,
                   in_: InSpec = None, filters: Iterable[Filter] = ()) -> List[Row]:
        return await self._client._call(  # type: ignore[no-any-return]
            self._find_req(op, keys, limit, offset, in_, filters))

    async def get(self, keys: Sequence[Value]) -> Optional[Row]:
        rows = await self.find("=", keys)
        return rows[0] if rows else None

    async def last(self, prefix: Sequence[Value] = (), limit: int = 1, offset: int = 0, *,
                   filters: Iterable[Filter] = ()) -> List[Row]:
        return await self._client._call(  # type: ignore[no-any-return]
            self._last_req(prefix, limit, offset, filters))

    async def merge(self, groups: Sequence[Value], limit: int, *, offset: int = 0,
                    newest_first: bool = True, before: Optional[Bound] = None,
                    after: Optional[Bound] = None,
                    filters: Iterable[Filter] = ()) -> List[Row]:
        """See :meth:`tablesocket.Index.merge`."""
        return await self._client._call(self._merge_req(  # type: ignore[no-any-return]
            groups, limit, offset, newest_first, before, after, filters))

    async def timeline(self, source: "AsyncIndex", source_keys: Sequence[Value], limit: int, *,
                       offset: int = 0, newest_first: bool = True,
                       before: Optional[Bound] = None, after: Optional[Bound] = None,
                       max_groups: int = 1000, filters: Iterable[Filter] = ()) -> List[Row]:
        """See :meth:`tablesocket.Index.timeline`."""
        return await self._client._call(self._timeline_req(  # type: ignore[no-any-return]
            source, source_keys, limit, offset, newest_first, before, after, max_groups,
            filters))

    async def insert(self, values: Sequence[Value]) -> Optional[int]:
        return await self._client._call(self._insert_req(values, "+"))  # type: ignore[no-any-return]

    async def upsert(self, values: Sequence[Value]) -> Optional[int]:
        return await self._client._call(self._insert_req(values, "+="))  # type: ignore[no-any-return]

    @overload
    async def update(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                     limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                     filters: Iterable[Filter] = ..., returning: Literal[False] = ...) -> int: ...
    @overload
    async def update(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                     limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                     filters: Iterable[Filter] = ..., returning: Literal[True]) -> List[Row]: ...
    async def update(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                     limit: int = 1, offset: int = 0, *, in_: InSpec = None,
                     filters: Iterable[Filter] = (),
                     returning: bool = False) -> Union[int, List[Row]]:
        return await self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "U", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    async def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                        filters: Iterable[Filter] = ...,
                        returning: Literal[False] = ...) -> int: ...
    @overload
    async def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                        filters: Iterable[Filter] = ...,
                        returning: Literal[True]) -> List[Row]: ...
    async def increment(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = 1, offset: int = 0, *, in_: InSpec = None,
                        filters: Iterable[Filter] = (),
                        returning: bool = False) -> Union[int, List[Row]]:
        return await self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "+", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    async def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                        filters: Iterable[Filter] = ...,
                        returning: Literal[False] = ...) -> int: ...
    @overload
    async def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = ..., offset: int = ..., *, in_: InSpec = ...,
                        filters: Iterable[Filter] = ...,
                        returning: Literal[True]) -> List[Row]: ...
    async def decrement(self, op: str, keys: Sequence[Value], values: Sequence[Value],
                        limit: int = 1, offset: int = 0, *, in_: InSpec = None,
                        filters: Iterable[Filter] = (),
                        returning: bool = False) -> Union[int, List[Row]]:
        return await self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "-", op, keys, values, limit, offset, in_, filters, returning))

    @overload
    async def delete(self, op: str, keys: Sequence[Value], limit: int = ..., offset: int = ...,
                     *, in_: InSpec = ..., filters: Iterable[Filter] = ...,
                     returning: Literal[False] = ...) -> int: ...
    @overload
    async def delete(self, op: str, keys: Sequence[Value], limit: int = ..., offset: int = ...,
                     *, in_: InSpec = ..., filters: Iterable[Filter] = ...,
                     returning: Literal[True]) -> List[Row]: ...
    async def delete(self, op: str, keys: Sequence[Value], limit: int = 1, offset: int = 0, *,
                     in_: InSpec = None, filters: Iterable[Filter] = (),
                     returning: bool = False) -> Union[int, List[Row]]:
        return await self._client._call(self._modify_req(  # type: ignore[no-any-return]
            "D", op, keys, (), limit, offset, in_, filters, returning))


class AsyncPipeline(PipelineBase):
    """``async with client.pipeline() as p:`` queues requests (the methods are plain,
    not coroutines) and sends them in one write when the block exits; the returned
    :class:`~tablesocket.Result` objects are then filled in order. Error handling is
    that of :class:`tablesocket.Pipeline`."""

    _client: AsyncClient

    async def __aenter__(self) -> "AsyncPipeline":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._abort()
            return
        await self.execute()

    async def execute(self) -> List[Any]:
        """Send the queued requests now; returns values (exceptions for failures)."""
        ops = self._begin_execute()
        if ops:
            await self._client._execute(ops)
        self._finish()
        return [r.result() if r.exception() is None else r.exception() for r in self.results]
