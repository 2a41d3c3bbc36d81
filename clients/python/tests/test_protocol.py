"""Table tests of the sans-IO encoder/decoder (tablesocket.protocol)."""

import pytest

from tablesocket import ClientError, Filter, ProtocolError, ServerError, AuthError
from tablesocket import protocol as P
from tablesocket.protocol import ReplyKind, Request

from fakes import bytewise

# ---- escaping --------------------------------------------------------------------------


@pytest.mark.parametrize("b", range(256))
def test_every_byte_value_round_trips(b):
    raw = bytes([b])
    enc = P.escape(raw)
    if b < 0x10:
        assert enc == bytes([0x01, b + 0x40])
    else:
        assert enc == raw
    assert P.unescape(enc) == raw
    # also embedded between other bytes, and as a value token
    raw3 = b"a" + raw + b"z"
    assert P.unescape(P.escape(raw3)) == raw3
    tok = P.encode_value(raw)
    assert b"\t" not in tok and b"\n" not in tok
    assert P.Reply(0, 1, [tok]).values() == [raw]


def test_all_256_bytes_in_one_value():
    raw = bytes(range(256)) * 2
    enc = P.escape(raw)
    assert len(enc) == len(raw) + 32
    assert all(c >= 0x10 or c == 0x01 for c in enc)
    assert P.unescape(enc) == raw


@pytest.mark.parametrize("token", [
    b"\x01",            # lone escape prefix at the end
    b"a\x01",
    b"\x01\x3f",        # prefix followed by a byte below 0x40
    b"\x01\x50",        # prefix followed by a byte that does not decode to 0x00-0x0f
    b"\x02",            # raw control byte
    b"ab\x0dcd",        # raw CR
    b"\x01\x01\x41",    # escaped 0x01 is 01 41, not 01 01
    b"x\x00",           # NUL inside a token (NULL is only a lone 0x00)
])
def test_invalid_escapes_in_replies_are_protocol_errors(token):
    with pytest.raises(ProtocolError):
        P.unescape(token)


# ---- value encoding ----------------------------------------------------------------------


@pytest.mark.parametrize("value, token", [
    (None, b"\x00"),
    ("", b""),
    (b"", b""),
    ("abc", b"abc"),
    ("h\xe9", "h\xe9".encode("utf-8")),
    ("\u2603", "\u2603".encode("utf-8")),
    ("a\tb\nc", b"a\x01\x49b\x01\x4ac"),
    (b"\x00", b"\x01\x40"),
    (bytearray(b"\x0f"), b"\x01\x4f"),
    (memoryview(b"xy"), b"xy"),
    (0, b"0"),
    (-42, b"-42"),
    (2**64, b"18446744073709551616"),
    (True, b"1"),
    (False, b"0"),
])
def test_encode_value(value, token):
    assert P.encode_value(value) == token


@pytest.mark.parametrize("value", [1.5, object(), [1], {"a": 1}, "\udc80"])
def test_encode_value_rejects(value):
    with pytest.raises(ClientError):
        P.encode_value(value)


# ---- request encoding ----------------------------------------------------------------------


@pytest.mark.parametrize("args, line", [
    ((0, "test", "t", "PRIMARY", ["id", "v"]), b"P\t0\ttest\tt\tPRIMARY\tid,v\n"),
    ((3, "db", "t", "idx", "a,b", ["c"]), b"P\t3\tdb\tt\tidx\ta,b\tc\n"),
    ((1, "db", "t", "PRIMARY", []), b"P\t1\tdb\tt\tPRIMARY\t\n"),
    ((1, "db", "t", "PRIMARY", ["a"], ["x", "y"]), b"P\t1\tdb\tt\tPRIMARY\ta\tx,y\n"),
])
def test_encode_open_index(args, line):
    assert P.encode_open_index(*args) == line


@pytest.mark.parametrize("args", [
    (0, "", "t", "PRIMARY", ["a"]),
    (0, "d", "t\tx", "PRIMARY", ["a"]),
    (0, "d", "t", "PRI\nMARY", ["a"]),
    (0, "d", "t", "PRIMARY", ["a,b"]),
    (0, "d", "t", "PRIMARY", [""]),
    (-1, "d", "t", "PRIMARY", ["a"]),
    (2**32, "d", "t", "PRIMARY", ["a"]),
    (0, "d", 5, "PRIMARY", ["a"]),
])
def test_encode_open_index_rejects(args):
    with pytest.raises(ClientError):
        P.encode_open_index(*args)


