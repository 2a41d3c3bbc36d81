"""Client state shared by the blocking and the asyncio client, without any I/O:
index-id allocation, which indexes are open on the current connection, batches of
requests with their result slots, and building requests for an index."""

from __future__ import annotations

import socket
import ssl as _ssl
import threading
from typing import (
    Any,
    Dict,
    Generic,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
    Union,
)

from . import protocol as proto
from .errors import ClientError, ProtocolError, ServerError, TablesocketError
from .protocol import DecodeSpec, Filter, ReplyKind, Request, Value

T = TypeVar("T")

_UNSET: Any = object()


class Result(Generic[T]):
    """The eventual answer to one request of a pipeline.

    Filled in when the pipeline's ``with`` block exits. :meth:`result` (or
    :attr:`value`) returns the value or raises the request's error.
    """

    __slots__ = ("_value", "_exc", "description")

    def __init__(self, description: str = "") -> None:
        self._value: Any = _UNSET
        self._exc: Optional[BaseException] = None
        self.description = description

    def done(self) -> bool:
        """True once the reply was read (or the request failed)."""
        return self._value is not _UNSET or self._exc is not None

    def result(self) -> T:
        """The value, or raise the request's error (:class:`ClientError` if not yet run)."""
        if self._exc is not None:
            raise self._exc
        if self._value is _UNSET:
            raise ClientError("result not available: the pipeline has not run yet")
        return self._value  # type: ignore[no-any-return]

    @property
    def value(self) -> T:
        """Same as :meth:`result`."""
        return self.result()

    def exception(self) -> Optional[BaseException]:
        """The request's error, or ``None`` (also while not done)."""
        return self._exc

    def ok(self) -> bool:
        """True if done without an error."""
        return self._value is not _UNSET and self._exc is None

    def _set(self, value: Any) -> None:
        if not self.done():
            self._value = value

    def _fail(self, exc: BaseException) -> None:
        if not self.done():
            self._exc = exc

    def __repr__(self) -> str:
        if self._exc is not None:
            state = f"error={self._exc!r}"
        elif self._value is not _UNSET:
            state = f"value={self._value!r}"
        else:
            state = "pending"
        return f"<Result {self.description} {state}>"


class Operation:
    """A request, the slot its answer goes to, and whether the caller asked for it
    (``hidden`` operations are the client's own, e.g. re-opening an index)."""

    __slots__ = ("request", "result", "hidden")

    def __init__(self, request: Request, result: Optional[Result[Any]] = None, hidden: bool = False):
        self.request = request
        self.result: Result[Any] = result if result is not None else Result()
        self.hidden = hidden


class IndexSpec(NamedTuple):
    db: str
    table: str
    index_name: str
    columns: Tuple[str, ...]
    filter_columns: Tuple[str, ...]


# Errors after which the server answers no more on the connection (it closes it).
CLOSING_ERRORS = frozenset({"toolong", "toomanytokens", "nomemory"})


class Batch:
    """Requests written together and answered in order. Feed it reply lines with
    :meth:`feed_line` until :attr:`finished`; on a transport or protocol failure call
    :meth:`fail` so that every unanswered result carries the error."""

    __slots__ = ("ops", "data", "pos", "_session", "_failed_opens", "generation", "_closing")

    def __init__(self, session: "Session", ops: List[Operation]):
        self._session = session
        self.ops = ops
        self.data = b"".join(op.request.line for op in ops)
        self.pos = 0
        self._failed_opens: Dict[int, ServerError] = {}
        self.generation = session.generation
        self._closing: Optional[ServerError] = None

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.ops)

    def closing_error(self) -> Optional[ServerError]:
        """The first answer after which the server closes the connection (a line over its
        size or token limit: ``toolong``, ``toomanytokens``, ``nomemory``), if any."""
        return self._closing

    @property
    def remaining(self) -> int:
        return len(self.ops) - self.pos

    def feed_line(self, line: bytes) -> None:
        """Read the reply to the next request. Raises :class:`ProtocolError` if the
        line is malformed (the caller must then close the connection)."""
        op = self.ops[self.pos]
        req = op.request
        try:
            value = req.interpret(proto.parse_reply(line))
        except ProtocolError:
            raise  # pos stays: fail() will fail this op too
        except ServerError as e:
            self.pos += 1
            if self._closing is None and e.message in CLOSING_ERRORS:
                self._closing = e
            if req.opens and req.index_id is not None:
                self._session.mark_closed(req.index_id, self.generation)
                self._failed_opens[req.index_id] = e
            else:
                e = self._failed_open(req) or e  # an open before it failed: say why
            op.result._fail(e)
            return
        except ClientError as e:  # a value that could not be decoded as asked
            self.pos += 1
            op.result._fail(e)
            return
        self.pos += 1
        if req.opens and req.index_id is not None:
            self._failed_opens.pop(req.index_id, None)
        else:
            failed = self._failed_open(req)
            if failed is not None:
                # the client re-opened an index first and that failed: report why
                op.result._fail(failed)
                return
        op.result._set(value)

    def _failed_open(self, req: Request) -> Optional[ServerError]:
        """The error of a failed open, in this batch, of an index the request uses."""
        if not self._failed_opens:
            return None
        for i in (req.index_id, *req.also_uses):
            if i is not None and i in self._failed_opens:
                return self._failed_opens[i]
        return None

    def fail(self, exc: BaseException) -> None:
        for op in self.ops[self.pos :]:
            op.result._fail(exc)
        self.pos = len(self.ops)

    def first_error(self) -> Optional[BaseException]:
        for op in self.ops:
            if not op.hidden and op.result.exception() is not None:
                return op.result.exception()
        return None


