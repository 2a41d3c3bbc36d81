"""Blocking client against a fake transport (replies split at every byte boundary) and
against real loopback sockets."""

import socket
import threading
import time

import pytest

import tablesocket as ts
from tablesocket import Filter

from fakes import (
    CLOSE,
    SILENT,
    LoopbackServer,
    bytewise,
    echo_handler,
    fake_client,
    split_at,
    whole,
)

OPEN = b"P\t0\ttest\tt\tPRIMARY\tid,v\tn"
OPEN_OK = (OPEN, b"0\t1")

# (call on the index, expected request line, reply line, expected value)
CONVERSATION = [
    (lambda i: i.find("=", [1]), b"0\t=\t1\t1", b"0\t2\t1\thello", [(b"1", b"hello")]),
    (lambda i: i.get([1]), b"0\t=\t1\t1", b"0\t2", None),
    (lambda i: i.find(">=", [0], 10), b"0\t>=\t1\t0\t10\t0",
     b"0\t2\t1\ta\t2\t\x00\t3\t\x01\x49tab", [(b"1", b"a"), (b"2", None), (b"3", b"\ttab")]),
    (lambda i: i.find("=", [], in_=(0, [1, 2])), b"0\t=\t1\t\t1\t0\t@\t0\t2\t1\t2",
     b"0\t2\t1\ta", [(b"1", b"a")]),
    (lambda i: i.find(">", [0], 5, 1, filters=[Filter("F", ">=", "n", 10)]),
     b"0\t>\t1\t0\t5\t1\tF\t>=\t0\t10", b"0\t2", []),
    (lambda i: i.insert([None, "x"]), b"0\t+\t2\t\x00\tx", b"0\t1\t4", 4),
    (lambda i: i.insert([5, b"\x00"]), b"0\t+\t2\t5\t\x01\x40", b"0\t1", None),
    (lambda i: i.upsert([5, "y"]), b"0\t+=\t2\t5\ty", b"0\t1\t5", 5),
    (lambda i: i.update("=", [1], [1, "new"]), b"0\t=\t1\t1\t1\t0\tU\t1\tnew", b"0\t1\t1", 1),
    (lambda i: i.update("=", [1], [1, None], returning=True), b"0\t=\t1\t1\t1\t0\tU?\t1\t\x00",
     b"0\t2\t1\told", [(b"1", b"old")]),
    (lambda i: i.increment("=", [1], [0, 3]), b"0\t=\t1\t1\t1\t0\t+\t0\t3", b"0\t1\t1", 1),
    (lambda i: i.increment("=", [1], [2]), b"0\t=\t1\t1\t1\t0\t+\t2\t\x00", b"0\t1\t0", 0),
    (lambda i: i.decrement(">", [1], [None, 1], limit=3, returning=True),
     b"0\t>\t1\t1\t3\t0\t-?\t\x00\t1", b"0\t2\t2\t5\t3\t6", [(b"2", b"5"), (b"3", b"6")]),
    (lambda i: i.delete(">", [0], 5), b"0\t>\t1\t0\t5\t0\tD", b"0\t1\t3", 3),
    (lambda i: i.delete("=", [9], returning=True), b"0\t=\t1\t9\t1\t0\tD?", b"0\t2", []),
    (lambda i: i.last(["u1"], 2), b"0\tL\t1\tu1\t2\t0", b"0\t2\t9\tz\t8\ty",
     [(b"9", b"z"), (b"8", b"y")]),
    (lambda i: i.last([7]), b"0\tL\t1\t7\t1\t0", b"0\t2\t9\tz", [(b"9", b"z")]),
]

CHUNKERS = [whole, bytewise] + [split_at(k) for k in range(1, 40)]


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_conversation(chunker):
    script = [OPEN_OK] + [(req, rep) for _, req, rep, _ in CONVERSATION]
    c = fake_client(script, chunker=chunker)
    idx = c.open_index("test", "t", "PRIMARY", ["id", "v"], ["n"])
    assert idx.id == 0 and idx.columns == ("id", "v") and idx.filter_columns == ("n",)
    for call, _, _, expected in CONVERSATION:
        assert call(idx) == expected
    assert c.server.done() and not c.closed