@pytest.mark.parametrize("kwargs, line", [
    # plain 1-row find: nothing after the values (as HandlerSocket's C++ client)
    (dict(op="=", keys=[1]), b"0\t=\t1\t1\n"),
    (dict(op=">=", keys=["a", None]), b"0\t>=\t2\ta\t\x00\n"),
    # a limit or offset: both are sent
    (dict(op=">", keys=[1], limit=10), b"0\t>\t1\t1\t10\t0\n"),
    (dict(op="<", keys=[1], offset=5), b"0\t<\t1\t1\t1\t5\n"),
    (dict(op="<=", keys=[1], limit=3, offset=2), b"0\t<=\t1\t1\t3\t2\n"),
    # IN: limit+offset always precede it; the ignored key slot gets a placeholder
    (dict(op="=", keys=[], in_=(0, [1, 2, "x"])), b"0\t=\t1\t\t1\t0\t@\t0\t3\t1\t2\tx\n"),
    (dict(op="=", keys=[7, 0], in_=(1, [5])), b"0\t=\t2\t7\t0\t1\t0\t@\t1\t1\t5\n"),
    (dict(op="=", keys=[7], in_=(1, [5, 6]), limit=4), b"0\t=\t2\t7\t\t4\t0\t@\t1\t2\t5\t6\n"),
    # filters
    (dict(op=">=", keys=[0], filters=[Filter("F", "!=", 0, "a\x00")]),
     b"0\t>=\t1\t0\t1\t0\tF\t!=\t0\ta\x01\x40\n"),
    (dict(op=">=", keys=[0], limit=9, filters=[Filter("F", ">", 1, 3), Filter("W", "<", 0, None)]),
     b"0\t>=\t1\t0\t9\t0\tF\t>\t1\t3\tW\t<\t0\t\x00\n"),
    # IN + filter + modify, in protocol order
    (dict(op="=", keys=[], in_=(0, [1, 2]), filters=[Filter("F", "=", 0, 1)], mod_op="U",
          mod_values=["v", None]),
     b"0\t=\t1\t\t1\t0\t@\t0\t2\t1\t2\tF\t=\t0\t1\tU\tv\t\x00\n"),
    # find_modify
    (dict(op="=", keys=[1], mod_op="D"), b"0\t=\t1\t1\t1\t0\tD\n"),
    (dict(op="=", keys=[1], mod_op="D?"), b"0\t=\t1\t1\t1\t0\tD?\n"),
    (dict(op=">", keys=[1], limit=100, mod_op="+?", mod_values=[1, None]),
     b"0\t>\t1\t1\t100\t0\t+?\t1\t\x00\n"),
    (dict(op="=", keys=[1], mod_op="-", mod_values=[2]), b"0\t=\t1\t1\t1\t0\t-\t2\n"),
    # tablesocket L: limit and offset always sent; empty prefix allowed
    (dict(op="L", keys=["user1"]), b"0\tL\t1\tuser1\t1\t0\n"),
    (dict(op="L", keys=[], limit=20, offset=3), b"0\tL\t0\t20\t3\n"),
    (dict(op="L", keys=[1], limit=5, filters=[Filter("W", ">=", 0, 10)]),
     b"0\tL\t1\t1\t5\t0\tW\t>=\t0\t10\n"),
])
def test_encode_find(kwargs, line):
    assert P.encode_find(0, **kwargs) == line


@pytest.mark.parametrize("kwargs", [
    dict(op="==", keys=[1]),
    dict(op="+", keys=[1]),
    dict(op="=", keys=[]),
    dict(op="=", keys=1),
    dict(op="=", keys="abc"),
    dict(op="=", keys=[1], limit=0),
    dict(op="=", keys=[1], limit=-1),
    dict(op="=", keys=[1], offset=-1),
    dict(op="=", keys=[1], limit=2**32),
    dict(op="=", keys=[1], limit=1.0),
    dict(op="=", keys=[1], in_=(0, [])),
    dict(op="=", keys=[], in_=(1, [1])),
    dict(op="=", keys=[1], in_=(0, [1], 2)),
    dict(op="=", keys=[1], in_=(0, 1)),
    dict(op="=", keys=[1], filters=[Filter("X", "=", 0, 1)]),
    dict(op="=", keys=[1], filters=[Filter("F", "~", 0, 1)]),
    dict(op="=", keys=[1], filters=[Filter("F", "=", -1, 1)]),
    dict(op="=", keys=[1], filters=[("F", "=", 0)]),
    dict(op="=", keys=[1], filters=[Filter("F", "=", 2, 1)], filter_columns=["a", "b"]),
    dict(op="=", keys=[1], filters=[Filter("F", "=", "zz", 1)], filter_columns=["a"]),
    dict(op="=", keys=[1], mod_op="X"),
    dict(op="=", keys=[1], mod_op="U??"),
    dict(op="=", keys=[1], mod_op="U", mod_values=[1.5]),
])
def test_encode_find_rejects(kwargs):
    with pytest.raises(ClientError):
        P.encode_find(0, **kwargs)


