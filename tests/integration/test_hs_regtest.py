"""HandlerSocket's own regression suite (regtest/test_01_lib, Perl), one pytest test per suite test.

Runs scripts/hs_regtest.sh against the session `server` fixture's ports (the suite's hard-coded write
port 9999 is redirected by tests/hs_regtest/TSRegtestCompat.pm).  With TS_REGTEST_FIXED_PORTS=1 a
separate server is started on the suite's own ports 9998/9999 instead (skipped if they are taken).

The suite runs with GLOBAL sql_mode='' (tests 15 and 16 expect non-strict value conversion, and
tablesocket converts values as SQL does under the server's GLOBAL sql_mode); the previous value is
restored afterwards, so the other tests still see the server's strict default.  scripts/hs_regtest.sh
does the same on its own; doing it here as well keeps the module correct whatever the script does.
With tablesocket, tests/hs_regtest/expected/testNN.expected replaces the suite's file where present
(the script decides that; see tests/hs_regtest/expected/README.md).

Skipped, with the reason, if the MariaDB source tree (with the suite), perl, DBD::MariaDB or g++ is
missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import tsserver

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "hs_regtest.sh"
ALL = [f"{i:02d}" for i in range(1, 25)]
READ = {"01", "02", "03", "04", "05", "07", "08", "20", "21", "22"}


def _source_dir() -> Path:
    src = os.environ.get("MARIADB_SOURCE_DIR")
    if not src:
        env = Path("/var/cache/tablesocket/env")
        if env.is_file():
            for line in env.read_text().splitlines():
                if line.startswith("MARIADB_SOURCE_DIR="):
                    src = line.split("=", 1)[1].strip()
    return Path(src or "/var/cache/tablesocket/mariadb-10.11.18")


def _missing_prereq() -> str | None:
    suite = _source_dir() / "plugin" / "handler_socket" / "regtest" / "test_01_lib"
    if not suite.is_dir():
        return f"HandlerSocket regression suite not found at {suite} (set MARIADB_SOURCE_DIR)"
    for tool in ("perl", "g++", "make", "ar"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    r = subprocess.run(["perl", "-MDBI", "-MDBD::MariaDB", "-e", "1"], capture_output=True)
    if r.returncode != 0:
        return "Perl DBI/DBD::MariaDB missing (apt-get install libdbi-perl libdbd-mariadb-perl)"
    return None


@pytest.fixture(scope="module")
def perl_client():
    why = _missing_prereq()
    if why:
        pytest.skip(why)
    r = subprocess.run(["bash", str(SCRIPT), "--build-only"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail(f"building the Perl HandlerSocket client failed:\n{r.stdout}\n{r.stderr}", pytrace=False)
    return True


@pytest.fixture(scope="module")
def regtest_server(request, perl_client, plugin):
    """The server the suite runs against: the session server, or a private one on 9998/9999."""
    if os.environ.get("TS_REGTEST_FIXED_PORTS", "") not in ("", "0"):
        busy = [p for p in (9998, 9999) if not tsserver.port_is_free(p)]
        if busy:
            pytest.skip(f"TS_REGTEST_FIXED_PORTS=1 but port(s) {busy} on 127.0.0.1 are already in use")
        srv = tsserver.MariaDBServer(plugin, hs_port=9998, hs_port_wr=9999, name="regtest",
                                     extra_args=["--sql-mode="])
        try:
            srv.start()
        except tsserver.ServerError as e:
            srv.stop()
            pytest.fail(f"could not start the {plugin} server on 9998/9999: {e}", pytrace=False)
        yield srv
        srv.stop()
        if not request.session.testsfailed:
            shutil.rmtree(srv.rundir, ignore_errors=True)
    else:
        yield request.getfixturevalue("server")


@pytest.fixture(scope="module")
def nonstrict_sql_mode(regtest_server):
    """GLOBAL sql_mode='' while the suite runs; the previous value is restored afterwards."""
    srv = regtest_server
    (saved,), = srv.sql("SELECT @@GLOBAL.sql_mode")
    srv.exec_sql("SET GLOBAL sql_mode = ''")
    try:
        yield
    finally:
        if srv.running():
            srv.exec_sql("SET GLOBAL sql_mode = %s", (saved,))


@pytest.mark.parametrize("num", ALL, ids=[f"test{n}{'' if n in READ else '-write'}" for n in ALL])
def test_hs_regtest(num, regtest_server, nonstrict_sql_mode):
    srv = regtest_server
    results = srv.rundir / "hs-regtest"
    cmd = ["bash", str(SCRIPT), "--sql-port", str(srv.sql_port), "--hs-port", str(srv.hs_port),
           "--hs-port-wr", str(srv.hs_port_wr), "--results", str(results), "--timeout", "600", num]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out = r.stdout + ("\n--- stderr ---\n" + r.stderr if r.stderr.strip() else "")
    assert r.returncode == 0 and "1 passed, 0 failed" in r.stdout, out
