"""Exceptions raised by the tablesocket client.

Every exception derives from :class:`TablesocketError`. Each class says who is at
fault, which tells you what to do about it:

* :class:`ClientError` -- the caller: fix the code (bad argument, misuse).
* :class:`ServerError` -- the request reached the server and was refused; the
  connection is still usable.
* :class:`ConnectionError` and its subclasses :class:`TimeoutError` and
  :class:`ProtocolError` -- the transport: the connection has been closed and
  must be reopened (``client.reconnect()``, or let a :class:`~tablesocket.Pool`
  replace it). Requests whose replies were not read may or may not have been
  executed by the server.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "TablesocketError",
    "ClientError",
    "PoolTimeoutError",
    "ServerError",
    "AuthError",
    "ConnectionError",
    "TimeoutError",
    "ProtocolError",
]


class TablesocketError(Exception):
    """Base class of every error raised by this package."""


class ClientError(TablesocketError):
    """The caller is at fault: a bad argument or a misuse of the API.

    Raised before anything is sent (so the connection is unaffected), or when a
    reply value cannot be decoded the way the caller asked (for example
    ``decode=True`` on a column that holds bytes that are not UTF-8).
    """


class PoolTimeoutError(ClientError):
    """No connection became free in the pool within ``acquire_timeout``.

    The caller's sizing is at fault: raise ``Pool(size=...)`` or hold
    connections for less time.
    """


class ServerError(TablesocketError):
    """The server received the request and answered with an error code.

    The connection stays open and in sync. ``code`` is the protocol's error
    code (HandlerSocket uses 1 for a storage-engine error, whose message is
    then the numeric handler error such as ``121`` for a duplicate key; 2 for a
    request the server rejects, e.g. ``op``, ``klen``, ``filterfld``; 3 for
    authentication) and ``message`` the server's text, ``""`` when it sent none.
    """

    def __init__(self, code: int, message: str, request: Optional[bytes] = None) -> None:
        self.code = code
        self.message = message
        self.request = request
        text = f"server error {code}: {message or '(no message)'}"
        super().__init__(text)

    @property
    def handler_error(self) -> Optional[int]:
        """The storage engine's numeric error (code 1 replies), else ``None``."""
        if self.code == 1 and self.message.isdigit():
            return int(self.message)
        return None

    @property
    def is_duplicate_key(self) -> bool:
        """True for a unique-key violation (``HA_ERR_FOUND_DUPP_KEY``, 121)."""
        return self.handler_error == 121


class AuthError(ServerError):
    """The server refused the credentials, or requires authentication first
    (error code 3, e.g. ``unauth``). Check the secret/account configured."""


class ConnectionError(TablesocketError):  # noqa: A001 - deliberate, namespaced
    """The connection failed: it could not be opened, the peer closed it, or a
    socket error occurred. Neither the caller's nor (necessarily) the server's
    fault. The client has closed the connection; reconnect to continue."""


class TimeoutError(ConnectionError):  # noqa: A001
    """Connecting, sending or waiting for a reply took longer than the
    configured timeout. The connection has been closed (a late reply would
    otherwise be read as the answer to a later request)."""


class ProtocolError(ConnectionError):
    """The server sent bytes that are not a valid reply to what was asked
    (malformed line, wrong column count, reply without a request, reply too
    large). The peer (or a proxy in between) is at fault, or it is not a
    HandlerSocket/tablesocket server. The connection has been closed."""
