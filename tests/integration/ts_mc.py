"""Helpers for the memcached-protocol tests (test_memcached.py).

McConn          a raw memcached text-protocol connection (TCP or unix socket) for exact-byte tests:
                send bytes, then expect() exactly the bytes that must come back next.
wait_for_container  polls until tablesocket knows a container added to innodb_memcache.containers.
MemcachedRef    a private memcached 1.6 (Debian's package) on a free loopback port: the reference
                the protocol tests also run against, so every expected byte string is memcached's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

from tsserver import LOOPBACK, LineConn, free_ports, port_accepts

MEMCACHED = os.environ.get("TS_MEMCACHED", shutil.which("memcached") or "/usr/bin/memcached")


class McConn(LineConn):
    """One memcached connection. Reads never wait longer than `timeout` seconds."""

    label = "memcached"
    eol = b"\r\n"
    recv_size = 1 << 20

    def __init__(self, port: int | None = None, *, unix_path: str | None = None,
                 host: str = LOOPBACK, timeout: float = 10.0):
        super().__init__(port, host, timeout, unix_path)

    def read_exact(self, n: int, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise EOFError(f"connection closed after {len(self.buf)} of {n} bytes: {self.buf[:300]!r}")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_until(self, terminator: bytes = b"END\r\n", timeout: float | None = None) -> bytes:
        """Reply lines (and value blocks) up to and including a line equal to `terminator`."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        out = b""
        while True:
            line = self.recv_line(max(0.001, deadline - time.monotonic()))
            out += line
            if line == terminator or line.startswith((b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR")):
                return out
            m = re.match(rb"(VALUE \S+ \d+ (\d+)(?: \d+)?|VA (\d+)[^\r]*)\r\n$", line)
            if m:
                n = int(m.group(2) or m.group(3))
                out += self.read_exact(n + 2, max(0.001, deadline - time.monotonic()))
                if m.group(3) is not None:  # a meta VA reply is complete after its data
                    return out

    def expect(self, want: bytes, timeout: float | None = None) -> None:
        """The next len(want) bytes from the server must be exactly `want`."""
        got = b""
        try:
            got = self.read_exact(len(want), timeout)
        except (TimeoutError, EOFError) as e:
            got = self.buf
            raise AssertionError(f"expected {want!r}, got only {got!r} ({e})") from None
        if got != want:
            try:  # show what followed, for the message
                deadline = time.monotonic() + 0.2
                while len(self.buf) < 300 and self._fill(deadline):
                    pass
            except (TimeoutError, OSError):
                pass
            raise AssertionError(f"expected {want!r}\n     got {got!r} (then {self.buf[:300]!r})")

    def request(self, data: bytes | str, want: bytes, timeout: float | None = None) -> None:
        self.send(data)
        self.expect(want, timeout)

    def assert_silent(self, wait: float = 0.3) -> None:
        """Nothing more arrives within `wait` seconds (and nothing is buffered)."""
        deadline = time.monotonic() + wait
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            pass
        extra, self.buf = self.buf, b""
        assert extra == b"", f"unexpected extra bytes {extra[:300]!r}"

    def closed_by_peer(self, timeout: float = 3.0) -> bytes | None:
        """Everything received until the server closed the connection; None if it stays open."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            return None
        except ConnectionResetError:
            pass
        data, self.buf = self.buf, b""
        return data

    # ---- conveniences -------------------------------------------------------------------------

    def get(self, key: bytes | str, cmd: str = "get") -> bytes:
        if isinstance(key, str):
            key = key.encode()
        self.send(cmd.encode() + b" " + key + b"\r\n")
        return self.recv_until()

    def gets_cas(self, key: bytes | str) -> int:
        """The CAS `gets` reports for key (fails on a miss)."""
        r = self.get(key, "gets")
        m = re.match(rb"VALUE \S+ \d+ \d+ (\d+)\r\n", r)
        assert m, f"gets {key!r}: {r!r}"
        return int(m.group(1))

    def set(self, key: bytes | str, value: bytes, flags: int = 0, exptime: int = 0) -> None:
        if isinstance(key, str):
            key = key.encode()
        self.request(b"set %s %d %d %d\r\n%s\r\n" % (key, flags, exptime, len(value), value), b"STORED\r\n")


def value_reply(key: bytes | str, value: bytes, flags: int = 0, cas: int | None = None) -> bytes:
    """The VALUE entry get/gets return for one item (without the final END)."""
    if isinstance(key, str):
        key = key.encode()
    head = b"VALUE %s %d %d" % (key, flags, len(value))
    if cas is not None:
        head += b" %d" % cas
    return head + b"\r\n" + value + b"\r\n"


class MemcachedRef:
    """A private memcached on a free loopback port (the protocol reference)."""

    def __init__(self, extra_args=()):
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @staticmethod
    def available() -> bool:
        return os.path.isfile(MEMCACHED) and os.access(MEMCACHED, os.X_OK)

    def start(self) -> "MemcachedRef":
        last = ""
        for _ in range(3):
            self.port = free_ports(1)[0]
            cmd = [MEMCACHED, "-l", LOOPBACK, "-p", str(self.port), "-U", "0", "-m", "64", "-c", "256",
                   *self.extra_args]
            if os.geteuid() == 0:
                cmd += ["-u", "nobody"]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if port_accepts(self.port, timeout=0.2):
                    return self
                time.sleep(0.05)
            last = self.proc.stdout.read().decode(errors="replace") if self.proc.poll() is not None else ""
            self.stop()
        raise RuntimeError(f"memcached did not start: {last}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None


def wait_for_container(c: McConn, name: str, timeout: float = 4.0) -> bytes:
    """Poll `get @@name` until the container is known; returns the reply."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.get(f"@@{name}")
        if r.startswith(b"VALUE"):
            return r
        if time.monotonic() > deadline:
            raise AssertionError(f"container {name} not visible after {timeout}s: {r!r}")
        time.sleep(0.1)
