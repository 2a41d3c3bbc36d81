"""TLS through ssl_context, for the blocking and the asyncio client, against a local TLS
line server (a self-signed certificate made with the openssl CLI; skipped without it)."""

import asyncio
import shutil
import ssl
import subprocess

import pytest

import tablesocket as ts

from fakes import LoopbackServer, echo_handler

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True)
    return str(crt), str(key)


@pytest.fixture
def tls_server(cert):
    crt, key = cert
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    with LoopbackServer(echo_handler, ssl_context=sctx) as srv:
        yield srv


def client_ctx(cert):
    ctx = ssl.create_default_context(cafile=cert[0])
    return ctx


def test_blocking_tls(tls_server, cert):
    with ts.Client("127.0.0.1", tls_server.port, timeout=10, ssl_context=client_ctx(cert)) as c:
        idx = c.open_index("db", "t", columns=["k", "v"], decode=True)
        assert idx.find("=", ["a", 3]) == [("a", "vvv")]
        with c.pipeline() as p:  # ~8 MB of TLS records: exercises SSL pending() + interleaving
            rs = [p.find(idx, "=", [str(i), 4000]) for i in range(2000)]
        assert all(r.value == [(str(i), "v" * 4000)] for i, r in enumerate(rs))
        assert c.healthy()


def test_blocking_tls_hostname_checked(tls_server, cert):
    with pytest.raises(ts.ConnectionError):
        ts.Client("127.0.0.1", tls_server.port, timeout=5, ssl_context=client_ctx(cert),
                  server_hostname="wrong.example")
    with pytest.raises(ts.ConnectionError):  # untrusted certificate
        ts.Client("127.0.0.1", tls_server.port, timeout=5,
                  ssl_context=ssl.create_default_context())
    with ts.Client("localhost", tls_server.port, timeout=5, ssl_context=client_ctx(cert)) as c:
        c.open_index("db", "t", columns=["k", "v"])


def test_async_tls(tls_server, cert):
    async def main():
        async with ts.AsyncClient("127.0.0.1", tls_server.port, timeout=10,
                                  ssl_context=client_ctx(cert)) as c:
            idx = await c.open_index("db", "t", columns=["k", "v"], decode=True)
            got = await asyncio.gather(*(idx.find("=", [str(i), 10]) for i in range(200)))
            assert got == [[(str(i), "v" * 10)] for i in range(200)]
        with pytest.raises(ts.ConnectionError):
            await ts.AsyncClient("127.0.0.1", tls_server.port, timeout=5,
                                 ssl_context=ssl.create_default_context()).connect()
    asyncio.run(main())