def test_filter_column_by_name():
    line = P.encode_find(2, ">", [0], filters=[Filter("F", "=", "b", 1)], filter_columns=["a", "b"])
    assert line == b"2\t>\t1\t0\t1\t0\tF\t=\t1\t1\n"


@pytest.mark.parametrize("values, op, line", [
    ([None, "a", b"\x01"], "+", b"4\t+\t3\t\x00\ta\t\x01\x41\n"),
    ([1], "+", b"4\t+\t1\t1\n"),
    ([1, ""], "+=", b"4\t+=\t2\t1\t\n"),
])
def test_encode_insert(values, op, line):
    assert P.encode_insert(4, values, op) == line


def test_encode_insert_rejects():
    with pytest.raises(ClientError):
        P.encode_insert(0, [])
    with pytest.raises(ClientError):
        P.encode_insert(0, [1], "=")


def test_encode_auth():
    assert P.encode_auth("1", "s\x00cret") == b"A\t1\ts\x01\x40cret\n"
    assert P.encode_auth("1", b"x") == b"A\t1\tx\n"


# ---- framing -------------------------------------------------------------------------------


def test_line_reader_every_split():
    stream = b"0\t1\n0\t2\ta\t\x00\n\n2\t1\top\n"
    expected = [b"0\t1", b"0\t2\ta\t\x00", b"", b"2\t1\top"]
    for k in range(len(stream) + 1):
        r = P.LineReader()
        got = []
        for chunk in (stream[:k], stream[k:]):
            r.feed(chunk)
            while True:
                line = r.next_line()
                if line is None:
                    break
                got.append(line)
        assert got == expected, k
        assert r.buffered == 0
    r = P.LineReader()
    got = []
    for chunk in bytewise(stream):
        r.feed(chunk)
        line = r.next_line()
        if line is not None:
            got.append(line)
    assert got == expected


def test_line_reader_max_line():
    r = P.LineReader(max_line=8)
    r.feed(b"0\t1\t1234")
    assert r.next_line() is None
    r.feed(b"5")
    with pytest.raises(ProtocolError):
        r.next_line()
    r = P.LineReader(max_line=8)
    r.feed(b"0\t1\t123456789\n")
    with pytest.raises(ProtocolError):
        r.next_line()
    r = P.LineReader(max_line=8)
    r.feed(b"0\t1\t1234\n")
    assert r.next_line() == b"0\t1\t1234"


# ---- reply decoding ---------------------------------------------------------------------------


@pytest.mark.parametrize("line, code, ncols, tokens", [
    (b"0\t1", 0, 1, []),
    (b"0\t1\t5", 0, 1, [b"5"]),
    (b"0\t2\ta\t\x00\t\tb", 0, 2, [b"a", b"\x00", b"", b"b"]),
    (b"2\t1\top", 2, 1, [b"op"]),
    (b"1\t1\t121", 1, 1, [b"121"]),
    (b"3\t1", 3, 1, []),
])
def test_parse_reply(line, code, ncols, tokens):
    assert P.parse_reply(line) == P.Reply(code, ncols, tokens)


@pytest.mark.parametrize("line", [b"", b"0", b"x\t1", b"0\tx", b"-1\t1", b"0\t", b"\t1",
                                  b"0 1", b"99999999999\t1", b"0\t1\r"])
def test_parse_reply_malformed(line):
    with pytest.raises(ProtocolError):
        P.parse_reply(line)


def rows_request(ncols, decode=False, columns=None):
    columns = columns or [f"c{i}" for i in range(ncols)]
    return Request(b"x\n", ReplyKind.ROWS, ncols=ncols, decoders=P.make_decoders(decode, ncols),
                   columns=columns)


