"""Timelines (tablesocket's M- / M+ ops): Index.merge, Index.timeline and their pipeline and
asyncio forms, against scripted fake servers whose replies are split at every byte boundary."""

import asyncio

import pytest

import tablesocket as ts
from tablesocket import Filter
from tablesocket import protocol as proto

from fakes import bytewise, fake_async_client, fake_client, split_at, whole

MSG_OPEN = b"P\t0\ttest\tmsg\tby_user\tid,user_id,body\tbody"
SRC_OPEN = b"P\t1\ttest\tfollower\tPRIMARY\tuser_id"
OPENS = [(MSG_OPEN, b"0\t1"), (SRC_OPEN, b"0\t1")]

ROWS_REPLY = b"0\t3\t9\t2\thi\t7\t1\t\x00\t3\t2\ta\x01Ib"
ROWS = [(b"9", b"2", b"hi"), (b"7", b"1", None), (b"3", b"2", b"a\tb")]

# (call(msg, src), expected request line, reply line, expected value)
CONVERSATION = [
    (lambda m, s: m.merge([1, 2, 3], 20),
     b"0\tM-\t1\t0\t20\t0\t@\t0\t3\t1\t2\t3", ROWS_REPLY, ROWS),
    (lambda m, s: m.merge([1, 2], 2, before=100),
     b"0\tM-\t2\t0\t100\t2\t0\t@\t0\t2\t1\t2", b"0\t3", []),
    (lambda m, s: m.merge([5], 3, newest_first=False, after=[7, 8]),
     b"0\tM+\t3\t0\t7\t8\t3\t0\t@\t0\t1\t5", b"0\t3\t1\t5\tx", [(b"1", b"5", b"x")]),
    (lambda m, s: m.merge(["a\tb", None, b"\x00"], 1, offset=2),
     b"0\tM-\t1\t0\t1\t2\t@\t0\t3\ta\x01Ib\t\x00\t\x01\x40", b"0\t3", []),
    (lambda m, s: m.merge((4, 4), 5, before=(None,), filters=[Filter("F", "!=", "body", "x")]),
     b"0\tM-\t2\t0\t\x00\t5\t0\t@\t0\t2\t4\t4\tF\t!=\t0\tx", b"0\t3", []),
    (lambda m, s: m.merge([1], 5, newest_first=False, filters=[Filter("W", "<", 0, 9)]),
     b"0\tM+\t1\t0\t5\t0\t@\t0\t1\t1\tW\t<\t0\t9", b"0\t3", []),
    (lambda m, s: m.timeline(s, [9], 20),
     b"0\tM-\t1\t0\t20\t0\t@\t0\t^\t1\t1\t9\t1000", ROWS_REPLY, ROWS),
    (lambda m, s: m.timeline(s, [9, "x"], 20, before=55, max_groups=10),
     b"0\tM-\t2\t0\t55\t20\t0\t@\t0\t^\t1\t2\t9\tx\t10", b"0\t3", []),
    (lambda m, s: m.timeline(s, [9], 4, offset=1, newest_first=False, after=3,
                             filters=[Filter("F", "=", "body", "")]),
     b"0\tM+\t2\t0\t3\t4\t1\t@\t0\t^\t1\t1\t9\t1000\tF\t=\t0\t", b"0\t3\t4\t1\t", [(b"4", b"1", b"")]),
    (lambda m, s: m.timeline(m, [1], 1),  # an index may be its own source
     b"0\tM-\t1\t0\t1\t0\t@\t0\t^\t0\t1\t1\t1000", b"0\t3", []),
]

CHUNKERS = [whole, bytewise] + [split_at(k) for k in range(1, 40)]


def open_both(c):
    msg = c.open_index("test", "msg", "by_user", ["id", "user_id", "body"], ["body"])
    src = c.open_index("test", "follower", "PRIMARY", ["user_id"])
    return msg, src


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_conversation(chunker):
    c = fake_client(OPENS + [(req, rep) for _, req, rep, _ in CONVERSATION], chunker=chunker)
    msg, src = open_both(c)
    for call, _, _, expected in CONVERSATION:
        assert call(msg, src) == expected
    assert c.server.done() and not c.closed


