"""Authentication methods.

An :class:`AuthMethod` is sans-IO: :meth:`AuthMethod.exchange` is a generator that
yields request lines and is sent each reply (a :class:`~tablesocket.protocol.Reply`),
so one method works unchanged with the blocking and the asyncio client, and
multi-step (challenge/response) methods fit the same shape. It returns when
authenticated and raises :class:`~tablesocket.AuthError` when refused.

Methods:

* :class:`SharedSecret` -- HandlerSocket's ``A 1 <secret>``.
* :class:`NativePassword` -- log in as a MariaDB account by challenge-response
  (``A 2``, then ``A 3 <user> <token>``): the password never crosses the wire. Works
  for accounts using ``mysql_native_password``.
* :class:`CleartextPassword` -- log in as a MariaDB account by sending the password
  (``A 4 <user> <password>``), for accounts using other authentication plugins. The
  server accepts it only over TLS, a unix socket, or when its administrator allowed
  cleartext passwords (``tablesocket_allow_cleartext_passwords``).

``client.auth("secret")`` is short for ``client.auth(SharedSecret("secret"))``;
``client.login(user, password)`` is short for
``client.auth(NativePassword(user, password))``. The methods given to a client's
constructor (``secret=``, ``user=``/``password=``/``auth=``) are replayed on every
(re)connection, before any other request.

Everything here is pure: :func:`native_password_token` is the scramble, without I/O.
"""

from __future__ import annotations

import hashlib
import re
from typing import Generator, Optional, Tuple, Union

from .errors import AuthError, ClientError, ProtocolError
from .protocol import Reply, encode_auth

__all__ = [
    "AuthMethod",
    "SharedSecret",
    "NativePassword",
    "CleartextPassword",
    "LOGIN_METHODS",
    "login_method",
    "native_password_token",
    "parse_nonce",
    "as_auth_method",
    "resolve_auth",
]

#: The generator type of :meth:`AuthMethod.exchange`.
Exchange = Generator[bytes, Reply, None]

#: The names accepted by ``auth=`` / ``login(method=...)``: ``"auto"`` (the
#: challenge-response login, never a cleartext password), ``"native"`` (the same,
#: explicitly) and ``"cleartext"`` (send the password; only when you ask for it).
LOGIN_METHODS = ("auto", "native", "cleartext")

NONCE_SIZE = 20
_NONCE_HEX = re.compile(rb"[0-9a-fA-F]{40}")

Secret = Union[str, bytes]


