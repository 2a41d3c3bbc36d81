"""ts-loadgen's own verdicts on runs that measured nothing, against fake servers on loopback: one
that never answers (every request stalls for less than --timeout) and one that closes every
connection during the warm-up. Neither may pass for a clean run of zero, nor report a duration
that is an unsigned difference gone round."""

from __future__ import annotations

import re
import socket
import subprocess
import threading

import pytest

import tsserver

LOADGEN = tsserver.REPO_ROOT / "build-loadgen" / "ts-loadgen"
pytestmark = [pytest.mark.tablesocket_only("the load generator's own checks"),
              pytest.mark.skipif(not LOADGEN.exists(), reason="ts-loadgen is not built (build-loadgen)")]


class _FakeServer:
    """Accepts on a loopback port; `mode` "silent" reads and never answers, "close" closes at once."""

    def __init__(self, mode: str):
        self.sock = socket.socket()
        self.sock.bind((tsserver.LOOPBACK, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.mode = mode
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "close":
                c.close()
            else:
                self.conns.append(c)  # kept open, never read from nor answered

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def _loadgen_against(mode: str, *args: str) -> subprocess.CompletedProcess:
    """ts-loadgen (memcached text, 2 connections) against a fake server in `mode`."""
    srv = _FakeServer(mode)
    try:
        return subprocess.run([str(LOADGEN), "--proto", "mc-text", "--port", str(srv.port), "--keys", "100",
                               "-c", "2", "-d", "1", *args], capture_output=True, text=True, timeout=60)
    finally:
        srv.close()


def test_a_run_in_which_nothing_was_answered_is_not_clean():
    r = _loadgen_against("silent", "--seconds", "1", "--warmup-seconds", "0", "--timeout", "30")
    assert "ops=0 " in r.stdout, r.stdout
    assert "WARNING      no reply was counted in the measured window" in r.stdout, r.stdout
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)


def test_a_run_that_ends_during_its_warm_up_measured_zero_seconds():
    r = _loadgen_against("close", "--seconds", "1", "--warmup-seconds", "3", "--timeout", "5")
    m = re.search(r"RESULT .* seconds=([0-9.]+) ", r.stdout)
    assert m and float(m.group(1)) == 0.0, (r.returncode, r.stdout, r.stderr)
    assert r.returncode != 0