def test_decoded_rows():
    c = fake_client([(b"P\t0\ttest\tmsg\tby_user\tid,user_id,body", b"0\t1"),
                     (b"0\tM-\t1\t0\t2\t0\t@\t0\t2\t1\t2", b"0\t3\t9\t2\th\xc3\xa9\t7\t1\t\x00")])
    msg = c.open_index("test", "msg", "by_user", ["id", "user_id", "body"], decode=[int, int, True])
    assert msg.merge([1, 2], 2) == [(9, 2, "hé"), (7, 1, None)]


def test_server_errors_keep_the_connection():
    c = fake_client(OPENS + [
        (b"0\tM-\t1\t0\t1\t0\t@\t0\t1\t1", b"2\t1\tmerge"),
        (b"0\tM-\t1\t0\t1\t0\t@\t0\t^\t1\t1\t1\t1000", b"2\t1\tinsource"),
        (b"0\tM-\t1\t0\t1\t0\t@\t0\t1\t1", b"0\t3"),
    ])
    msg, src = open_both(c)
    with pytest.raises(ts.ServerError) as ei:
        msg.merge([1], 1)
    assert (ei.value.code, ei.value.message) == (2, "merge")
    with pytest.raises(ts.ServerError, match="insource"):
        msg.timeline(src, [1], 1)
    assert msg.merge([1], 1) == []
    assert not c.closed and c.server.done()


@pytest.mark.parametrize("call, match", [
    (lambda m, s: m.merge([], 10), "groups must not be empty"),
    (lambda m, s: m.merge(5, 10), "groups must be a list"),
    (lambda m, s: m.merge("abc", 10), "groups must be a list"),
    (lambda m, s: m.merge([1], 0), "limit"),
    (lambda m, s: m.merge([1], 10, offset=-1), "offset"),
    (lambda m, s: m.merge([1], 10, after=5), "after= needs newest_first=False"),
    (lambda m, s: m.merge([1], 10, newest_first=False, before=5), "before= needs newest_first=True"),
    (lambda m, s: m.merge([1], 10, before=5, after=6), "not both"),
    (lambda m, s: m.merge([1], 10, before=[]), "empty bound"),
    (lambda m, s: m.merge([1], 10, newest_first=0), "newest_first must be a bool"),
    (lambda m, s: m.merge([1], 10, before=1.5), "unsupported value type"),
    (lambda m, s: m.merge([object()], 10), "unsupported value type"),
    (lambda m, s: m.merge([1], 10, filters=[Filter("F", "=", "nope", 1)]), "filter columns"),
    (lambda m, s: m.timeline(s, [], 10), "source keys must not be empty"),
    (lambda m, s: m.timeline(s, 9, 10), "source keys must be a list"),
    (lambda m, s: m.timeline(s, [9], 10, max_groups=0), "max_groups"),
    (lambda m, s: m.timeline(s, [9], 10, newest_first=False, before=1), "before= needs"),
    (lambda m, s: m.timeline("follower", [9], 10), "source must be an index handle"),
])
def test_client_errors_send_nothing(call, match):
    c = fake_client(OPENS)
    msg, src = open_both(c)
    sent = c.transports[0].sent
    with pytest.raises(ts.ClientError, match=match):
        call(msg, src)
    assert c.transports[0].sent == sent and not c.closed


def test_source_from_another_client_is_refused():
    c1, c2 = fake_client(OPENS), fake_client(OPENS)
    msg, _ = open_both(c1)
    _, foreign = open_both(c2)
    with pytest.raises(ts.ClientError, match="another client"):
        msg.timeline(foreign, [1], 10)
    with pytest.raises(ts.ClientError, match="another client"):
        with c1.pipeline() as p:
            p.timeline(msg, foreign, [1], 10)