class Session:
    """Per-client protocol state that survives reconnects: index specs and their ids.
    ``generation`` counts connections and account logins (after which the server has
    forgotten the connection's indexes); an index is open on the current connection
    iff its id is in ``opened``."""

    def __init__(self) -> None:
        self._ids: Dict[IndexSpec, int] = {}
        self._specs: Dict[int, IndexSpec] = {}
        self.opened: Set[int] = set()
        self.generation = 0
        self._lock = threading.Lock()  # index_id may be called outside the client's lock

    def new_connection(self) -> None:
        self.generation += 1
        self.opened.clear()

    def forget_opened(self) -> None:
        """The server forgot the connection's indexes (a login changed its account):
        each is re-opened before its next use. Replies still to come for requests sent
        before belong to the previous generation and cannot mark an index closed."""
        self.new_connection()

    def index_id(self, spec: IndexSpec) -> int:
        """The id for this spec (allocated on first use; ids stay small)."""
        with self._lock:
            i = self._ids.get(spec)
            if i is None:
                i = len(self._ids)
                self._ids[spec] = i
                self._specs[i] = spec
            return i

    def mark_closed(self, index_id: int, generation: int) -> None:
        if generation == self.generation:
            self.opened.discard(index_id)

    def open_request(self, index_id: int) -> Request:
        s = self._specs[index_id]
        line = proto.encode_open_index(index_id, s.db, s.table, s.index_name, s.columns, s.filter_columns)
        return Request(line, ReplyKind.OK, index_id=index_id, opens=True)

    def batch(self, ops: Sequence[Operation]) -> Batch:
        """Build a batch, inserting an open request before the first use of every index
        that is not open on this connection (after a reconnect, say). Marks indexes
        open optimistically; a failed open unmarks it when its reply is read."""
        out: List[Operation] = []
        for op in ops:
            req = op.request
            if req.resets_indexes:
                # Cleared when the request is queued, not when it is answered: whatever
                # is sent after it (possibly by other tasks) re-opens its indexes.
                self.forget_opened()
            if req.opens and req.index_id is not None:
                self.opened.add(req.index_id)
            else:
                for i in (req.index_id, *req.also_uses):
                    if i is not None and i not in self.opened:
                        out.append(Operation(self.open_request(i), hidden=True))
                        self.opened.add(i)
            out.append(op)
        return Batch(self, out)


# ---------------------------------------------------------------------------------------
# Request builders for an opened index (shared by Index, AsyncIndex and the pipelines)
# ---------------------------------------------------------------------------------------

InSpec = Optional[Tuple[int, Sequence[Value]]]

#: A timeline bound: one value (for the key part after the group) or a list of values
#: (for the key parts after the group, in order); ``None`` means no bound.
Bound = Union[Value, Sequence[Value]]


def _merge_op_and_bound(newest_first: bool, before: Optional[Bound],
                        after: Optional[Bound]) -> Tuple[str, List[Value]]:
    """``M-``/``M+`` and the bound values, checking that the bound fits the direction."""
    if not isinstance(newest_first, bool):
        raise ClientError("newest_first must be a bool")
    if before is not None and after is not None:
        raise ClientError("give before= or after=, not both")
    if newest_first:
        if after is not None:
            raise ClientError("after= needs newest_first=False (a newest-first timeline pages "
                              "with before=, the key of the last row seen)")
        bound = before
    else:
        if before is not None:
            raise ClientError("before= needs newest_first=True (an oldest-first timeline pages "
                              "with after=, the key of the last row seen)")
        bound = after
    if bound is None:
        values: List[Value] = []
    elif isinstance(bound, (list, tuple)):
        values = list(bound)
        if not values:
            raise ClientError("an empty bound: pass None for no bound")
    else:
        values = [bound]  # type: ignore[list-item]
    return ("M-" if newest_first else "M+"), values


