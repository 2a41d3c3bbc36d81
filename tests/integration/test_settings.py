"""Dynamic system variables: limits and timeouts change with SET GLOBAL, without a restart.

  * information_schema.SYSTEM_VARIABLES lists exactly the documented variables as dynamic
    (READ_ONLY = NO) and the rest (ports, threads, TLS files, security switches) as read-only; a
    SET GLOBAL of a read-only one fails with the server's own error;
  * a new value reaches connections that are already open: a lower tablesocket_max_request_size
    refuses the next long line of an open HandlerSocket connection, a lower
    tablesocket_idle_timeout closes an idle one, a lower tablesocket_lock_wait_timeout ends the
    next lock wait sooner, a lower tablesocket_mc_max_value_size refuses a memcached set (and
    `stats settings` shows it), a lower tablesocket_max_connections refuses the next connection;
  * out-of-range values are clamped as MariaDB clamps its own, and setting a value back restores
    the behaviour.
"""

from __future__ import annotations

import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

import ts_harness as h
from ts_mc import McConn

pytestmark = pytest.mark.tablesocket_only("tablesocket's system variables")

DYNAMIC = {
    "tablesocket_auth_log_interval", "tablesocket_commit_rejoin_wait", "tablesocket_ddl_check_interval",
    "tablesocket_idle_timeout", "tablesocket_lock_queue_after", "tablesocket_lock_queue_sessions",
    "tablesocket_lock_wait_timeout", "tablesocket_login_timeout", "tablesocket_max_batch_rows",
    "tablesocket_max_buffer_memory", "tablesocket_max_connections", "tablesocket_max_open_indexes",
    "tablesocket_max_output_buffer", "tablesocket_max_request_size", "tablesocket_max_requests_per_batch",
    "tablesocket_max_tokens", "tablesocket_max_turn_rows", "tablesocket_max_user_connections",
    "tablesocket_mc_idle_timeout", "tablesocket_mc_max_range_rows", "tablesocket_mc_max_value_size",
    "tablesocket_output_high_water", "tablesocket_privilege_check_interval", "tablesocket_tls_handshake_timeout",
    "tablesocket_tls_reload",  # a trigger, not a setting
}


@pytest.fixture(scope="module")
def srv(request):
    with h.private_server(request, "settings", ["--tablesocket-threads=1"]) as s:
        s.exec_sql("CREATE TABLE st (k int primary key, v varchar(4000)) ENGINE=InnoDB")
        s.executemany("INSERT INTO st VALUES (%s, %s)", [(k, f"v{k}") for k in range(1, 11)])
        yield s


def test_which_variables_are_dynamic(srv):
    rows = srv.sql("SELECT LOWER(VARIABLE_NAME), READ_ONLY FROM information_schema.SYSTEM_VARIABLES "
                   "WHERE VARIABLE_NAME LIKE 'TABLESOCKET\\_%'", db=None)
    seen = {name: ro for name, ro in rows}
    assert {n for n, ro in seen.items() if ro == "NO"} == DYNAMIC
    assert "tablesocket_hs_port" in seen and seen["tablesocket_hs_port"] == "YES"
    for name in ("tablesocket_hs_port", "tablesocket_threads", "tablesocket_require_auth",
                 "tablesocket_character_set", "tablesocket_max_connections_per_host"):
        with pytest.raises(Exception) as e:
            srv.exec_sql(f"SET GLOBAL {name} = DEFAULT")
        assert "read only variable" in str(e.value), (name, e.value)
    # Every dynamic setting takes its own current value back (the update path runs for each).
    for name in sorted(DYNAMIC - {"tablesocket_tls_reload"}):
        old = h.variable(srv, name)
        srv.exec_sql(f"SET GLOBAL {name} = {old}")
        assert h.variable(srv, name) == old


def test_out_of_range_values_are_clamped(srv):
    holder = h.hs_open(srv.hs_port, "st", "k,v")
    try:
        with h.global_setting(srv, "tablesocket_max_connections", 0):
            assert h.variable(srv, "tablesocket_max_connections") == "1"
            # The open connection goes on; nobody new gets in.
            assert holder.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
            extra = h.HSConn(srv.hs_port)
            try:
                assert extra.recv_line(timeout=5) == b"1\t1\ttoomanyconnections\n"
            finally:
                extra.close()
    finally:
        holder.close()
    assert h.variable(srv, "tablesocket_max_connections") == "10000"
    c = h.hs_open(srv.hs_port, "st", "k,v")
    try:
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\tv1\n"
    finally:
        c.close()