def test_sent_bytes_exact():
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", b"0\t2")])
    idx = c.open_index("test", "t", columns="id,v", filter_columns="n")
    idx.find("=", [1])
    assert c.transports[0].sent == OPEN + b"\n0\t=\t1\t1\n"


def test_decode_options():
    c = fake_client([
        (b"P\t0\ttest\tt\tPRIMARY\tid,v,b", b"0\t1"),
        (b"0\t=\t1\t1", b"0\t3\t1\th\xc3\xa9\t\xff\t2\t\x00\t\x00"),
    ])
    idx = c.open_index("test", "t", columns=["id", "v", "b"], decode=[int, True, False])
    assert idx.find("=", [1]) == [(1, "h\xe9", b"\xff"), (2, None, None)]


def test_decode_failure_keeps_connection():
    c = fake_client([
        (b"P\t0\tdb\tt\tPRIMARY\tv", b"0\t1"),
        (b"0\t=\t1\t1", b"0\t1\t\xff"),
        (b"0\t=\t1\t2", b"0\t1\tok"),
    ])
    idx = c.open_index("db", "t", columns=["v"], decode=True)
    with pytest.raises(ts.ClientError):
        idx.find("=", [1])
    assert not c.closed
    assert idx.find("=", [2]) == [("ok",)]


def test_open_index_is_cached_per_spec_and_ids_are_allocated():
    c = fake_client([
        (b"P\t0\tdb\tt\tPRIMARY\ta", b"0\t1"),
        (b"P\t1\tdb\tt\tk\ta", b"0\t1"),
    ])
    a = c.open_index("db", "t", columns=["a"])
    a2 = c.open_index("db", "t", columns=["a"], decode=True)  # no round trip
    b = c.open_index("db", "t", "k", ["a"])
    assert (a.id, a2.id, b.id) == (0, 0, 1)
    assert c.server.done()


def test_open_index_failure_then_retry():
    c = fake_client([
        (b"P\t0\tdb\tnosuch\tPRIMARY\ta", b"1\t1\topen_table"),
        (b"P\t0\tdb\tnosuch\tPRIMARY\ta", b"0\t1"),
    ])
    with pytest.raises(ts.ServerError) as ei:
        c.open_index("db", "nosuch", columns=["a"])
    assert ei.value.code == 1 and ei.value.message == "open_table"
    assert not c.closed
    c.open_index("db", "nosuch", columns=["a"])
    assert c.server.done()


@pytest.mark.parametrize("reply, cls, code, message", [
    (b"2\t1\tkpnum", ts.ServerError, 2, "kpnum"),
    (b"1\t1\t121", ts.ServerError, 1, "121"),
    (b"2\t1", ts.ServerError, 2, ""),
    (b"3\t1\tunauth", ts.AuthError, 3, "unauth"),
])
def test_server_errors_keep_connection(reply, cls, code, message):
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", reply), (b"0\t=\t1\t2", b"0\t2\t2\tb")])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(cls) as ei:
        idx.find("=", [1])
    assert type(ei.value) is cls
    assert (ei.value.code, ei.value.message) == (code, message)
    assert not c.closed
    assert idx.find("=", [2]) == [(b"2", b"b")]


@pytest.mark.parametrize("reply", [
    b"0\t3\ta\tb\tc",          # wrong column count
    b"0\t2\ta",                # not a multiple of the column count
    b"garbage",                # not a reply
    b"",                       # empty line
    b"0\t2\ta\x02\tb",         # raw control byte
    ("raw", b"0\t2\n0\t2\n"),  # one reply too many
    ("raw", b"0\t2\n0"),       # trailing partial line
])
@pytest.mark.parametrize("chunker", [whole, bytewise])
def test_protocol_error_closes_connection(reply, chunker):
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", reply)], chunker=chunker)
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    try:
        idx.find("=", [1])
    except ts.ProtocolError:
        pass
    else:
        # extra bytes that arrive after the reply are caught before the next request
        assert isinstance(reply, tuple) and chunker is bytewise
        c.server.script.append((None, b"0\t2"))
        with pytest.raises(ts.ProtocolError, match="unexpected bytes"):
            idx.find("=", [2])
        assert c.transports[0].sent.count(b"\n") == 2  # nothing was sent
    assert c.closed and c.transports[0].closed
    with pytest.raises(ts.ConnectionError, match="closed"):
        idx.find("=", [1])