class AuthMethod:
    """Base class of authentication methods. Subclasses implement :meth:`exchange`.

    ``changes_account`` is true for methods that log in as a MariaDB account. The
    server forgets every index a connection opened when its account changes, so the
    clients forget them too (and re-open them by themselves before their next use);
    a :class:`~tablesocket.Pool` does not lend out again a connection on which such a
    login was made by hand.
    """

    changes_account = False

    def exchange(self) -> Exchange:
        """Yield request lines (each ending in LF), receive each reply; return when done."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def _check_ok(reply: Reply, what: str) -> None:
    reply.raise_for_error()  # no request bytes in the exception: they hold the credentials
    if reply.ncols != 1 or reply.tokens:
        raise ProtocolError(f"unexpected reply to '{what}': expected '0 1'")


class SharedSecret(AuthMethod):
    """HandlerSocket's plain shared secret: ``A 1 <secret>``, answered ``0 1`` or
    ``3 1 unauth``. The server compares it with ``handlersocket_plain_secret`` (read
    port) or ``handlersocket_plain_secret_rw`` (write port); tablesocket with
    ``tablesocket_plain_secret`` / ``tablesocket_plain_secret_wr``."""

    def __init__(self, secret: Secret) -> None:
        if not isinstance(secret, (str, bytes)):
            raise ClientError("the secret must be str or bytes")
        self._secret = secret

    def exchange(self) -> Exchange:
        reply = yield encode_auth("1", self._secret)
        _check_ok(reply, "A 1")

    def __repr__(self) -> str:  # never show the secret
        return "<SharedSecret ***>"


def _as_bytes(value: Secret, what: str) -> bytes:
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ClientError(f"cannot encode the {what} as UTF-8: {e}") from None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise ClientError(f"the {what} must be str or bytes, not {type(value).__name__}")


def _check_user(user: Secret) -> bytes:
    raw = _as_bytes(user, "user name")
    if not raw:
        raise ClientError("the user name must not be empty")
    return raw


def native_password_token(password: Secret, nonce: bytes) -> bytes:
    """The ``mysql_native_password`` scramble, as MariaDB computes it:
    ``SHA1(password) XOR SHA1(nonce + SHA1(SHA1(password)))`` (20 bytes), or ``b""``
    for an empty password. ``nonce`` is the server's 20 random bytes; ``str``
    passwords are UTF-8 encoded. ``A 3`` sends it as 40 lowercase hex digits."""
    pw = _as_bytes(password, "password")
    if not pw:
        return b""
    return _scramble(hashlib.sha1(pw).digest(), nonce)


def _scramble(stage1: bytes, nonce: bytes) -> bytes:
    if not isinstance(nonce, (bytes, bytearray)) or len(nonce) != NONCE_SIZE:
        raise ClientError(f"the nonce must be {NONCE_SIZE} bytes")
    stage2 = hashlib.sha1(stage1).digest()
    mask = hashlib.sha1(bytes(nonce) + stage2).digest()
    return bytes(a ^ b for a, b in zip(stage1, mask))


def parse_nonce(reply: Reply) -> bytes:
    """The 20 nonce bytes of the reply to ``A 2`` (``0 1 <40 hex digits>``). Raises the
    reply's error (:class:`~tablesocket.AuthError` for code 3, e.g. ``authtype`` from a
    server without account logins), or :class:`~tablesocket.ProtocolError` if it is
    not a challenge."""
    try:
        reply.raise_for_error()
    except AuthError as e:
        if e.message == "authtype":
            e.args = (f"{e.args[0]} (the server has no MariaDB-account logins: it does not "
                      "know 'A 2')",)
        raise
    if reply.ncols != 1 or len(reply.tokens) != 1 or not _NONCE_HEX.fullmatch(reply.tokens[0]):
        raise ProtocolError("unexpected reply to 'A 2': expected '0 1 <40 hex digits>'")
    return bytes.fromhex(reply.tokens[0].decode("ascii"))


class NativePassword(AuthMethod):
    """Log in as the MariaDB account ``user`` by challenge-response, for accounts that
    use ``mysql_native_password``. Sends ``A 2``; the server answers with a nonce,
    ``0 1 <nonce>``; then sends ``A 3 <user> <token>`` (see
    :func:`native_password_token`; an empty token for an empty password), answered
    ``0 1``. Neither the password nor anything that can be replayed crosses the
    wire. The host part of the account is not sent: the server matches the
    connection's address, as MariaDB does.

    Only ``SHA1(password)`` is kept in memory (to log in again after a reconnect), not
    the password itself.
    """

    changes_account = True

    def __init__(self, user: Secret, password: Optional[Secret] = None) -> None:
        self.user = _check_user(user)
        pw = _as_bytes(password if password is not None else b"", "password")
        self._stage1: Optional[bytes] = hashlib.sha1(pw).digest() if pw else None

    def token(self, nonce: bytes) -> bytes:
        """The 20-byte scramble for ``nonce`` (``b""`` for an empty password)."""
        return b"" if self._stage1 is None else _scramble(self._stage1, nonce)

    def exchange(self) -> Exchange:
        nonce = parse_nonce((yield encode_auth("2")))
        reply = yield encode_auth("3", self.user, self.token(nonce).hex())
        _check_ok(reply, "A 3")

    def __repr__(self) -> str:
        return f"<NativePassword user={self.user.decode('utf-8', 'replace')!r} password=***>"


class CleartextPassword(AuthMethod):
    """Log in as the MariaDB account ``user`` by sending its password:
    ``A 4 <user> <password>``, answered ``0 1``. Works for accounts of any
    authentication plugin the server can check a password against, but the password
    crosses the wire: use TLS (``ssl=``). The server refuses it on an unencrypted TCP
    connection unless its administrator allowed that."""

    changes_account = True

    def __init__(self, user: Secret, password: Optional[Secret] = None) -> None:
        self.user = _check_user(user)
        self._password = _as_bytes(password if password is not None else b"", "password")

    def exchange(self) -> Exchange:
        reply = yield encode_auth("4", self.user, self._password)
        _check_ok(reply, "A 4")

    def __repr__(self) -> str:
        return f"<CleartextPassword user={self.user.decode('utf-8', 'replace')!r} password=***>"


def login_method(user: Secret, password: Optional[Secret] = None,
                 method: str = "auto") -> AuthMethod:
    """The :class:`AuthMethod` for a login by name: ``"auto"`` or ``"native"`` ->
    :class:`NativePassword`, ``"cleartext"`` -> :class:`CleartextPassword`. ``"auto"``
    never sends the password in clear."""
    if method in ("auto", "native"):
        return NativePassword(user, password)
    if method == "cleartext":
        return CleartextPassword(user, password)
    raise ClientError(f"the login method must be one of {', '.join(LOGIN_METHODS)}, got {method!r}")


def as_auth_method(auth: Union[AuthMethod, Secret]) -> AuthMethod:
    if isinstance(auth, AuthMethod):
        return auth
    if isinstance(auth, (str, bytes)):
        return SharedSecret(auth)
    raise ClientError(f"auth must be an AuthMethod or a secret (str/bytes), got {type(auth).__name__}")


def resolve_auth(
    auth: Union[AuthMethod, Secret, None],
    user: Optional[Secret],
    password: Optional[Secret],
    secret: Optional[Secret],
) -> Tuple[Optional[AuthMethod], Optional[AuthMethod]]:
    """The constructor arguments of a client as ``(connection_auth, login)``: the
    method that is not a MariaDB-account login (a shared secret, or a custom method)
    and the account login. Both are replayed on every connection, in that order.

    * ``user=`` (and ``password=``) log in as an account, by the method that
      ``auth=`` names (``"auto"``, the default, ``"native"`` or ``"cleartext"``);
    * ``secret=`` sends HandlerSocket's shared secret first;
    * ``auth=`` may instead be an :class:`AuthMethod`, or (as before, and only
      without ``user=``) a shared secret.
    """
    conn: Optional[AuthMethod] = None
    login: Optional[AuthMethod] = None
    if password is not None and user is None:
        raise ClientError("password= needs user=")
    if isinstance(auth, str) and auth in LOGIN_METHODS:
        if user is None:
            raise ClientError(f"auth={auth!r} names a login method: give user= (and password=); "
                              "a shared secret goes in secret=")
        login = login_method(user, password, auth)
    elif auth is not None:
        if user is not None and isinstance(auth, (str, bytes)):
            # with user=, auth= names the login method: a typo must not become a secret
            raise ClientError(f"auth={auth!r}: the login method must be one of "
                              f"{', '.join(LOGIN_METHODS)} (a shared secret goes in secret=)")
        method = as_auth_method(auth)
        if method.changes_account:
            if user is not None:
                raise ClientError("give either user=/password= or an account login as auth=")
            login = method
        else:
            conn = method
    if user is not None and login is None:
        login = login_method(user, password, "auto")
    if secret is not None:
        if conn is not None:
            raise ClientError("give the shared secret once: secret= or auth=, not both")
        conn = SharedSecret(secret)
    return conn, login
