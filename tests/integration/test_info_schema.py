"""INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS: tablesocket's clients, as the process list shows SQL's.

Every connection, on every worker, with its listener, remote address, account, TLS, state and the
bytes it has buffered; an account without PROCESS sees only its own connections."""

from __future__ import annotations

import time

import pymysql
import pytest

from test_security import login
from ts_mc import McConn
from tsserver import HSConn

pytestmark = pytest.mark.tablesocket_only("tablesocket's INFORMATION_SCHEMA table")

COLS = "ID, WORKER, PORT, REMOTE_ADDRESS, USER, HOST, TLS, TIME, IDLE, STATE, INPUT_BYTES, OUTPUT_BYTES"


def rows_by_address(server, conn=None) -> dict[str, dict]:
    if conn is None:
        got = server.sql(f"SELECT {COLS} FROM information_schema.TABLESOCKET_CONNECTIONS")
    else:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {COLS} FROM information_schema.TABLESOCKET_CONNECTIONS")
            got = [tuple(str(v) for v in r) for r in cur.fetchall()]
    names = [c.strip() for c in COLS.split(",")]
    return {r[3]: dict(zip(names, r)) for r in got}


def address(sock) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def test_every_connection_is_listed_with_its_port_address_and_buffers(server):
    if not getattr(server, "mc_port", None):
        pytest.skip("no memcached port")
    rd, wr, mc = HSConn(server.hs_port), HSConn(server.hs_port_wr), McConn(server.mc_port)
    try:
        assert rd.request("P\t1\ttest\tnone\tPRIMARY\tk\n") == b"1\t1\topen_table\n"
        wr.send("P\t1\ttes")                     # half a request: 7 bytes wait in its input buffer
        mc.request("version\r\n", b"VERSION 1.6.18\r\n")
        time.sleep(0.1)
        rows = rows_by_address(server)
        r, w, m = rows[address(rd.sock)], rows[address(wr.sock)], rows[address(mc.sock)]
        assert (r["PORT"], w["PORT"], m["PORT"]) == ("hs", "hs_wr", "mc")
        for row in (r, w, m):
            assert row["TLS"] == "NO" and row["USER"] == "" and row["OUTPUT_BYTES"] == "0", row
            assert int(row["TIME"]) < 60 and int(row["IDLE"]) < 60
        assert r["STATE"] == "idle" and r["INPUT_BYTES"] == "0"
        assert w["INPUT_BYTES"] == "7"
        assert len({r["ID"], w["ID"], m["ID"]}) == 3
        workers = int(server.sql("SELECT @@tablesocket_threads")[0][0])
        assert all(0 <= int(x["WORKER"]) < workers for x in (r, w, m))
        # a connection that is gone is no longer listed
        rd.close()
        deadline = time.monotonic() + 5
        while r["REMOTE_ADDRESS"] in rows_by_address(server):
            assert time.monotonic() < deadline, "closed connection still listed"
            time.sleep(0.05)
    finally:
        for c in (rd, wr, mc):
            c.close()


def test_the_account_a_connection_logged_in_as_and_who_may_see_it(server):
    server.exec_sql("DROP USER IF EXISTS 'isuser'@'%'")
    server.exec_sql("CREATE USER 'isuser'@'%' IDENTIFIED BY 'pw1'")
    server.exec_sql("GRANT SELECT ON test.* TO 'isuser'@'%'")
    mine, other = HSConn(server.hs_port), HSConn(server.hs_port)
    sql = None
    try:
        assert login(mine, "isuser", "pw1") == b"0\t1\n"
        mine.request("P\t1\ttest\tnone\tPRIMARY\tk\n")
        rows = rows_by_address(server)                     # root: PROCESS, sees everything
        assert rows[address(mine.sock)]["USER"] == "isuser"
        assert rows[address(mine.sock)]["HOST"] == "%"
        assert rows[address(other.sock)]["USER"] == ""
        sql = pymysql.connect(unix_socket=server.socket, user="isuser", password="pw1")
        seen = rows_by_address(server, sql)                 # no PROCESS: its own account's only
        assert address(mine.sock) in seen and address(other.sock) not in seen
        assert {v["USER"] for v in seen.values()} == {"isuser"}
    finally:
        if sql:
            sql.close()
        mine.close()
        other.close()
        server.exec_sql("DROP USER IF EXISTS 'isuser'@'%'")


def test_a_request_waiting_for_a_row_lock_shows_it(server, make_table):
    t = make_table("k int primary key, n int", [(1, 0)])
    c = HSConn(server.hs_port_wr)
    sql = pymysql.connect(unix_socket=server.socket, user="root", password="", database="test",
                          autocommit=False)
    try:
        assert c.request(f"P\t1\ttest\t{t}\tPRIMARY\tn\n") == b"0\t1\n"
        with sql.cursor() as cur:
            cur.execute(f"SELECT * FROM {t} WHERE k = 1 FOR UPDATE")
            c.send("1\t=\t1\t1\t1\t0\t+\t1\n")
            deadline = time.monotonic() + 5
            while rows_by_address(server)[address(c.sock)]["STATE"] != "waiting for a lock":
                assert time.monotonic() < deadline, rows_by_address(server)[address(c.sock)]
                time.sleep(0.05)
        sql.commit()
        assert c.recv_line(timeout=10) == b"0\t1\t1\n"
    finally:
        sql.close()
        c.close()
