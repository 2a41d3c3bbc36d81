"""Checks of the test infrastructure itself (fixtures, SQL helper, restart), with any plugin."""

from __future__ import annotations

import os
from pathlib import Path

import tsserver


def test_server_attributes(server, plugin):
    assert server.plugin == plugin
    assert len({server.hs_port, server.hs_port_wr, server.sql_port}) == 3
    assert Path(server.socket).exists()
    assert Path(server.datadir, "mysql").is_dir()
    assert Path(server.log_path).is_file()
    assert server.running()
    assert tsserver.port_accepts(server.hs_port) and tsserver.port_accepts(server.hs_port_wr)
    assert server.sql("SELECT DATABASE()") == [("test",)]
    want = "handlersocket" if plugin == "handlersocket" else "tablesocket"
    assert server.sql("SELECT plugin_status FROM information_schema.plugins WHERE plugin_name = %s",
                      (want,)) == [("ACTIVE",)]


def test_sql_helpers_are_binary_safe(server, make_table):
    t = make_table("id int primary key, b varbinary(10), s varchar(10), n int",
                   [(1, bytes(range(0, 256, 37)) + b"\x00\xff", "h\u00e9", None), (2, b"", "", 0)])
    assert server.sql_bytes(f"SELECT b, s, n FROM {t} ORDER BY id") == [
        (bytes(range(0, 256, 37)) + b"\x00\xff", "h\u00e9".encode(), None), (b"", b"", b"0")]
    assert server.sql(f"SELECT id, s, n FROM {t} ORDER BY id") == [("1", "h\u00e9", None), ("2", "", "0")]
    assert server.exec_sql(f"UPDATE {t} SET n = n + 1 WHERE id = 2") == 1
    assert server.sql(f"SELECT n FROM {t} WHERE id = %s", (2,)) == [("1",)]


def test_hs_helper(hs, make_table):
    t = make_table("k int primary key, v varchar(10)", [(1, "a\tb"), (2, None)])
    conn = hs()
    assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
    conn.send(b"1\t=\t1\t1\n1\t=\t1\t2\n")
    assert conn.recv_lines(2) == [b"0\t2\t1\ta\x01Ib\n", b"0\t2\t2\t\x00\n"]
    assert tsserver.hs_line("1", "=", "1", b"a\tb") == b"1\t=\t1\ta\x01Ib\n"
    assert tsserver.hs_line("1", None) == b"1\t\x00\n"


def test_write_port_reaches_the_table(server, hs, make_table):
    t = make_table("k int primary key, v varchar(10)")
    w = hs(wr=True)
    assert w.request(f"P\t1\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n"
    assert w.request("1\t+\t2\t5\tfive\n") == b"0\t1\n"
    w.close()
    assert server.sql(f"SELECT k, v FROM {t}") == [("5", "five")]


def test_restart_keeps_data_and_ports(server, hs, make_table):
    t = make_table("k int primary key", [(7,)])
    ports = (server.hs_port, server.hs_port_wr, server.sql_port)
    pid = server.pid
    server.restart()
    assert server.pid != pid and server.running()
    assert (server.hs_port, server.hs_port_wr, server.sql_port) == ports
    conn = hs()
    assert conn.request(f"P\t1\ttest\t{t}\tPRIMARY\tk\n") == b"0\t1\n"
    assert conn.request("1\t=\t1\t7\n") == b"0\t1\t7\n"


def test_repo_root_is_found_from_the_test_file():
    assert (tsserver.REPO_ROOT / "tests" / "integration" / "tsserver.py").is_file()
    if not os.environ.get("TS_PLUGIN_SO"):
        assert tsserver.tablesocket_so() == tsserver.REPO_ROOT / "build" / "tablesocket.so"
