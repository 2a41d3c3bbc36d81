"""Exceptions raised by the tablesocket client.

Every exception derives from :class:`TablesocketError`. Each class says who is at
fault, which tells you what to do about it:

* :class:`ClientError` -- the caller: fix the code (bad argument, misuse).
* :class:`ServerError` -- the request reached the server and was refused; the
  connection is still usable. Its subclasses :class:`AuthError` (a login was refused,
  or one is required) and :class:`PermissionDenied` (the account lacks a privilege)
  are the replies with code 3.
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
    "PermissionDenied",
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
    authentication and privileges, raised as :class:`AuthError` or
    :class:`PermissionDenied`) and ``message`` the server's text, ``""`` when it sent none.
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
    """A reply with error code 3: the server refused a login, or requires one.

    At fault: the credentials or the login configuration, not the request. Raised
    for the reply to a login (``A``) -- a wrong user name, password or shared secret,
    an account that may not log in from this address, a cleartext password over an
    unencrypted connection, a login method the server does not support
    (``authtype``) -- and for ``unauth``: the server requires a login before any
    other request. The connection stays open and in sync (you may try another
    login), except that a login configured on the client (``user=``, ``secret=``,
    ``auth=``) that fails while connecting closes it.

    :class:`PermissionDenied` is the subclass for code 3 on other requests.
    """


class PermissionDenied(AuthError):
    """Code 3 on a request other than a login: the account the connection is
    logged in as lacks a privilege for it, e.g. ``SELECT command denied to user
    'bob'@'localhost' for table 't'`` when opening an index, or ``INSERT command
    denied ...`` on an insert.

    At fault: the account's grants (``GRANT`` the privilege, or log in as another
    account), not the credentials, which were accepted. The connection stays open
    and in sync; other requests are unaffected. A subclass of :class:`AuthError`,
    so ``except AuthError`` catches every code-3 reply.
    """


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