class IndexBase:
    """What the blocking and asyncio index handles share: the spec, the id and the
    request builders."""

    __slots__ = ("_client", "id", "spec", "decoders")

    def __init__(self, client: Any, index_id: int, spec: IndexSpec, decode: DecodeSpec) -> None:
        self._client = client
        self.id = index_id
        self.spec = spec
        self.decoders = proto.make_decoders(decode, len(spec.columns))

    @property
    def db(self) -> str:
        return self.spec.db

    @property
    def table(self) -> str:
        return self.spec.table

    @property
    def name(self) -> str:
        """The index name (``PRIMARY`` for the primary key)."""
        return self.spec.index_name

    @property
    def columns(self) -> Tuple[str, ...]:
        return self.spec.columns

    @property
    def filter_columns(self) -> Tuple[str, ...]:
        return self.spec.filter_columns

    def __repr__(self) -> str:
        s = self.spec
        return (f"<{type(self).__name__} {self.id}: {s.db}.{s.table} {s.index_name} "
                f"columns={list(s.columns)} filter_columns={list(s.filter_columns)}>")

    # -- builders ---------------------------------------------------------------------

    def _rows_request(self, line: bytes) -> Request:
        return Request(line, ReplyKind.ROWS, ncols=len(self.spec.columns),
                       decoders=self.decoders, columns=self.spec.columns, index_id=self.id)

    def _find_req(self, op: str, keys: Sequence[Value], limit: int, offset: int,
                  in_: InSpec, filters: Iterable[Filter]) -> Request:
        if op == proto.LAST_OP:
            raise ClientError("use last() for the 'L' op")
        return self._rows_request(proto.encode_find(
            self.id, op, keys, limit, offset, in_, filters,
            filter_columns=self.spec.filter_columns))

    def _last_req(self, prefix: Sequence[Value], limit: int, offset: int,
                  filters: Iterable[Filter]) -> Request:
        if not prefix:
            raise ClientError("last() needs a prefix: the leading key part(s) to look under")
        return self._rows_request(proto.encode_find(
            self.id, proto.LAST_OP, prefix, limit, offset, None, filters,
            filter_columns=self.spec.filter_columns))

    def _merge_req(self, groups: Sequence[Value], limit: int, offset: int, newest_first: bool,
                   before: Optional[Bound], after: Optional[Bound],
                   filters: Iterable[Filter]) -> Request:
        op, bound = _merge_op_and_bound(newest_first, before, after)
        return self._rows_request(proto.encode_merge(
            self.id, op, limit, offset, bound=bound, groups=groups, filters=filters,
            filter_columns=self.spec.filter_columns))

    def _timeline_req(self, source: "IndexBase", source_keys: Sequence[Value], limit: int,
                      offset: int, newest_first: bool, before: Optional[Bound],
                      after: Optional[Bound], max_groups: int,
                      filters: Iterable[Filter]) -> Request:
        if not isinstance(source, IndexBase):
            raise ClientError("source must be an index handle (from open_index)")
        check_index_owner(source, self._client)
        if not source.spec.columns:
            raise ClientError("the source index must be opened with at least one column")
        op, bound = _merge_op_and_bound(newest_first, before, after)
        req = self._rows_request(proto.encode_merge(
            self.id, op, limit, offset, bound=bound,
            source=(source.id, source_keys, max_groups), filters=filters,
            filter_columns=self.spec.filter_columns))
        if source.id != self.id:
            req.also_uses = (source.id,)
        return req

    def _insert_req(self, values: Sequence[Value], op: str) -> Request:
        vals = proto._as_values(values, "values")
        if len(vals) > len(self.spec.columns):
            raise ClientError(f"{len(vals)} values given but the index was opened with "
                              f"{len(self.spec.columns)} column(s)")
        return Request(proto.encode_insert(self.id, vals, op), ReplyKind.INSERT, index_id=self.id)

    def _modify_req(self, mod: str, op: str, keys: Sequence[Value], values: Sequence[Value],
                    limit: int, offset: int, in_: InSpec, filters: Iterable[Filter],
                    returning: bool) -> Request:
        ncols = len(self.spec.columns)
        if mod == "U":
            vals = list(proto._as_values(values, "values"))
            if len(vals) != ncols:
                # HandlerSocket sets every opened column; a missing value would become ''.
                raise ClientError(
                    f"{len(vals)} value(s) given, expected exactly {ncols}"
                    f" (one per opened column {list(self.spec.columns)})")
        elif mod in ("+", "-"):
            vals = list(proto._as_values(values, "values"))
            if len(vals) > ncols:
                raise ClientError(f"{len(vals)} value(s) given for {ncols} opened column(s)")
            # NULL leaves a column alone (0 would rewrite a non-numeric column as a number)
            vals += [None] * (ncols - len(vals))
        else:
            vals = []
        mod_op = mod + "?" if returning else mod
        if op == proto.LAST_OP:
            raise ClientError("the 'L' op cannot modify rows")
        line = proto.encode_find(self.id, op, keys, limit, offset, in_, filters, mod_op, vals,
                                 filter_columns=self.spec.filter_columns)
        if returning:
            return self._rows_request(line)
        return Request(line, ReplyKind.COUNT, index_id=self.id)


