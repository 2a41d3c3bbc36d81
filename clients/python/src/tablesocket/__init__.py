"""tablesocket: a client for tablesocket and MariaDB HandlerSocket.

* :class:`Client` -- blocking; :class:`AsyncClient` -- asyncio; :class:`Pool` --
  thread-safe pool of blocking clients.
* :mod:`tablesocket.protocol` -- the sans-IO encoder/decoder both clients share.
* Errors: :class:`TablesocketError` and its subclasses (see :mod:`tablesocket.errors`).
"""

from .aio import AsyncClient, AsyncIndex, AsyncPipeline
from .auth import (
    AuthMethod,
    CleartextPassword,
    NativePassword,
    SharedSecret,
    native_password_token,
)
from ._core import Result
from .client import Client, Index, Pipeline, SocketTransport, Transport
from .errors import (
    AuthError,
    ClientError,
    ConnectionError,
    PermissionDenied,
    PoolTimeoutError,
    ProtocolError,
    ServerError,
    TablesocketError,
    TimeoutError,
)
from .pool import Pool
from .protocol import NULL, Filter, Row, Value

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncIndex",
    "AsyncPipeline",
    "AuthError",
    "AuthMethod",
    "CleartextPassword",
    "Client",
    "ClientError",
    "ConnectionError",
    "Filter",
    "Index",
    "NULL",
    "NativePassword",
    "PermissionDenied",
    "Pipeline",
    "Pool",
    "PoolTimeoutError",
    "ProtocolError",
    "Result",
    "Row",
    "ServerError",
    "SharedSecret",
    "SocketTransport",
    "TablesocketError",
    "TimeoutError",
    "Transport",
    "Value",
    "__version__",
    "native_password_token",
]