def test_eof_is_connection_error():
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", CLOSE)])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.ConnectionError) as ei:
        idx.find("=", [1])
    assert type(ei.value) is ts.ConnectionError
    assert "closed by the server" in str(ei.value)
    assert c.closed


def test_eof_mid_reply_is_connection_error():
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", ("raw", b"0\t2\ta"))], chunker=bytewise)
    c.server.script.append((None, CLOSE))
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.ConnectionError):
        with c.pipeline() as p:  # the second request makes the fake close
            p.find(idx, "=", [1])
            p.find(idx, "=", [2])
    assert c.closed


def test_silence_is_timeout():
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", SILENT)], timeout=0.05)
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.TimeoutError):
        idx.find("=", [1])
    assert c.closed


def test_client_errors_send_nothing():
    c = fake_client([OPEN_OK])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    sent = c.transports[0].sent
    bad_calls = [
        lambda: idx.find("~", [1]),
        lambda: idx.find("=", [1], limit=0),
        lambda: idx.find("=", [1.5]),
        lambda: idx.find("=", [1], filters=[Filter("F", "=", 1, 0)]),  # one filter column
        lambda: idx.find("L", [1]),
        lambda: idx.update("=", [1], ["only one"]),
        lambda: idx.update("=", [1], [1, 2, 3]),
        lambda: idx.increment("=", [1], [1, 2, 3]),
        lambda: idx.insert([1, 2, 3]),
        lambda: idx.insert([]),
        lambda: c.open_index("test", "t"),
        lambda: c.open_index("test", "t", columns=["a,b"]),
    ]
    for call in bad_calls:
        with pytest.raises(ts.ClientError):
            call()
    assert c.transports[0].sent == sent and not c.closed


def test_partial_sends():
    script = [OPEN_OK] + [(req, rep) for _, req, rep, _ in CONVERSATION]
    c = fake_client(script, max_send=3, chunker=bytewise)
    idx = c.open_index("test", "t", "PRIMARY", ["id", "v"], ["n"])
    for call, _, _, expected in CONVERSATION:
        assert call(idx) == expected


def test_keyboard_interrupt_closes_connection():
    def handler(line):
        if line.startswith(b"P"):
            return b"0\t1"
        raise KeyboardInterrupt

    c = fake_client(handler=handler)
    idx = c.open_index("d", "t", columns=["a"])
    with pytest.raises(KeyboardInterrupt):
        idx.find("=", [1])
    assert c.closed


# ---- reconnect, auth --------------------------------------------------------------------------


def test_reconnect_reopens_indexes_lazily():
    c = fake_client([
        OPEN_OK,
        (b"0\t=\t1\t1", b"garbage"),
        OPEN_OK,  # after reconnect, sent together with the find
        (b"0\t=\t1\t1", b"0\t2\t1\ta"),
        (b"0\t=\t1\t2", b"0\t2"),
    ])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.ProtocolError):
        idx.find("=", [1])
    c.reconnect()
    assert idx.find("=", [1]) == [(b"1", b"a")]
    assert idx.find("=", [2]) == []
    assert len(c.transports) == 2
    assert c.transports[1].sent == OPEN + b"\n0\t=\t1\t1\n0\t=\t1\t2\n"
    assert c.server.done()


def test_failed_reopen_reports_the_open_error():
    c = fake_client([
        OPEN_OK,
        (OPEN, b"1\t1\topen_table"),
        (b"0\t=\t1\t1", b"2\t1\tstmtnum"),
    ])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    c.reconnect()
    with pytest.raises(ts.ServerError, match="open_table"):
        idx.find("=", [1])
    assert not c.closed


