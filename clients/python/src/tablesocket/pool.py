"""A small thread-safe pool of blocking :class:`~tablesocket.Client` connections."""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from typing import Any, Iterator, List, Optional

from .client import Client
from .errors import ClientError, PoolTimeoutError

__all__ = ["Pool"]


class Pool:
    """Hands out :class:`~tablesocket.Client` connections to one server, to at most
    ``size`` threads at a time::

        pool = Pool("127.0.0.1", 9999, size=8, timeout=5)
        with pool.connection() as c:
            idx = c.open_index("test", "t", columns=["id", "v"])   # no round trip
            idx.find("=", [1])                                      # once opened

    Connections are created on demand and reused (most recently returned first). A
    connection that was closed by an error, or that the server closed while it was
    idle, is dropped and replaced. ``acquire_timeout`` (seconds, ``None`` = wait
    forever) bounds the wait for a free connection; past it
    :class:`~tablesocket.PoolTimeoutError` is raised. Every other keyword argument
    (``timeout``, ``ssl``, ``user``, ``password``, ``auth``, ``secret``, ...) goes to
    :class:`Client`, so every new or replacement connection does the TLS handshake
    and logs in before it is lent out.

    A connection on which the borrower logged in as another account
    (``client.login(...)``) is closed when it is released rather than lent to the
    next borrower with that account's privileges.
    """

    def __init__(self, host: str, port: int, *, size: int = 8,
                 acquire_timeout: Optional[float] = 30.0, **client_kwargs: Any) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ClientError("size must be an int >= 1")
        if client_kwargs.get("connect") is False:
            raise ClientError("a pool's clients always connect")
        if acquire_timeout is not None and (isinstance(acquire_timeout, bool)
                                            or not isinstance(acquire_timeout, (int, float))
                                            or acquire_timeout < 0):
            raise ClientError("acquire_timeout must be a number >= 0 or None")
        try:  # a misspelt keyword fails here, not at the first acquire()
            inspect.signature(Client).bind(host, port, **client_kwargs)
        except TypeError as e:
            raise ClientError(f"Pool: {e}") from None
        self.host = host
        self.port = port
        self.size = size
        self.acquire_timeout = acquire_timeout
        self._kwargs = client_kwargs
        self._idle: List[Client] = []
        self._total = 0  # idle + lent out + being created
        self._cond = threading.Condition(threading.Lock())
        self._closed = False

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<tablesocket.Pool {self.host}:{self.port} size={self.size} "
                f"open={self._total} idle={len(self._idle)}>")

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def total(self) -> int:
        return self._total

    def acquire(self, timeout: Optional[float] = None) -> Client:
        """Take a connection (create one if under ``size``); give it back with
        :meth:`release`. Prefer :meth:`connection`."""
        if timeout is None:
            timeout = self.acquire_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise ClientError("the pool is closed")
                while self._idle:
                    c = self._idle.pop()
                    if c.healthy():
                        return c
                    c.close()
                    self._total -= 1
                if self._total < self.size:
                    self._total += 1
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise PoolTimeoutError(
                        f"no free connection within {timeout}s (pool size {self.size})")
                self._cond.wait(remaining)
        try:  # connect outside the lock
            c = Client(self.host, self.port, **self._kwargs)
            c._pool = self  # release() takes back only its own connections
            return c
        except BaseException:
            with self._cond:
                self._total -= 1
                self._cond.notify()
            raise

    def release(self, client: Client) -> None:
        """Return a connection; a closed one, or one whose account was changed with
        ``login()``, is closed and dropped (its slot freed)."""
        with self._cond:
            if client in self._idle:
                raise ClientError("this connection was already given back to the pool")
            if client._pool is not self:
                raise ClientError("this connection does not belong to this pool")
            if self._closed or client.closed or client._manual_login:
                self._total -= 1
                client.close()
            else:
                self._idle.append(client)
            self._cond.notify()

    @contextlib.contextmanager
    def connection(self, timeout: Optional[float] = None) -> Iterator[Client]:
        """``with pool.connection() as client:`` -- acquire, then always release."""
        c = self.acquire(timeout)
        try:
            yield c
        finally:
            self.release(c)

    def close(self) -> None:
        """Close the idle connections; lent ones are closed when released."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._total -= len(idle)
            self._cond.notify_all()
        for c in idle:
            c.close()