def test_reconnect_reopens_the_source_index_too():
    line = b"0\tM-\t1\t0\t5\t0\t@\t0\t^\t1\t1\t9\t1000"
    c = fake_client(OPENS + [OPENS[0], OPENS[1], (line, ROWS_REPLY),
                             OPENS[0], (b"0\t=\t1\t1", b"0\t3"), OPENS[1], (line, b"0\t3")])
    msg, src = open_both(c)
    c.reconnect()
    assert msg.timeline(src, [9], 5) == ROWS   # both indexes re-opened, in the same write
    assert c.transports[1].sent == MSG_OPEN + b"\n" + SRC_OPEN + b"\n" + line + b"\n"
    c.reconnect()
    msg.find("=", [1])                         # re-opens msg only
    assert msg.timeline(src, [9], 5) == []     # now only the source is missing
    assert c.transports[2].sent == (MSG_OPEN + b"\n0\t=\t1\t1\n" + SRC_OPEN + b"\n" + line + b"\n")
    assert c.server.done()


def test_failed_source_reopen_reports_the_open_error():
    c = fake_client(OPENS + [OPENS[0], (SRC_OPEN, b"1\t1\topen_table"),
                             (b"0\tM-\t1\t0\t5\t0\t@\t0\t^\t1\t1\t9\t1000", b"2\t1\tinsource")])
    msg, src = open_both(c)
    c.reconnect()
    with pytest.raises(ts.ServerError, match="open_table"):
        msg.timeline(src, [9], 5)
    assert not c.closed and c.server.done()


PIPE_SCRIPT = [
    (b"P\t0\ttest\tmsg\tby_user\tid,user_id,body", b"0\t1"),
    (b"P\t1\ttest\tfollower\tPRIMARY\tuser_id", b"0\t1"),
    (b"0\tM-\t1\t0\t2\t0\t@\t0\t2\t1\t2", b"0\t3\t9\t2\thi"),
    (b"0\tM-\t1\t0\t2\t0\t@\t0\t^\t1\t1\t7\t50", b"0\t3\t9\t2\thi\t7\t1\tyo"),
    (b"0\tM+\t2\t0\t7\t2\t0\t@\t0\t^\t1\t1\t7\t1000", b"0\t3"),
    (b"0\tM-\t1\t0\t1\t0\t@\t0\t1\t1", b"2\t1\tmerge"),
]


def queue(p):
    msg = p.open_index("test", "msg", "by_user", ["id", "user_id", "body"])
    src = p.open_index("test", "follower", "PRIMARY", ["user_id"])
    return [
        p.merge(msg, [1, 2], 2),
        p.timeline(msg, src, [7], 2, max_groups=50),
        p.timeline(msg, src, [7], 2, newest_first=False, after=7),
        p.merge(msg, [1], 1),
    ]


def check(r):
    assert r[0].value == [(b"9", b"2", b"hi")]
    assert r[1].value == [(b"9", b"2", b"hi"), (b"7", b"1", b"yo")]
    assert r[2].value == []
    assert isinstance(r[3].exception(), ts.ServerError) and r[3].exception().message == "merge"


def test_pipeline_one_write_every_byte_boundary():
    stream = b"".join(rep + b"\n" for _, rep in PIPE_SCRIPT)
    for chunker in [whole, bytewise] + [split_at(k) for k in range(len(stream) + 1)]:
        c = fake_client(PIPE_SCRIPT, chunker=chunker)
        with c.pipeline(raise_on_error=False) as p:
            r = queue(p)
        check(r)
        assert c.transports[0].sent == b"".join(req + b"\n" for req, _ in PIPE_SCRIPT)
        assert not c.closed


def test_pipeline_raises_the_error():
    c = fake_client(PIPE_SCRIPT)
    with pytest.raises(ts.ServerError, match="merge"):
        with c.pipeline() as p:
            r = queue(p)
    check(r)


