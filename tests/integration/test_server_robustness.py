"""The server under hostile or heavy clients, and its lifecycle with clients connected.

  * 2,000 concurrent connections (half reading, half writing), each doing a request;
  * out of file descriptors: accept() fails, the listener is left alone for a moment (no spinning)
    and the clients waiting in the backlog are served once descriptors are free;
  * connections accepted by the workers themselves are spread evenly over them;
  * oversized, malformed and absurd input (a 2 MB line, garbage bytes, counts like 4294967295)
    answered with an error (and a close where the line cannot be read), while a canary client on
    the same worker keeps being answered and the server's memory stays flat;
  * a client that pipelines 100,000 finds and stops reading does not hold up the others, and gets
    every reply, in order, once it reads again;
  * UNINSTALL SONAME 'tablesocket' while 20 clients hammer, then INSTALL SONAME works again;
  * --tablesocket-idle-timeout=1 closes idle connections after 1-2 s (not busy or lock-waiting ones);
  * `mariadb-admin shutdown` with 50 clients connected (idle, busy, waiting for a row lock) takes
    less than 10 s, and acknowledged writes are there after the restart.

The module's main server runs one tablesocket worker, so the canary shares the worker with the
hostile client. CANARY_BOUND is the documented bound for a canary reply.
"""

from __future__ import annotations

import random
import selectors
import shutil
import socket
import struct
import subprocess
import fcntl
import termios
import threading
import os
import time
from pathlib import Path

import pytest

import ts_harness as h
from ts_mc import McConn

pytestmark = pytest.mark.tablesocket_only("tablesocket's limits and lifecycle")

CANARY_BOUND = 0.200      # seconds
NCONN = 2000
OPEN_FILES = 20000


@pytest.fixture(scope="module")
def srv(request):
    with h.private_server(request, "robust", ["--tablesocket-threads=1", f"--open-files-limit={OPEN_FILES}"]) as s:
        s.exec_sql("CREATE TABLE rob (k int primary key, v varchar(2000)) ENGINE=InnoDB")
        s.executemany("INSERT INTO rob VALUES (%s, %s)", [(k, f"v{k}") for k in range(1, 1001)])
        s.exec_sql("CREATE TABLE rob_ins (k int primary key, v varchar(32)) ENGINE=InnoDB")
        yield s


