"""Accounts, privileges and abuse limits on every tablesocket port (docs/security.md).

Each test class runs against its own private server (module-scoped) configured for what it tests:
require_auth on, an anonymous account mapping, cleartext allowed. Accounts are created with SQL;
the tests log in over the HandlerSocket protocol ('A 2' challenge + 'A 3' token, 'A 4' cleartext)
and memcached's ASCII authentication, and check replies byte for byte where the bytes are ours.
The server runs with --skip-name-resolve (as MariaDB matches hosts then: TCP clients are
'user'@'127.0.0.1', unix-socket clients 'user'@'localhost').
"""
from __future__ import annotations

import hashlib
import re
import socket
import struct
import threading
import time

import pytest

from tsserver import HSConn, MariaDBServer, hs_escape  # noqa: F401
from ts_mc import McConn

pytestmark = pytest.mark.tablesocket_only

INTERVAL_MS = 200  # tablesocket_privilege_check_interval of these servers


def native_token(password: str, nonce: bytes) -> bytes:
    s1 = hashlib.sha1(password.encode()).digest()
    s2 = hashlib.sha1(s1).digest()
    x = hashlib.sha1(nonce + s2).digest()
    return bytes(a ^ b for a, b in zip(s1, x))


def login(c: HSConn, user: str, password: str) -> bytes:
    """The challenge-response login; returns the reply to 'A 3'."""
    r = c.request("A\t2\n")
    m = re.fullmatch(rb"0\t1\t([0-9a-f]{40})\n", r)
    assert m, r
    tok = native_token(password, bytes.fromhex(m.group(1).decode())).hex() if password else ""
    return c.request(f"A\t3\t{user}\t{tok}\n")


def _until_closed(c: HSConn, timeout: float = 5.0) -> bytes:
    """What arrives until the server closes the connection (a reset counts: it may drop the last
    replies); fails if it stays open."""
    deadline = time.monotonic() + timeout
    try:
        while c._fill(deadline):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        pytest.fail(f"the connection stayed open; got {c.buf[:200]!r}")
    data, c.buf = c.buf, b""
    return data


def status(srv: MariaDBServer, name: str) -> int:
    rows = srv.sql(f"SHOW GLOBAL STATUS LIKE 'Tablesocket_{name}'")
    return int(rows[0][1])


def start(name: str, *args: str) -> MariaDBServer:
    srv = MariaDBServer("tablesocket", name=name, extra_args=[
        f"--tablesocket-privilege-check-interval={INTERVAL_MS}", "--tablesocket-auth-log-interval=3600",
        *args])
    srv.start()
    srv.exec_sql("CREATE TABLE IF NOT EXISTS test.acct (id INT PRIMARY KEY, name VARCHAR(20), "
                 "secret VARCHAR(20), KEY name_idx (name))")
    srv.exec_sql("REPLACE INTO test.acct VALUES (1,'alice','s1'),(2,'bob','s2')")
    srv.exec_sql("CREATE TABLE IF NOT EXISTS test.other (id INT PRIMARY KEY, v VARCHAR(10))")
    srv.exec_sql("REPLACE INTO test.other VALUES (1,'x')")
    return srv


def create_user(srv: MariaDBServer, user: str, password: str = "pw", host: str = "127.0.0.1",
                extra: str = "") -> None:
    srv.exec_sql(f"DROP USER IF EXISTS '{user}'@'{host}'")
    ident = f"IDENTIFIED BY '{password}'" if password else ""
    srv.exec_sql(f"CREATE USER '{user}'@'{host}' {ident} {extra}")


@pytest.fixture(scope="module")
def srv():
    s = start("sec", "--tablesocket-require-auth=ON")
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def conns():
    opened: list = []

    def make(srv: MariaDBServer, wr: bool = False) -> HSConn:
        c = HSConn(srv.hs_port_wr if wr else srv.hs_port)
        opened.append(c)
        return c
    yield make
    for c in opened:
        try:
            c.close()
        except OSError:
            pass


# ---- logins -----------------------------------------------------------------------------------

