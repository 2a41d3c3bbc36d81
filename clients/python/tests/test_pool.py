"""The thread-safe Pool."""

import socket
import threading
import time

import pytest

import tablesocket as ts

from fakes import LoopbackServer, echo_handler


def handler(line):
    if b"\tbreak" in line:
        return b"not a reply"
    return echo_handler(line)


def test_threads_share_a_bounded_pool():
    with LoopbackServer(handler) as srv, ts.Pool("127.0.0.1", srv.port, size=3, timeout=5) as pool:
        bad, peak = [], [0]
        lock = threading.Lock()
        in_use = [0]

        def worker(w):
            for i in range(50):
                with pool.connection() as c:
                    with lock:
                        in_use[0] += 1
                        peak[0] = max(peak[0], in_use[0])
                    idx = c.open_index("db", "t", columns=["k", "v"], decode=True)
                    key = f"{w}-{i}"
                    if idx.find("=", [key, 2]) != [(key, "vv")]:
                        bad.append(key)
                    with lock:
                        in_use[0] -= 1

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not bad
        assert peak[0] <= 3 and pool.total <= 3
        assert len(srv.conns) <= 3  # connections were reused


def test_acquire_timeout():
    with LoopbackServer(handler) as srv, ts.Pool("127.0.0.1", srv.port, size=1,
                                                acquire_timeout=0.1) as pool:
        with pool.connection():
            t0 = time.monotonic()
            with pytest.raises(ts.PoolTimeoutError):
                with pool.connection():
                    pass
            assert 0.05 < time.monotonic() - t0 < 2
        with pool.connection():  # free again
            pass


def test_broken_connection_is_replaced():
    with LoopbackServer(handler) as srv, ts.Pool("127.0.0.1", srv.port, size=1, timeout=5) as pool:
        with pytest.raises(ts.ProtocolError):
            with pool.connection() as c1:
                idx = c1.open_index("db", "t", columns=["k", "v"])
                idx.find("=", ["break"])
        assert c1.closed and pool.total == 0
        with pool.connection() as c2:
            assert c2 is not c1
            idx = c2.open_index("db", "t", columns=["k", "v"])
            assert idx.find("=", ["ok"]) == [(b"ok", b"v")]


def test_connection_closed_by_server_while_idle_is_replaced():
    with LoopbackServer(handler) as srv, ts.Pool("127.0.0.1", srv.port, size=2, timeout=5) as pool:
        with pool.connection() as c1:
            c1.open_index("db", "t", columns=["k", "v"])
        for conn in list(srv.conns):
            conn.shutdown(socket.SHUT_RDWR)
        time.sleep(0.1)
        with pool.connection() as c2:
            assert c2 is not c1 and c1.closed
            assert c2.open_index("db", "t", columns=["k", "v"]).get(["x"]) == (b"x", b"v")


def test_connect_failure_frees_the_slot():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    pool = ts.Pool("127.0.0.1", port, size=1, timeout=1)
    for _ in range(3):
        with pytest.raises(ts.ConnectionError):
            pool.acquire()
    assert pool.total == 0


def test_close_and_validation():
    with LoopbackServer(handler) as srv:
        pool = ts.Pool("127.0.0.1", srv.port, size=2)
        c = pool.acquire()
        pool.close()
        pool.release(c)
        assert c.closed and pool.total == 0
        with pytest.raises(ts.ClientError):
            pool.acquire()
    for bad in (dict(size=0), dict(size=True), dict(connect=False)):
        with pytest.raises(ts.ClientError):
            ts.Pool("h", 1, **bad)


def test_a_connection_is_taken_back_once_and_only_by_its_pool():
    """Released twice, one connection went to two borrowers; a foreign one was taken in."""
    with LoopbackServer(handler) as srv, ts.Pool("127.0.0.1", srv.port, size=2, timeout=5) as pool:
        c = pool.acquire()
        pool.release(c)
        with pytest.raises(ts.ClientError, match="already given back"):
            pool.release(c)
        a, b = pool.acquire(), pool.acquire()
        assert a is not b
        pool.release(a)
        pool.release(b)
        other = ts.Client("127.0.0.1", srv.port, timeout=5)
        try:
            with pytest.raises(ts.ClientError, match="does not belong"):
                pool.release(other)
        finally:
            other.close()
        assert pool.idle == 2


def test_bad_pool_and_client_arguments_are_client_errors_at_once():
    """A misspelt keyword, a non-numeric acquire_timeout or max_reply_size: ClientError when the
    pool or client is made (they were TypeErrors at the first acquire() or request)."""
    with pytest.raises(ts.ClientError, match="bogus"):
        ts.Pool("127.0.0.1", 1, bogus=1)
    with pytest.raises(ts.ClientError, match="acquire_timeout"):
        ts.Pool("127.0.0.1", 1, acquire_timeout="1")
    for bad in ("x", 0, True, 1.5):
        with pytest.raises(ts.ClientError, match="max_reply_size"):
            ts.Client("127.0.0.1", 1, max_reply_size=bad, connect=False)
        with pytest.raises(ts.ClientError, match="max_reply_size"):
            ts.AsyncClient("127.0.0.1", 1, max_reply_size=bad)
