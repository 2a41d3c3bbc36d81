"""memcached clients of other languages, each running one scenario (tests/clients/) against
tablesocket and against a private memcached 1.6.18, the outputs compared step by step:

    gomemcache (Go, github.com/bradfitz/gomemcache)   text protocol        tests/clients/gomemcache
    spymemcached 2.12.3 (Java)                        text and binary      tests/clients/spymemcached
    xmemcached 2.4.9 (Java)                           text and binary      tests/clients/xmemcached

Each scenario covers storage commands, multi-gets, CAS, counters (miss, wrap, floor at 0,
non-numeric), touch and expiry, flags, every byte value, empty / 1 MB / over-the-limit values,
250- and 251-byte keys, and 50 concurrent goroutines or threads sharing a counter; the Java
clients also their transcoders (int, long, byte[], a serialized object, a compressed string).

The clients come from the language's registry (the Go module proxy; Maven Central, the jar's
jars' SHA-1 checked): built once into build-clients/. Without the toolchain (go; javac and java) or
the registry, the test is skipped; a scenario that does not compile fails.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tsserver import REPO_ROOT  # noqa: E402

TS_ONLY = pytest.mark.tablesocket_only("the memcached front door is tablesocket's")
CLIENTS_DIR = REPO_ROOT / "tests" / "clients"
BUILD = REPO_ROOT / "build-clients"
MAVEN = "https://repo1.maven.org/maven2"
SPYMEMCACHED = ("net.spy", "spymemcached", "2.12.3")
XMEMCACHED = [("com.googlecode.xmemcached", "xmemcached", "2.4.9"), ("org.slf4j", "slf4j-api", "1.7.21")]


@pytest.fixture
def ts(server):
    if not getattr(server, "mc_port", None):
        pytest.skip("the test server has no memcached port")
    return server


def _newer(target: Path, *sources: Path) -> bool:
    return target.exists() and all(target.stat().st_mtime >= s.stat().st_mtime for s in sources)


@pytest.fixture(scope="module")
def gomemcache_scenario() -> Path:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if not go:
        pytest.skip("Go is not installed")
    src = CLIENTS_DIR / "gomemcache"
    out = BUILD / "gomemcache-scenario"
    if _newer(out, src / "main.go", src / "go.mod", src / "go.sum"):
        return out
    BUILD.mkdir(exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}  # go.mod and go.sum are complete: never rewritten
    dl = subprocess.run([go, "mod", "download"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    if dl.returncode != 0:
        pytest.skip(f"gomemcache could not be downloaded (the Go module proxy): {dl.stderr[-500:]}")
    b = subprocess.run([go, "build", "-o", str(out), "."], cwd=src, env=env, capture_output=True, text=True,
                       timeout=600)
    assert b.returncode == 0, f"the gomemcache scenario does not build:\n{b.stderr}"
    return out


def _maven_jar(group: str, artifact: str, version: str) -> Path:
    """A jar from the local Maven repository, or downloaded from Maven Central (SHA-1 checked)."""
    name = f"{artifact}-{version}.jar"
    local = Path.home() / ".m2/repository" / group.replace(".", "/") / artifact / version / name
    if local.exists():
        return local
    jar = BUILD / name
    if jar.exists():
        return jar
    BUILD.mkdir(exist_ok=True)
    url = f"{MAVEN}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as r:
            want = r.read().decode().split()[0].strip()
    except OSError as e:
        pytest.skip(f"{artifact} could not be downloaded from Maven Central: {e}")
    got = hashlib.sha1(data).hexdigest()
    assert got == want, f"{name}: SHA-1 {got}, Maven Central says {want}"
    tmp = jar.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.rename(jar)
    return jar


def _java_scenario(client: str, jars: list[Path]) -> list[str]:
    """tests/clients/<client>/Scenario.java compiled against jars: the command that runs it."""
    if not shutil.which("javac") or not shutil.which("java"):
        pytest.skip("a JDK (javac, java) is not installed")
    cp = os.pathsep.join(str(j) for j in jars)
    srcs = [CLIENTS_DIR / "java" / "Steps.java", CLIENTS_DIR / client / "Scenario.java"]
    classes = BUILD / f"{client}-scenario"
    if not _newer(classes / "Scenario.class", *srcs):
        classes.mkdir(parents=True, exist_ok=True)
        b = subprocess.run(["javac", "-cp", cp, "-d", str(classes), *map(str, srcs)], capture_output=True,
                           text=True, timeout=300)
        assert b.returncode == 0, f"the {client} scenario does not compile:\n{b.stderr}"
    return ["java", "-cp", f"{cp}{os.pathsep}{classes}", "Scenario"]


@pytest.fixture(scope="module")
def spymemcached_scenario() -> list[str]:
    return _java_scenario("spymemcached", [_maven_jar(*SPYMEMCACHED)])


@pytest.fixture(scope="module")
def xmemcached_scenario() -> list[str]:
    return _java_scenario("xmemcached", [_maven_jar(*a) for a in XMEMCACHED])


def _run(cmd: list[str], port: int, prefix: str, *extra: str) -> list[str]:
    r = subprocess.run([*cmd, f"127.0.0.1:{port}", prefix, *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{cmd[0]} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout.splitlines()


def _same(ts_lines: list[str], ref_lines: list[str]) -> None:
    diff = "\n".join(difflib.unified_diff(ref_lines, ts_lines, "memcached 1.6.18", "tablesocket", lineterm=""))
    assert ts_lines == ref_lines, f"the client saw something else from tablesocket:\n{diff}"


@TS_ONLY
def test_gomemcache_sees_what_memcached_gives(ts, mc_ref, gomemcache_scenario):
    prefix = f"go{uuid.uuid4().hex[:6]}:"
    try:
        ts_lines = _run([str(gomemcache_scenario)], ts.mc_port, prefix)
        ref_lines = _run([str(gomemcache_scenario)], mc_ref.port, prefix)
        assert len(ts_lines) >= 45
        _same(ts_lines, ref_lines)
        # what it wrote are rows of the default container's table
        assert ts.sql("SELECT v, flags FROM test.kv WHERE k = %s", ((prefix + "f").encode(),)) == \
            [("v", "4294967295")]
        assert ts.sql("SELECT v FROM test.kv WHERE k = %s", ((prefix + "ctr").encode(),)) == [("1000",)]
    finally:
        ts.exec_sql("DELETE FROM test.kv WHERE k LIKE %s", (prefix.encode() + b"%",))


# What each Java scenario wrote that SQL then reads (key suffix, query, rows).
JAVA_SQL_CHECK = {
    # spymemcached's int: big-endian without its leading zero bytes, flags 2 << 8
    "spymemcached": ("i", "SELECT HEX(v), flags FROM test.kv WHERE k = %s", [("01E240", "512")]),
    "xmemcached": ("shared", "SELECT v FROM test.kv WHERE k = %s", [("1000",)]),
}


@TS_ONLY
@pytest.mark.parametrize("protocol", ["text", "binary"])
@pytest.mark.parametrize("client", ["spymemcached", "xmemcached"])
def test_java_clients_see_what_memcached_gives(ts, mc_ref, request, client, protocol):
    scenario = request.getfixturevalue(f"{client}_scenario")
    prefix = f"{client[:3]}{uuid.uuid4().hex[:6]}:"
    try:
        ts_lines = _run(scenario, ts.mc_port, prefix, protocol)
        ref_lines = _run(scenario, mc_ref.port, prefix, protocol)
        assert len(ts_lines) >= 54
        _same(ts_lines, ref_lines)
        suffix, query, rows = JAVA_SQL_CHECK[client]
        assert ts.sql(query, ((prefix + suffix).encode(),)) == rows
    finally:
        ts.exec_sql("DELETE FROM test.kv WHERE k LIKE %s", (prefix.encode() + b"%",))