def test_auth_shared_secret():
    c = fake_client([(b"A\t1\ts\x01\x49cret", b"0\t1"), (b"A\t1\tbad", b"3\t1\tunauth")])
    c.auth("s\tcret")
    with pytest.raises(ts.AuthError) as ei:
        c.auth(ts.SharedSecret(b"bad"))
    assert ei.value.code == 3 and ei.value.message == "unauth"
    assert not c.closed
    assert "hunter2" not in repr(ts.SharedSecret("hunter2"))


def test_auth_is_replayed_on_connect_and_reconnect():
    c = fake_client([
        (b"A\t1\tk", b"0\t1"),
        (b"P\t0\tdb\tt\tPRIMARY\ta", b"0\t1"),
        (b"A\t1\tk", b"0\t1"),
        (b"P\t0\tdb\tt\tPRIMARY\ta", b"0\t1"),
        (b"0\t=\t1\t1", b"0\t1"),
    ], auth="k")
    idx = c.open_index("db", "t", columns=["a"])
    c.reconnect()
    assert idx.find("=", [1]) == []
    assert c.server.done()


def test_auth_failure_on_connect_closes():
    with pytest.raises(ts.AuthError):
        fake_client([(b"A\t1\tk", b"3\t1\tunauth")], auth=ts.SharedSecret("k"))


def test_custom_multi_step_auth_method():
    class Challenge(ts.AuthMethod):
        def exchange(self):
            reply = yield b"A\tX\thello\n"
            reply.raise_for_error()
            nonce = reply.values()[0]
            reply = yield b"A\tX\tproof-" + nonce + b"\n"
            reply.raise_for_error()

    c = fake_client([(b"A\tX\thello", b"0\t1\tn0nce"), (b"A\tX\tproof-n0nce", b"0\t1")])
    c.auth(Challenge())
    assert c.server.done()


# ---- pipelines --------------------------------------------------------------------------------

PIPE_SCRIPT = [
    OPEN_OK,
    (b"0\t=\t1\t1", b"0\t2\t1\ta"),
    (b"0\t+\t2\t\x00\tb", b"0\t1\t7"),
    (b"0\t=\t1\t9", b"2\t1\tkpnum"),
    (b"0\t>\t1\t0\t2\t0\tD?", b"0\t2\t1\ta\t7\tb"),
    (b"0\t=\t1\t1\t1\t0\tU\t1\tz", b"0\t1\t1"),
]


def run_pipeline(c, raise_on_error=False):
    with c.pipeline(raise_on_error=raise_on_error) as p:
        idx = p.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
        r = [
            p.find(idx, "=", [1]),
            p.insert(idx, [None, "b"]),
            p.find(idx, "=", [9]),
            p.delete(idx, ">", [0], 2, returning=True),
            p.update(idx, "=", [1], [1, "z"]),
        ]
        assert not any(x.done() for x in r)
    return p, r


def check_pipeline_results(r):
    assert r[0].value == [(b"1", b"a")]
    assert r[1].value == 7
    assert isinstance(r[2].exception(), ts.ServerError) and r[2].exception().message == "kpnum"
    with pytest.raises(ts.ServerError):
        r[2].result()
    assert r[3].value == [(b"1", b"a"), (b"7", b"b")]
    assert r[4].value == 1


def test_pipeline_one_write_and_ordering():
    c = fake_client(PIPE_SCRIPT)
    p, r = run_pipeline(c)
    check_pipeline_results(r)
    assert c.transports[0].sent == b"".join(req + b"\n" for req, _ in PIPE_SCRIPT)
    assert len(p) == 6 and len(p.results) == 5  # the open is the client's own: no result