def test_a_lower_request_size_applies_to_an_open_connection(srv):
    c = h.hs_open(srv.hs_port, "st", "k,v")
    long_line = "1\t=\t1\t" + "9" * 3000 + "\n"
    try:
        assert c.request(long_line).startswith(b"0\t2")  # a 3 kB line is fine under 1 MiB
        with h.global_setting(srv, "tablesocket_max_request_size", 1024):
            assert c.request("1\t=\t1\t2\n") == b"0\t2\t2\tv2\n"
            c.send(long_line)
            assert c.recv_line(timeout=5) == b"2\t1\ttoolong\n"
            assert h.wait_closed(c, 5) is not None
        c2 = h.hs_open(srv.hs_port, "st", "k,v")
        try:
            assert c2.request(long_line).startswith(b"0\t2")  # back to 1 MiB
        finally:
            c2.close()
    finally:
        c.close()


def test_a_shorter_idle_timeout_closes_an_open_idle_connection(srv):
    idle = h.hs_open(srv.hs_port, "st", "k,v")
    busy = h.hs_open(srv.hs_port, "st", "k,v")
    try:
        assert idle.request("1\t=\t1\t3\n") == b"0\t2\t3\tv3\n"
        with h.global_setting(srv, "tablesocket_idle_timeout", 1):
            t0 = time.monotonic()
            closed = None
            while time.monotonic() - t0 < 5:
                assert busy.request("1\t=\t1\t4\n") == b"0\t2\t4\tv4\n", "a busy connection was closed"
                if h.closed_now(idle):
                    closed = time.monotonic() - t0
                    break
                time.sleep(0.1)
            assert closed is not None, "the idle connection was not closed after SET GLOBAL tablesocket_idle_timeout = 1"
            print(f"closed {closed:.2f} s after the SET")
        assert h.variable(srv, "tablesocket_idle_timeout") == "600"
        time.sleep(1.5)
        assert not h.closed_now(busy), "closed after the timeout went back to 600 s"
    finally:
        idle.close()
        busy.close()


def test_a_lower_lock_wait_timeout_ends_the_next_wait_sooner(srv):
    w = h.hs_open(srv.hs_port_wr, "st", "v")
    sql = h.sql_conn(srv, autocommit=False)
    try:
        with h.global_setting(srv, "tablesocket_lock_wait_timeout", 700):
            with sql.cursor() as cur:
                cur.execute("SELECT * FROM st WHERE k = 5 FOR UPDATE")
            t0 = time.monotonic()
            w.send("1\t=\t1\t5\t1\t0\tU\tlocked\n")
            assert w.recv_line(timeout=10) == b"1\t1\tlock_wait_timeout\n"
            waited = time.monotonic() - t0
            print(f"lock_wait_timeout=700 ms answered after {waited:.3f} s")
            assert 0.6 <= waited <= 3.0, waited
            sql.rollback()
            assert w.request("1\t=\t1\t5\t1\t0\tU\tv5\n") == b"0\t1\t1\n"  # the connection goes on
    finally:
        sql.rollback()
        sql.close()
        w.close()


def test_a_lower_memcached_value_size_refuses_a_set_and_shows_in_stats(srv):
    c = McConn(srv.mc_port)
    try:
        c.request(b"set dyn:k 0 0 3000\r\n" + b"a" * 3000 + b"\r\n", b"STORED\r\n")
        with h.global_setting(srv, "tablesocket_mc_max_value_size", 2048):
            c.send(b"stats settings\r\n")
            assert b"STAT item_size_max 2048\r\n" in c.recv_until(b"END\r\n")
            c.request(b"set dyn:k 0 0 3000\r\n" + b"b" * 3000 + b"\r\n",
                      b"SERVER_ERROR object too large for cache\r\n")
            c.request(b"set dyn:s 0 0 2000\r\n" + b"c" * 2000 + b"\r\n", b"STORED\r\n")
        c.request(b"set dyn:k 0 0 3000\r\n" + b"d" * 3000 + b"\r\n", b"STORED\r\n")
        c.request(b"get dyn:k\r\n", b"VALUE dyn:k 0 3000\r\n" + b"d" * 3000 + b"\r\nEND\r\n")
    finally:
        c.close()