def test_encode_merge():
    enc = proto.encode_merge
    assert enc(3, "M-", 20, groups=[1, 2]) == b"3\tM-\t1\t0\t20\t0\t@\t0\t2\t1\t2\n"
    assert enc(3, "M+", 20, 4, bound=[b"\x0a", 5], groups=["x"]) == (
        b"3\tM+\t3\t0\t\x01\x4a\t5\t20\t4\t@\t0\t1\tx\n")
    assert enc(3, "M-", 1, source=(7, [1, None], 9)) == b"3\tM-\t1\t0\t1\t0\t@\t0\t^\t7\t2\t1\t\x00\t9\n"
    assert enc(0, "M-", 1, groups=[1], filters=[Filter("F", ">", 1, 3)]) == (
        b"0\tM-\t1\t0\t1\t0\t@\t0\t1\t1\tF\t>\t1\t3\n")
    for kwargs, match in [
        (dict(op="M"), "merge op"), (dict(op="L"), "merge op"),
        (dict(groups=None), "either groups or a source"),
        (dict(source=(1, [1], 1)), "either groups or a source"),
        (dict(limit=0), "limit"), (dict(limit=2 ** 32), "limit"),
        (dict(groups=[]), "groups must not be empty"),
    ]:
        args = dict(index_id=0, op="M-", limit=5, groups=[1])
        args.update(kwargs)
        with pytest.raises(ts.ClientError, match=match):
            enc(**args)
    with pytest.raises(ts.ClientError, match="source index id"):
        enc(0, "M-", 5, source=(-1, [1], 5))
    with pytest.raises(ts.ClientError, match="max_groups"):
        enc(0, "M-", 5, source=(1, [1], 0))


# ---- asyncio ----------------------------------------------------------------------------------


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_async_conversation(chunker):
    async def main():
        c = fake_async_client(OPENS + [(req, rep) for _, req, rep, _ in CONVERSATION], chunker=chunker)
        async with c:
            msg = await c.open_index("test", "msg", "by_user", ["id", "user_id", "body"], ["body"])
            src = await c.open_index("test", "follower", "PRIMARY", ["user_id"])
            for call, _, _, expected in CONVERSATION:
                assert await call(msg, src) == expected
            assert c.server.done() and not c.closed
    run(main())


def test_async_concurrent_timelines_on_one_connection():
    def handler(line):
        if line.startswith(b"P\t"):
            return b"0\t1"
        parts = line.split(b"\t")
        user = parts[parts.index(b"^") + 3]
        return b"0\t3\t1\t" + user + b"\tx"

    async def main():
        c = fake_async_client(handler=handler, chunker=bytewise)
        async with c:
            msg = await c.open_index("test", "msg", "by_user", ["id", "user_id", "body"], decode=True)
            src = await c.open_index("test", "follower", "PRIMARY", ["user_id"])
            got = await asyncio.gather(*(msg.timeline(src, [u], 20) for u in range(50)))
            assert got == [[("1", str(u), "x")] for u in range(50)]
    run(main())


def test_async_pipeline_and_reconnect():
    line = b"0\tM-\t1\t0\t5\t0\t@\t0\t^\t1\t1\t9\t1000"

    async def main():
        c = fake_async_client(PIPE_SCRIPT + [PIPE_SCRIPT[0], PIPE_SCRIPT[1], (line, b"0\t3")],
                              chunker=bytewise)
        await c.connect()
        async with c.pipeline(raise_on_error=False) as p:
            r = queue(p)
        check(r)
        assert len(c.writers[0].writes) == 1
        msg = await c.open_index("test", "msg", "by_user", ["id", "user_id", "body"])
        src = await c.open_index("test", "follower", "PRIMARY", ["user_id"])
        await c.reconnect()
        assert await msg.timeline(src, [9], 5) == []
        assert c.writers[1].writes == [PIPE_SCRIPT[0][0] + b"\n" + PIPE_SCRIPT[1][0] + b"\n" + line + b"\n"]
        await c.close()
    run(main())


def test_async_client_errors():
    async def main():
        c = fake_async_client(OPENS)
        async with c:
            msg = await c.open_index("test", "msg", "by_user", ["id", "user_id", "body"], ["body"])
            with pytest.raises(ts.ClientError):
                await msg.merge([], 5)
            with pytest.raises(ts.ClientError):
                await msg.timeline(msg, [1], 5, newest_first=False, before=3)
            assert len(c.writers[0].writes) == 1  # only the open
    run(main())