def test_pipeline_results_do_not_depend_on_whether_the_index_was_open():
    """open_index() returns a handle, not a result: execute() and results have one entry per
    request method called, whether the connection had the index open already or not."""
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", b"0\t2\t1\ta"), (b"0\t=\t1\t1", b"0\t2\t1\ta")])
    for _ in range(2):  # opened by the first pipeline, open for the second
        with c.pipeline() as p:
            idx = p.open_index("test", "t", "PRIMARY", ["id", "v"], ["n"])
            p.find(idx, "=", [1])
        assert len(p.results) == 1
        assert [r.value for r in p.results] == [[(b"1", b"a")]]
    assert c.server.done()


def test_pipeline_every_byte_boundary():
    stream = b"".join(rep + b"\n" for _, rep in PIPE_SCRIPT)
    for k in range(len(stream) + 1):
        c = fake_client(PIPE_SCRIPT, chunker=split_at(k))
        _, r = run_pipeline(c)
        check_pipeline_results(r)
        assert not c.closed
    c = fake_client(PIPE_SCRIPT, chunker=bytewise)
    _, r = run_pipeline(c)
    check_pipeline_results(r)


def test_pipeline_raises_first_error_after_filling_all():
    c = fake_client(PIPE_SCRIPT)
    with pytest.raises(ts.ServerError, match="kpnum"):
        run_pipeline(c, raise_on_error=True)
    assert not c.closed


def test_pipeline_execute_returns_values():
    c = fake_client([OPEN_OK, (b"0\t=\t1\t1", b"0\t2"), (b"0\t=\t1\t2", b"2\t1\tx")])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    p = c.pipeline(raise_on_error=False)
    p.find(idx, "=", [1])
    p.find(idx, "=", [2])
    values = p.execute()
    assert values[0] == [] and isinstance(values[1], ts.ServerError)
    with pytest.raises(ts.ClientError):
        p.execute()
    with pytest.raises(ts.ClientError):
        p.find(idx, "=", [1])


def test_pipeline_block_exception_sends_nothing():
    c = fake_client([OPEN_OK])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    sent = c.transports[0].sent
    with pytest.raises(RuntimeError):
        with c.pipeline() as p:
            r = p.find(idx, "=", [1])
            raise RuntimeError("boom")
    assert c.transports[0].sent == sent
    with pytest.raises(ts.ClientError):
        r.result()


def test_pipeline_result_before_run():
    c = fake_client([OPEN_OK])
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    c.server.script.append((b"0\t=\t1\t1", b"0\t2"))
    p = c.pipeline()
    r = p.find(idx, "=", [1])
    with pytest.raises(ts.ClientError, match="not run"):
        r.result()
    assert r.exception() is None and not r.done() and not r.ok()
    p.execute()
    assert r.ok() and r.value == []


def test_pipeline_protocol_error_fails_rest_and_closes():
    script = [OPEN_OK, (b"0\t=\t1\t1", b"0\t2\t1\ta"), (b"0\t=\t1\t2", b"bogus"),
              (b"0\t=\t1\t3", b"0\t2")]
    c = fake_client(script)
    idx = c.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.ProtocolError):
        with c.pipeline() as p:
            a = p.find(idx, "=", [1])
            b = p.find(idx, "=", [2])
            d = p.find(idx, "=", [3])
    assert a.value == [(b"1", b"a")]
    assert isinstance(b.exception(), ts.ProtocolError)
    assert isinstance(d.exception(), ts.ProtocolError)
    assert c.closed


def test_pipeline_rejects_foreign_index():
    c1 = fake_client([OPEN_OK])
    c2 = fake_client([])
    idx = c1.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
    with pytest.raises(ts.ClientError):
        with c2.pipeline() as p:
            p.find(idx, "=", [1])


def test_empty_pipeline():
    c = fake_client([])
    with c.pipeline() as p:
        pass
    assert p.results == [] and c.transports[0].sent == b""


def test_constructor_validation():
    for kw in (dict(timeout=0), dict(timeout=-1), dict(connect_timeout="x"),
               dict(ssl_context=object()), dict(auth=5)):
        with pytest.raises(ts.ClientError):
            ts.Client("h", 1, connect=False, **kw)