@pytest.mark.parametrize("request_, line, value", [
    (Request(b"", ReplyKind.OK), b"0\t1", None),
    (Request(b"", ReplyKind.INSERT), b"0\t1", None),
    (Request(b"", ReplyKind.INSERT), b"0\t1\t42", 42),
    (Request(b"", ReplyKind.INSERT), b"0\t1\t0", None),
    (Request(b"", ReplyKind.INSERT), b"0\t1\t18446744073709551615", 2**64 - 1),
    (Request(b"", ReplyKind.COUNT), b"0\t1\t0", 0),
    (Request(b"", ReplyKind.COUNT), b"0\t1\t17", 17),
    (rows_request(2), b"0\t2", []),
    (rows_request(2), b"0\t2\ta\t\x00", [(b"a", None)]),
    (rows_request(2), b"0\t2\t\t\x01\x40\t3\t4", [(b"", b"\x00"), (b"3", b"4")]),
    (rows_request(2, decode=True), b"0\t2\th\xc3\xa9\t\x00", [("h\xe9", None)]),
    (rows_request(2, decode=[int, "latin-1"]), b"0\t2\t-7\t\xe9", [(-7, "\xe9")]),
    (rows_request(3, decode=[None, True, False]), b"0\t3\ta\tb\tc", [(b"a", "b", b"c")]),
    (rows_request(0), b"0\t0", []),
    (Request(b"", ReplyKind.RAW), b"3\t1\tunauth", P.Reply(3, 1, [b"unauth"])),
])
def test_interpret(request_, line, value):
    assert request_.interpret(P.parse_reply(line)) == value


@pytest.mark.parametrize("request_, line", [
    (Request(b"", ReplyKind.OK), b"0\t1\textra"),
    (Request(b"", ReplyKind.OK), b"0\t2"),
    (Request(b"", ReplyKind.INSERT), b"0\t1\t1\t2"),
    (Request(b"", ReplyKind.INSERT), b"0\t1\tabc"),
    (Request(b"", ReplyKind.COUNT), b"0\t1"),
    (Request(b"", ReplyKind.COUNT), b"0\t1\tx"),
    (Request(b"", ReplyKind.COUNT), b"0\t2\t1\t2"),
    (rows_request(2), b"0\t3\ta\tb\tc"),
    (rows_request(2), b"0\t2\ta"),
    (rows_request(2), b"0\t2\ta\tb\x02"),
    (rows_request(0), b"0\t0\tx"),
])
def test_interpret_malformed(request_, line):
    with pytest.raises(ProtocolError):
        request_.interpret(P.parse_reply(line))


@pytest.mark.parametrize("line, cls, code, message", [
    (b"2\t1\top", ServerError, 2, "op"),
    (b"1\t1\t121", ServerError, 1, "121"),
    (b"2\t1", ServerError, 2, ""),
    (b"3\t1\tunauth", AuthError, 3, "unauth"),
    (b"7\t1\tbad\x01\x40x", ServerError, 7, "bad\x00x"),
])
@pytest.mark.parametrize("kind", [ReplyKind.OK, ReplyKind.ROWS, ReplyKind.COUNT, ReplyKind.INSERT])
def test_interpret_errors(line, cls, code, message, kind):
    req = Request(b"0\t=\t1\t1\n", kind, ncols=2, decoders=(None, None))
    with pytest.raises(cls) as ei:
        req.interpret(P.parse_reply(line))
    assert type(ei.value) is cls
    assert ei.value.code == code and ei.value.message == message
    assert ei.value.request == b"0\t=\t1\t1\n"


def test_server_error_helpers():
    e = ServerError(1, "121")
    assert e.handler_error == 121 and e.is_duplicate_key
    assert ServerError(2, "121").handler_error is None
    assert not ServerError(1, "lock_tables").is_duplicate_key


def test_decode_failure_is_client_error():
    with pytest.raises(ClientError, match="c1"):
        rows_request(2, decode=True).interpret(P.parse_reply(b"0\t2\tok\t\xff"))
    with pytest.raises(ClientError):
        rows_request(1, decode=[int]).interpret(P.parse_reply(b"0\t1\tnotanumber"))


@pytest.mark.parametrize("spec", [[True], "no-such-codec", 5, [True, True, True]])
def test_make_decoders_rejects(spec):
    with pytest.raises(ClientError):
        P.make_decoders(spec, 2)


def test_filters_none_is_no_filters():
    """filters=None reads as no filters (it raised a bare TypeError)."""
    assert P._check_filters(None, ["n"]) == []
    assert P._check_filters((), ["n"]) == []
