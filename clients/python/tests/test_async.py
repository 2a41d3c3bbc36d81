"""AsyncClient against fake streams (replies split at every byte boundary) and a real
loopback server. Plain tests driving asyncio.run(), no plugin needed."""

import asyncio
import time

import pytest

import tablesocket as ts

from fakes import (
    CLOSE,
    SILENT,
    LoopbackServer,
    bytewise,
    echo_handler,
    fake_async_client,
    split_at,
    whole,
)
from test_client import CONVERSATION, OPEN, OPEN_OK, PIPE_SCRIPT, check_pipeline_results

CHUNKERS = [whole, bytewise] + [split_at(k) for k in range(1, 40)]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def open_t(c):
    return await c.open_index("test", "t", "PRIMARY", ["id", "v"], ["n"])


@pytest.mark.parametrize("chunker", CHUNKERS)
def test_conversation(chunker):
    async def main():
        script = [OPEN_OK] + [(req, rep) for _, req, rep, _ in CONVERSATION]
        c = fake_async_client(script, chunker=chunker)
        async with c:
            idx = await open_t(c)
            for call, _, _, expected in CONVERSATION:
                assert await call(idx) == expected
            assert c.server.done() and not c.closed
        assert c.closed
    run(main())


async def run_pipeline(c, raise_on_error=False):
    async with c.pipeline(raise_on_error=raise_on_error) as p:
        idx = p.open_index("test", "t", columns=["id", "v"], filter_columns=["n"])
        r = [
            p.find(idx, "=", [1]),
            p.insert(idx, [None, "b"]),
            p.find(idx, "=", [9]),
            p.delete(idx, ">", [0], 2, returning=True),
            p.update(idx, "=", [1], [1, "z"]),
        ]
    return r


def test_pipeline_every_byte_boundary():
    stream = b"".join(rep + b"\n" for _, rep in PIPE_SCRIPT)

    async def main():
        for chunker in [whole, bytewise] + [split_at(k) for k in range(len(stream) + 1)]:
            c = fake_async_client(PIPE_SCRIPT, chunker=chunker)
            await c.connect()
            check_pipeline_results(await run_pipeline(c))
            assert len(c.writers[0].writes) == 1  # one write for the whole pipeline
            assert not c.closed
            await c.close()
    run(main())


def test_pipeline_raise_on_error():
    async def main():
        c = fake_async_client(PIPE_SCRIPT)
        await c.connect()
        with pytest.raises(ts.ServerError, match="kpnum"):
            await run_pipeline(c, raise_on_error=True)
        assert not c.closed
    run(main())


def test_pipeline_block_exception_sends_nothing():
    async def main():
        c = fake_async_client([OPEN_OK])
        await c.connect()
        idx = await open_t(c)
        with pytest.raises(RuntimeError):
            async with c.pipeline() as p:
                r = p.find(idx, "=", [1])
                raise RuntimeError("x")
        assert len(c.writers[0].writes) == 1
        with pytest.raises(ts.ClientError):
            r.result()
    run(main())


def numbered_handler(line):
    """'<id> = 1 <k>' -> row (k, k); P -> ok."""
    if line.startswith(b"P\t"):
        return b"0\t1"
    parts = line.split(b"\t")
    return b"0\t2\t" + parts[3] + b"\t" + parts[3]


@pytest.mark.parametrize("chunker", [whole, bytewise, split_at(5)])
def test_concurrent_tasks_matched_in_order(chunker):
    async def main():
        c = fake_async_client(handler=numbered_handler, chunker=chunker)
        async with c:
            idx = await c.open_index("d", "t", columns=["a", "b"], decode=[int, True])
            results = await asyncio.gather(*(idx.find("=", [i]) for i in range(300)))
            assert results == [[(i, str(i))] for i in range(300)]
    run(main())


def test_cancelled_task_keeps_stream_in_sync():
    async def main():
        c = fake_async_client(handler=numbered_handler, chunker=bytewise)
        async with c:
            idx = await c.open_index("d", "t", columns=["a", "b"])
            slow = asyncio.ensure_future(idx.find("=", ["x" * 200]))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            slow.cancel()
            assert await idx.find("=", ["after"]) == [(b"after", b"after")]
            assert slow.cancelled()
            assert not c.closed
    run(main())


