"""TLS through ssl= (ssl_context=), for the blocking and the asyncio client, against a local TLS
line server (a self-signed certificate made with the openssl CLI; skipped without it), a
client certificate, and logins over TLS to a fake account server."""

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


# ---- client certificates and logins over TLS --------------------------------------------------

from fakes import AccountServer  # noqa: E402


@pytest.fixture(scope="module")
def pki(tmp_path_factory, cert):
    """A CA and a client certificate it signed (the server keeps its self-signed one)."""
    d = tmp_path_factory.mktemp("pki")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    ca_key, ca_crt = d / "ca.key", d / "ca.pem"
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(ca_key),
        "-out", str(ca_crt), "-subj", "/CN=test CA")
    key, csr, crt = d / "client.key", d / "client.csr", d / "client.pem"
    run("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", "/CN=alice")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "1", "-out", str(crt))
    return dict(ca=str(ca_crt), client_cert=str(crt), client_key=str(key))


@pytest.fixture
def mtls_server(cert, pki):
    crt, key = cert
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    sctx.verify_mode = ssl.CERT_REQUIRED
    sctx.load_verify_locations(pki["ca"])
    with LoopbackServer(echo_handler, ssl_context=sctx) as srv:
        yield srv


def test_client_certificate(mtls_server, cert, pki):
    ctx = client_ctx(cert)
    ctx.load_cert_chain(pki["client_cert"], pki["client_key"])
    with ts.Client("127.0.0.1", mtls_server.port, timeout=5, ssl=ctx) as c:
        assert c.open_index("db", "t", columns=["k", "v"]).get(["a"]) == (b"a", b"v")
        peer = [s for s in mtls_server.conns if isinstance(s, ssl.SSLSocket)][-1]
        assert dict(x[0] for x in peer.getpeercert()["subject"])["commonName"] == "alice"

    async def main():
        async with ts.AsyncClient("127.0.0.1", mtls_server.port, timeout=5, ssl=ctx) as c:
            idx = await c.open_index("db", "t", columns=["k", "v"])
            assert await idx.get(["b"]) == (b"b", b"v")
    asyncio.run(main())
    with pytest.raises(ts.ConnectionError):  # no certificate: refused (during or after the handshake)
        with ts.Client("127.0.0.1", mtls_server.port, timeout=5, ssl=client_ctx(cert)) as c:
            c.open_index("db", "t", columns=["k", "v"]).get(["a"])


@pytest.fixture
def tls_account_server(cert):
    crt, key = cert
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    accounts = AccountServer({"bob": "hunter2"}, {"bob": ["t"]}, cleartext_ok=True)
    with LoopbackServer(accounts.connection, per_connection=True, ssl_context=sctx) as srv:
        srv.accounts = accounts
        yield srv


def test_logins_over_tls(tls_account_server, cert):
    srv = tls_account_server
    for method in ("auto", "cleartext"):
        with ts.Client("localhost", srv.port, timeout=5, ssl=client_ctx(cert), user="bob",
                       password="hunter2", auth=method) as c:
            assert c.open_index("db", "t", columns=["k", "v"]).get(["1"]) == (b"t", b"1")
            c.login("bob", "hunter2", method="cleartext")
            with pytest.raises(ts.AuthError):
                c.login("bob", "wrong", method="cleartext")
            assert c.open_index("db", "t", columns=["k", "v"]).get(["2"]) == (b"t", b"2")

    async def main():
        async with ts.AsyncClient("localhost", srv.port, timeout=5, ssl=client_ctx(cert),
                                  user="bob", password="hunter2", auth="cleartext") as c:
            idx = await c.open_index("db", "t", columns=["k", "v"])
            assert await idx.get(["3"]) == (b"t", b"3")
    asyncio.run(main())
    with ts.Pool("localhost", srv.port, size=2, timeout=5, ssl=client_ctx(cert), user="bob",
                 password="hunter2") as pool:
        with pool.connection() as a, pool.connection() as b:
            for c in (a, b):
                assert c.open_index("db", "t", columns=["k", "v"]).get(["4"]) == (b"t", b"4")
    assert [m for _, m in srv.accounts.logins] == [
        "native", "cleartext", "cleartext", "cleartext", "cleartext", "native", "native"]
