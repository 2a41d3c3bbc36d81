"""The README's first command: scripts/run.sh starts the main job (a private mariadbd with
tablesocket, its datadir under TS_VAR, loopback ports), serves the demo table over both protocols,
and stops. Its fresh datadir has no anonymous `test` database grants (mariadb-install-db's default
gives every account test.* through PUBLIC, which the main job would then serve over tablesocket)."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

import tsserver

pytestmark = pytest.mark.tablesocket_only("the main job runs tablesocket")


def _request(port: int, data: bytes, want_lines: int) -> bytes:
    with socket.create_connection((tsserver.LOOPBACK, port), timeout=10) as s:
        s.sendall(data)
        got = b""
        while got.count(b"\n") < want_lines:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_run_sh_starts_serves_and_stops_the_main_job(tmp_path):
    var = tmp_path / "var"
    sql, hs, hs_wr, mc = tsserver.free_ports(4)
    env = dict(os.environ, TS_VAR=str(var), TS_SQL_PORT=str(sql), TS_HS_PORT=str(hs), TS_HS_PORT_WR=str(hs_wr),
               TS_MC_PORT=str(mc))
    run = [str(tsserver.REPO_ROOT / "scripts" / "run.sh")]
    r = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    try:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert _request(hs, b"P\t1\ttest\tuser\tPRIMARY\tuser_name\n1\t=\t1\t2\n", 2) == b"0\t1\n0\t1\tbob\n"
        assert _request(mc, b"set main:job 0 0 2\r\nok\r\nget main:job\r\n", 4) == \
            b"STORED\r\nVALUE main:job 0 2\r\nok\r\nEND\r\n"
        out = subprocess.run(["mariadb", "--no-defaults", f"--socket={var / 'mysqld.sock'}", "-uroot", "-N", "-e",
                              "SELECT COUNT(*) FROM mysql.db WHERE Db LIKE 'test%'"],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == "0", out.stdout + out.stderr
    finally:
        stop = subprocess.run(run + ["stop"], env=env, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stdout + stop.stderr