def _rss_kb(srv) -> int:
    for line in Path(f"/proc/{srv.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_seconds(srv) -> float:
    """mariadbd's CPU time so far (user + system, all threads)."""
    fields = Path(f"/proc/{srv.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _canary(s, readers: int = 1, writers: int = 1) -> h.Load:
    """Clients that must keep being answered: finds on the read port, updates on the write port."""
    def setup(i):
        c = h.hs_open(s.hs_port if i < readers else s.hs_port_wr, "rob", "k,v", timeout=5)
        c.rnd = random.Random(i)
        return c

    def step(i, c):
        k = c.rnd.randint(10, 1000)  # rows 1..9 are left to the tests
        if i < readers:
            r = c.request(f"1\t=\t1\t{k}\n", timeout=5)
            assert r.startswith(f"0\t2\t{k}\t".encode()), r
        else:
            r = c.request(f"1\t=\t1\t{k}\t1\t0\tU\t{k}\tv{k}\n", timeout=5)
            assert r == b"0\t1\t1\n", r

    return h.Load(readers + writers, setup, step, max_seconds=60, teardown=lambda c: c.close())


def _assert_canary(load: h.Load, t0: float, t1: float, what: str, min_each: int = 10) -> None:
    assert not load.errors, f"{what}: canary errors: {load.errors[:5]}"
    lats = load.latencies_between(t0, t1)
    each = [sum(1 for (end, _, i) in load.samples if t0 <= end <= t1 and i == j) for j in range(load.n)]
    assert min(each) >= min_each, f"{what}: a canary client was hardly answered: {each}"
    worst = max(lats)
    print(f"{what}: canary {len(lats)} replies, p99={h.percentile(lats, 99) * 1e3:.2f} ms max={worst * 1e3:.1f} ms")
    assert worst <= CANARY_BOUND, f"{what}: a canary reply took {worst * 1e3:.0f} ms (bound {CANARY_BOUND * 1e3:.0f} ms)"


# --------------------------------------------------------------------------------------------------
# many connections


def test_two_thousand_concurrent_connections_each_get_their_reply(srv):
    soft = h.raise_nofile(NCONN + 1000)
    assert soft >= NCONN + 100, f"cannot raise RLIMIT_NOFILE enough: {soft}"
    assert int(h.variable(srv, "open_files_limit")) >= NCONN + 100
    before = h.status(srv)
    conns: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    try:
        t0 = time.monotonic()
        for i in range(NCONN):
            s = h.connect_raw(srv.hs_port if i % 2 == 0 else srv.hs_port_wr)
            conns.append(s)
        connected = time.monotonic() - t0
        want = {}
        for i, s in enumerate(conns):
            if i % 2 == 0:
                k = i % 1000 + 1
                s.sendall(f"P\t1\ttest\trob\tPRIMARY\tk,v\n1\t=\t1\t{k}\n".encode())
                want[s.fileno()] = f"0\t1\n0\t2\t{k}\tv{k}\n".encode()
            else:
                k = 100000 + i
                s.sendall(f"P\t1\ttest\trob_ins\tPRIMARY\tk,v\n1\t+\t2\t{k}\tc{i}\n".encode())
                want[s.fileno()] = b"0\t1\n0\t1\n"
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        got = {s.fileno(): b"" for s in conns}
        pending = len(conns)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                fd = s.fileno()
                got[fd] += data
                if not data or got[fd].count(b"\n") >= 2:
                    sel.unregister(s)
                    pending -= 1
        took = time.monotonic() - t0
        print(f"{NCONN} connections: connected in {connected:.2f} s, all answered in {took:.2f} s")
        wrong = [(fd, got[fd], want[fd]) for fd in want if got[fd] != want[fd]]
        assert not wrong, f"{len(wrong)} of {NCONN} connections got a wrong or no reply: {wrong[:3]}"
        st = h.status(srv)
        assert st["tablesocket_connections"] >= NCONN
        assert st["tablesocket_connections_rejected"] == before["tablesocket_connections_rejected"]
        assert srv.sql("SELECT COUNT(*) FROM rob_ins WHERE k >= 100000") == [(str(NCONN // 2),)]
    finally:
        sel.close()
        for s in conns:
            s.close()
    deadline = time.monotonic() + 10
    while h.status(srv)["tablesocket_connections"] > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert h.status(srv)["tablesocket_connections"] == 0, "closed connections were not released"


def test_out_of_descriptors_the_listener_pauses_and_then_serves_the_backlog(srv):
    """accept() failing with EMFILE leaves the listener readable: the worker must neither spin on it
    nor stop accepting once descriptors are free again."""
    h.raise_nofile(1000)
    import resource
    pid = srv.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    spare = 40
    clients: list[socket.socket] = []
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + spare, hard))
        for _ in range(spare + 60):  # the kernel completes the handshakes; the rest wait in the backlog
            clients.append(h.connect_raw(srv.hs_port))
        time.sleep(0.5)
        c0 = _cpu_seconds(srv)
        time.sleep(1.5)
        busy = _cpu_seconds(srv) - c0
        assert busy < 0.5, f"mariadbd used {busy:.2f} s of CPU in 1.5 s while out of descriptors (spinning on accept?)"
        deadline = time.monotonic() + 5
        while "cannot accept on the hs port" not in srv.log_tail(200) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "cannot accept on the hs port" in srv.log_tail(200)
        waiting = clients[-5:]  # beyond the limit: still in the backlog
        for s in clients[:-5]:
            s.close()
        for i, s in enumerate(waiting):
            s.sendall(b"P\t1\ttest\trob\tPRIMARY\tk,v\n1\t=\t1\t7\n")
        for i, s in enumerate(waiting):
            s.settimeout(10)
            got = b""
            while got.count(b"\n") < 2:
                chunk = s.recv(4096)
                assert chunk, f"backlog client {i} was closed unanswered"
                got += chunk
            assert got == b"0\t1\n0\t2\t7\tv7\n", got
    finally:
        for s in clients:
            s.close()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    fresh = h.hs_open(srv.hs_port, "rob", "k,v", timeout=5)
    assert fresh.request("1\t=\t1\t8\n", timeout=5) == b"0\t2\t8\tv8\n"
    fresh.close()


def test_clients_that_connect_per_request_do_not_reopen_the_table_each_time_and_ddl_is_not_held(srv):
    """A table whose last open index went with its connection stays open a moment (the next client
    opens it again at once), but a DDL statement still gets it at once."""
    before = h.status(srv)["tablesocket_table_opens"]
    for k in range(10, 40):
        c = h.hs_open(srv.hs_port, "rob", "k,v", timeout=5)
        assert c.request(f"1\t=\t1\t{k}\n", timeout=5) == f"0\t2\t{k}\tv{k}\n".encode()
        c.close()
        time.sleep(0.01)
    opens = h.status(srv)["tablesocket_table_opens"] - before
    assert opens <= 2, f"30 connections one after another opened the table {opens} times"
    t0 = time.monotonic()
    srv.exec_sql("ALTER TABLE rob COMMENT 'per-request clients'")
    took = time.monotonic() - t0
    assert took < 0.5, f"ALTER TABLE waited {took:.2f} s for a table no client uses"
    c = h.hs_open(srv.hs_port, "rob", "k,v", timeout=5)
    assert c.request("1\t=\t1\t11\n", timeout=5) == b"0\t2\t11\tv11\n"
    c.close()


# --------------------------------------------------------------------------------------------------
# hostile input


def _send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    def run():
        try:
            sock.sendall(data)
        except OSError:
            pass  # the server closed on us: expected for oversized input
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _expect_error_then_close(conn: h.HSConn, want: bytes, what: str) -> None:
    try:
        line = conn.recv_line(timeout=10)
    except ConnectionResetError:
        pytest.fail(f"{what}: connection reset before the error reply {want!r} could be read")
    assert line == want, f"{what}: {line!r}"
    assert h.wait_closed(conn, 5.0) is not None, f"{what}: the connection was not closed after {line!r}"


def test_oversized_and_malformed_input_gets_errors_while_others_keep_working(srv):
    load = _canary(srv).start()
    rss0 = _rss_kb(srv)
    before = h.status(srv)
    t0 = time.monotonic()
    try:
        # 2 MB line (limit: 1 MiB): error reply, then close.
        for port in (srv.hs_port, srv.hs_port_wr):
            c = h.HSConn(port)
            th = _send_in_background(c.sock, b"1\t=\t1\t" + b"a" * (2 << 20) + b"\n")
            _expect_error_then_close(c, b"2\t1\ttoolong\n", f"2 MB line on port {port}")
            th.join(10)
            c.close()
        # The same without any LF: the server must not wait for one forever.
        c = h.HSConn(srv.hs_port)
        th = _send_in_background(c.sock, b"x" * (2 << 20))
        _expect_error_then_close(c, b"2\t1\ttoolong\n", "2 MB without LF")
        th.join(10)
        c.close()
        # Just under the limit is a request like any other.
        with h.hs_open(srv.hs_port, "rob", "k,v") as c:
            assert c.request(b"1\t=\t1\t" + b"7" * ((1 << 20) - 16) + b"\n") == b"0\t2\n"
            assert c.request("1\t=\t1\t7\n") == b"0\t2\t7\tv7\n"
        # Too many tokens: error, then close.
        c = h.HSConn(srv.hs_port)
        c.send(b"1\t=\t1" + b"\t1" * 20000 + b"\n")
        _expect_error_then_close(c, b"2\t1\ttoomanytokens\n", "20,000 tokens")
        c.close()

        # Garbage: every line gets exactly one reply; the connection then still works.
        rnd = random.Random(42)
        alphabet = bytes(range(256)).replace(b"\n", b"")
        for port in (srv.hs_port, srv.hs_port_wr):
            with h.hs_open(port, "rob", "k,v") as c:
                lines = [b"", b"\r", b"\x00", b"\xff\xfe\xfd", b"\t\t\t", b"P", b"P\t", b"A\t1", b"1", b"1\t",
                         b"1\t=", b"1\t=\t", b"1\t=\t1", b"1\t?\t1\t1", b"1\t=\tx\t1", b"\x01", b"1\t=\t1\t\x01",
                         b"-1\t=\t1\t1", b"1\t=\t-1\t1", b"1\t=\t1\t1\t-1\t-1", b"1\t=\t1\t1\t1\t0\tZ\tq"]
                lines += [bytes(rnd.choice(alphabet) for _ in range(rnd.randint(1, 300))) for _ in range(300)]
                lines = [ln for ln in lines if not ln.startswith((b"P\t", b"A\t"))] + [b"P", b"A\t1"]
                c.send(b"".join(ln + b"\n" for ln in lines))
                replies = c.recv_lines(len(lines), timeout=10)
                assert all(r.startswith((b"0\t", b"1\t", b"2\t", b"3\t")) for r in replies), replies[:5]
                assert c.recv_all(0.2) == b"", "more replies than request lines"
                assert c.request("1\t=\t1\t9\n") == b"0\t2\t9\tv9\n"

        # Absurd counts: answered (an error or an empty result), nothing allocated for them.
        absurd = {
            "1\t=\t4294967295\t1": b"2\t1\tklen\n",
            "1\t=\t4294967296\t1": b"2\t1\tklen\n",
            "1\t=\t18446744073709551616\t1": b"2\t1\tklen\n",
            "1\t+\t4294967295\t1": b"2\t1\tklen\n",
            "1\t=\t1\t1\t4294967295\t4294967295": b"0\t2\n",
            "1\t=\t1\t1\t1\t0\t@\t0\t4294967295\t1": b"2\t1\tinvalueslen\n",
            "1\t=\t1\t1\t1\t0\t@\t4294967295\t1\t1": None,
            "1\t=\t1\t1\t1\t0\tF\t=\t4294967295\t1": None,
            "4294967295\t=\t1\t1": None,
            "99999999999999999999\t=\t1\t1": None,
        }
        for port in (srv.hs_port, srv.hs_port_wr):
            with h.hs_open(port, "rob", "k,v") as c:
                for req, want in absurd.items():
                    r = c.request(req + "\n")
                    if want is None:
                        assert r.startswith((b"1\t1\t", b"2\t1\t")), (req, r)
                    else:
                        assert r == want, (req, r)
                    assert c.request("1\t=\t1\t3\n") == b"0\t2\t3\tv3\n", f"connection broken after {req!r}"
        t1 = time.monotonic()
        _assert_canary(load, t0, t1, "hostile input")
        assert srv.running()
        grown = _rss_kb(srv) - rss0
        assert grown < 200 * 1024, f"mariadbd grew by {grown // 1024} MB"
        assert h.status(srv)["tablesocket_protocol_errors"] >= before["tablesocket_protocol_errors"] + 4
    finally:
        load.stop()


def test_a_client_that_never_reads_its_replies_does_not_stall_the_others(srv):
    srv.exec_sql("UPDATE rob SET v = REPEAT('x', 1000) WHERE k = 1")
    hog = h.hs_open(srv.hs_port, "rob", "v")
    n = 100_000
    data = b"1\t=\t1\t1\n" * n
    rss0 = _rss_kb(srv)
    load = _canary(srv).start()
    sent = 0
    try:
        hog.sock.setblocking(False)
        t0 = time.monotonic()
        while sent < len(data) and time.monotonic() - t0 < 3.0:
            try:
                sent += hog.sock.send(data[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)
        time.sleep(max(0.0, 3.0 - (time.monotonic() - t0)))
        t1 = time.monotonic()
        _assert_canary(load, t0, t1, "a client not reading 100k replies", min_each=50)
        grown = _rss_kb(srv) - rss0
        assert grown < 100 * 1024, f"mariadbd grew by {grown // 1024} MB buffering replies for a client that does not read"
        print(f"the hog got {sent} of {len(data)} request bytes in; mariadbd grew {grown // 1024} MB")
    finally:
        load.stop()
    # While the hog still does not read, its worker waits for the socket to drain instead of
    # retrying: the server is idle.
    time.sleep(0.3)
    cpu0, w0 = _cpu_seconds(srv), time.monotonic()
    time.sleep(2.0)
    busy = (_cpu_seconds(srv) - cpu0) / (time.monotonic() - w0)
    assert busy < 0.25, f"mariadbd used {busy:.0%} of a CPU while a client was not reading its replies"
    # It reads now: every reply to what it sent, in order, and it can finish sending.
    hog.sock.setblocking(True)
    th = _send_in_background(hog.sock, data[sent:])
    want = b"0\t1\t" + b"x" * 1000 + b"\n"
    deadline = time.monotonic() + 60
    count = 0
    while count < n and time.monotonic() < deadline:
        line = hog.recv_line(timeout=10)
        assert line == want, f"reply {count}: {line[:60]!r}"
        count += 1
    th.join(10)
    assert count == n
    assert hog.request("1\t=\t1\t2\n") == b"0\t1\tv2\n"
    hog.close()
    srv.exec_sql("UPDATE rob SET v = 'v1' WHERE k = 1")


# --------------------------------------------------------------------------------------------------
# lifecycle


def _writer_load(s, n_readers: int, n_writers: int, acked: set, lock: threading.Lock, seconds: float = 60,
                 timeout: float = 5.0, key_base: int = 0):
    """Readers and writers that stop at the first error (no reconnect); writers record acked keys."""
    ends: dict[int, str] = {}

    def setup(i):
        if i < n_readers:
            c = h.hs_open(s.hs_port, "life", "k,v", timeout=timeout)
        else:
            c = h.hs_open(s.hs_port_wr, "life", "k,v", timeout=timeout)
        c.seq = 0
        return c

    def step(i, c):
        try:
            if i < n_readers:
                r = c.request(f"1\t=\t1\t{(c.seq % 100) + 1}\n", timeout=timeout)
                c.seq += 1
                assert r.startswith(b"0\t2\t"), r
            else:
                c.seq += 1
                k = key_base + 1_000_000 * (i + 1) + c.seq
                r = c.request(f"1\t+\t2\t{k}\tw{i}\n", timeout=timeout)
                if r != b"0\t1\n":
                    raise AssertionError(r)
                with lock:
                    acked.add(k)
        except BaseException as e:
            ends[i] = type(e).__name__ + ": " + str(e)[:80]
            raise

    load = h.Load(n_readers + n_writers, setup, step, max_seconds=seconds, teardown=lambda c: c.close())
    load.ends = ends
    return load


def _life_table(s):
    s.exec_sql("DROP TABLE IF EXISTS life")
    s.exec_sql("CREATE TABLE life (k int primary key, v varchar(32)) ENGINE=InnoDB")
    s.executemany("INSERT INTO life VALUES (%s, %s)", [(k, f"v{k}") for k in range(1, 101)])


def _plugin_status(s) -> list:
    return s.sql("SELECT plugin_status FROM information_schema.plugins WHERE plugin_name = 'tablesocket'", db=None)


def test_uninstall_soname_under_load_then_install_soname_again(request):
    with h.private_server(request, "uninstall") as s:
        _life_table(s)
        for cycle in range(2):
            acked: set[int] = set()
            lock = threading.Lock()
            load = _writer_load(s, 10, 10, acked, lock, key_base=100_000_000 * cycle).start()
            # INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS is read all along: the server it reads
            # goes away under it
            is_stop, is_errors, is_reads = threading.Event(), [], [0]

            def read_is():
                conn = h.sql_conn(s, db=None)
                while not is_stop.is_set():
                    try:
                        with conn.cursor() as cur:
                            cur.execute("SELECT COUNT(*) FROM information_schema.TABLESOCKET_CONNECTIONS")
                            cur.fetchall()
                        is_reads[0] += 1
                    except Exception as e:  # the table is gone between UNINSTALL and INSTALL
                        if "Unknown table" not in str(e):
                            is_errors.append(repr(e))
                        time.sleep(0.01)
                conn.close()
            is_thread = threading.Thread(target=read_is, daemon=True)
            is_thread.start()
            time.sleep(1.0)
            assert not load.errors, load.errors[:3]
            u0 = time.monotonic()
            s.exec_sql("UNINSTALL SONAME 'tablesocket'", db=None)
            took = time.monotonic() - u0
            print(f"cycle {cycle}: UNINSTALL SONAME under load took {took * 1e3:.0f} ms, {len(acked)} writes acknowledged")
            assert took < 10.0, f"UNINSTALL SONAME took {took:.1f} s"
            t_end = time.monotonic() + 10
            while any(t.is_alive() for t in load.threads) and time.monotonic() < t_end:
                time.sleep(0.05)
            load.stop()
            hung = [e for e in load.ends.values() if "Timeout" in e]
            assert not hung, f"clients left hanging by UNINSTALL (no reply, no close): {hung[:3]}"
            assert s.running()
            assert _plugin_status(s) == [], _plugin_status(s)
            assert not h.tsserver.port_accepts(s.hs_port) and not h.tsserver.port_accepts(s.hs_port_wr)
            have = {int(r[0]) for r in s.sql("SELECT k FROM life WHERE k > 100")}
            assert acked <= have, f"acknowledged writes missing after UNINSTALL: {sorted(acked - have)[:5]}"

            s.exec_sql("INSTALL SONAME 'tablesocket'", db=None)
            assert _plugin_status(s) == [("ACTIVE",)]
            deadline = time.monotonic() + 10
            while not (h.tsserver.port_accepts(s.hs_port) and h.tsserver.port_accepts(s.hs_port_wr)):
                assert time.monotonic() < deadline, "tablesocket ports not listening after INSTALL SONAME"
                time.sleep(0.05)
            with h.hs_open(s.hs_port_wr, "life", "k,v") as c:
                assert c.request(f"1\t+\t2\t{500 + cycle}000000\tafter\n") == b"0\t1\n"
            with h.hs_open(s.hs_port, "life", "k,v") as c:
                assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
            assert s.sql(f"SELECT v FROM life WHERE k = {500 + cycle}000000") == [("after",)]
            is_stop.set()
            is_thread.join(10)
            assert not is_errors and is_reads[0] > 0, (is_errors[:3], is_reads)
        assert "[ERROR]" not in s.log_tail(200), s.log_tail(40)
        took = h.admin_shutdown(s)
        assert took < 10.0


def test_idle_timeout_closes_idle_connections_only(request):
    with h.private_server(request, "idle", ["--tablesocket-idle-timeout=1", "--tablesocket-threads=1"]) as s:
        _life_table(s)
        before = h.status(s)
        t0 = time.monotonic()
        idle = h.hs_open(s.hs_port, "life", "k,v")
        assert idle.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
        t_idle = time.monotonic()
        silent = h.HSConn(s.hs_port)          # never sends anything
        busy = h.hs_open(s.hs_port_wr, "life", "k,v")
        waiting = h.hs_open(s.hs_port_wr, "life", "v")
        sql = h.sql_conn(s, autocommit=False)
        closed_at: dict[str, float] = {}
        try:
            with sql.cursor() as c:
                c.execute("BEGIN")
                c.execute("SELECT * FROM life WHERE k = 2 FOR UPDATE")
            waiting.send("1\t=\t1\t2\t1\t0\tU\tafter wait\n")
            end = time.monotonic() + 3.5
            while time.monotonic() < end:
                assert busy.request("1\t=\t1\t3\n") == b"0\t2\t3\tv3\n", "a busy connection was closed"
                for name, c in (("idle", idle), ("silent", silent)):
                    if name not in closed_at and h.closed_now(c):
                        closed_at[name] = time.monotonic()
                time.sleep(0.1)
            assert "idle" in closed_at and "silent" in closed_at, f"idle connections not closed: {closed_at}"
            idle_for = closed_at["idle"] - t_idle
            silent_for = closed_at["silent"] - t0
            print(f"idle closed after {idle_for:.2f} s, silent after {silent_for:.2f} s")
            assert 0.9 <= idle_for <= 3.0, f"idle connection closed after {idle_for:.2f} s (timeout 1 s)"
            assert 0.9 <= silent_for <= 3.5, f"silent connection closed after {silent_for:.2f} s"
            # The lock-waiting connection was not idle: it gets its answer after COMMIT.
            sql.commit()
            assert waiting.recv_line(timeout=2.0) == b"0\t1\t1\n"
            assert h.status(s)["tablesocket_timeouts"] >= before["tablesocket_timeouts"] + 2
            # ... and is idle from now on.
            t_w = time.monotonic()
            assert h.wait_closed(waiting, 4.0) is not None, "connection not closed after becoming idle"
            assert time.monotonic() - t_w >= 0.9
        finally:
            for c in (idle, silent, busy, waiting):
                c.close()
            sql.close()


def test_shutdown_with_fifty_connected_clients_takes_less_than_ten_seconds(request):
    with h.private_server(request, "shutdown") as s:
        _life_table(s)
        acked: set[int] = set()
        lock = threading.Lock()
        idle = [h.hs_open(s.hs_port if i % 2 else s.hs_port_wr, "life", "k,v") for i in range(20)]
        sql = h.sql_conn(s, autocommit=False)
        with sql.cursor() as c:
            c.execute("BEGIN")
            c.execute("SELECT * FROM life WHERE k = 50 FOR UPDATE")
        waiting = []
        for i in range(5):
            w = h.hs_open(s.hs_port_wr, "life", "v")
            w.send("1\t=\t1\t50\t1\t0\tU\tnever\n")
            waiting.append(w)
        load = _writer_load(s, 12, 13, acked, lock, timeout=15).start()
        try:
            time.sleep(1.0)
            assert not load.errors, load.errors[:3]
            assert h.status(s)["tablesocket_connections"] == 50
            took = h.admin_shutdown(s, timeout=60)
            print(f"shutdown with 50 tablesocket clients: {took:.2f} s; {len(acked)} writes acknowledged")
            assert took < 10.0, f"shutdown took {took:.1f} s"
            t_end = time.monotonic() + 5
            while any(t.is_alive() for t in load.threads) and time.monotonic() < t_end:
                time.sleep(0.05)
            load.stop()
            for c in idle + waiting:
                assert h.wait_closed(c, 2.0) is not None, "a client connection outlived the server"
            # A write the shutdown refused says so (`1 1 shutdown`), not InnoDB's "interrupted"
            # (`1 1 188`, which a helper saw in 4 of 15 shutdowns under pipelined writes).
            assert not [e for e in load.ends.values() if "188" in e], load.ends
        finally:
            load.stop()
            for c in idle + waiting:
                c.close()
            try:
                sql.close()
            except Exception:  # noqa: BLE001
                pass
        s.start()
        have = {int(r[0]) for r in s.sql("SELECT k FROM life WHERE k > 100")}
        assert acked <= have, f"acknowledged writes missing after the shutdown: {sorted(acked - have)[:5]}"
        assert s.sql("SELECT v FROM life WHERE k = 50") == [("v50",)]


def _from(source_ip: str, port: int) -> socket.socket:
    """A TCP connection to the server's loopback port from another loopback address."""
    sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sk.settimeout(5)
    sk.bind((source_ip, 0))
    sk.connect((h.tsserver.LOOPBACK, port))
    return sk


def test_connections_over_max_connections_per_host_are_refused_per_address(request, tmp_path):
    """tablesocket_max_connections_per_host: one address holds at most that many TCP connections
    over every listener (HS read and write, memcached together); the next is told so and closed,
    another address is not affected, a closed connection gives its slot back at once, and
    unix-socket clients are not counted."""
    mc_unix = str(tmp_path / "mc.sock")
    with h.private_server(request, "maxconn-host", ["--tablesocket-max-connections-per-host=4",
                                                    f"--tablesocket-mc-socket={mc_unix}"]) as s:
        assert h.variable(s, "tablesocket_max_connections_per_host") == "4"
        _life_table(s)
        s.load_mc_schema()
        held = [h.hs_open(s.hs_port, "life", "k,v"), h.hs_open(s.hs_port_wr, "life", "k,v"),
                McConn(s.mc_port), McConn(s.mc_port)]
        others: list[socket.socket] = []
        unix: list[McConn] = []
        try:
            held[2].send("version\r\n")
            assert held[2].recv_line().startswith(b"VERSION ")
            total0 = h.status(s)["tablesocket_connections_total"]
            extra = h.HSConn(s.hs_port_wr)
            assert extra.recv_line(timeout=5) == b"1\t1\ttoomanyconnections\n"
            assert h.wait_closed(extra, 2.0) is not None
            extra.close()
            extra = McConn(s.mc_port)
            assert extra.recv_line(timeout=5) == b"ERROR Too many open connections from this address\r\n"
            assert h.wait_closed(extra, 2.0) is not None
            extra.close()
            st = h.status(s)
            assert st["tablesocket_connections_rejected_per_host"] == 2
            assert st["tablesocket_connections_rejected"] == 0
            assert st["tablesocket_connections_total"] == total0, "refused connections are not accepted ones"
            # another address has its own four
            for _ in range(4):
                sk = _from("127.0.0.2", s.hs_port)
                others.append(sk)
                sk.sendall(b"P\t1\ttest\tlife\tPRIMARY\tk,v\n1\t=\t1\t5\n")
                got = b""
                while got.count(b"\n") < 2:
                    chunk = sk.recv(4096)
                    assert chunk, got
                    got += chunk
                assert got == b"0\t1\n0\t2\t5\tv5\n"
            sk = _from("127.0.0.2", s.mc_port)
            assert sk.recv(4096) == b"ERROR Too many open connections from this address\r\n"
            sk.close()
            # unix-socket clients are not counted
            for _ in range(6):
                u = McConn(unix_path=mc_unix)
                unix.append(u)
                u.send("version\r\n")
                assert u.recv_line().startswith(b"VERSION ")
            # a closed connection's slot is free again as soon as the server has seen it go
            held.pop(0).close()
            deadline = time.monotonic() + 5
            while True:
                c = h.HSConn(s.hs_port)
                c.send("P\t1\ttest\tlife\tPRIMARY\tk,v\n")
                if c.recv_line(timeout=5) == b"0\t1\n":
                    break
                c.close()
                assert time.monotonic() < deadline, "the closed connection's slot was not given back"
                time.sleep(0.05)
            held.append(c)
            assert c.request("1\t=\t1\t5\n") == b"0\t2\t5\tv5\n"
            for c in held:  # the connections held all along were not disturbed
                if isinstance(c, McConn):
                    c.send("version\r\n")
                    assert c.recv_line().startswith(b"VERSION ")
        finally:
            for c in held + unix:
                c.close()
            for sk in others:
                sk.close()


def test_a_half_closed_connection_gets_every_reply_then_is_closed(srv):
    """The client sends its requests and shuts down its sending side (EOF): everything it asked for
    is still executed and answered, then the server closes."""
    c = h.hs_open(srv.hs_port_wr, "rob_ins", "k,v")
    assert c.request("P\t2\ttest\trob\tPRIMARY\tk,v\n") == b"0\t1\n"
    reqs = b"".join(f"1\t+\t2\t{500000 + i}\thalf{i}\n2\t=\t1\t{i % 8 + 2}\n".encode() for i in range(200))
    c.send(reqs)
    c.sock.shutdown(socket.SHUT_WR)
    replies = c.recv_lines(400, timeout=10)
    assert replies[0::2] == [b"0\t1\n"] * 200
    assert replies[1::2] == [f"0\t2\t{i % 8 + 2}\tv{i % 8 + 2}\n".encode() for i in range(200)]
    assert h.wait_closed(c, 3.0) is not None, "the server did not close a half-closed connection"
    c.close()
    assert srv.sql("SELECT COUNT(*) FROM rob_ins WHERE k BETWEEN 500000 AND 500199") == [("200",)]


def test_connections_are_spread_evenly_over_the_workers_that_accept_them(request):
    """Every worker polls the listeners and accepts; it keeps a connection only while no other
    worker has fewer, so clients connecting one after another end up spread evenly."""
    with h.private_server(request, "spread", ["--tablesocket-threads=2"]) as s:
        assert h.variable(s, "tablesocket_threads") == "2"
        conns = []
        try:
            for i in range(20):
                c = h.HSConn(s.hs_port if i % 2 else s.hs_port_wr)
                assert c.request("P\t1\ttest\tnone\tPRIMARY\tk\n") == b"1\t1\topen_table\n"
                conns.append(c)
            per_worker = dict(s.sql("SELECT WORKER, COUNT(*) FROM information_schema.TABLESOCKET_CONNECTIONS "
                                    "GROUP BY WORKER", db=None))
            counts = sorted(int(n) for n in per_worker.values())
            assert len(counts) == 2 and sum(counts) == 20 and counts[1] - counts[0] <= 1, per_worker
        finally:
            for c in conns:
                c.close()


def test_connections_over_tablesocket_max_connections_are_refused_with_an_error(request):
    with h.private_server(request, "maxconn", ["--tablesocket-max-connections=50"]) as s:
        _life_table(s)
        conns = [h.hs_open(s.hs_port if i % 2 else s.hs_port_wr, "life", "k,v") for i in range(50)]
        try:
            for port in (s.hs_port, s.hs_port_wr):
                extra = h.HSConn(port)
                assert extra.recv_line(timeout=5) == b"1\t1\ttoomanyconnections\n"
                assert h.wait_closed(extra, 2.0) is not None
                extra.close()
            assert h.status(s)["tablesocket_connections_rejected"] == 2
            for c in conns[:10]:
                c.close()
            deadline = time.monotonic() + 5
            while h.status(s)["tablesocket_connections"] > 40:
                assert time.monotonic() < deadline, "closed connections still counted"
                time.sleep(0.05)
            more = [h.hs_open(s.hs_port, "life", "k,v") for _ in range(10)]
            conns += more
            for c in conns[10:]:
                assert c.request("1\t=\t1\t5\n") == b"0\t2\t5\tv5\n"
        finally:
            for c in conns:
                c.close()


def test_kill_of_a_tablesocket_worker_thread_from_sql_does_not_stop_it(request):
    with h.private_server(request, "kill") as s:
        _life_table(s)
        ids = [r[0] for r in s.sql("SELECT id FROM information_schema.processlist "
                                   "WHERE state LIKE 'tablesocket worker%'", db=None)]
        # per worker (2): the session that owns its tables, and the two its batches alternate on
        assert len(ids) == 6, ids
        clients = [h.hs_open(s.hs_port_wr if i % 2 else s.hs_port, "life", "k,v") for i in range(4)]
        try:
            for stmt in ("KILL QUERY", "KILL", "KILL HARD", "KILL CONNECTION"):
                for tid in ids:
                    try:
                        s.exec_sql(f"{stmt} {tid}", db=None)
                    except Exception as e:  # noqa: BLE001  (refusing is fine too)
                        print(f"{stmt} {tid}: {e}")
                time.sleep(0.2)
                for i, c in enumerate(clients):
                    assert c.request("1\t=\t1\t3\n", timeout=5) == b"0\t2\t3\tv3\n", f"after {stmt}"
                with h.hs_open(s.hs_port_wr, "life", "k,v") as c:
                    assert c.request(f"1\t=\t1\t4\t1\t0\tU\t4\tafter {stmt}\n", timeout=5) == b"0\t1\t1\n"
            assert s.running()
            left = [r[0] for r in s.sql("SELECT id FROM information_schema.processlist "
                                        "WHERE state LIKE 'tablesocket worker%'", db=None)]
            assert sorted(left) == sorted(ids)
        finally:
            for c in clients:
                c.close()


def test_buffers_of_all_connections_together_are_bounded_by_max_buffer_memory(request):
    """40 clients each send 900 KiB of a request line and stop (just under the per-connection
    limit, 1 MiB). With --tablesocket-max-buffer-memory=16M the clients whose buffers push the total
    over 16 MiB are closed; ordinary clients keep working, and a big request that completes later
    still succeeds once the others are gone."""
    with h.private_server(request, "bufmem", ["--tablesocket-max-buffer-memory=16M",
                                              "--tablesocket-threads=1"]) as s:
        _life_table(s)
        small = h.hs_open(s.hs_port, "life", "k,v")
        hogs = []
        chunk = b"1\t=\t1\t" + b"x" * (900 << 10)   # no newline: an unfinished request
        for _ in range(40):
            hog = h.connect_raw(s.hs_port)
            hog.sendall(chunk)
            hogs.append(hog)
        deadline = time.monotonic() + 10
        while h.status(s)["tablesocket_buffer_memory_closes"] < 20:
            assert time.monotonic() < deadline, h.status(s)
            time.sleep(0.05)
        closes = h.status(s)["tablesocket_buffer_memory_closes"]
        # each surviving hog holds a 1-2 MiB input buffer: what survives fits the limit (plus the
        # connection that crossed it)
        survivors = 40 - closes
        assert survivors * (900 << 10) <= (16 << 20) + (2 << 20), (survivors, closes)
        assert small.request("1\t=\t1\t5\n") == b"0\t2\t5\tv5\n"
        for hog in hogs:
            hog.close()
        deadline = time.monotonic() + 5
        while h.status(s)["tablesocket_connections"] > 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        big = h.hs_open(s.hs_port, "life", "k,v")
        key = "y" * (900 << 10)
        assert big.request(f"1\t=\t1\t{key}\n", timeout=10) == b"0\t2\n"
        big.close()
        small.close()


@pytest.mark.parametrize("how", ["sessions-created-read-only", "set-later"])
def test_transaction_read_only_refuses_writes_and_does_not_crash(request, how):
    """The server's default transaction access mode READ ONLY (--transaction-read-only, or SET
    GLOBAL tx_read_only before the plugin creates its sessions: here by INSTALL SONAME) made every
    write kill mariadbd (InnoDB wrote in a read-only transaction). Writes are refused, as a new SQL
    session's are, for as long as it is ON, whenever it was set."""
    with h.private_server(request, f"tx-ro-{how}") as s:
        conn = h.sql_conn(s)
        try:
            with conn.cursor() as c:
                c.execute("SET SESSION tx_read_only = 0")
                c.execute("CREATE TABLE txro (id int primary key, v int) ENGINE=InnoDB")
                c.execute("INSERT INTO txro VALUES (1, 1)")
                c.execute("SET GLOBAL tx_read_only = 1")
                if how == "sessions-created-read-only":
                    c.execute("UNINSTALL SONAME 'tablesocket'")
                    c.execute("INSTALL SONAME 'tablesocket'")
        finally:
            conn.close()
        from tsserver import port_accepts
        deadline = time.monotonic() + 10
        while not port_accepts(s.hs_port_wr) and time.monotonic() < deadline:
            time.sleep(0.1)
        with h.hs_open(s.hs_port_wr, "txro", "id,v") as w:
            assert w.request("1\t+\t2\t2\t2\n") == b"1\t1\tread_only\n"
            assert w.request("1\t=\t1\t1\t1\t0\tD\n") == b"1\t1\tread_only\n"
            assert w.request("1\t=\t1\t1\n") == b"0\t2\t1\t1\n"  # reads are served
        c = McConn(s.mc_port)
        try:
            c.request("set k 0 0 1\r\nx\r\n", b"SERVER_ERROR server is read-only\r\n")
        finally:
            c.close()
        s.exec_sql("SET GLOBAL tx_read_only = 0", db=None)
        with h.hs_open(s.hs_port_wr, "txro", "id,v") as w:
            assert w.request("1\t+\t2\t2\t2\n") == b"0\t1\n"
        assert s.running()
        assert s.sql("SELECT id, v FROM txro ORDER BY id") == [("1", "1"), ("2", "2")]


def test_innodb_rollback_on_timeout_is_warned_about_once(request):
    """With innodb_rollback_on_timeout a write that meets a locked row rolls back its whole batch
    (InnoDB rolls back the transaction, not the statement): the log says so, once."""
    with h.private_server(request, "rollback-on-timeout", ["--innodb-rollback-on-timeout=1",
                                                           "--tablesocket-threads=2"]) as s:
        text = Path(s.log_path).read_text(errors="replace")
        assert text.count("tablesocket: innodb_rollback_on_timeout is ON") == 1, text[-2000:]
    with h.private_server(request, "rollback-on-timeout-off") as s:
        assert "innodb_rollback_on_timeout is ON" not in Path(s.log_path).read_text(errors="replace")


def _mc_set_burst(s, prefix: str, n: int, size: int) -> None:
    """n memcached sets of size-byte values (keys prefix0..), pipelined in one write (one batch):
    every one is STORED."""
    c = McConn(s.mc_port)
    try:
        c.send(b"".join(b"set %s%d 0 0 %d\r\n%s\r\n" % (prefix.encode(), i, size, b"m" * size) for i in range(n)))
        c.expect(b"STORED\r\n" * n, timeout=30)
    finally:
        c.close()


def test_writes_that_fit_max_binlog_cache_size_alone_are_not_failed_by_their_batch(request):
    """A batch's rows share one binary log cache: small writes used to fail with 'Multi-statement
    transaction required more than max_binlog_cache_size' when their batch, not they, passed it.
    Such a write runs again in the next batch; one too big on its own still fails, with SQL's
    message."""
    with h.private_server(request, "binlog-cache", ["--log-bin=binlog", "--server-id=1",
                                                    "--max-binlog-cache-size=16384",
                                                    "--max-binlog-stmt-cache-size=8192",
                                                    "--binlog-stmt-cache-size=4096",
                                                    "--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE bc (id int primary key, v varchar(3000)) ENGINE=InnoDB")
        with h.hs_open(s.hs_port_wr, "bc", "id,v") as w:
            burst = "".join(f"1\t+\t2\t{i}\t{'x' * 2000}\n" for i in range(1, 41))
            assert w.request(burst, timeout=30) == b"0\t1\n" * 40
            big = w.request(f"1\t+\t2\t99\t{'y' * 3000}\n".encode() * 1, timeout=10)
            assert big == b"0\t1\n"  # 3 KB alone fits
        from tsserver import hs_line
        with h.hs_open(s.hs_port_wr, "bc", "v") as w:
            # Eight rows in one request (one statement) need more than 16 KB: SQL's error.
            reply = w.request(hs_line(1, ">=", 1, "1", 8, 0, "U", "z" * 2500), timeout=10)
            assert reply.startswith(b"1\t1\t") and b"max_binlog_cache_size" in reply, reply
        s.exec_sql("CREATE TABLE bc2 (id int primary key, v blob) ENGINE=MyISAM")
        s.executemany("INSERT INTO bc2 VALUES (%s, REPEAT('x', 1000))", [(i,) for i in range(20)])
        with h.hs_open(s.hs_port_wr, "bc2", "v") as w:
            # A non-transactional table's statement over max_binlog_stmt_cache_size: SQL's message
            # (was "1 1 161", the handler's number).
            reply = w.request(hs_line(1, ">=", 1, "0", 20, 0, "U", "w" * 1000), timeout=10)
            assert reply.startswith(b"1\t1\t") and b"max_binlog_stmt_cache_size" in reply, reply
        assert s.sql("SELECT COUNT(*), SUM(LENGTH(v)) FROM bc") == [("41", str(40 * 2000 + 3000))]
        _mc_set_burst(s, "k", 12, 3000)


def test_writes_are_not_failed_by_their_batch_when_the_binlog_cache_cannot_spill_to_tmpdir(request):
    """A batch's rows share one binary log cache, which spills past binlog_cache_size into a file
    in tmpdir: with tmpdir full (a helper filled a tmpfs) or gone, 105 of 200 small pipelined
    inserts failed with "Error writing file '<tmpdir>/#sql/fd=..' (Errcode: 28)" because of the
    rows before them in their batch, where each alone (and SQL's autocommit INSERT) succeeds.
    Such a write runs again in the next batch; one too big for the cache on its own still fails,
    with the server's message, and nothing else is lost."""
    with h.private_server(request, "binlog-tmpdir", ["--log-bin=binlog", "--server-id=1",
                                                     "--binlog-cache-size=4096",
                                                     "--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE bt (id int primary key, v mediumtext) ENGINE=InnoDB")
        shutil.rmtree(s.tmpdir)  # the cache's temporary files can no longer be created
        try:
            with h.hs_open(s.hs_port_wr, "bt", "id,v") as w:
                burst = "".join(f"1\t+\t2\t{i}\t{'x' * 300}\n" for i in range(1, 201))
                assert w.request(burst, timeout=30) == b"0\t1\n" * 200
                big = w.request(f"1\t+\t2\t999\t{'y' * 60000}\n", timeout=10)
                assert big.startswith(b"1\t1\t") and b"tmp" in big, big
                assert w.request("1\t+\t2\t201\tafter\n", timeout=10) == b"0\t1\n"
            _mc_set_burst(s, "t", 60, 300)
        finally:
            s.tmpdir.mkdir(parents=True, exist_ok=True)
        assert s.sql("SELECT COUNT(*), SUM(id = 999) FROM bt") == [("201", "0")]
        assert s.sql("SELECT COUNT(*) FROM kv WHERE k LIKE 't%'") == [("60",)]


def test_shared_write_statements_stay_within_the_binlog_cache_memory(request):
    """With the binary log on, consecutive one-row writes share a statement whose rows reach the
    batch's binary log cache only when it ends: all of them would be undone if writing them
    failed, so they share only while they fit the cache's memory (binlog_cache_size), where
    nothing can fail; past it each request is its own statement again, and one that cannot
    spill into tmpdir (gone here) runs again in the next batch. 300 pipelined inserts and 300
    updates of ~300-byte rows through a 16 KB cache: every one succeeds, each exactly once."""
    with h.private_server(request, "binlog-share", ["--log-bin=binlog", "--server-id=1",
                                                    "--binlog-cache-size=16384",
                                                    "--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE bs (id int primary key, v varchar(100) character set latin1, n int) ENGINE=InnoDB")
        start = s.sql("SHOW MASTER STATUS", db=None)[0]
        shutil.rmtree(s.tmpdir)  # the cache's temporary files can no longer be created
        try:
            with h.hs_open(s.hs_port_wr, "bs", "id,v,n") as w:
                burst = "".join(f"1\t+\t3\t{i}\t{chr(97 + i % 26) * 95}\t{i}\n" for i in range(1, 301))
                assert w.request(burst, timeout=30) == b"0\t1\n" * 300
                upd = "".join(f"1\t=\t1\t{i}\t1\t0\tU\t{i}\t{'u' * 90}\t{-i}\n" for i in range(1, 301))
                assert w.request(upd, timeout=30) == b"0\t1\t1\n" * 300
        finally:
            s.tmpdir.mkdir(parents=True, exist_ok=True)
        assert s.sql("SELECT COUNT(*), SUM(n), SUM(v = REPEAT('u', 90)) FROM bs") == [("300", str(-300 * 301 // 2), "300")]
        events = s.sql(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}", db=None)
        maps = sum(1 for e in events if e[2] == "Table_map")
        assert maps < 600, f"{maps} table maps for 600 one-row writes: no statement was shared"


def _container_over_copy_of_kv(s, name: str) -> None:
    """A memcached container `name` over a new table test.<name> shaped as test.kv."""
    s.exec_sql(f"CREATE TABLE test.{name} LIKE test.kv")
    s.exec_sql("REPLACE INTO innodb_memcache.containers VALUES "
               f"('{name}', 'test', '{name}', 'k', 'v', 'flags', 'cas', 'exp', 'PRIMARY')")
    time.sleep(1.5)  # the containers are reread once a second


def _touch_hot_item(s, stop: threading.Event) -> None:
    """Pipelined touches of one item of the default container until stop: they keep the
    worker's batches (their transaction) open across another client's TRUNCATE."""
    c = McConn(s.mc_port)
    c.request("set hot 0 0 1\r\nx\r\n", b"STORED\r\n")
    while not stop.is_set():
        c.send(b"gat 0 hot\r\n" * 50)
        for _ in range(50):
            c.recv_until(b"END\r\n", timeout=30)


def _truncate_under(s, threads: list, stop: threading.Event, statements: list[str], rounds: int) -> None:
    """Starts the threads, runs the statements `rounds` times, 30 ms apart, then stops them."""
    for t in threads:
        t.start()
    try:
        for _ in range(rounds):
            for sql in statements:
                s.exec_sql(sql)
            time.sleep(0.03)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def test_gets_while_the_container_table_is_truncated_answer_rows_or_misses(request):
    """TRUNCATE recreates the table; a batch whose transaction began before it (kept open by other
    clients' writes, here pipelined touches of another container) cannot use the new table's
    indexes: InnoDB's "table definition has changed, please retry transaction". Gets were
    answered `SERVER_ERROR storage engine error 159` (a helper: 10 in 100 truncates); they now run
    again in a later transaction and get the row or a miss."""
    with h.private_server(request, "truncate-gets", ["--tablesocket-threads=1"]) as s:
        _container_over_copy_of_kv(s, "t159")
        stop = threading.Event()
        bad: list[bytes] = []

        def reader():
            c = McConn(s.mc_port)
            c.request("get @@t159\r\n", b"VALUE @@t159 0 9\r\ntest/t159\r\nEND\r\n")
            while not stop.is_set():
                c.send(b"mg a v\r\nmn\r\n")
                got = b""
                while not got.endswith(b"MN\r\n"):
                    got += c.recv_until(b"MN\r\n", timeout=30)
                if b"ERROR" in got:
                    bad.append(got)

        threads = [threading.Thread(target=_touch_hot_item, args=(s, stop), daemon=True) for _ in range(4)]
        threads += [threading.Thread(target=reader, daemon=True) for _ in range(3)]
        _truncate_under(s, threads, stop, ["TRUNCATE TABLE test.t159",
                                           "REPLACE INTO test.t159 VALUES ('a', 'x', 0, 0, 0)"], 60)
        assert not bad, bad[:3]


def test_writes_while_their_tables_are_truncated_succeed(request):
    """The writes' side of the test above: memcached set/add/incr/delete on a container whose
    table is truncated again and again, and HandlerSocket insert, update and delete of a table
    with a secondary unique key, truncated too, while pipelined touches of another container keep
    batches open across each TRUNCATE. Every write succeeds (a request the TRUNCATE got between
    finds its row gone or not yet there, which is no error); none is answered with an error."""
    with h.private_server(request, "truncate-writes", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE test.hw (id int primary key, v int, unique key(v)) ENGINE=InnoDB")
        _container_over_copy_of_kv(s, "tw")
        stop = threading.Event()
        bad: list[bytes] = []

        def mc_writer(n):
            c = McConn(s.mc_port)
            c.request("get @@tw\r\n", b"VALUE @@tw 0 7\r\ntest/tw\r\nEND\r\n")
            i = 0
            while not stop.is_set():
                i += 1
                c.send(f"set k{n}_{i} 0 0 1\r\nx\r\nadd a{n}_{i} 0 0 1\r\ny\r\nincr a 1\r\n"
                       f"delete k{n}_{i - 1}\r\nmn\r\n".encode())
                got = b""
                while not got.endswith(b"MN\r\n"):
                    got += c.recv_until(b"MN\r\n", timeout=30)
                if b"ERROR" in got:
                    bad.append(got)

        def hs_writer(n):
            w = h.hs_open(s.hs_port_wr, "hw", "id,v")
            i = 0
            while not stop.is_set():
                i += 1
                k = n * 10000000 + i
                got = w.request(f"1\t+\t2\t{k}\t{k}\n1\t=\t1\t{k}\t1\t0\tU\t{k}\t{k + 1}\n"
                                f"1\t=\t1\t{k}\t1\t0\tD\n", timeout=30)
                if any(not line.startswith(b"0\t1") for line in got.splitlines()):
                    bad.append(got)

        threads = [threading.Thread(target=_touch_hot_item, args=(s, stop), daemon=True) for _ in range(3)]
        threads += [threading.Thread(target=mc_writer, args=(n,), daemon=True) for n in range(3)]
        threads += [threading.Thread(target=hs_writer, args=(n,), daemon=True) for n in range(3)]
        _truncate_under(s, threads, stop, ["TRUNCATE TABLE test.tw", "TRUNCATE TABLE test.hw",
                                           "REPLACE INTO test.tw VALUES ('a', '1', 0, 0, 0)"], 40)
        assert not bad, bad[:5]


@pytest.mark.parametrize("lock,unlock", [
    ("LOCK TABLES rl READ", "UNLOCK TABLES"),
    ("FLUSH TABLES rl FOR EXPORT", "UNLOCK TABLES"),
    ("FLUSH TABLES rl WITH READ LOCK", "UNLOCK TABLES"),
    ("FLUSH TABLES WITH READ LOCK", "UNLOCK TABLES"),
])
def test_read_locks_from_sql_let_reads_through_and_hold_writes(request, lock, unlock):
    """A table written through a worker holds a write metadata lock; under an SQL read lock the
    worker could not reopen it, so every read of it waited (or timed out) while SQL's SELECTs went
    on (found by a helper). Reads now go through as SQL's do; writes wait until the lock is gone."""
    with h.private_server(request, "read-locks", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE rl (id int primary key, v int) ENGINE=InnoDB")
        s.exec_sql("INSERT INTO rl VALUES (1, 1), (2, 2)")
        s.exec_sql("INSERT INTO test.kv (k, v) VALUES ('rlkey', 'before')")
        w = h.hs_open(s.hs_port_wr, "rl", "id,v")
        r = h.hs_open(s.hs_port, "rl", "id,v")
        c = McConn(s.mc_port)
        locker = h.sql_conn(s)
        try:
            assert w.request("1\t=\t1\t1\t1\t0\tU\t1\t10\n") == b"0\t1\t1\n"  # opened and written
            c.request("set rlkey2 0 0 1\r\nx\r\n", b"STORED\r\n")
            with locker.cursor() as cur:
                cur.execute(lock)
            t0 = time.monotonic()
            assert r.request("1\t=\t1\t1\n", timeout=3) == b"0\t2\t1\t10\n"
            assert w.request("1\t=\t1\t2\n", timeout=3) == b"0\t2\t2\t2\n"
            c.request("get rlkey\r\n", b"VALUE rlkey 0 6\r\nbefore\r\nEND\r\n", timeout=3)
            assert time.monotonic() - t0 < 2.0
            w.send("1\t=\t1\t2\t1\t0\tU\t2\t20\n")  # a write waits for the lock
            assert not w.recv_all(0.5)
            with locker.cursor() as cur:
                cur.execute(unlock)
            assert w.recv_line(timeout=5) == b"0\t1\t1\n"
            assert r.request("1\t=\t1\t2\n") == b"0\t2\t2\t20\n"
        finally:
            w.close()
            r.close()
            c.close()
            locker.close()
        assert s.sql("SELECT id, v FROM rl ORDER BY id") == [("1", "10"), ("2", "20")]


def test_a_waiting_lock_tables_read_is_not_starved_by_two_workers(request):
    """LOCK TABLES t READ does not keep new write metadata locks out while it waits (a waiting DDL
    does); it is granted at a moment no one holds one. Two workers reopening the table for their
    writers in turn never left such a moment: the LOCK waited 8-24 s and every tablesocket client of
    the table, readers too, with it (found by a helper). A table given up for a waiting lock now
    stays closed to writes for a moment (reads reopen it for reading)."""
    with h.private_server(request, "lock-read-starve", ["--tablesocket-threads=2", "--log-bin=binlog", "--server-id=1",
                                                         "--sync-binlog=1", "--innodb-flush-log-at-trx-commit=1"]) as s:
        s.exec_sql("CREATE TABLE lr (id int primary key, n bigint not null) ENGINE=InnoDB")
        s.exec_sql("INSERT INTO lr VALUES (1,0),(2,0),(3,0),(4,0)")
        stop = threading.Event()
        errors: list = []
        worst = {"lock": 0.0, "read": 0.0}

        def writer(i):
            try:
                c = h.hs_open(s.hs_port_wr, "lr", "n", timeout=30)
                while not stop.is_set():
                    if c.request(f"1\t=\t1\t{i}\t1\t0\t+\t1\n", timeout=30) != b"0\t1\t1\n":
                        errors.append(i)
                c.close()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        def reader():
            try:
                c = h.hs_open(s.hs_port, "lr", "id,n", timeout=30)
                while not stop.is_set():
                    t0 = time.monotonic()
                    if not c.request("1\t>=\t1\t0\t10\n", timeout=30).startswith(b"0\t2"):
                        errors.append("read")
                    worst["read"] = max(worst["read"], time.monotonic() - t0)
                    time.sleep(0.005)
                c.close()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        def sql_writer():
            conn = h.sql_conn(s)
            try:
                while not stop.is_set():
                    with conn.cursor() as cur:
                        cur.execute("UPDATE lr SET n = n + 1 WHERE id = 4")
                    time.sleep(0.002)
            finally:
                conn.close()

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(1, 4)]
        threads += [threading.Thread(target=reader), threading.Thread(target=sql_writer)]
        for th in threads:
            th.start()
        locker = h.sql_conn(s)
        try:
            time.sleep(0.5)
            for _ in range(12):
                with locker.cursor() as cur:
                    t0 = time.monotonic()
                    cur.execute("LOCK TABLES lr READ")
                    worst["lock"] = max(worst["lock"], time.monotonic() - t0)
                    time.sleep(0.5)
                    cur.execute("UNLOCK TABLES")
                time.sleep(0.3)
        finally:
            locker.close()
            stop.set()
            for th in threads:
                th.join(60)
        assert not errors, errors[:5]
        assert worst["lock"] < 3.0 and worst["read"] < 3.0, worst


@pytest.mark.parametrize("mc_idle", [0, 1], ids=["mc-never", "mc-1s"])
def test_memcached_connections_have_their_own_idle_timeout_never_by_default(request, mc_idle):
    """memcached closes no idle connection, and its clients' pools reuse one idle for hours
    without checking it (gomemcache's next request then failed with EOF after 10 idle minutes):
    tablesocket_mc_idle_timeout, 0 by default, is theirs; tablesocket_idle_timeout stays the
    HandlerSocket ports' and, on every port, the longest a request may take to arrive. Every
    TCP connection has keepalive (inherited from its listener), so a vanished peer is found."""
    args = ["--tablesocket-idle-timeout=1", "--tablesocket-threads=1"]
    if mc_idle:
        args.append(f"--tablesocket-mc-idle-timeout={mc_idle}")
    with h.private_server(request, f"mcidle{mc_idle}", args) as s:
        _life_table(s)
        assert h.variable(s, "tablesocket_mc_idle_timeout") == str(mc_idle)
        mc = McConn(s.mc_port)
        mc.request(b"set idle:k 0 0 2\r\nv1\r\n", b"STORED\r\n")
        silent = McConn(s.mc_port)  # connected, never says anything
        partial = h.HSConn(s.mc_port)
        partial.send(b"get idle:")  # a request that never completes
        hs = h.hs_open(s.hs_port, "life", "k,v")
        try:
            ss = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{s.mc_port} )"],
                                capture_output=True, text=True, timeout=10).stdout
            assert ss.count("keepalive") >= 3, ss
            time.sleep(2.5)
            assert h.closed_now(hs), "an idle HandlerSocket connection was not closed"
            assert h.closed_now(partial), "a request still arriving after the idle timeout was not closed"
            if mc_idle:
                assert h.closed_now(mc) and h.closed_now(silent)
            else:
                assert not h.closed_now(silent)
                mc.request(b"get idle:k\r\n", b"VALUE idle:k 0 2\r\nv1\r\nEND\r\n")
        finally:
            for c in (mc, silent, partial, hs):
                c.close()


def test_a_request_trickling_in_is_closed_after_the_idle_timeout(request):
    """A byte now and then keeps a connection from being idle, but a request still incomplete an
    idle timeout after its first byte closes it (one slow client per connection slot would
    otherwise hold every slot forever). A client that keeps completing requests, each packet
    ending in the middle of the next one, is served on."""
    with h.private_server(request, "trickle", ["--tablesocket-idle-timeout=1", "--tablesocket-threads=1"]) as s:
        _life_table(s)
        hs_trickle = h.hs_open(s.hs_port, "life", "k,v")
        mc_trickle = h.HSConn(s.mc_port)
        bin_trickle = h.HSConn(s.mc_port)
        skipped = h.HSConn(s.mc_port)  # the data of a store refused as too large, skipped as it comes
        skipped.sock.sendall(b"set big 0 0 2000000\r\n")
        assert skipped.recv_line() == b"SERVER_ERROR object too large for cache\r\n"
        steady = h.hs_open(s.hs_port, "life", "k,v")
        before = h.status(s)
        t0 = time.monotonic()
        pieces = {hs_trickle: b"1\t=\t1\t1\t1\t0" * 10, mc_trickle: b"get " + b"k" * 60,
                  bin_trickle: b"\x80\x00\x00\x05" + b"\x00" * 40, skipped: b"x" * 60}
        closed_at: dict[str, float] = {}
        names = {hs_trickle: "hs", mc_trickle: "mc", bin_trickle: "binary", skipped: "skipped data"}
        req = b"1\t=\t1\t2\n"
        i = 0
        while time.monotonic() - t0 < 4.0 and len(closed_at) < len(names):
            for c, data in pieces.items():
                if names[c] in closed_at:
                    continue
                try:
                    c.sock.sendall(data[i:i + 1])
                except OSError:
                    closed_at[names[c]] = time.monotonic() - t0
                    continue
                if h.closed_now(c):
                    closed_at[names[c]] = time.monotonic() - t0
            # the steady client: each send completes the request begun by the last one and begins another
            steady.sock.sendall(req[4:] + req[:4] if i else req + req[:4])
            assert steady.recv_line(timeout=2.0) == b"0\t2\t2\tv2\n", "a client completing its requests was cut off"
            i += 1
            time.sleep(0.2)
        print(f"closed after (s): {closed_at}")
        assert set(closed_at) == set(names.values()), f"trickling requests not closed: {closed_at}"
        assert all(0.9 <= t <= 3.5 for t in closed_at.values()), closed_at
        assert h.status(s)["tablesocket_timeouts"] >= before["tablesocket_timeouts"] + 4
        steady.sock.sendall(req[4:])
        assert steady.recv_line(timeout=2.0) == b"0\t2\t2\tv2\n"
        for c in (hs_trickle, mc_trickle, bin_trickle, skipped, steady):
            c.close()


def test_reads_a_reset_connection_sent_are_skipped_and_its_writes_still_run(request):
    """Once the peer has reset the connection nobody hears the answers: the reads it had sent are
    skipped rather than run for minutes at the other clients' expense; its writes still run."""
    with h.private_server(request, "resetreads", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE wide (k int primary key, v varchar(32)) ENGINE=InnoDB")
        s.executemany("INSERT INTO wide VALUES (%s, %s)", [(k, f"v{k}") for k in range(1, 2001)])
        scans = 3000
        before = h.status(s)["tablesocket_rows_read"]
        c = h.hs_open(s.hs_port_wr, "wide", "k,v")
        c.sock.sendall(b"1\t>=\t1\t0\t1000\t0\n" * scans + b"1\t+\t2\t999999\tafter reset\n")
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.sock.close()  # a reset, with the replies unread
        deadline = time.monotonic() + 30
        while not s.sql("SELECT v FROM wide WHERE k = 999999"):
            assert time.monotonic() < deadline, "the write sent before the reset never ran"
            time.sleep(0.05)
        read = h.status(s)["tablesocket_rows_read"] - before
        print(f"rows read for the reset connection: {read} of {scans * 1000}")
        assert read < scans * 1000 // 2, f"the reset connection's scans ran anyway: {read} rows read"
        with h.hs_open(s.hs_port, "wide", "k,v") as probe:
            assert probe.request("1\t=\t1\t999999\n") == b"0\t2\t999999\tafter reset\n"


def test_one_clients_pipelined_scans_hold_the_others_up_about_one_turn(request):
    """A client pipelining 1000-row scans gets one turn of tablesocket_max_turn_rows rows, then the
    worker's other connections go: a lookup sent behind 100 queued scans is answered after a few
    of them, not after a whole batch of them."""
    with h.private_server(request, "turns", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE wide (k int primary key, v varchar(32)) ENGINE=InnoDB")
        s.executemany("INSERT INTO wide VALUES (%s, %s)", [(k, f"v{k}") for k in range(1, 2001)])
        assert h.variable(s, "tablesocket_max_turn_rows") == "1000"
        heavy = h.hs_open(s.hs_port, "wide", "k,v")
        probe = h.hs_open(s.hs_port, "wide", "k,v")
        def answered() -> int:
            """Scans answered so far (replies to reads go out at once): what has arrived, read now."""
            heavy.sock.setblocking(False)
            try:
                while chunk := heavy.sock.recv(1 << 20):
                    heavy.buf += chunk
            except BlockingIOError:
                pass
            heavy.sock.setblocking(True)
            return heavy.buf.count(b"\n")

        heavy.sock.sendall(b"1\t>=\t1\t0\t1000\t0\n" * 100)
        time.sleep(0.002)
        # Counted from the probe's sending, not the scans': a test thread descheduled for a while
        # before sending it (a busy machine) must not count the scans run meanwhile.
        at_send = answered()
        probe.sock.sendall(b"1\t=\t1\t7\n")
        assert probe.recv_line(timeout=10.0) == b"0\t2\t7\tv7\n"
        at_probe = answered()
        print(f"scans answered when the probe was sent: {at_send}, answered: {at_probe} of 100")
        assert at_send < 100, "the scans were all answered before the probe was sent: nothing measured"
        assert at_probe - at_send < 40, f"the probe waited for {at_probe - at_send} of the other client's scans"
        got = heavy.recv_lines(100, timeout=30.0)
        assert len(got) == 100 and all(line.startswith(b"0\t2\t1\tv1\t2\tv2\t") for line in got)
        heavy.close()
        probe.close()


def test_open_indexes_count_against_the_buffer_memory_limit(request):
    """P copies its column list: more than 4096 columns (the most a table has) is refused, and a
    connection whose open indexes grow past tablesocket_max_buffer_memory is closed like one
    whose buffers do, instead of holding gigabytes."""
    with h.private_server(request, "idxmem", ["--tablesocket-threads=1",
                                               "--tablesocket-max-buffer-memory=16777216"]) as s:
        _life_table(s)
        c = h.HSConn(s.hs_port)
        assert c.request("P\t1\ttest\tlife\tPRIMARY\t" + ",".join(["k"] * 4097) + "\n") == b"2\t1\ttoomanycolumns\n"
        assert c.request("P\t1\ttest\tlife\tPRIMARY\tk\t" + ",".join(["v"] * 4097) + "\n") == b"2\t1\ttoomanycolumns\n"
        assert c.request("1\t=\t1\t1\n") == b"2\t1\tstmtnum\n"  # the refused open left nothing behind
        wide = "P\t{}\ttest\tlife\tPRIMARY\t" + ",".join(["k", "v"] * 2048) + "\n"
        assert c.request(wide.format(1)) == b"0\t1\n"
        reply = c.request("1\t=\t1\t3\n")
        assert reply == b"0\t4096\t" + b"\t".join([b"3", b"v3"] * 2048) + b"\n"
        before = h.status(s)["tablesocket_buffer_memory_closes"]
        opened = 1
        closed = False
        for i in range(2, 400):
            try:
                c.sock.sendall(wide.format(i).encode())
                if c.recv_line(timeout=5.0) != b"0\t1\n":
                    break
            except (OSError, EOFError):
                closed = True
                break
            opened += 1
        closed = closed or h.closed_now(c) or h.wait_closed(c, 2.0) is not None
        print(f"indexes open when the connection was closed: {opened}")
        assert closed and opened < 300, f"{opened} wide indexes open and the connection still up"
        assert h.status(s)["tablesocket_buffer_memory_closes"] == before + 1
        with h.hs_open(s.hs_port, "life", "k,v") as other:
            assert other.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
        c.close()


def test_a_client_reading_its_replies_slowly_is_not_idle(request):
    """Replies the kernel holds for a client that reads them slowly (no EPOLLOUT, no send for
    longer than the idle timeout) are traffic: the connection is not closed as idle while the
    socket's send queue keeps shrinking, and every reply arrives."""
    with h.private_server(request, "slowreader", ["--tablesocket-idle-timeout=1", "--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE wide (k int primary key, v varchar(200)) ENGINE=InnoDB")
        s.executemany("INSERT INTO wide VALUES (%s, %s)", [(k, f"{k:0100d}") for k in range(1, 1001)])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # the replies wait on the server's side
        sock.settimeout(5.0)
        sock.connect(("127.0.0.1", s.hs_port))
        sock.sendall(b"P\t1\ttest\twide\tPRIMARY\tk,v\n")
        n, rate = 45, 400_000  # about 4.7 MB of replies, more than the kernel's buffers, read at 400 kB/s
        sock.sendall(b"1\t>=\t1\t0\t1000\t0\n" * n)
        data = bytearray()
        t0 = time.monotonic()
        while data.count(b"\n") < n + 1:
            chunk = sock.recv(65536)
            got = data.count(b"\n")
            assert chunk, f"closed after {time.monotonic() - t0:.1f} s with {got} of {n} replies read"
            data += chunk
            time.sleep(len(chunk) / rate)
        lines = bytes(data).split(b"\n")
        assert lines[0] == b"0\t1"
        assert all(line.startswith(b"0\t2\t1\t" + b"0" * 99 + b"1\t2\t") for line in lines[1:n + 1])
        print(f"{n} replies, {len(data)} bytes, read in {time.monotonic() - t0:.1f} s")
        sock.close()


def test_a_reset_connections_writes_beyond_the_input_buffer_still_run(request):
    """After a reset the kernel still holds what the client had sent (here megabytes, past the
    server's input buffer): it is read and its writes run, as if the client had only closed."""
    with h.private_server(request, "resetbig", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE wide (k int primary key, v varchar(200)) ENGINE=InnoDB")
        s.executemany("INSERT INTO wide VALUES (%s, %s)", [(k, f"{k:0100d}") for k in range(1, 1001)])
        c = h.HSConn(s.hs_port_wr)
        assert c.request("P\t1\ttest\twide\tPRIMARY\tk,v\tv\n") == b"0\t1\n"
        scan = b"1\t>=\t1\t0\t1000\t0\tF\t=\t0\tnone\n"  # examines 1000 rows, answers none: slow, small replies
        rounds = 10
        pipeline = b"".join(scan * 8000 + f"1\t+\t2\t{100000 + r}\tafter\n".encode() for r in range(rounds))
        c.sock.settimeout(60)
        c.sock.sendall(pipeline)  # ~2.4 MB, more than the input buffer (1 MiB + 16 KiB) takes
        deadline = time.monotonic() + 60
        while True:  # everything has left the client: the rest is in the server's receive queue
            queued = struct.unpack("i", fcntl.ioctl(c.sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
            if queued == 0:
                break
            assert time.monotonic() < deadline, f"{queued} bytes never left the client"
            time.sleep(0.01)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.sock.close()
        deadline = time.monotonic() + 60
        while len(s.sql("SELECT k FROM wide WHERE k >= 100000")) < rounds:
            assert time.monotonic() < deadline, f"writes lost: {s.sql('SELECT k FROM wide WHERE k >= 100000')}"
            time.sleep(0.05)
        assert s.sql("SELECT COUNT(*) FROM wide WHERE k >= 100000 AND v = 'after'") == [(str(rounds),)]