def describe(request: Request) -> str:
    line = request.line.rstrip(b"\n")
    return repr(line[:40]) + ("..." if len(line) > 40 else "")


def as_tablesocket_error(exc: BaseException, what: str) -> TablesocketError:
    """Map a socket-level exception to this package's hierarchy."""
    from . import errors

    if isinstance(exc, TablesocketError):
        return exc
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return errors.TimeoutError(f"{what}: timed out")
    if isinstance(exc, OSError):
        return errors.ConnectionError(f"{what}: {exc.strerror or exc}")
    return errors.ConnectionError(f"{what}: {exc!r}")


def resolve_ssl(ssl: Union["_ssl.SSLContext", bool, None],
                ssl_context: Optional["_ssl.SSLContext"]) -> Optional["_ssl.SSLContext"]:
    """The TLS context from a client's ``ssl=`` (a context, ``True`` for
    :func:`ssl.create_default_context`, ``False``/``None`` for none) and the older
    ``ssl_context=`` spelling."""
    if ssl_context is not None:
        if ssl is not None:
            raise ClientError("give ssl= or ssl_context=, not both")
        ssl = ssl_context
    if ssl is None or ssl is False:
        return None
    if ssl is True:
        return _ssl.create_default_context()
    if not isinstance(ssl, _ssl.SSLContext):
        raise ClientError("ssl must be an ssl.SSLContext, True or None")
    return ssl


def check_timeouts(**values: Optional[float]) -> None:
    for name, value in values.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value <= 0):
            raise ClientError(f"{name} must be a positive number or None")


def check_max_reply(max_reply_size: Any) -> None:
    if isinstance(max_reply_size, bool) or not isinstance(max_reply_size, int) or max_reply_size < 1:
        raise ClientError("max_reply_size must be an int >= 1 (bytes)")


def check_index_owner(index: IndexBase, client: Any) -> None:
    if index._client is not client:
        raise ClientError("this index handle belongs to another client")


def make_spec(db: str, table: str, index: str, columns: Union[str, Sequence[str]],
              filter_columns: Union[str, Sequence[str], None]) -> IndexSpec:
    cols = proto._column_list(columns, "column")
    if not cols:
        raise ClientError("open_index needs at least one column (an index without columns "
                          "cannot tell a found row from a miss)")
    fcols = proto._column_list(filter_columns or (), "filter column")
    for v, what in ((db, "database name"), (table, "table name"), (index, "index name")):
        proto._name(v, what)
    return IndexSpec(db, table, index, cols, fcols)


