"""Authentication methods.

An :class:`AuthMethod` is sans-IO: :meth:`AuthMethod.exchange` is a generator that
yields request lines and is sent each reply (a :class:`~tablesocket.protocol.Reply`),
so one method works unchanged with the blocking and the asyncio client, and
multi-step (challenge/response) methods fit the same shape. It returns when
authenticated and raises :class:`~tablesocket.AuthError` when refused.

``client.auth("secret")`` is short for ``client.auth(SharedSecret("secret"))``. A
method passed to the client's constructor (``auth=``) is replayed on every
(re)connection, before any other request.
"""

from __future__ import annotations

from typing import Generator, Union

from .errors import ClientError, ProtocolError
from .protocol import Reply, encode_auth

__all__ = ["AuthMethod", "SharedSecret", "as_auth_method"]

#: The generator type of :meth:`AuthMethod.exchange`.
Exchange = Generator[bytes, Reply, None]


class AuthMethod:
    """Base class of authentication methods. Subclasses implement :meth:`exchange`."""

    def exchange(self) -> Exchange:
        """Yield request lines (each ending in LF), receive each reply; return when done."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class SharedSecret(AuthMethod):
    """HandlerSocket's plain shared secret: ``A 1 <secret>``, answered ``0 1`` or
    ``3 1 unauth``. The server compares it with ``handlersocket_plain_secret`` (read
    port) or ``handlersocket_plain_secret_rw`` (write port)."""

    def __init__(self, secret: Union[str, bytes]) -> None:
        if not isinstance(secret, (str, bytes)):
            raise ClientError("the secret must be str or bytes")
        self._secret = secret

    def exchange(self) -> Exchange:
        reply = yield encode_auth("1", self._secret)
        reply.raise_for_error()
        if reply.tokens:
            raise ProtocolError("unexpected values in the reply to 'A 1'")

    def __repr__(self) -> str:  # never show the secret
        return "<SharedSecret ***>"


def as_auth_method(auth: Union[AuthMethod, str, bytes]) -> AuthMethod:
    if isinstance(auth, AuthMethod):
        return auth
    if isinstance(auth, (str, bytes)):
        return SharedSecret(auth)
    raise ClientError(f"auth must be an AuthMethod or a secret (str/bytes), got {type(auth).__name__}")