# ---- real sockets -----------------------------------------------------------------------------


def test_real_socket_round_trip_and_context_manager():
    with LoopbackServer(echo_handler) as srv:
        with ts.Client("127.0.0.1", srv.port, timeout=5) as c:
            idx = c.open_index("db", "t", columns=["k", "v"], decode=True)
            assert idx.find("=", ["abc", 3]) == [("abc", "vvv")]
            assert c.healthy()
        assert c.closed


def test_big_pipeline_does_not_deadlock():
    """~40 MB of replies to ~4 MB of requests, with a server that blocks on writes while
    it is not read: the client must read while it sends (a client that sends everything
    first times out here)."""
    n, size = 20000, 2000
    with LoopbackServer(echo_handler, read_chunk=4096) as srv:
        with ts.Client("127.0.0.1", srv.port, timeout=60) as c:
            idx = c.open_index("db", "t", columns=["k", "v"])
            pad = "p" * 200
            with c.pipeline() as p:
                rs = [p.find(idx, "=", [f"{i}{pad}", size]) for i in range(n)]
        assert all(r.value == [(f"{i}{pad}".encode(), b"v" * size)] for i, r in enumerate(rs))
        assert not srv.errors


def test_real_socket_timeout_closes():
    with LoopbackServer(lambda line: None) as srv:
        c = ts.Client("127.0.0.1", srv.port, timeout=0.2)
        t0 = time.monotonic()
        with pytest.raises(ts.TimeoutError):
            c.open_index("db", "t", columns=["a"])
        assert 0.15 < time.monotonic() - t0 < 2
        assert c.closed


def test_server_closing_idle_connection_is_detected():
    with LoopbackServer(echo_handler) as srv:
        c = ts.Client("127.0.0.1", srv.port, timeout=5)
        c.open_index("db", "t", columns=["k", "v"])
        for conn in list(srv.conns):
            conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 5
        while c.healthy() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not c.healthy()
        c.close()


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ts.ConnectionError) as ei:
        ts.Client("127.0.0.1", port, timeout=2)
    assert type(ei.value) is ts.ConnectionError


def test_client_lock_serialises_threads():
    with LoopbackServer(echo_handler) as srv:
        c = ts.Client("127.0.0.1", srv.port, timeout=10)
        idx = c.open_index("db", "t", columns=["k", "v"], decode=True)
        bad = []

        def worker(w):
            for i in range(200):
                key = f"{w}-{i}"
                if idx.find("=", [key, 1]) != [(key, "v")]:
                    bad.append(key)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c.close()
        assert not bad


def test_requests_that_cannot_be_answered_are_refused_before_sending():
    """last() without a prefix (the server answers klen) and an index without columns (a
    found row and a miss look alike)."""
    with LoopbackServer(echo_handler) as srv, ts.Client("127.0.0.1", srv.port, timeout=5) as c:
        idx = c.open_index("db", "t", columns=["k", "v"])
        with pytest.raises(ts.ClientError, match="needs a prefix"):
            idx.last()
        with pytest.raises(ts.ClientError, match="at least one column"):
            c.open_index("db", "t", columns=[])


def test_close_from_another_thread_ends_a_call_waiting_for_its_reply():
    """close() shuts the socket down: a call of another thread waiting for a reply that will
    never come ends with ConnectionError at once, not at its timeout (or never)."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(lsock.accept()[0]), daemon=True).start()
    c = ts.Client("127.0.0.1", lsock.getsockname()[1], timeout=None)
    outcome = []

    def call():
        try:
            c.open_index("db", "t", columns=["k"]).find("=", [1])
        except ts.ConnectionError as e:
            outcome.append(e)
    try:
        t = threading.Thread(target=call)
        t.start()
        time.sleep(0.2)
        assert t.is_alive()
        c.close()
        t.join(3)
        assert not t.is_alive(), "the waiting call did not end after close()"
        assert outcome and isinstance(outcome[0], ts.ConnectionError), outcome
    finally:
        for s in held:
            s.close()
        lsock.close()