class PipelineBase:
    """Queues requests; the subclass sends them all in one write and fills the results
    in order. Each method mirrors the index handle's method of the same name, with the
    index handle as first argument, and returns a :class:`Result`."""

    def __init__(self, client: Any, raise_on_error: bool) -> None:
        self._client = client
        self._ops: List[Operation] = []
        self._raise_on_error = raise_on_error
        self._state = "open"  # open -> ran | aborted

    def __len__(self) -> int:
        return len(self._ops)

    @property
    def results(self) -> List[Result[Any]]:
        """The results of the queued requests, in order."""
        return [op.result for op in self._ops if not op.hidden]

    def _queue(self, index: Optional[IndexBase], request: Request) -> Result[Any]:
        if self._state != "open":
            raise ClientError("this pipeline has already been executed")
        if index is not None:
            check_index_owner(index, self._client)
        op = Operation(request, Result(describe(request)))
        self._ops.append(op)
        return op.result

    def _abort(self) -> None:
        self._state = "aborted"
        err = ClientError("pipeline not sent: its block raised an exception")
        for op in self._ops:
            op.result._fail(err)

    def _begin_execute(self) -> List[Operation]:
        if self._state != "open":
            raise ClientError("this pipeline has already been executed")
        self._state = "ran"
        return self._ops

    def _finish(self) -> None:
        if self._raise_on_error:
            for op in self._ops:
                exc = op.result.exception()
                if exc is not None:
                    raise exc

    # -- queueing -------------------------------------------------------------------

    def open_index(self, db: str, table: str, index: str = "PRIMARY",
                   columns: Union[str, Sequence[str], None] = None,
                   filter_columns: Union[str, Sequence[str], None] = None, *,
                   decode: DecodeSpec = False) -> Any:
        """Queue opening an index; returns the handle right away (usable in this
        pipeline). If the open fails, the requests that use it fail with its error."""
        handle = self._client._make_index(db, table, index, columns, filter_columns, decode)
        session: Session = self._client._session
        if handle.id not in session.opened:
            # The client's own request, as when it re-opens an index: not in ``results``, whose
            # length would otherwise depend on whether the connection had the index open.
            self._queue(None, session.open_request(handle.id))
            self._ops[-1].hidden = True
        return handle

    def find(self, index: IndexBase, op: str, keys: Sequence[Value], limit: int = 1,
             offset: int = 0, *, in_: InSpec = None,
             filters: Iterable[Filter] = ()) -> "Result[List[proto.Row]]":
        return self._queue(index, index._find_req(op, keys, limit, offset, in_, filters))

    def last(self, index: IndexBase, prefix: Sequence[Value] = (), limit: int = 1,
             offset: int = 0, *, filters: Iterable[Filter] = ()) -> "Result[List[proto.Row]]":
        return self._queue(index, index._last_req(prefix, limit, offset, filters))

    def merge(self, index: IndexBase, groups: Sequence[Value], limit: int, *, offset: int = 0,
              newest_first: bool = True, before: Optional[Bound] = None,
              after: Optional[Bound] = None,
              filters: Iterable[Filter] = ()) -> "Result[List[proto.Row]]":
        return self._queue(index, index._merge_req(groups, limit, offset, newest_first, before,
                                                   after, filters))

    def timeline(self, index: IndexBase, source: IndexBase, source_keys: Sequence[Value],
                 limit: int, *, offset: int = 0, newest_first: bool = True,
                 before: Optional[Bound] = None, after: Optional[Bound] = None,
                 max_groups: int = 1000,
                 filters: Iterable[Filter] = ()) -> "Result[List[proto.Row]]":
        check_index_owner(index, self._client)
        return self._queue(index, index._timeline_req(source, source_keys, limit, offset,
                                                      newest_first, before, after, max_groups,
                                                      filters))

    def insert(self, index: IndexBase, values: Sequence[Value]) -> "Result[Optional[int]]":
        return self._queue(index, index._insert_req(values, "+"))

    def upsert(self, index: IndexBase, values: Sequence[Value]) -> "Result[Optional[int]]":
        return self._queue(index, index._insert_req(values, "+="))

    def update(self, index: IndexBase, op: str, keys: Sequence[Value], values: Sequence[Value],
               limit: int = 1, offset: int = 0, *, in_: InSpec = None,
               filters: Iterable[Filter] = (), returning: bool = False) -> "Result[Any]":
        return self._queue(index, index._modify_req("U", op, keys, values, limit, offset, in_,
                                                    filters, returning))

    def increment(self, index: IndexBase, op: str, keys: Sequence[Value],
                  values: Sequence[Value], limit: int = 1, offset: int = 0, *,
                  in_: InSpec = None, filters: Iterable[Filter] = (),
                  returning: bool = False) -> "Result[Any]":
        return self._queue(index, index._modify_req("+", op, keys, values, limit, offset, in_,
                                                    filters, returning))

    def decrement(self, index: IndexBase, op: str, keys: Sequence[Value],
                  values: Sequence[Value], limit: int = 1, offset: int = 0, *,
                  in_: InSpec = None, filters: Iterable[Filter] = (),
                  returning: bool = False) -> "Result[Any]":
        return self._queue(index, index._modify_req("-", op, keys, values, limit, offset, in_,
                                                    filters, returning))

    def delete(self, index: IndexBase, op: str, keys: Sequence[Value], limit: int = 1,
               offset: int = 0, *, in_: InSpec = None, filters: Iterable[Filter] = (),
               returning: bool = False) -> "Result[Any]":
        return self._queue(index, index._modify_req("D", op, keys, (), limit, offset, in_,
                                                    filters, returning))