def _big_values(c, prefix: str, n: int, size: int) -> dict[str, bytes]:
    values = {f"{prefix}{i}": (b"%03d" % i) * (size // 3) for i in range(n)}
    for k, v in values.items():
        c.request(b"set %s 0 0 %d\r\n%s\r\n" % (k.encode(), len(v), v), b"STORED\r\n")
    return values


def _read_values(c, values: dict[str, bytes], cmd: bytes = b"get") -> None:
    for k, v in values.items():
        head = c.recv_line(timeout=30)
        assert head.split()[:4] == [b"VALUE", k.encode(), b"0", str(len(v)).encode()], head[:120]
        assert c.read_exact(len(v) + 2, timeout=30) == v + b"\r\n"
    assert c.recv_line(timeout=30) == b"END\r\n"


def test_a_streamed_get_survives_limits_changed_around_it(srv):
    """A get of 24 x 700 kB (over tablesocket_max_output_buffer) is answered in parts whatever
    output_high_water says (a helper set it above max_output_buffer: the get failed), and a
    lower max_tokens or max_request_size set while it streams does not cut it (it was accepted
    under the old ones: it got "more keys than tablesocket_max_tokens" after 43 values)."""
    c = McConn(srv.mc_port)
    try:
        values = _big_values(c, "strm:", 24, 700_000)
        line = b"get " + b" ".join(k.encode() for k in values) + b"\r\n"
        with h.global_setting(srv, "tablesocket_output_high_water", 64 << 20):
            c.send(line)
            _read_values(c, values)
        c.send(line)
        c.recv_line(timeout=30)  # the first value's header: the get has started
        with h.global_setting(srv, "tablesocket_max_tokens", 8), \
                h.global_setting(srv, "tablesocket_max_request_size", 64):
            first = next(iter(values.values()))
            assert c.read_exact(len(first) + 2, timeout=30) == first + b"\r\n"
            _read_values(c, dict(list(values.items())[1:]))
        c.request(b"get strm:0\r\n", b"VALUE strm:0 0 %d\r\n%s\r\nEND\r\n" % (len(first), first))
    finally:
        c.close()


def test_values_that_would_not_fit_a_reply_are_refused_alike(srv):
    """tablesocket_mc_max_value_size above tablesocket_max_output_buffer let a value be stored that
    came back from mg (and a client slower than loopback would have been closed holding it) but
    not from get ("reply too large", the other keys of the get lost with it). Now a set is held
    to what one reply can carry, and an item stored before the limits were lowered is refused
    alike by get (after the keys before it), mg and binary get; the connection goes on."""
    c = McConn(srv.mc_port)
    try:
        big = b"B" * (3 << 20)
        c.request(b"set small1 0 0 2\r\ns1\r\n", b"STORED\r\n")
        c.request(b"set small2 0 0 2\r\ns2\r\n", b"STORED\r\n")
        with h.global_setting(srv, "tablesocket_mc_max_value_size", 8 << 20):
            c.request(b"set huge 0 0 %d\r\n%s\r\n" % (len(big), big), b"STORED\r\n")  # fits 16 MiB
            c.send(b"get huge\r\n")
            assert c.recv_line(timeout=10) == b"VALUE huge 0 %d\r\n" % len(big)
            assert c.read_exact(len(big) + 2, timeout=30) == big + b"\r\n"
            assert c.recv_line(timeout=10) == b"END\r\n"
        with h.global_setting(srv, "tablesocket_mc_max_value_size", 8 << 20), \
                h.global_setting(srv, "tablesocket_max_output_buffer", 2 << 20):
            c.send(b"stats settings\r\n")
            item_max = int(c.recv_until(b"END\r\n").split(b"STAT item_size_max ")[1].split(b"\r\n")[0])
            assert item_max <= (2 << 20) - 4096, item_max
            c.request(b"set again 0 0 %d\r\n%s\r\n" % (len(big), big), b"SERVER_ERROR object too large for cache\r\n")
            c.send(b"get small1 huge small2\r\n")
            assert c.recv_line(timeout=10) == b"VALUE small1 0 2\r\n"
            assert c.read_exact(4, timeout=10) == b"s1\r\n"
            assert c.recv_line(timeout=10) == b"SERVER_ERROR reply too large (tablesocket_max_output_buffer)\r\n"
            c.request(b"mg huge v\r\n", b"SERVER_ERROR reply too large (tablesocket_max_output_buffer)\r\n")
            c.request(b"mg huge s\r\n", b"HD s%d\r\n" % len(big))  # no value asked for: answered
            c.request(b"get small2\r\n", b"VALUE small2 0 2\r\ns2\r\nEND\r\n")
            b = McConn(srv.mc_port)  # the binary protocol: GET answers E2BIG (0x0003)
            try:
                b.send(struct.pack(">BBHBBHIIQ", 0x80, 0x00, 4, 0, 0, 0, 4, 7, 0) + b"huge")
                head = b.read_exact(24, timeout=10)
                status, body = struct.unpack(">H", head[6:8])[0], struct.unpack(">I", head[8:12])[0]
                assert head[0] == 0x81 and status == 0x0003, head
                b.read_exact(body, timeout=10)
            finally:
                b.close()
        c.request(b"mg huge s v\r\n", b"VA %d s%d\r\n%s\r\n" % (len(big), len(big), big))  # 16 MiB again
    finally:
        c.close()


def test_set_global_server_settings_reach_the_writes_of_running_workers(request):
    """The workers' sessions live as long as the plugin; SET GLOBAL of time_zone,
    auto_increment_increment / _offset, server_id, gtid_domain_id and binlog_row_image reaches their
    next batch, as it reaches a new SQL session (they kept the values the plugin started with: a
    TIMESTAMP written in the old zone, ids off the new auto-increment pattern, binary log events
    under the old GTID domain and server id, before images of the old binlog_row_image)."""
    with h.private_server(request, "globals", ["--tablesocket-threads=1", "--log-bin=binlog", "--server-id=1"]) as s:
        s.exec_sql("CREATE TABLE tz (k int primary key, t timestamp NULL) ENGINE=InnoDB")
        s.exec_sql("CREATE TABLE ai (id int auto_increment primary key, v varchar(8)) ENGINE=InnoDB")
        w = h.hs_open(s.hs_port_wr, "tz", "k,t")
        a = h.hs_open(s.hs_port_wr, "ai", "v")
        assert w.request("1\t+\t2\t1\t2026-01-01 00:00:00\n") == b"0\t1\n"
        try:
            s.exec_sql("SET GLOBAL time_zone = '+05:00', auto_increment_increment = 10, "
                       "auto_increment_offset = 3, gtid_domain_id = 9, server_id = 77")
            assert w.request("1\t+\t2\t2\t2026-01-01 00:00:00\n") == b"0\t1\n"
            # A new SQL session is in +05:00 too: both rows read as written, 5 hours apart in UTC.
            assert s.sql("SELECT k, t, UNIX_TIMESTAMP(t) FROM test.tz ORDER BY k") == [
                ("1", "2026-01-01 05:00:00", "1767225600"), ("2", "2026-01-01 00:00:00", "1767207600")]
            assert h.HSConn(s.hs_port).request("P\t1\ttest\ttz\tPRIMARY\tt\n1\t=\t1\t2\n") == \
                b"0\t1\n0\t1\t2026-01-01 00:00:00\n"
            for i, want in enumerate((3, 23, 43)):  # the insert's reply carries the id it got
                assert a.request(f"1\t+\t1\tts{i}\n") == f"0\t1\t{want}\n".encode()
                s.exec_sql(f"INSERT INTO test.ai (v) VALUES ('sql{i}')")
            ids = [int(r[0]) for r in s.sql("SELECT id FROM test.ai ORDER BY id")]
            assert ids == [3, 13, 23, 33, 43, 53], ids
            gtids = s.sql("SELECT @@gtid_binlog_pos", db=None)[0][0]
            assert "9-77-" in gtids, gtids
            last = [r for r in s.sql("SHOW BINLOG EVENTS IN 'binlog.000001'", db=None) if r[2] == "Gtid"]
            assert "GTID 9-77-" in last[-1][5], last[-1]
            # binlog_row_image: an update's before image is the primary key alone with MINIMAL,
            # every column again with FULL (the after image has every column either way).
            u = h.hs_open(s.hs_port_wr, "ai", "id,v")
            try:
                s.exec_sql("SET GLOBAL binlog_row_image = MINIMAL")
                assert u.request("1\t=\t1\t3\t1\t0\tU\t3\tmin\n") == b"0\t1\t1\n"
                s.exec_sql("SET GLOBAL binlog_row_image = FULL")
                assert u.request("1\t=\t1\t3\t1\t0\tU\t3\tfull\n") == b"0\t1\t1\n"
            finally:
                u.close()
            out = subprocess.run([h.MARIADB_BINLOG, "--no-defaults", "--base64-output=decode-rows", "-v",
                                  *sorted(str(p) for p in Path(s.datadir).glob("binlog.[0-9]*"))],
                                 capture_output=True, text=True, errors="replace", timeout=60).stdout
            images = re.findall(r"^### UPDATE `test`\.`ai`\n### WHERE\n((?:###   @\d+=.*\n)+)### SET\n"
                                r"((?:###   @\d+=.*\n)+)", out, re.M)
            assert [(w.count("@"), a.count("@")) for w, a in images] == [(1, 2), (2, 2)], images
        finally:
            s.exec_sql("SET GLOBAL time_zone = SYSTEM, auto_increment_increment = 1, auto_increment_offset = 1, "
                       "gtid_domain_id = 0, server_id = 1, binlog_row_image = FULL")
            w.close()
            a.close()