class TestLogin:
    def test_unauthenticated_may_do_nothing(self, srv, conns):
        c = conns(srv)
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"3\t1\tunauth\n"
        assert c.request("1\t=\t1\t1\n") == b"2\t1\tstmtnum\n"

    @staticmethod
    def _login_and_read(srv, conns, user):
        """A new account with SELECT on test.acct logs in, opens it and reads row 1."""
        create_user(srv, user)
        srv.exec_sql(f"GRANT SELECT ON test.acct TO '{user}'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, user, "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"

    def test_native_login_then_read(self, srv, conns):
        self._login_and_read(srv, conns, "reader")

    def test_a_privilege_check_does_not_stay_in_the_process_list(self, srv, conns):
        # The worker's session showed "checking permissions" in SHOW PROCESSLIST, its time
        # growing, long after the check was over.
        self._login_and_read(srv, conns, "pl_reader")
        assert srv.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                       "WHERE STATE = 'checking permissions' AND ID <> CONNECTION_ID()") == [("0",)]

    def test_wrong_password_fails_alone(self, srv, conns):
        create_user(srv, "reader2")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'reader2'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "reader2", "nope") == \
            b"3\t1\tAccess denied for user 'reader2'@'127.0.0.1' (using password: YES)\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"3\t1\tunauth\n"
        # the same connection can still log in
        assert login(c, "reader2", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"0\t1\n"

    def test_max_password_errors_blocks_the_account_as_sql_does(self, srv, conns):
        # The server's max_password_errors: that many wrong passwords in a row block the account
        # (even its right password) until FLUSH PRIVILEGES or ALTER USER; a success in between
        # starts the count again. Guesses over tablesocket were not counted at all.
        create_user(srv, "guessed")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'guessed'@'127.0.0.1'")
        blocked = (b"3\t1\tUser is blocked because of too many credential errors; unblock with "
                   b"'ALTER USER / FLUSH PRIVILEGES'\n")
        srv.exec_sql("SET GLOBAL max_password_errors = 3")
        try:
            c = conns(srv)
            for _ in range(2):
                assert login(c, "guessed", "nope").startswith(b"3\t1\tAccess denied")
            assert login(c, "guessed", "pw") == b"0\t1\n"  # clears the count
            for _ in range(3):
                assert login(c, "guessed", "nope").startswith(b"3\t1\tAccess denied")
            assert login(c, "guessed", "pw") == blocked
            assert login(conns(srv), "guessed", "pw") == blocked  # on every connection
            assert c.request("A\t4\tguessed\tpw\n").startswith(b"3\t1\t")  # cleartext too (plain TCP: refused)
            srv.exec_sql("FLUSH PRIVILEGES")
            assert login(c, "guessed", "pw") == b"0\t1\n"
            for _ in range(3):
                assert login(c, "guessed", "nope").startswith(b"3\t1\tAccess denied")
            assert login(c, "guessed", "pw") == blocked
            srv.exec_sql("ALTER USER 'guessed'@'127.0.0.1' IDENTIFIED BY 'pw2'")
            assert login(c, "guessed", "pw2") == b"0\t1\n"
        finally:
            srv.exec_sql("SET GLOBAL max_password_errors = DEFAULT")

    def test_unknown_user_looks_like_wrong_password(self, srv, conns):
        c = conns(srv)
        assert login(c, "nosuchuser", "pw") == \
            b"3\t1\tAccess denied for user 'nosuchuser'@'127.0.0.1' (using password: YES)\n"

    def test_unknown_user_takes_as_long_as_a_wrong_password(self, srv, conns):
        """A name that is no account used to be refused at once, a wrong password to an account
        after its record was read and the token checked: ~33 against ~58 µs, which told anyone
        counting microseconds which accounts exist. Both now do the same work. Timed in turns on
        one connection; the medians must be within 20% (they were 0.57x apart)."""
        import statistics
        create_user(srv, "timed")
        c = conns(srv)
        took: dict[str, list[float]] = {"timed": [], "nosuchname": []}
        for i in range(300):
            for user in (("timed", "nosuchname") if i % 2 else ("nosuchname", "timed")):
                m = re.fullmatch(rb"0\t1\t([0-9a-f]{40})\n", c.request("A\t2\n"))
                tok = native_token("wrong", bytes.fromhex(m.group(1).decode())).hex()
                t0 = time.perf_counter()
                r = c.request(f"A\t3\t{user}\t{tok}\n")
                took[user].append(time.perf_counter() - t0)
                assert r == f"3\t1\tAccess denied for user '{user}'@'127.0.0.1' (using password: YES)\n".encode()
        known, unknown = statistics.median(took["timed"]), statistics.median(took["nosuchname"])
        assert 0.8 < unknown / known < 1.25, f"wrong password {known * 1e6:.1f} µs, unknown name {unknown * 1e6:.1f} µs"

    def test_host_mismatch(self, srv, conns):
        create_user(srv, "remote", host="10.1.2.%")
        srv.exec_sql("GRANT SELECT ON test.* TO 'remote'@'10.1.2.%'")
        c = conns(srv)
        assert login(c, "remote", "pw").startswith(b"3\t1\tAccess denied for user 'remote'@'127.0.0.1'")

    def test_wildcard_host_matches(self, srv, conns):
        create_user(srv, "anyhost", host="%")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'anyhost'@'%'")
        c = conns(srv)
        assert login(c, "anyhost", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"

    def test_empty_password(self, srv, conns):
        create_user(srv, "nopw", password="")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'nopw'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "nopw", "") == b"0\t1\n"
        c2 = conns(srv)
        assert login(c2, "nopw", "something").startswith(b"3\t1\tAccess denied")

    def test_token_needs_a_fresh_challenge(self, srv, conns):
        create_user(srv, "replay")
        c = conns(srv)
        r = c.request("A\t2\n")
        nonce = bytes.fromhex(r.split(b"\t")[2].strip().decode())
        tok = native_token("pw", nonce).hex()
        assert c.request(f"A\t3\treplay\t{tok}\n") == b"0\t1\n"
        # the same token again (a replay) fails: the challenge was used up
        c2 = conns(srv)
        assert c2.request(f"A\t3\treplay\t{tok}\n").startswith(b"3\t1\t")
        assert c.request(f"A\t3\treplay\t{tok}\n").startswith(b"3\t1\t")

    def test_malformed_tokens(self, srv, conns):
        c = conns(srv)
        c.request("A\t2\n")
        assert c.request("A\t3\tx\tzz\n") == b"3\t1\tmalformed token: expected 40 hex digits\n"
        assert c.request("A\t3\n").startswith(b"3\t1\tAccess denied for user ''")
        assert c.request("A\t9\tx\n") == b"3\t1\tauthtype\n"

    def test_cleartext_refused_without_tls(self, srv, conns):
        create_user(srv, "clear")
        c = conns(srv)
        r = c.request("A\t4\tclear\tpw\n")
        assert r.startswith(b"3\t1\tcleartext passwords are refused on an unencrypted connection"), r

    def test_locked_and_expired_accounts(self, srv, conns):
        create_user(srv, "locked", extra="ACCOUNT LOCK")
        c = conns(srv)
        assert login(c, "locked", "pw") == b"3\t1\tAccess denied, this account is locked\n"
        create_user(srv, "expired", extra="PASSWORD EXPIRE")
        assert login(c, "expired", "pw").startswith(b"3\t1\tYour password has expired")

    def test_password_lifetime(self, srv, conns):
        # An account whose password is older than its PASSWORD EXPIRE INTERVAL, and one older than
        # the server's default_password_lifetime: both refused, as SQL logins are.
        create_user(srv, "aged", extra="PASSWORD EXPIRE INTERVAL 1 DAY")
        create_user(srv, "aged_default")
        for user, lifetime in (("aged", 1), ("aged_default", -1)):
            srv.exec_sql("UPDATE mysql.global_priv SET Priv = JSON_SET(Priv, '$.password_last_changed', 1000000, "
                         f"'$.password_lifetime', {lifetime}) WHERE User = '{user}'")
        srv.exec_sql("FLUSH PRIVILEGES")
        c = conns(srv)
        assert login(c, "aged", "pw").startswith(b"3\t1\tYour password has expired")
        assert login(c, "aged_default", "pw") == b"0\t1\n"  # default_password_lifetime is 0: never
        srv.exec_sql("SET GLOBAL default_password_lifetime = 1")
        try:
            assert login(c, "aged_default", "pw").startswith(b"3\t1\tYour password has expired")
        finally:
            srv.exec_sql("SET GLOBAL default_password_lifetime = 0")

    def test_other_auth_plugins_are_named(self, srv, conns):
        srv.exec_sql("DROP USER IF EXISTS 'sockuser'@'127.0.0.1'")
        srv.exec_sql("CREATE USER 'sockuser'@'127.0.0.1' IDENTIFIED VIA unix_socket")
        c = conns(srv)
        r = login(c, "sockuser", "pw")
        assert r.startswith(b"3\t1\tAccess denied for user 'sockuser': the account authenticates with "
                            b"'unix_socket', which tablesocket cannot verify"), r

    def test_relogin_switches_account_and_forgets_indexes(self, srv, conns):
        create_user(srv, "sw1")
        create_user(srv, "sw2")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'sw1'@'127.0.0.1'")
        srv.exec_sql("GRANT SELECT ON test.other TO 'sw2'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "sw1", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert login(c, "sw2", "pw") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"2\t1\tstmtnum\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n").startswith(b"3\t1\tSELECT command denied")
        assert c.request("P\t2\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"

    def test_hosts_resolved_as_the_server_resolves_them(self, conns):
        # Without skip-name-resolve a TCP client on 127.0.0.1 is 'localhost', as for SQL.
        s = start("resolve", "--tablesocket-require-auth=ON", "--skip-name-resolve=OFF")
        try:
            assert s.sql("SELECT @@skip_name_resolve") == [("0",)]
            create_user(s, "named", host="localhost")
            s.exec_sql("GRANT SELECT ON test.acct TO 'named'@'localhost'")
            c = conns(s)
            assert login(c, "named", "pw") == b"0\t1\n"
            assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
            assert login(c, "named", "bad") == \
                b"3\t1\tAccess denied for user 'named'@'localhost' (using password: YES)\n"
        finally:
            s.cleanup()

    def test_legacy_secret_alone_is_not_an_account(self, conns):
        s = start("secret", "--tablesocket-require-auth=ON", "--tablesocket-plain-secret=sekrit")
        try:
            # An option, not a system variable: no SQL account can read it (it opens the port).
            assert s.sql("SHOW GLOBAL VARIABLES LIKE 'tablesocket%secret%'", db=None) == []
            assert s.sql("SELECT COUNT(*) FROM information_schema.SYSTEM_VARIABLES "
                         "WHERE VARIABLE_NAME LIKE 'TABLESOCKET%SECRET%'", db=None) == [("0",)]
            c = conns(s)
            assert c.request("A\t1\tsekrit\n") == b"0\t1\n"
            assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"3\t1\tunauth\n"
            # an account login also opens the secret-protected port
            create_user(s, "acc")
            s.exec_sql("GRANT SELECT ON test.acct TO 'acc'@'127.0.0.1'")
            c2 = conns(s)
            assert login(c2, "acc", "pw") == b"0\t1\n"
            assert c2.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"0\t1\n"
            c3 = conns(s)
            assert c3.request("A\t1\twrong\n") == b"3\t1\tunauth\n"
        finally:
            s.cleanup()


# ---- privileges -------------------------------------------------------------------------------

class TestPrivileges:
    def test_no_privilege_on_table(self, srv, conns):
        create_user(srv, "noprivs")
        c = conns(srv)
        assert login(c, "noprivs", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == \
            b"3\t1\tSELECT command denied to user 'noprivs'@'127.0.0.1' for table `test`.`acct`\n"
        # a table that does not exist gives the same answer: nothing is disclosed
        assert c.request("P\t1\ttest\tnosuchtable\tPRIMARY\tid\n") == \
            b"3\t1\tSELECT command denied to user 'noprivs'@'127.0.0.1' for table `test`.`nosuchtable`\n"

    def test_db_level_grant(self, srv, conns):
        create_user(srv, "dbreader")
        srv.exec_sql("GRANT SELECT ON test.* TO 'dbreader'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "dbreader", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\tx\n"

    def test_column_grants(self, srv, conns):
        create_user(srv, "colreader")
        srv.exec_sql("GRANT SELECT (id, name) ON test.acct TO 'colreader'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "colreader", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t2\n") == b"0\t2\t2\tbob\n"
        assert c.request("P\t2\ttest\tacct\tPRIMARY\tid,secret\n") == \
            b"3\t1\tSELECT command denied to user 'colreader'@'127.0.0.1' for column 'secret' in table 'acct'\n"
        # a filter on a column without SELECT is refused too
        assert c.request("P\t3\ttest\tacct\tPRIMARY\tid\tsecret\n").startswith(b"3\t1\tSELECT command denied")
        # and so is searching an index whose key column is not readable
        srv.exec_sql("GRANT SELECT (id) ON test.other TO 'colreader'@'127.0.0.1'")
        assert c.request("P\t4\ttest\tother\tPRIMARY\tid\n") == b"0\t1\n"

    def test_write_privileges_each_checked(self, srv, conns):
        srv.exec_sql("CREATE TABLE IF NOT EXISTS test.wr (id INT PRIMARY KEY, v INT)")
        srv.exec_sql("DELETE FROM test.wr")
        create_user(srv, "inserter")
        srv.exec_sql("GRANT INSERT ON test.wr TO 'inserter'@'127.0.0.1'")
        c = conns(srv, wr=True)
        assert login(c, "inserter", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\twr\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t+\t2\t1\t10\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n").startswith(b"3\t1\tSELECT command denied")
        assert c.request("1\t=\t1\t1\t1\t0\tU\t1\t11\n").startswith(b"3\t1\tUPDATE command denied")
        assert c.request("1\t=\t1\t1\t1\t0\tD\n").startswith(b"3\t1\t")
        assert srv.sql("SELECT id, v FROM test.wr") == [("1", "10")]

        create_user(srv, "updater")
        srv.exec_sql("GRANT SELECT (id), UPDATE (v) ON test.wr TO 'updater'@'127.0.0.1'")
        c2 = conns(srv, wr=True)
        assert login(c2, "updater", "pw") == b"0\t1\n"
        assert c2.request("P\t1\ttest\twr\tPRIMARY\tv\n") == b"0\t1\n"
        assert c2.request("1\t=\t1\t1\t1\t0\tU\t12\n") == b"0\t1\t1\n"
        # increment reads the column too: needs SELECT on v
        assert c2.request("1\t=\t1\t1\t1\t0\t+\t1\n").startswith(b"3\t1\tSELECT command denied")
        assert c2.request("1\t+\t1\t5\n").startswith(b"3\t1\tINSERT command denied")
        assert c2.request("1\t=\t1\t1\t1\t0\tD\n").startswith(b"3\t1\tDELETE command denied")
        assert srv.sql("SELECT id, v FROM test.wr") == [("1", "12")]

        create_user(srv, "deleter")
        srv.exec_sql("GRANT SELECT, DELETE ON test.wr TO 'deleter'@'127.0.0.1'")
        c3 = conns(srv, wr=True)
        assert login(c3, "deleter", "pw") == b"0\t1\n"
        assert c3.request("P\t1\ttest\twr\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c3.request("1\t=\t1\t1\t1\t0\tD\n") == b"0\t1\t1\n"
        assert srv.sql("SELECT COUNT(*) FROM test.wr") == [("0",)]

    def test_role(self, srv, conns):
        srv.exec_sql("DROP ROLE IF EXISTS acct_reader")
        srv.exec_sql("CREATE ROLE acct_reader")
        srv.exec_sql("GRANT SELECT ON test.acct TO acct_reader")
        create_user(srv, "roleuser")
        srv.exec_sql("GRANT acct_reader TO 'roleuser'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "roleuser", "pw") == b"0\t1\n"
        # without a default role the role's privileges are not active (as in SQL)
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n").startswith(b"3\t1\tSELECT command denied")
        srv.exec_sql("SET DEFAULT ROLE acct_reader FOR 'roleuser'@'127.0.0.1'")
        c2 = conns(srv)
        assert login(c2, "roleuser", "pw") == b"0\t1\n"
        assert c2.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert c2.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
        # revoking from the role reaches the open handle too
        srv.exec_sql("REVOKE SELECT ON test.acct FROM acct_reader")
        time.sleep(INTERVAL_MS / 1000 * 2 + 0.1)
        assert c2.request("1\t=\t1\t1\n").startswith(b"3\t1\tSELECT command denied")

    def test_revoke_reaches_open_handles(self, srv, conns):
        create_user(srv, "revokee")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'revokee'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "revokee", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
        srv.exec_sql("REVOKE SELECT ON test.acct FROM 'revokee'@'127.0.0.1'")
        t0 = time.monotonic()
        while c.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n":
            assert time.monotonic() - t0 < 2.0, "REVOKE did not reach the open handle"
            time.sleep(0.02)
        took = time.monotonic() - t0
        assert took <= INTERVAL_MS / 1000 + 0.5
        assert c.request("1\t=\t1\t1\n").startswith(b"3\t1\tSELECT command denied")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'revokee'@'127.0.0.1'")
        time.sleep(INTERVAL_MS / 1000 * 2 + 0.1)
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"

    def test_revoke_db_level_and_drop_user(self, srv, conns):
        create_user(srv, "dropped")
        srv.exec_sql("GRANT SELECT ON test.* TO 'dropped'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "dropped", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\tx\n"
        srv.exec_sql("DROP USER 'dropped'@'127.0.0.1'")
        time.sleep(INTERVAL_MS / 1000 * 2 + 0.1)
        r = c.request("1\t=\t1\t1\n")
        assert r.startswith(b"3\t1\t"), r

    def test_global_privilege(self, srv, conns):
        create_user(srv, "globalreader")
        srv.exec_sql("GRANT SELECT ON *.* TO 'globalreader'@'127.0.0.1'")
        c = conns(srv)
        assert login(c, "globalreader", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\tx\n"

    def test_status_counters(self, srv, conns):
        before_ok, before_fail, before_denied = (status(srv, "auth_successes"), status(srv, "auth_failures"),
                                                 status(srv, "access_denied"))
        create_user(srv, "counted")
        c = conns(srv)
        assert login(c, "counted", "bad").startswith(b"3\t1\t")
        assert login(c, "counted", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid\n").startswith(b"3\t1\t")
        assert status(srv, "auth_successes") == before_ok + 1
        assert status(srv, "auth_failures") == before_fail + 1
        assert status(srv, "access_denied") >= before_denied + 1


# ---- connection limits and abuse --------------------------------------------------------------

class TestLimits:
    def test_account_max_user_connections(self, srv, conns):
        create_user(srv, "limited", extra="WITH MAX_USER_CONNECTIONS 2")
        a, b, x = conns(srv), conns(srv), conns(srv)
        assert login(a, "limited", "pw") == b"0\t1\n"
        assert login(b, "limited", "pw") == b"0\t1\n"
        assert login(x, "limited", "pw") == \
            b"3\t1\tUser 'limited'@'127.0.0.1' has exceeded the 'max_user_connections' resource (2)\n"
        a.close()
        deadline = time.monotonic() + 5
        while login(x, "limited", "pw") != b"0\t1\n":
            assert time.monotonic() < deadline
            time.sleep(0.05)

    def test_account_hourly_limits(self, srv, conns):
        """MAX_QUERIES_PER_HOUR counts every read and write request, MAX_UPDATES_PER_HOUR the writes,
        MAX_CONNECTIONS_PER_HOUR the logins; over every connection of the account. A refused
        request changes nothing; others' requests go on."""
        create_user(srv, "hourly", extra="WITH MAX_QUERIES_PER_HOUR 5 MAX_UPDATES_PER_HOUR 2")
        srv.exec_sql("GRANT SELECT, INSERT, UPDATE ON test.other TO 'hourly'@'127.0.0.1'")
        create_user(srv, "free")
        srv.exec_sql("GRANT SELECT ON test.other TO 'free'@'127.0.0.1'")
        a, b = conns(srv, wr=True), conns(srv, wr=True)
        for c in (a, b):
            assert login(c, "hourly", "pw") == b"0\t1\n"
            assert c.request("P\t1\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"  # opens do not count
        assert a.request("1\t=\t1\t1\n") == b"0\t2\t1\tx\n"                     # 1 question
        assert a.request("1\t+\t2\t50\th1\n") == b"0\t1\n"                     # 2, update 1
        assert b.request("1\t=\t1\t50\t1\t0\tU\t50\th2\n") == b"0\t1\t1\n"  # 3, update 2
        updates = b"3\t1\tUser 'hourly'@'127.0.0.1' has exceeded the 'max_updates_per_hour' resource (2)\n"
        assert b.request("1\t+\t2\t51\th3\n") == updates
        assert a.request("1\t=\t1\t50\t1\t0\tD\n") == updates
        assert b.request("1\t=\t1\t50\n") == b"0\t2\t50\th2\n"                  # 4
        assert a.request("1\t>=\t1\t1\t10\t0\n") == b"0\t2\t1\tx\t50\th2\n"  # 5
        questions = b"3\t1\tUser 'hourly'@'127.0.0.1' has exceeded the 'max_queries_per_hour' resource (5)\n"
        assert a.request("1\t=\t1\t1\n") == questions
        assert b.request("1\t=\t1\t1\n") == questions
        assert srv.sql("SELECT id, v FROM test.other WHERE id >= 50") == [("50", "h2")]
        srv.exec_sql("DELETE FROM test.other WHERE id >= 50")
        f = conns(srv)
        assert login(f, "free", "pw") == b"0\t1\n"
        assert f.request("P\t1\ttest\tother\tPRIMARY\tid,v\n") == b"0\t1\n"
        for _ in range(20):
            assert f.request("1\t=\t1\t1\n") == b"0\t2\t1\tx\n"
        # Logins per hour.
        create_user(srv, "hourly_conn", extra="WITH MAX_CONNECTIONS_PER_HOUR 2")
        x, y, z = conns(srv), conns(srv), conns(srv)
        assert login(x, "hourly_conn", "pw") == b"0\t1\n"
        x.close()
        assert login(y, "hourly_conn", "pw") == b"0\t1\n"
        assert login(z, "hourly_conn", "pw") == \
            b"3\t1\tUser 'hourly_conn'@'127.0.0.1' has exceeded the 'max_connections_per_hour' resource (2)\n"
        # A login refused by MAX_USER_CONNECTIONS is not one of the hour's connections.
        create_user(srv, "hourly_both", extra="WITH MAX_USER_CONNECTIONS 1 MAX_CONNECTIONS_PER_HOUR 2")
        a1, a2 = conns(srv), conns(srv)
        assert login(a1, "hourly_both", "pw") == b"0\t1\n"
        for _ in range(3):
            assert login(a2, "hourly_both", "pw").endswith(b"has exceeded the 'max_user_connections' resource (1)\n")
        a1.close()
        deadline = time.monotonic() + 5
        while (r := login(a2, "hourly_both", "pw")) != b"0\t1\n":
            assert r.endswith(b"'max_user_connections' resource (1)\n") and time.monotonic() < deadline, r
            time.sleep(0.05)
        a2.close()
        a3 = conns(srv)
        deadline = time.monotonic() + 5
        while (r := login(a3, "hourly_both", "pw")).endswith(b"'max_user_connections' resource (1)\n"):
            assert time.monotonic() < deadline, r
            time.sleep(0.05)
        assert r.endswith(b"has exceeded the 'max_connections_per_hour' resource (2)\n"), r

    def test_before_a_login_a_connection_holds_little_input(self, srv, conns):
        """A connection that must log in first may buffer 16 KB of input until it does: a request
        longer than that (it can only be something else than a login) closes it at once, instead
        of holding up to tablesocket_max_request_size each (1 MB) until login_timeout. Pipelined
        short requests are answered as before; after the login, large requests work."""
        c = conns(srv, wr=True)
        t0 = time.monotonic()
        c.send(b"1\t=\t1\t" + b"x" * 200000)  # no end of line
        got = _until_closed(c)
        assert time.monotonic() - t0 < 3
        assert got in (b"", b"2\t1\ttoolong\n") or got.startswith(b"2\t1\ttoolong\n"), got  # a reset may lose it
        p = conns(srv, wr=True)
        p.send(b"P\t1\ttest\tother\tPRIMARY\tid,v\n" * 2000)  # 62 KB of short unauthenticated requests
        assert p.recv_lines(2000, timeout=10) == [b"3\t1\tunauth\n"] * 2000
        create_user(srv, "bigline")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'bigline'@'127.0.0.1'")
        assert login(p, "bigline", "pw") == b"0\t1\n"
        assert p.request("P\t1\ttest\tacct\tname_idx\tid,name\n") == b"0\t1\n"
        assert p.request(b"1\t=\t1\t" + b"y" * 200000 + b"\n") == b"0\t2\n"  # a 200 KB key: found nothing

    def test_global_max_user_connections(self, conns):
        s = start("peracct", "--tablesocket-require-auth=ON", "--tablesocket-max-user-connections=1")
        try:
            create_user(s, "one")
            a, b = conns(s), conns(s)
            assert login(a, "one", "pw") == b"0\t1\n"
            assert login(b, "one", "pw").endswith(b"has exceeded the 'max_user_connections' resource (1)\n")
            # a second login on the connection that holds the slot keeps it
            assert login(a, "one", "pw") == b"0\t1\n"
        finally:
            s.cleanup()

    def test_ten_thousand_failed_logins_while_others_work(self, srv, conns):
        create_user(srv, "busy")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'busy'@'127.0.0.1'")
        good = conns(srv)
        assert login(good, "busy", "pw") == b"0\t1\n"
        assert good.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        before = status(srv, "auth_failures")
        log_lines_before = srv.log_path.read_text(errors="replace").count("failed login")
        n = 10_000
        stop = threading.Event()
        served = []

        def keep_reading():
            while not stop.is_set():
                assert good.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
                served.append(1)
        t = threading.Thread(target=keep_reading)
        t.start()
        try:
            bad = conns(srv)
            tok = "00" * 20
            batch = 500
            for _ in range(n // batch):
                bad.send(("A\t2\n" + f"A\t3\tbusy\t{tok}\n") * batch)
                lines = bad.recv_lines(2 * batch, timeout=60)
                assert all(line.startswith((b"0\t1\t", b"3\t1\tAccess denied")) for line in lines)
        finally:
            stop.set()
            t.join()
        assert status(srv, "auth_failures") == before + n
        assert len(served) > 10
        # rate-limited logging: a handful of lines, not ten thousand
        assert srv.log_path.read_text(errors="replace").count("failed login") - log_lines_before <= 2

    def test_client_stalling_mid_login_blocks_nobody(self, srv, conns):
        create_user(srv, "patient")
        srv.exec_sql("GRANT SELECT ON test.acct TO 'patient'@'127.0.0.1'")
        stalled = conns(srv)
        stalled.request("A\t2\n")
        stalled.send("A\t3\tpatient\t0123")  # half a request, then silence
        raw = socket.create_connection(("127.0.0.1", srv.hs_port))
        raw.sendall(b"A")  # one byte, then silence
        c = conns(srv)
        assert login(c, "patient", "pw") == b"0\t1\n"
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        raw.close()

    def test_login_timeout_closes_idle_unauthenticated(self, conns):
        s = start("logintimeout", "--tablesocket-require-auth=ON", "--tablesocket-login-timeout=1")
        try:
            create_user(s, "quick")
            idle = conns(s)
            t0 = time.monotonic()
            chatty = conns(s)   # sends requests, but never logs in: closed as well
            ok = conns(s)
            assert login(ok, "quick", "pw") == b"0\t1\n"
            mc = McConn(s.mc_port)
            # Requests do not extend the time to log in: chatty, talking all along, is closed
            # after the limit (1 s) and the worker's once-a-second check, not kept open.
            closed_after = None
            while closed_after is None and time.monotonic() - t0 < 5:
                try:
                    assert chatty.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"3\t1\tunauth\n"
                except (EOFError, ConnectionError):
                    closed_after = time.monotonic() - t0
                time.sleep(0.1)
            assert closed_after is not None and closed_after >= 0.9, closed_after
            with pytest.raises((EOFError, ConnectionError)):
                idle.recv_line(timeout=5)
            with pytest.raises((EOFError, ConnectionError)):
                mc.recv_line(timeout=5)
            assert time.monotonic() - t0 < 6
            assert ok.request("P\t1\ttest\tacct\tPRIMARY\tid\n").startswith(b"3\t1\tSELECT command denied")
        finally:
            s.cleanup()

    def test_hostile_auth_input(self, srv, conns):
        c = conns(srv)
        c.request("A\t2\n")
        assert c.request(f"A\t3\t{'u' * 4000}\t\n").startswith(b"3\t1\tAccess denied")
        # A line longer than any login (8 KB) before the login: refused, and the connection closed.
        c.send(f"A\t3\t{'u' * 100_000}\t\n")
        assert _until_closed(c).startswith(b"2\t1\ttoolong\n")
        c = conns(srv)
        assert c.request("A\t3\tx\t\n") == b"3\t1\tno challenge: request one with 'A 2' first\n"
        assert c.request("A\t4\t\x01\x02\t\n") == b"2\t1\tescape\n"  # 0x01 before 0x02: malformed
        assert c.request("A\t4\t\x01\x42\t\n").startswith(b"3\t1\t")
        assert c.request("A\t3\tnul\x10user\t" + "ab" * 20 + "\n").startswith(b"3\t1\t")
        assert c.request("A\n") == b"3\t1\tauthtype\n"
        create_user(srv, "afterhostile")
        assert login(c, "afterhostile", "pw") == b"0\t1\n"


# ---- an anonymous account for connections that do not log in ----------------------------------

class TestAnonymousAccount:
    @pytest.fixture(scope="class")
    @classmethod
    def mapped(cls):
        s = MariaDBServer("tablesocket", name="anon", extra_args=[
            f"--tablesocket-privilege-check-interval={INTERVAL_MS}", "--tablesocket-require-auth=ON",
            "--tablesocket-anonymous-account='legacy'@'%'"])
        s.start()
        s.exec_sql("CREATE TABLE test.acct (id INT PRIMARY KEY, name VARCHAR(20))")
        s.exec_sql("INSERT INTO test.acct VALUES (1,'alice')")
        s.exec_sql("CREATE TABLE test.other (id INT PRIMARY KEY, v VARCHAR(10))")
        s.exec_sql("CREATE USER 'legacy'@'%' IDENTIFIED BY 'unused'")
        s.exec_sql("GRANT SELECT ON test.acct TO 'legacy'@'%'")
        try:
            yield s
        finally:
            s.cleanup()

    def test_unauthenticated_get_the_mapped_account(self, mapped, conns):
        c = conns(mapped)
        assert c.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
        assert c.request("P\t2\ttest\tother\tPRIMARY\tid\n") == \
            b"3\t1\tSELECT command denied to user 'legacy'@'%' for table `test`.`other`\n"
        w = conns(mapped, wr=True)
        assert w.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
        assert w.request("1\t+\t2\t2\tbob\n").startswith(b"3\t1\tINSERT command denied")


class TestUnrestrictedByDefault:
    def test_default_server_needs_no_login(self, server):
        # The shared server runs with the defaults: HandlerSocket's behaviour, no account needed.
        assert server.sql("SELECT @@tablesocket_require_auth, @@tablesocket_anonymous_account") == [("0", "")]
        server.exec_sql("CREATE TABLE IF NOT EXISTS test.sec_default (id INT PRIMARY KEY, v VARCHAR(5))")
        server.exec_sql("REPLACE INTO test.sec_default VALUES (1, 'a')")
        c = HSConn(server.hs_port)
        try:
            assert c.request("P\t1\ttest\tsec_default\tPRIMARY\tid,v\n") == b"0\t1\n"
            assert c.request("1\t=\t1\t1\n") == b"0\t2\t1\ta\n"
            # but a client that logs in is held to its account's privileges
            create_user(server, "defuser")
            assert login(c, "defuser", "pw") == b"0\t1\n"
            assert c.request("P\t1\ttest\tsec_default\tPRIMARY\tid,v\n").startswith(b"3\t1\tSELECT command denied")
        finally:
            c.close()
            server.exec_sql("DROP TABLE IF EXISTS test.sec_default")
            server.exec_sql("DROP USER IF EXISTS 'defuser'@'127.0.0.1'")

    def test_the_mysql_schema_needs_a_login(self, server):
        # Without an account no privilege is checked, but mysql.* (password hashes; an insert into
        # global_priv made an administrator at the next FLUSH PRIVILEGES) is refused; an account
        # that may read it does.
        want = (b"3\t1\tthe mysql schema needs a login: log in with a MariaDB account (A 3 / A 4) "
                b"that may use it\n")
        for port in (server.hs_port, server.hs_port_wr):
            c = HSConn(port)
            try:
                for db in ("mysql", "MySQL"):
                    assert c.request(f"P\t1\t{db}\tglobal_priv\tPRIMARY\tHost,User,Priv\n") == want, (port, db)
                assert c.request("1\t>=\t1\t\t10\n") == b"2\t1\tstmtnum\n"
                assert c.request("P\t2\tinnodb_memcache\tcontainers\tPRIMARY\tname\n") == b"0\t1\n"
                create_user(server, "sysreader")
                server.exec_sql("GRANT SELECT ON mysql.global_priv TO 'sysreader'@'127.0.0.1'")
                assert login(c, "sysreader", "pw") == b"0\t1\n"
                assert c.request("P\t1\tmysql\tglobal_priv\tPRIMARY\tUser\n") == b"0\t1\n"
            finally:
                c.close()
                server.exec_sql("DROP USER IF EXISTS 'sysreader'@'127.0.0.1'")


# ---- memcached ----------------------------------------------------------------------------------

class TestMemcachedAuth:
    @pytest.fixture(scope="class")
    @classmethod
    def mcsrv(cls, tmp_path_factory):
        sock = str(tmp_path_factory.mktemp("mcsock") / "mc.sock")
        s = MariaDBServer("tablesocket", name="mcauth", extra_args=[
            f"--tablesocket-privilege-check-interval={INTERVAL_MS}", "--tablesocket-require-auth=ON",
            f"--tablesocket-mc-socket={sock}"])
        s.start()
        s.load_mc_schema()
        s.mc_unix = sock
        s.exec_sql("DELETE FROM test.kv")
        s.exec_sql("INSERT INTO test.kv (k, v, flags, cas, exp) VALUES ('hello', 'world', 0, 0, 0)")
        s.exec_sql("CREATE USER 'mcuser'@'localhost' IDENTIFIED BY 'mcpw'")
        s.exec_sql("GRANT SELECT, INSERT, UPDATE, DELETE ON test.kv TO 'mcuser'@'localhost'")
        s.exec_sql("CREATE USER 'mcro'@'localhost' IDENTIFIED BY 'ro'")
        s.exec_sql("GRANT SELECT ON test.kv TO 'mcro'@'localhost'")
        try:
            yield s
        finally:
            s.cleanup()

    def test_unauthenticated_commands_refused(self, mcsrv):
        c = McConn(mcsrv.mc_port)
        c.send("get hello\r\n")
        c.expect(b"CLIENT_ERROR unauthenticated\r\n")
        c.send("delete hello\r\n")
        c.expect(b"CLIENT_ERROR unauthenticated\r\n")
        c.send("mg hello v\r\n")
        c.expect(b"CLIENT_ERROR unauthenticated\r\n")

    def test_ascii_auth_over_tcp_without_tls_is_refused(self, mcsrv):
        c = McConn(mcsrv.mc_port)
        c.send("set auth 0 0 11\r\nmcuser mcpw\r\n")
        c.expect(b"CLIENT_ERROR authentication failure\r\n")
        c.send("get hello\r\n")
        c.expect(b"CLIENT_ERROR unauthenticated\r\n")

    def test_ascii_auth_on_unix_socket(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set whatever 0 0 11\r\nmcuser mcpw\r\n")
        c.expect(b"STORED\r\n")
        c.send("get hello\r\n")
        c.expect(b"VALUE hello 0 5\r\nworld\r\nEND\r\n")
        c.send("set k2 0 0 2\r\nv2\r\n")
        c.expect(b"STORED\r\n")
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='k2'") == [("v2",)]

    def test_before_the_login_a_large_request_is_refused_with_an_error(self, mcsrv):
        """Before a required login a connection holds at most 16 KB of input: a larger data block
        or a longer get line is refused with memcached's error as soon as its header is read (the
        data skipped as it comes), not met by that cap, which closed the connection without a
        word. The login that follows on the same connection works, and after it the account's
        limits apply."""
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send(b"set auth 0 0 100000\r\n" + b"u" * 100000 + b"\r\n")
        c.expect(b"SERVER_ERROR object too large for cache\r\n")
        c.send(b"get " + b"k " * 6000 + b"\r\n")  # 12 KB line: closed, as any over-long line
        assert c.closed_by_peer() == b"SERVER_ERROR get line too long (before the login)\r\n"
        for op, extras, key, value in ((0x01, struct.pack(">II", 0, 0), b"bk", b"v" * 100000),  # too large
                                       (0x1b, struct.pack(">I", 1), b"", b""),  # verbosity
                                       (0x55, b"", b"", b"x" * 100)):  # an unknown opcode
            b = McConn(unix_path=mcsrv.mc_unix)  # binary: refused and closed, as memcached -S does
            assert self.bin_call(b, op, extras, key, value) == (op, 0x20, b"Auth failure."), op
            assert b.closed_by_peer() == b""
        b = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(b, 0x21, key=b"PLAIN", value=b"\0mcuser\0mcpw") == (0x21, 0, b"Authenticated")
        assert self.bin_call(b, 0x01, struct.pack(">II", 0, 0), b"bk", b"v" * 100000)[:2] == (0x01, 0)
        assert self.bin_call(b, 0x00, key=b"hello") == (0x00, 0, b"world")
        mcsrv.exec_sql("DELETE FROM test.kv WHERE k='bk'")
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send(b"set auth 0 0 100000\r\n" + b"u" * 100000 + b"\r\n")
        c.expect(b"SERVER_ERROR object too large for cache\r\n")
        c.send("set whatever 0 0 11\r\nmcuser mcpw\r\n")
        c.expect(b"STORED\r\n")
        c.send(b"set big 0 0 100000\r\n" + b"b" * 100000 + b"\r\n")  # after it, as large as allowed
        c.expect(b"STORED\r\n")
        assert mcsrv.sql("SELECT LENGTH(v) FROM test.kv WHERE k='big'") == [("100000",)]
        mcsrv.exec_sql("DELETE FROM test.kv WHERE k='big'")

    def test_an_oversized_set_before_the_login_deletes_nothing(self, mcsrv):
        """memcached unlinks an item whose set was refused as too large; that unlink ran before the
        connection's identity was asked, as no account at all: a client that had not logged in
        deleted any item with `set <key> 0 0 2000000` (text or binary)."""
        mcsrv.exec_sql("REPLACE INTO test.kv (k, v, flags, cas, exp) VALUES ('victim', 'alive', 0, 0, 0)")
        c = McConn(mcsrv.mc_port)
        c.send(b"set victim 0 0 2000000\r\n")
        c.expect(b"SERVER_ERROR object too large for cache\r\n")
        b = McConn(mcsrv.mc_port)
        b.send(struct.pack(">BBHBBHIIQ", 0x80, 0x01, 6, 8, 0, 0, 8 + 6 + 2000000, 0, 0) +
               struct.pack(">II", 0, 0) + b"victim")
        time.sleep(0.3)
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='victim'") == [("alive",)]
        # Logged in (with DELETE), the unlink is done, as memcached does.
        u = McConn(unix_path=mcsrv.mc_unix)
        u.send("set whatever 0 0 11\r\nmcuser mcpw\r\n")
        u.expect(b"STORED\r\n")
        u.send(b"set victim 0 0 2000000\r\n")
        u.expect(b"SERVER_ERROR object too large for cache\r\n")
        deadline = time.monotonic() + 3
        while mcsrv.sql("SELECT v FROM test.kv WHERE k='victim'") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='victim'") == []

    def test_ascii_auth_wrong_password(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set whatever 0 0 11\r\nmcuser nope\r\n")
        c.expect(b"CLIENT_ERROR authentication failure\r\n")
        c.send("get hello\r\n")
        c.expect(b"CLIENT_ERROR unauthenticated\r\n")

    def test_read_only_account(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set a 0 0 7\r\nmcro ro\r\n")
        c.expect(b"STORED\r\n")
        c.send("get hello\r\n")
        c.expect(b"VALUE hello 0 5\r\nworld\r\nEND\r\n")
        c.send("set hello 0 0 1\r\nx\r\n")
        line = c.recv_line()
        assert line.startswith(b"CLIENT_ERROR INSERT command denied to user 'mcro'@'localhost'"), line
        c.send("delete hello\r\n")
        assert c.recv_line().startswith(b"CLIENT_ERROR DELETE command denied")
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='hello'") == [("world",)]

    def test_hourly_limits(self, mcsrv):
        """MAX_QUERIES_PER_HOUR / MAX_UPDATES_PER_HOUR over memcached: a command that reads or
        writes counts once (a multi-key get too); refused ones answer CLIENT_ERROR with the
        server's message and change nothing."""
        mcsrv.exec_sql("DROP USER IF EXISTS 'mchourly'@'localhost'")
        mcsrv.exec_sql("CREATE USER 'mchourly'@'localhost' IDENTIFIED BY 'h' WITH MAX_QUERIES_PER_HOUR 4 "
                       "MAX_UPDATES_PER_HOUR 1")
        mcsrv.exec_sql("GRANT SELECT, INSERT, UPDATE, DELETE ON test.kv TO 'mchourly'@'localhost'")
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set a 0 0 10\r\nmchourly h\r\n")  # the login itself is no request
        c.expect(b"STORED\r\n")
        c.send("get hello hello hello\r\n")  # one question
        c.expect(b"VALUE hello 0 5\r\nworld\r\n" * 3 + b"END\r\n")
        c.send("set hq 0 0 1\r\n1\r\n")  # two, the one update
        c.expect(b"STORED\r\n")
        c.send("delete hq\r\n")
        c.expect(b"CLIENT_ERROR User 'mchourly'@'localhost' has exceeded the 'max_updates_per_hour' resource (1)\r\n")
        # The unlink after an oversized set is a write too: not past the limit either.
        mcsrv.exec_sql("REPLACE INTO test.kv (k, v, flags, cas, exp) VALUES ('hvictim', 'alive', 0, 0, 0)")
        c.send(b"set hvictim 0 0 2000000\r\n" + b"x" * 2000000 + b"\r\n")  # (its data is skipped)
        c.expect(b"SERVER_ERROR object too large for cache\r\n")
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='hvictim'") == [("alive",)]
        mcsrv.exec_sql("DELETE FROM test.kv WHERE k='hvictim'")
        c.send("version\r\nmg hq v\r\nmn\r\n")  # version and mn are no requests
        c.expect(b"VERSION 1.6.18\r\nVA 1\r\n1\r\nMN\r\n")
        c.send("get hq\r\n")
        c.expect(b"VALUE hq 0 1\r\n1\r\nEND\r\n")
        c.send("get hello\r\n")
        c.expect(b"CLIENT_ERROR User 'mchourly'@'localhost' has exceeded the 'max_queries_per_hour' resource (4)\r\n")
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='hq'") == [("1",)]
        mcsrv.exec_sql("DELETE FROM test.kv WHERE k='hq'")

    def test_stats_reset_needs_reload(self, mcsrv):
        """`stats reset` zeroes the figures every memcached client's `stats` shows, server-wide: as
        SQL's FLUSH STATUS it needs RELOAD (any logged-in account could run it, a helper found)."""
        mcsrv.exec_sql("DROP USER IF EXISTS 'mcreload'@'localhost'")
        mcsrv.exec_sql("CREATE USER 'mcreload'@'localhost' IDENTIFIED BY 'rl'")
        mcsrv.exec_sql("GRANT RELOAD ON *.* TO 'mcreload'@'localhost'")
        ro = McConn(unix_path=mcsrv.mc_unix)
        ro.send("set whatever 0 0 7\r\nmcro ro\r\n")
        ro.expect(b"STORED\r\n")
        ro.send("get hello\r\n")
        ro.expect(b"VALUE hello 0 5\r\nworld\r\nEND\r\n")
        ro.send("stats reset\r\n")
        ro.expect(b"CLIENT_ERROR Access denied; you need (at least one of) the RELOAD privilege(s) for this operation\r\n")
        ro.send("stats\r\n")
        assert b"STAT cmd_get 0\r\n" not in ro.recv_until(b"END\r\n")
        rb = McConn(unix_path=mcsrv.mc_unix)  # the binary protocol's stat "reset": refused too
        assert self.bin_call(rb, 0x21, key=b"PLAIN", value=b"\0mcro\0ro") == (0x21, 0, b"Authenticated")
        assert self.bin_call(rb, 0x10, key=b"reset")[:2] == (0x10, 0x20)
        adm = McConn(unix_path=mcsrv.mc_unix)
        adm.send("set whatever 0 0 11\r\nmcreload rl\r\n")
        adm.expect(b"STORED\r\n")
        adm.send("stats reset\r\n")
        adm.expect(b"RESET\r\n")
        adm.send("stats\r\n")
        assert b"STAT cmd_get 0\r\n" in adm.recv_until(b"END\r\n")
        mcsrv.exec_sql("REVOKE RELOAD ON *.* FROM 'mcreload'@'localhost'")
        time.sleep(INTERVAL_MS / 1000 + 0.2)
        adm.send("stats reset\r\n")
        assert adm.recv_until(b"\r\n").startswith(b"CLIENT_ERROR Access denied; you need")

    # the binary protocol's SASL PLAIN login (memcached -S)

    @staticmethod
    def bin_call(c: McConn, op: int, extras: bytes = b"", key: bytes = b"", value: bytes = b"") -> tuple:
        c.send(struct.pack(">BBHBBHIIQ", 0x80, op, len(key), len(extras), 0, 0, len(extras) + len(key) + len(value),
                           0, 0) + extras + key + value)
        h = c.read_exact(24)
        n = struct.unpack(">I", h[8:12])[0]
        body = c.read_exact(n) if n else b""
        return h[1], struct.unpack(">H", h[6:8])[0], body[h[4] + struct.unpack(">H", h[2:4])[0]:]

    def test_binary_sasl_plain_logs_in_with_an_account(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x20) == (0x20, 0, b"PLAIN")
        assert self.bin_call(c, 0x21, key=b"PLAIN", value=b"\0mcuser\0mcpw") == (0x21, 0, b"Authenticated")
        assert self.bin_call(c, 0x00, key=b"hello") == (0x00, 0, b"world")
        assert self.bin_call(c, 0x01, struct.pack(">II", 0, 0), b"bk", b"bv")[:2] == (0x01, 0)
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='bk'") == [("bv",)]

    def test_binary_unauthenticated_request_is_refused_and_closed(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x00, key=b"hello") == (0x00, 0x20, b"Auth failure.")
        assert c.closed_by_peer() == b""
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x0B)[:2] == (0x0B, 0)  # version needs no login, as in memcached

    def test_binary_sasl_wrong_password_bad_mechanism_and_cleartext_over_tcp(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x21, key=b"PLAIN", value=b"\0mcuser\0nope") == (0x21, 0x20, b"Auth failure.")
        assert self.bin_call(c, 0x21, key=b"CRAM-MD5", value=b"mcuser x") == (0x21, 0x20, b"Auth failure.")
        assert self.bin_call(c, 0x21, key=b"PLAIN", value=b"mcuser mcpw") == (0x21, 0x20, b"Auth failure.")
        t = McConn(mcsrv.mc_port)  # plain TCP: a cleartext password is refused
        assert self.bin_call(t, 0x21, key=b"PLAIN", value=b"\0mcuser\0mcpw") == (0x21, 0x20, b"Auth failure.")

    def test_binary_hourly_limits(self, mcsrv):
        mcsrv.exec_sql("DROP USER IF EXISTS 'mcbhour'@'localhost'")
        mcsrv.exec_sql("CREATE USER 'mcbhour'@'localhost' IDENTIFIED BY 'h' WITH MAX_QUERIES_PER_HOUR 2")
        mcsrv.exec_sql("GRANT SELECT ON test.kv TO 'mcbhour'@'localhost'")
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x21, key=b"PLAIN", value=b"\0mcbhour\0h")[1] == 0
        assert self.bin_call(c, 0x0A)[:2] == (0x0A, 0)  # noop: no request
        assert self.bin_call(c, 0x00, key=b"hello") == (0x00, 0, b"world")
        assert self.bin_call(c, 0x00, key=b"hello") == (0x00, 0, b"world")
        assert self.bin_call(c, 0x00, key=b"hello") == \
            (0x00, 0x20, b"User 'mcbhour'@'localhost' has exceeded the 'max_queries_per_hour' resource (2)")

    def test_binary_read_only_account_gets_the_servers_denial(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        assert self.bin_call(c, 0x21, key=b"PLAIN", value=b"\0mcro\0ro")[1] == 0
        op, status, msg = self.bin_call(c, 0x01, struct.pack(">II", 0, 0), b"hello", b"x")
        assert (op, status) == (0x01, 0x20) and msg.startswith(b"INSERT command denied to user 'mcro'"), msg
        assert mcsrv.sql("SELECT v FROM test.kv WHERE k='hello'") == [("world",)]

    def test_stats_counts_only_the_tables_the_account_may_read(self, mcsrv):
        """curr_items sums the containers' tables the account can read: test.kv for mcuser, not
        test.demo_test (container aaa), whose rows it may not see."""
        mcsrv.exec_sql("INSERT IGNORE INTO test.demo_test (c1, c2) SELECT CONCAT('d', seq), 'x' FROM seq_1_to_50")
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set a 0 0 11\r\nmcuser mcpw\r\n")
        c.expect(b"STORED\r\n")
        c.send("stats\r\n")
        st = dict(re.findall(rb"STAT (\S+) (\S+)\r\n", c.recv_until()))
        kv = int(mcsrv.sql("SELECT COUNT(*) FROM test.kv")[0][0])
        assert int(mcsrv.sql("SELECT COUNT(*) FROM test.demo_test")[0][0]) >= 50
        assert int(st[b"curr_items"]) == kv, (st[b"curr_items"], kv)

    def test_container_needs_privileges_on_its_table(self, mcsrv):
        c = McConn(unix_path=mcsrv.mc_unix)
        c.send("set a 0 0 11\r\nmcuser mcpw\r\n")
        c.expect(b"STORED\r\n")
        c.send("get @@aaa.x\r\n")
        line = c.recv_line()
        assert line.startswith(b"CLIENT_ERROR SELECT command denied to user 'mcuser'@'localhost' for table "
                               b"`test`.`demo_test`"), line


# ---- accounts over TLS: REQUIRE SSL/X509/SUBJECT, cleartext over TLS, certificate logins ----------

def make_certs(d) -> dict:
    """A CA, a server certificate and client certificates (CN=certuser, CN=plainuser, CN=x509pw), by
    openssl."""
    import subprocess

    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ts-test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    for name, cn in (("server", "localhost"), ("certuser", "certuser"), ("plainuser", "plainuser"),
                     ("x509pw", "x509pw")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/O=tablesocket/CN={cn}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", f"{name}.pem")
    return {n: str(d / n) for n in ("ca.pem", "server.pem", "server.key", "certuser.pem", "certuser.key",
                                     "plainuser.pem", "plainuser.key", "x509pw.pem", "x509pw.key")}


class TLSConn(HSConn):
    """An HSConn over TLS (optionally with a client certificate)."""

    def __init__(self, port: int, certs: dict, client: str | None = None, timeout: float = 10.0):
        import ssl
        ctx = ssl.create_default_context(cafile=certs["ca.pem"])
        ctx.check_hostname = False
        if client:
            ctx.load_cert_chain(certs[f"{client}.pem"], certs[f"{client}.key"])
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.port = port
        self.timeout = timeout
        self.sock = ctx.wrap_socket(raw)
        self.buf = b""


class TestTLSAccounts:
    @pytest.fixture(scope="class")
    @classmethod
    def tsrv(cls, tmp_path_factory):
        certs = make_certs(tmp_path_factory.mktemp("certs"))
        s = MariaDBServer("tablesocket", name="tlsacct", extra_args=[
            f"--tablesocket-privilege-check-interval={INTERVAL_MS}", "--tablesocket-require-auth=ON",
            f"--tablesocket-ssl-cert={certs['server.pem']}", f"--tablesocket-ssl-key={certs['server.key']}",
            f"--tablesocket-ssl-ca={certs['ca.pem']}"])
        s.start()
        s.certs = certs
        s.exec_sql("CREATE TABLE test.acct (id INT PRIMARY KEY, name VARCHAR(20))")
        s.exec_sql("INSERT INTO test.acct VALUES (1,'alice')")
        s.exec_sql("CREATE USER 'ssluser'@'127.0.0.1' IDENTIFIED BY 'pw' REQUIRE SSL")
        s.exec_sql("CREATE USER 'certuser'@'127.0.0.1' REQUIRE X509")
        s.exec_sql("CREATE USER 'plainuser'@'127.0.0.1' IDENTIFIED BY 'pw'")
        s.exec_sql("CREATE USER 'subjuser'@'127.0.0.1' REQUIRE SUBJECT '/O=tablesocket/CN=someoneelse'")
        s.exec_sql("CREATE USER 'x509pw'@'127.0.0.1' IDENTIFIED BY 'pw' REQUIRE X509")
        for u in ("ssluser", "certuser", "plainuser", "subjuser", "x509pw"):
            s.exec_sql(f"GRANT SELECT ON test.acct TO '{u}'@'127.0.0.1'")
        try:
            yield s
        finally:
            s.cleanup()

    def test_require_ssl_account(self, tsrv, conns):
        c = conns(tsrv)
        assert login(c, "ssluser", "pw") == \
            b"3\t1\tAccess denied for user 'ssluser'@'127.0.0.1' (using password: YES): the account requires TLS\n"
        t = TLSConn(tsrv.hs_port, tsrv.certs)
        try:
            assert login(t, "ssluser", "pw") == b"0\t1\n"
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
            assert t.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
        finally:
            t.close()

    def test_cleartext_over_tls(self, tsrv):
        t = TLSConn(tsrv.hs_port, tsrv.certs)
        try:
            assert t.request("A\t4\tplainuser\tpw\n") == b"0\t1\n"
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
            assert t.request("A\t4\tplainuser\twrong\n").startswith(b"3\t1\tAccess denied")
        finally:
            t.close()

    def test_certificate_login(self, tsrv):
        t = TLSConn(tsrv.hs_port, tsrv.certs, client="certuser")
        try:
            # no A at all: the verified certificate's CN names a REQUIRE X509 account
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid,name\n") == b"0\t1\n"
            assert t.request("1\t=\t1\t1\n") == b"0\t2\t1\talice\n"
        finally:
            t.close()

    def test_an_x509_account_with_a_password_wants_both(self, tsrv):
        # SQL refuses the certificate without the password: so does tablesocket (it let the
        # certificate alone in); with the password over the same TLS connection it works.
        t = TLSConn(tsrv.hs_port, tsrv.certs, client="x509pw")
        try:
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"3\t1\tunauth\n"
            assert login(t, "x509pw", "pw") == b"0\t1\n"
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"0\t1\n"
        finally:
            t.close()
        t = TLSConn(tsrv.hs_port, tsrv.certs)  # the password without the certificate: refused
        try:
            assert login(t, "x509pw", "pw").startswith(b"3\t1\tAccess denied")
        finally:
            t.close()

    def test_certificate_does_not_log_into_password_accounts(self, tsrv):
        t = TLSConn(tsrv.hs_port, tsrv.certs, client="plainuser")
        try:
            assert t.request("P\t1\ttest\tacct\tPRIMARY\tid\n") == b"3\t1\tunauth\n"
            assert login(t, "plainuser", "pw") == b"0\t1\n"
        finally:
            t.close()

    def test_x509_account_without_certificate(self, tsrv):
        t = TLSConn(tsrv.hs_port, tsrv.certs)
        try:
            assert t.request("A\t4\tcertuser\t\n").endswith(b"the account requires a verified client certificate\n")
        finally:
            t.close()

    def test_require_subject_mismatch(self, tsrv, conns):
        t = TLSConn(tsrv.hs_port, tsrv.certs, client="certuser")
        try:
            r = t.request("A\t4\tsubjuser\t\n")
            assert r.endswith(b"the client certificate or cipher does not match the account's REQUIRE\n"), r
        finally:
            t.close()

    def test_require_cipher(self, tsrv):
        tsrv.exec_sql("CREATE USER IF NOT EXISTS 'cipheruser'@'127.0.0.1' REQUIRE CIPHER 'NO-SUCH-CIPHER'")
        t = TLSConn(tsrv.hs_port, tsrv.certs, client="certuser")
        try:
            assert t.request("A\t4\tcipheruser\t\n").endswith(
                b"the client certificate or cipher does not match the account's REQUIRE\n")
            cipher = t.sock.cipher()[0]
            tsrv.exec_sql(f"ALTER USER 'cipheruser'@'127.0.0.1' REQUIRE CIPHER '{cipher}'")
            assert t.request("A\t4\tcipheruser\t\n") == b"0\t1\n"
        finally:
            t.close()

    def test_memcached_over_tls(self, tsrv):
        import ssl
        tsrv.load_mc_schema()
        tsrv.exec_sql("CREATE USER IF NOT EXISTS 'mcuser'@'127.0.0.1' IDENTIFIED BY 'mcpw'")
        tsrv.exec_sql("GRANT SELECT, INSERT, UPDATE, DELETE ON test.kv TO 'mcuser'@'127.0.0.1'")
        tsrv.exec_sql("GRANT SELECT, INSERT, UPDATE, DELETE ON test.kv TO 'certuser'@'127.0.0.1'")
        for client in (None, "certuser"):
            ctx = ssl.create_default_context(cafile=tsrv.certs["ca.pem"])
            ctx.check_hostname = False
            if client:
                ctx.load_cert_chain(tsrv.certs["certuser.pem"], tsrv.certs["certuser.key"])
            c = McConn(tsrv.mc_port)
            c.sock = ctx.wrap_socket(c.sock)
            try:
                if not client:
                    c.send("get x\r\n")
                    c.expect(b"CLIENT_ERROR unauthenticated\r\n")
                    c.send("set a 0 0 11\r\nmcuser mcpw\r\n")
                    c.expect(b"STORED\r\n")
                c.send(f"set tlskey 0 0 2\r\n{'v1' if client else 'v0'}\r\n")
                c.expect(b"STORED\r\n")
                c.send("get tlskey\r\n")
                c.expect(b"VALUE tlskey 0 2\r\n" + (b"v1" if client else b"v0") + b"\r\nEND\r\n")
            finally:
                c.sock.close()
