"""Sans-IO encoder and decoder for the HandlerSocket line protocol and tablesocket's
extensions. Nothing here touches a socket: the blocking :class:`~tablesocket.Client`
and the :class:`~tablesocket.AsyncClient` both build :class:`Request` objects here,
frame the reply stream with :class:`LineReader` and read each line with
:func:`parse_reply` and :meth:`Request.interpret`.

Wire format (see HandlerSocket's ``protocol.en.txt``):

* a request or reply is one line of TAB (0x09) separated tokens ending in LF (0x0a);
* in a token, bytes 0x00-0x0f are sent as 0x01 followed by the byte + 0x40;
* SQL NULL is a token made of a single 0x00 byte; the empty string is an empty token.
"""

from __future__ import annotations

import re
from typing import (
    Any,
    Callable,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from .errors import AuthError, ClientError, PermissionDenied, ProtocolError, ServerError

__all__ = [
    "NULL",
    "Value",
    "Row",
    "Decoder",
    "DecodeSpec",
    "Filter",
    "FIND_OPS",
    "FILTER_OPS",
    "MOD_OPS",
    "escape",
    "unescape",
    "encode_value",
    "encode_open_index",
    "encode_auth",
    "encode_find",
    "encode_insert",
    "encode_merge",
    "MERGE_OPS",
    "LineReader",
    "Reply",
    "parse_reply",
    "error_for",
    "ReplyKind",
    "Request",
    "make_decoders",
    "decode_values",
]

#: The token that stands for SQL NULL.
NULL = b"\x00"

#: What may be sent as a value: ``str`` (sent as UTF-8), bytes-like, ``int``
#: (``bool`` is sent as 1/0) or ``None`` (SQL NULL).
Value = Union[str, bytes, bytearray, memoryview, int, None]

#: A row of a find reply: one item per opened column, ``None`` for NULL.
Row = Tuple[Any, ...]

#: How one column is decoded: ``False``/``None`` keeps ``bytes``, ``True``
#: decodes UTF-8, a ``str`` names a codec, a callable gets the bytes.
Decoder = Union[bool, str, Callable[[bytes], Any], None]
#: One :data:`Decoder` for every column, or a sequence with one per column.
DecodeSpec = Union[Decoder, Sequence[Decoder]]

FIND_OPS = ("=", ">", ">=", "<", "<=")
FILTER_OPS = ("=", "!=", "<", "<=", ">", ">=")
FILTER_TYPES = ("F", "W")
MOD_OPS = ("U", "+", "-", "D")
INSERT_OPS = ("+", "+=")  # '+=' is tablesocket's upsert
LAST_OP = "L"  # tablesocket: last N rows within a key prefix, newest first
MERGE_OPS = ("M-", "M+")  # tablesocket: k-way merge over groups, newest / oldest first

_U32_MAX = 0xFFFFFFFF

# ---------------------------------------------------------------------------------------
# Escaping
# ---------------------------------------------------------------------------------------

_SPECIAL = re.compile(rb"[\x00-\x0f]")
_ESCAPED = re.compile(rb"\x01([\x40-\x4f])")
_ESCAPE_MAP = {bytes((b,)): bytes((0x01, b + 0x40)) for b in range(0x10)}
_UNESCAPE_MAP = {bytes((b + 0x40,)): bytes((b,)) for b in range(0x10)}


def _escape_one(m: "re.Match[bytes]") -> bytes:
    return _ESCAPE_MAP[m.group()]


def _unescape_one(m: "re.Match[bytes]") -> bytes:
    return _UNESCAPE_MAP[m.group(1)]


def escape(data: bytes) -> bytes:
    """Escape bytes 0x00-0x0f as 0x01, byte+0x40 (the result never contains TAB or LF)."""
    if _SPECIAL.search(data) is None:
        return bytes(data)
    return _SPECIAL.sub(_escape_one, data)


def unescape(token: bytes) -> bytes:
    """Reverse :func:`escape`. Strict: any byte 0x00-0x0f that is not part of a valid
    escape pair raises :class:`ProtocolError` (a server never sends one)."""
    if _SPECIAL.search(token) is None:
        return token
    if _SPECIAL.search(_ESCAPED.sub(b"", token)) is not None:
        raise ProtocolError(f"invalid escape sequence in reply token {_clip(token)}")
    return _ESCAPED.sub(_unescape_one, token)


def _clip(data: bytes, n: int = 60) -> str:
    return repr(data[:n]) + ("..." if len(data) > n else "")


# ---------------------------------------------------------------------------------------
# Request encoding
# ---------------------------------------------------------------------------------------


def encode_value(value: Value) -> bytes:
    """Encode one value as a token: ``None`` -> NULL, ``str`` -> escaped UTF-8,
    bytes-like -> escaped bytes, ``int`` -> decimal (``True``/``False`` -> 1/0)."""
    if value is None:
        return NULL
    if isinstance(value, str):
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ClientError(f"cannot encode string value as UTF-8: {e}") from e
    elif isinstance(value, bool):
        return b"1" if value else b"0"
    elif isinstance(value, int):
        return b"%d" % value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise ClientError(
            f"unsupported value type {type(value).__name__}: use str, bytes, int or None"
        )
    return escape(raw)


def _uint(value: Any, what: str, minimum: int = 0) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClientError(f"{what} must be an int, not {type(value).__name__}")
    if not minimum <= value <= _U32_MAX:
        raise ClientError(f"{what} must be between {minimum} and {_U32_MAX}, got {value}")
    return b"%d" % value


def _name(value: Any, what: str, allow_comma: bool = True) -> bytes:
    if isinstance(value, str):
        raw = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    else:
        raise ClientError(f"{what} must be a str, not {type(value).__name__}")
    if not raw:
        raise ClientError(f"{what} must not be empty")
    if _SPECIAL.search(raw) is not None:
        raise ClientError(f"{what} {value!r} contains a control character (TAB, LF, ...)")
    if not allow_comma and b"," in raw:
        raise ClientError(f"{what} {value!r} contains a comma")
    return raw


def _column_list(columns: Union[str, Sequence[str]], what: str) -> Tuple[str, ...]:
    """Normalise a column list given as a sequence or a comma-separated string."""
    if isinstance(columns, (bytes, bytearray)):
        columns = columns.decode("utf-8")
    if isinstance(columns, str):
        cols = tuple(c.strip() for c in columns.split(",")) if columns.strip() else ()
    else:
        cols = tuple(columns)
    for c in cols:
        _name(c, f"{what} name", allow_comma=False)
    return cols


def encode_open_index(
    index_id: int,
    db: str,
    table: str,
    index: str,
    columns: Sequence[str],
    filter_columns: Sequence[str] = (),
) -> bytes:
    """``P <id> <db> <table> <index> <col,...> [<fcol,...>]`` (names are sent unescaped,
    so they may not contain control characters; column names may not contain commas)."""
    cols = _column_list(columns, "column")
    fcols = _column_list(filter_columns, "filter column")
    parts = [
        b"P",
        _uint(index_id, "index id"),
        _name(db, "database name"),
        _name(table, "table name"),
        _name(index, "index name"),
        ",".join(cols).encode("utf-8"),
    ]
    if fcols:
        parts.append(",".join(fcols).encode("utf-8"))
    return b"\t".join(parts) + b"\n"


def encode_auth(auth_type: str, *args: Union[str, bytes]) -> bytes:
    """``A <type> <arg>...``; HandlerSocket's shared secret is ``encode_auth("1", secret)``."""
    parts = [b"A", _name(auth_type, "auth type", allow_comma=False)]
    parts.extend(encode_value(a) for a in args)
    return b"\t".join(parts) + b"\n"


class Filter(NamedTuple):
    """A filter clause: ``type`` is ``"F"`` (skip rows that fail) or ``"W"`` (stop at the
    first row that fails); ``op`` one of ``= != < <= > >=``; ``column`` the position in
    the index's filter columns (or its name); ``value`` the value compared with."""

    type: str
    op: str
    column: Union[int, str]
    value: Value


def _check_filters(
    filters: Iterable[Filter], filter_columns: Optional[Sequence[str]]
) -> List[Tuple[bytes, bytes, bytes, bytes]]:
    out = []
    for f in filters if filters is not None else ():
        if not isinstance(f, tuple) or len(f) != 4:
            raise ClientError(f"a filter must be a Filter(type, op, column, value), got {f!r}")
        ftype, fop, fcol, fval = f
        if ftype not in FILTER_TYPES:
            raise ClientError(f"filter type must be 'F' or 'W', got {ftype!r}")
        if fop not in FILTER_OPS:
            raise ClientError(f"filter op must be one of {' '.join(FILTER_OPS)}, got {fop!r}")
        if isinstance(fcol, str):
            if filter_columns is None or fcol not in filter_columns:
                raise ClientError(f"{fcol!r} is not one of the index's filter columns")
            fcol = list(filter_columns).index(fcol)
        _uint(fcol, "filter column")
        if filter_columns is not None and fcol >= len(filter_columns):
            raise ClientError(
                f"filter column {fcol} out of range: the index was opened with "
                f"{len(filter_columns)} filter column(s)"
            )
        out.append((ftype.encode(), fop.encode(), b"%d" % fcol, encode_value(fval)))
    return out


def encode_find(
    index_id: int,
    op: str,
    keys: Sequence[Value],
    limit: int = 1,
    offset: int = 0,
    in_: Optional[Tuple[int, Sequence[Value]]] = None,
    filters: Iterable[Filter] = (),
    mod_op: Optional[str] = None,
    mod_values: Sequence[Value] = (),
    filter_columns: Optional[Sequence[str]] = None,
) -> bytes:
    """``<id> <op> <vlen> <v...> [<limit> <offset>] [@ <icol> <n> <iv...>] [F|W <fop>
    <fcol> <fval>]... [<mop> <m...>]``.

    ``op`` is a find op or ``"L"``. Like HandlerSocket's C++ client, nothing follows the
    key values for a plain ``limit=1, offset=0`` find; ``<limit> <offset>`` are sent
    whenever anything else follows (and always for ``L``). With ``in_=(icol, values)``
    the key at position ``icol`` is ignored by the server; if ``keys`` stops just before
    it, a placeholder is sent. ``filter_columns`` (when known) validates filter positions.
    """
    if op not in FIND_OPS and op != LAST_OP:
        raise ClientError(f"find op must be one of {' '.join(FIND_OPS)} or 'L', got {op!r}")
    keys = list(_as_values(keys, "keys"))
    parts = [_uint(index_id, "index id"), op.encode()]
    in_parts: List[bytes] = []
    if in_ is not None:
        if not isinstance(in_, (tuple, list)) or len(in_) != 2:
            raise ClientError("in_ must be a (key_position, values) pair")
        icol, ivalues = in_
        icol_b = _uint(icol, "in_ key position")
        ivalues = list(_as_values(ivalues, "in_ values"))
        if not ivalues:
            raise ClientError("in_ needs at least one value")
        if len(keys) == icol:
            keys.append(b"")  # placeholder for the key part the IN list replaces
        elif len(keys) < icol:
            raise ClientError(
                f"in_ replaces key part {icol}, but only {len(keys)} key value(s) were given"
            )
        in_parts = [b"@", icol_b, b"%d" % len(ivalues)] + [encode_value(v) for v in ivalues]
    if not keys and op != LAST_OP:
        raise ClientError("at least one key value is required")
    parts.append(b"%d" % len(keys))
    parts.extend(encode_value(k) for k in keys)
    fparts = _check_filters(filters, filter_columns)
    mparts: List[bytes] = []
    if mod_op is not None:
        base = mod_op[:-1] if mod_op.endswith("?") else mod_op
        if base not in MOD_OPS:
            raise ClientError(f"modify op must be one of U + - D (optionally with ?), got {mod_op!r}")
        mparts = [mod_op.encode()] + [encode_value(v) for v in _as_values(mod_values, "values")]
    limit_b = _uint(limit, "limit", minimum=1)
    offset_b = _uint(offset, "offset")
    if in_parts or fparts or mparts or op == LAST_OP or limit != 1 or offset != 0:
        parts += [limit_b, offset_b]
        parts += in_parts
        for fp in fparts:
            parts.extend(fp)
        parts += mparts
    return b"\t".join(parts) + b"\n"


def encode_merge(
    index_id: int,
    op: str,
    limit: int,
    offset: int = 0,
    *,
    bound: Sequence[Value] = (),
    groups: Optional[Sequence[Value]] = None,
    source: Optional[Tuple[int, Sequence[Value], int]] = None,
    filters: Iterable[Filter] = (),
    filter_columns: Optional[Sequence[str]] = None,
) -> bytes:
    """tablesocket's timeline ops: ``M-`` (newest first) or ``M+`` (oldest first).

    ``<id> <op> <1+len(bound)> 0 <bound...> <limit> <offset> @ 0 <k> <g1..gk> [F|W ...]``
    with explicit ``groups``, or, with ``source=(source_id, keys, max_groups)``,
    ``... @ 0 ^ <source_id> <n> <k1..kn> <max_groups> [F|W ...]``: the groups are then
    the first column of the rows that index ``source_id`` finds with ``=`` for the keys.

    The first key value (the group's key part, replaced by the IN list) is a placeholder;
    ``bound`` holds values for the following key parts, an exclusive bound: rows older
    than it for ``M-``, newer than it for ``M+``.
    """
    if op not in MERGE_OPS:
        raise ClientError(f"merge op must be 'M-' or 'M+', got {op!r}")
    if (groups is None) == (source is None):
        raise ClientError("a merge needs either groups or a source index")
    bound = list(_as_values(bound, "bound"))
    parts = [_uint(index_id, "index id"), op.encode(), b"%d" % (1 + len(bound)), b"0"]
    parts.extend(encode_value(v) for v in bound)
    parts += [_uint(limit, "limit", minimum=1), _uint(offset, "offset"), b"@", b"0"]
    if groups is not None:
        gvals = list(_as_values(groups, "groups"))
        if not gvals:
            raise ClientError("groups must not be empty")
        parts.append(b"%d" % len(gvals))
        parts.extend(encode_value(g) for g in gvals)
    else:
        assert source is not None
        source_id, keys, max_groups = source
        kvals = list(_as_values(keys, "source keys"))
        if not kvals:
            raise ClientError("source keys must not be empty")
        parts += [b"^", _uint(source_id, "source index id"), b"%d" % len(kvals)]
        parts.extend(encode_value(k) for k in kvals)
        parts.append(_uint(max_groups, "max_groups", minimum=1))
    for fp in _check_filters(filters, filter_columns):
        parts.extend(fp)
    return b"\t".join(parts) + b"\n"


def encode_insert(index_id: int, values: Sequence[Value], op: str = "+") -> bytes:
    """``<id> + <n> <v...>`` (insert) or ``<id> += <n> <v...>`` (tablesocket upsert)."""
    if op not in INSERT_OPS:
        raise ClientError(f"insert op must be '+' or '+=', got {op!r}")
    vals = list(_as_values(values, "values"))
    if not vals:
        raise ClientError("at least one value is required")
    parts = [_uint(index_id, "index id"), op.encode(), b"%d" % len(vals)]
    parts.extend(encode_value(v) for v in vals)
    return b"\t".join(parts) + b"\n"


def _as_values(values: Any, what: str) -> Sequence[Value]:
    if isinstance(values, (str, bytes, bytearray, memoryview, int)) or values is None:
        raise ClientError(f"{what} must be a list or tuple of values, got {type(values).__name__}")
    try:
        return list(values)
    except TypeError:
        raise ClientError(f"{what} must be a list or tuple of values") from None


# ---------------------------------------------------------------------------------------
# Reply framing and decoding
# ---------------------------------------------------------------------------------------


class LineReader:
    """Accumulates received bytes and hands out complete lines (without the LF).

    Feeding the same stream in chunks of any size, down to one byte, yields the same
    lines. A line longer than ``max_line`` raises :class:`ProtocolError`.
    """

    __slots__ = ("_buf", "_scan", "max_line")

    def __init__(self, max_line: int = 64 * 1024 * 1024) -> None:
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf already known to contain no LF
        self.max_line = max_line

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_line(self) -> Optional[bytes]:
        """Return the next complete line, or ``None`` if more bytes are needed."""
        i = self._buf.find(b"\n", self._scan)
        if i < 0:
            self._scan = len(self._buf)
            if self._scan > self.max_line:
                raise ProtocolError(f"reply line longer than {self.max_line} bytes")
            return None
        if i > self.max_line:
            raise ProtocolError(f"reply line longer than {self.max_line} bytes")
        line = bytes(self._buf[:i])
        del self._buf[: i + 1]
        self._scan = 0
        return line

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a line."""
        return len(self._buf)

    def clear(self) -> None:
        self._buf.clear()
        self._scan = 0


class Reply(NamedTuple):
    """One reply line: ``code`` (0 = success), ``ncols`` and the raw (still escaped)
    value ``tokens``."""

    code: int
    ncols: int
    tokens: List[bytes]

    def values(self) -> List[Optional[bytes]]:
        """The value tokens decoded: ``None`` for NULL, else unescaped bytes."""
        return [None if t == NULL else unescape(t) for t in self.tokens]

    def error_message(self) -> str:
        """The message of an error reply (``""`` if the server sent none)."""
        if not self.tokens:
            return ""
        tok = self.tokens[0]
        try:
            raw = unescape(tok)
        except ProtocolError:
            raw = tok
        return raw.decode("utf-8", "replace")

    def raise_for_error(self, request: Optional[bytes] = None, *, login: bool = True) -> None:
        """Raise the error of this reply if ``code != 0`` (see :func:`error_for`).
        ``login`` says whether it answers a login (``A``) request, as in an
        :class:`~tablesocket.AuthMethod` exchange."""
        if self.code != 0:
            raise error_for(self.code, self.error_message(), request, login=login)


def error_for(code: int, message: str, request: Optional[bytes] = None, *,
              login: bool) -> ServerError:
    """The exception for an error reply: :class:`ServerError`, or for code 3
    :class:`AuthError` (the reply to a login, or ``unauth``: a login is required) or
    :class:`PermissionDenied` (any other request: the account lacks a privilege)."""
    if code == 3:
        if login or message == "unauth":
            return AuthError(code, message, request)
        return PermissionDenied(code, message, request)
    return ServerError(code, message, request)


def _parse_uint(token: bytes, what: str, line: bytes) -> int:
    if not token or len(token) > 10 or not token.isdigit():
        raise ProtocolError(f"malformed reply {_clip(line)}: bad {what} {_clip(token, 12)}")
    return int(token)


def parse_reply(line: bytes) -> Reply:
    """Split a reply line (without its LF) into ``<code> <ncols> <tokens...>``."""
    tokens = line.split(b"\t")
    if len(tokens) < 2:
        raise ProtocolError(f"malformed reply {_clip(line)}: expected '<code> <ncols> ...'")
    code = _parse_uint(tokens[0], "error code", line)
    ncols = _parse_uint(tokens[1], "column count", line)
    return Reply(code, ncols, tokens[2:])


def _build_decoder(spec: Decoder) -> Optional[Callable[[bytes], Any]]:
    if spec is None or spec is False:
        return None
    if spec is True:
        spec = "utf-8"
    if isinstance(spec, str):
        import codecs

        try:
            codecs.lookup(spec)
        except LookupError:
            raise ClientError(f"unknown codec {spec!r}") from None
        codec = spec
        return lambda b: b.decode(codec)
    if callable(spec):
        return spec
    raise ClientError(f"decode must be a bool, codec name or callable, got {spec!r}")


def make_decoders(spec: DecodeSpec, ncols: int) -> Tuple[Optional[Callable[[bytes], Any]], ...]:
    """Turn a decode spec into one decoder (or ``None`` for raw bytes) per column."""
    if isinstance(spec, (list, tuple)):
        if len(spec) != ncols:
            raise ClientError(f"decode has {len(spec)} entries but {ncols} columns were opened")
        return tuple(_build_decoder(s) for s in spec)
    one = _build_decoder(spec)  # type: ignore[arg-type]
    return (one,) * ncols


def decode_values(
    values: List[Optional[bytes]],
    decoders: Sequence[Optional[Callable[[bytes], Any]]],
    columns: Sequence[str] = (),
) -> List[Any]:
    """Apply per-column decoders to a flat list of row values (``None`` stays ``None``)."""
    if not any(decoders):
        return values
    n = len(decoders)
    out: List[Any] = []
    for i, v in enumerate(values):
        d = decoders[i % n]
        if v is None or d is None:
            out.append(v)
            continue
        try:
            out.append(d(v))
        except Exception as e:
            col = columns[i % n] if len(columns) == n else str(i % n)
            raise ClientError(f"cannot decode column {col!r} value {_clip(v)}: {e}") from e
    return out


class ReplyKind:
    """What a successful reply looks like (see :meth:`Request.interpret`)."""

    OK = "ok"  # '0 1' (open_index, auth)
    ROWS = "rows"  # '0 <ncols> <values>' (find, L, find_modify with '?')
    COUNT = "count"  # '0 1 <n>' (find_modify)
    INSERT = "insert"  # '0 1' or '0 1 <id>' (insert, upsert)
    RAW = "raw"  # the Reply itself, error or not (auth exchanges)


class Request:
    """One encoded request line and how to read its reply.

    ``ncols`` and ``decoders`` are used by :attr:`ReplyKind.ROWS`; ``index_id`` is the
    index the request uses (``None`` for auth), ``opens`` is true for ``P`` requests.
    ``also_uses`` lists other indexes the request refers to (a timeline's source index):
    they must be open on the connection too. ``resets_indexes`` marks a request after
    which the server has forgotten every index the connection opened (a login as an
    account); ``RAW`` requests are logins, so their code-3 errors are
    :class:`AuthError`.
    """

    __slots__ = ("line", "kind", "ncols", "decoders", "columns", "index_id", "opens", "also_uses",
                 "resets_indexes")

    def __init__(
        self,
        line: bytes,
        kind: str,
        *,
        ncols: int = 0,
        decoders: Sequence[Optional[Callable[[bytes], Any]]] = (),
        columns: Sequence[str] = (),
        index_id: Optional[int] = None,
        opens: bool = False,
        also_uses: Sequence[int] = (),
        resets_indexes: bool = False,
    ) -> None:
        self.line = line
        self.kind = kind
        self.ncols = ncols
        self.decoders = tuple(decoders)
        self.columns = tuple(columns)
        self.index_id = index_id
        self.opens = opens
        self.also_uses = tuple(also_uses)
        self.resets_indexes = resets_indexes

    def __repr__(self) -> str:
        return f"Request({self.kind}, {_clip(self.line)})"

    def interpret(self, reply: Reply) -> Any:
        """Check a reply against this request and return its value.

        Raises :class:`ServerError` for an error reply, :class:`ProtocolError` for a
        reply of the wrong shape and :class:`ClientError` when a value cannot be
        decoded as the caller asked.
        """
        kind = self.kind
        if kind == ReplyKind.RAW:
            return reply
        reply.raise_for_error(self.line, login=False)
        tokens = reply.tokens
        if kind == ReplyKind.ROWS:
            n = self.ncols
            if reply.ncols != n:
                raise ProtocolError(
                    f"find reply has {reply.ncols} column(s), {n} were opened"
                )
            if (n == 0 and tokens) or (n and len(tokens) % n):
                raise ProtocolError(
                    f"find reply has {len(tokens)} value(s), not a multiple of {n} columns"
                )
            values = decode_values(reply.values(), self.decoders, self.columns)
            return [tuple(values[i : i + n]) for i in range(0, len(values), n)] if n else []
        if kind == ReplyKind.COUNT:
            if reply.ncols != 1 or len(tokens) != 1:
                raise ProtocolError(f"expected '0 1 <count>', got {reply.ncols} column(s)"
                                    f" and {len(tokens)} value(s)")
            return _parse_uint(tokens[0], "count", b"\t".join(tokens))
        if kind == ReplyKind.INSERT:
            if reply.ncols != 1 or len(tokens) > 1:
                raise ProtocolError("expected '0 1' or '0 1 <insert id>'")
            if not tokens:
                return None
            if not tokens[0].isdigit() or len(tokens[0]) > 20:
                raise ProtocolError(f"bad insert id {_clip(tokens[0], 24)}")
            return int(tokens[0]) or None
        if kind == ReplyKind.OK:
            if reply.ncols != 1 or tokens:
                raise ProtocolError("expected '0 1'")
            return None
        raise AssertionError(f"unknown reply kind {kind!r}")