@pytest.mark.parametrize("reply", [
    b"0\t3\ta\tb\tc",
    b"bogus",
    ("raw", b"0\t2\n0\t2\n"),   # a reply with no request
])
def test_protocol_error_closes_and_fails_all_waiters(reply):
    async def main():
        c = fake_async_client([OPEN_OK, (b"0\t=\t1\t1", reply), (b"0\t=\t1\t2", b"0\t2")])
        await c.connect()
        idx = await open_t(c)
        r1, r2 = await asyncio.gather(idx.find("=", [1]), idx.find("=", [2]),
                                      return_exceptions=True)
        if isinstance(reply, tuple):  # the extra reply answers request 2; then one too many
            assert r1 == [] and r2 == []
            await asyncio.sleep(0.01)
        else:
            assert isinstance(r1, ts.ProtocolError) and isinstance(r2, ts.ProtocolError)
        assert c.closed and c.writers[0].closed
        with pytest.raises(ts.ConnectionError, match="closed"):
            await idx.find("=", [1])
    run(main())


def test_server_error_keeps_connection():
    async def main():
        c = fake_async_client([OPEN_OK, (b"0\t=\t1\t1", b"2\t1\tkpnum"),
                               (b"0\t=\t1\t2", b"3\t1\tunauth"), (b"0\t=\t1\t3", b"0\t2")])
        await c.connect()
        idx = await open_t(c)
        with pytest.raises(ts.ServerError) as ei:
            await idx.find("=", [1])
        assert (ei.value.code, ei.value.message) == (2, "kpnum")
        with pytest.raises(ts.AuthError):
            await idx.find("=", [2])
        assert await idx.find("=", [3]) == []
    run(main())


def test_eof_and_timeout():
    async def main():
        c = fake_async_client([OPEN_OK, (b"0\t=\t1\t1", CLOSE)])
        await c.connect()
        idx = await open_t(c)
        with pytest.raises(ts.ConnectionError, match="closed by the server") as ei:
            await idx.find("=", [1])
        assert type(ei.value) is ts.ConnectionError and c.closed

        c = fake_async_client([OPEN_OK, (b"0\t=\t1\t1", SILENT)], timeout=0.05)
        await c.connect()
        idx = await open_t(c)
        with pytest.raises(ts.TimeoutError):
            await idx.find("=", [1])
        assert c.closed
    run(main())


def test_reconnect_reopens_and_replays_auth():
    async def main():
        c = fake_async_client([
            (b"A\t1\tk", b"0\t1"), OPEN_OK, (b"0\t=\t1\t1", b"x"),
            (b"A\t1\tk", b"0\t1"), OPEN_OK, (b"0\t=\t1\t1", b"0\t2\t1\ta"),
        ], auth="k")
        await c.connect()
        idx = await open_t(c)
        with pytest.raises(ts.ProtocolError):
            await idx.find("=", [1])
        await c.reconnect()
        assert await idx.find("=", [1]) == [(b"1", b"a")]
        assert c.writers[1].writes == [b"A\t1\tk\n", OPEN + b"\n0\t=\t1\t1\n"]
        assert c.server.done()
    run(main())


def test_auth_failure():
    async def main():
        c = fake_async_client([(b"A\t1\tk", b"3\t1\tunauth")], auth="k")
        with pytest.raises(ts.AuthError):
            await c.connect()
        assert c.closed
        c = fake_async_client([(b"A\t1\tx", b"0\t1")])
        await c.connect()
        await c.auth(b"x")
    run(main())


def test_real_loopback_and_timeout():
    async def main():
        with LoopbackServer(echo_handler) as srv:
            async with ts.AsyncClient("127.0.0.1", srv.port, timeout=5) as c:
                idx = await c.open_index("db", "t", columns=["k", "v"], decode=True)
                assert await idx.find("=", ["abc", 3]) == [("abc", "vvv")]
                async with c.pipeline() as p:
                    rs = [p.find(idx, "=", [str(i), 2000]) for i in range(3000)]
                assert all(r.value == [(str(i), "v" * 2000)] for i, r in enumerate(rs))
        with LoopbackServer(lambda line: None) as srv:
            c = ts.AsyncClient("127.0.0.1", srv.port, timeout=0.2)
            await c.connect()
            t0 = time.monotonic()
            with pytest.raises(ts.TimeoutError):
                await c.open_index("db", "t", columns=["a"])
            assert time.monotonic() - t0 < 2 and c.closed
    run(main())


def test_connect_refused():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def main():
        with pytest.raises(ts.ConnectionError):
            await ts.AsyncClient("127.0.0.1", port, timeout=2).connect()
    run(main())
