"""mariabackup while tablesocket clients write.

16 clients write through the write port, each in bursts of pipelined requests: 1-4 inserts of new
rows (`bk_ins`, ids <client>*10^7 + <seq>), one increment of both columns of a shared counter row
(`bk_cnt`, `a` and `b` by the same amount in one request) and an update of the client's own row in
`bk_last` to the seq of its last insert. Each client logs when it sent every request and when its
reply came. `mariadb-backup --backup` runs in the middle of the load; the backup is prepared and
started on a plain mariadbd (no plugin), and checked:

  (a) every insert acknowledged before the backup started is in it; nothing sent after it ended is;
  (b) it is a consistent cut: each client's requests are answered in order and commit in order, so
      the backup holds a prefix of every client's requests (no gap in its inserts, its `bk_last`
      row the last update of that prefix), every counter has a == b and lies between the sums
      those prefixes imply; and every insert acknowledged before an insert of the backup was sent
      is in the backup (real-time order across clients: batches commit in order);
  (c) the binary log position mariabackup recorded (`xtrabackup_binlog_info`) matches the data:
      the row events of the source's binlog before it are exactly the backup's rows (inserts,
      the last image of every counter and `bk_last` row), so a replica built from the backup and
      that position neither misses nor repeats a write;
  and no client got an error reply or was disconnected (they wait while mariabackup holds
  BACKUP STAGE BLOCK_COMMIT).

Then writes to tables of every engine while BACKUP STAGE BLOCK_COMMIT is held longer than the 2 s a
worker once waited: they wait for BACKUP STAGE END and succeed. (Before, a write to an Aria table was
answered with an error although the row was written and binlogged, and a MEMORY writer was
disconnected with its row kept: the engines cannot roll back; found by a helper running
mariabackup with a large statistics table, copied under BLOCK_COMMIT.)
"""

from __future__ import annotations

import random
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import ts_harness as h

pytestmark = pytest.mark.tablesocket_only("tablesocket's write path under mariabackup")

MARIADB_BACKUP = shutil.which("mariadb-backup") or shutil.which("mariabackup")
MARIADBD = h.tsserver.MARIADBD

CLIENTS = 16
COUNTERS = 4
WARMUP = 2.0          # seconds of load before the backup starts
AFTER = 1.0           # seconds of load after it ended
BACKUP_BOUND = 40.0   # the backup must end within this (about 2 s here under load, 1.4 s idle)
REPLY_BOUND = 20.0    # no reply may take longer (BLOCK_COMMIT is held ~1 s)
MIN_ACKED_BEFORE = 500

ARGS = ["--innodb-flush-log-at-trx-commit=1", "--log-bin=binlog", "--server-id=1", "--binlog-format=ROW"]


@pytest.fixture(scope="module")
def srv(request):
    with h.private_server(request, "backup", ARGS) as s:
        _read_table(s)
        yield s


@pytest.fixture(scope="module")
def srv_no_overlap(request):
    with h.private_server(request, "backup-inline", ARGS + ["--tablesocket-commit-overlap=OFF"]) as s:
        _read_table(s)
        yield s


def _read_table(s) -> None:
    s.exec_sql("CREATE TABLE bk_read (k int primary key, v varchar(20)) ENGINE=InnoDB")
    s.exec_sql("INSERT INTO bk_read VALUES (1, 'r')")


# --------------------------------------------------------------------------------------------------
# load


@dataclass
class ClientLog:
    ops: list = field(default_factory=list)   # [kind, arg, sent, acked or None]
    errors: list = field(default_factory=list)
    end: str = ""


def _client(i: int, port: int, log: ClientLog, stop: threading.Event, started: threading.Barrier) -> None:
    rnd = random.Random(7000 + i)
    try:
        c = h.hs_open(port, "bk_ins", "id,client,seq,payload", index_id=1, timeout=60)
        assert c.request("P\t2\ttest\tbk_cnt\tPRIMARY\ta,b\n") == b"0\t1\n"
        assert c.request("P\t3\ttest\tbk_last\tPRIMARY\tseq\n") == b"0\t1\n"
    except Exception as e:  # noqa: BLE001
        log.end = f"setup: {e!r}"
        started.abort()
        return
    started.wait(timeout=30)
    seq = 0
    try:
        while not stop.is_set():
            ops, wire = [], []
            for _ in range(rnd.choice((1, 1, 2, 4))):
                seq += 1
                rid = i * 10_000_000 + seq
                ops.append(["ins", rid, 0.0, None])
                wire.append(f"1\t+\t4\t{rid}\t{i}\t{seq}\tc{i}-s{seq}-{rnd.getrandbits(32):08x}\n")
            k, d = rnd.randrange(COUNTERS) + 1, rnd.randint(1, 5)
            ops.append(["inc", (k, d), 0.0, None])
            wire.append(f"2\t=\t1\t{k}\t1\t0\t+\t{d}\t{d}\n")
            ops.append(["last", seq, 0.0, None])
            wire.append(f"3\t=\t1\t{i}\t1\t0\tU\t{seq}\n")
            now = time.time()
            for o in ops:
                o[2] = now
            log.ops.extend(ops)
            c.send("".join(wire))
            for o in ops:
                reply = c.recv_line(timeout=REPLY_BOUND)
                if reply != (b"0\t1\n" if o[0] == "ins" else b"0\t1\t1\n"):
                    log.errors.append((o[0], o[1], reply))
                    continue
                o[3] = time.time()
        log.end = "stopped"
    except Exception as e:  # noqa: BLE001
        log.end = f"connection lost: {e!r}"
    finally:
        c.close()


def _tables(srv) -> None:
    srv.exec_sql("DROP TABLE IF EXISTS bk_ins, bk_cnt, bk_last")
    srv.exec_sql("CREATE TABLE bk_ins (id bigint not null primary key, client int not null, seq int not null, "
                 "payload varchar(64) not null) ENGINE=InnoDB")
    srv.exec_sql("CREATE TABLE bk_cnt (id int primary key, a bigint not null, b bigint not null) ENGINE=InnoDB")
    srv.exec_sql("CREATE TABLE bk_last (client int primary key, seq int not null) ENGINE=InnoDB")
    srv.executemany("INSERT INTO bk_cnt VALUES (%s, 0, 0)", [(k,) for k in range(1, COUNTERS + 1)])
    srv.executemany("INSERT INTO bk_last VALUES (%s, 0)", [(i,) for i in range(CLIENTS)])


# --------------------------------------------------------------------------------------------------
# backup, prepare, restore


def _run(cmd: list[str], timeout: float) -> tuple[int, str]:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                       timeout=timeout)
    return r.returncode, r.stdout


class _Restored:
    """A plain mariadbd (no plugin, no binlog) on a prepared backup, on a unix socket only."""

    def __init__(self, datadir: Path, rundir: Path):
        self.datadir, self.rundir = datadir, rundir
        rundir.mkdir(parents=True, exist_ok=True)
        self.socket = str(rundir / "sock")
        self.log_path = rundir / "error.log"
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(
            [MARIADBD, "--no-defaults", f"--datadir={self.datadir}", f"--socket={self.socket}", "--skip-networking",
             "--user=root", "--skip-grant-tables", "--skip-log-bin", f"--log-error={self.log_path}",
             f"--pid-file={self.rundir / 'pid'}", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"mariadbd on the prepared backup exited ({self.proc.returncode}):\n"
                            f"{h.tsserver.tail(self.log_path, 30)}", pytrace=False)
            try:
                self.sql("SELECT 1")
                return self
            except Exception:  # noqa: BLE001
                time.sleep(0.2)
        pytest.fail("mariadbd on the prepared backup did not come up", pytrace=False)

    def sql(self, q: str):
        import pymysql
        c = pymysql.connect(unix_socket=self.socket, user="root", password="", database="test",
                            autocommit=True, connect_timeout=5)
        try:
            with c.cursor() as cur:
                cur.execute(q)
                return cur.fetchall()
        finally:
            c.close()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _binlog_before(datadir: Path, first: str, bfile: str, bpos: int):
    """Row events on bk_* in binlog files from `first` on, before (bfile, bpos): inserted ids and
    the last after-image of each bk_cnt / bk_last row."""
    ins: set[int] = set()
    cnt: dict[int, tuple[int, int]] = {}
    last: dict[int, int] = {}
    for f in sorted(p.name for p in datadir.glob("binlog.[0-9]*")):
        if f < first or f > bfile:
            continue
        cmd = [h.MARIADB_BINLOG, "--no-defaults", "--base64-output=decode-rows", "-v", str(datadir / f)]
        if f == bfile:
            cmd.insert(-1, f"--stop-position={bpos}")
        rc, text = _run(cmd, 120)
        assert rc == 0, text[-2000:]
        for m in re.finditer(r"^### INSERT INTO `test`\.`bk_ins`\n### SET\n###   @1=(\d+)\n", text, re.M):
            ins.add(int(m.group(1)))
        for m in re.finditer(r"^### UPDATE `test`\.`bk_cnt`\n### WHERE\n(?:###   @\d+=.*\n)+### SET\n"
                             r"###   @1=(\d+)\n###   @2=(-?\d+)\n###   @3=(-?\d+)\n", text, re.M):
            cnt[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^### UPDATE `test`\.`bk_last`\n### WHERE\n(?:###   @\d+=.*\n)+### SET\n"
                             r"###   @1=(\d+)\n###   @2=(-?\d+)\n", text, re.M):
            last[int(m.group(1))] = int(m.group(2))
    return ins, cnt, last


# --------------------------------------------------------------------------------------------------
# checks


def _consistency(logs: list[ClientLog], rows: set[int], cnt: dict, last: dict) -> list[str]:
    """(b): a prefix of every client's requests; counters within the prefixes' bounds; real time."""
    problems = []
    lo_sum = {k: 0 for k in range(1, COUNTERS + 1)}
    hi_sum = dict(lo_sum)
    latest_present_send = 0.0
    for i, lg in enumerate(logs):
        L = last.get(i, 0)
        ops = lg.ops
        lo = -1   # the last request known to be in the backup
        for idx, o in enumerate(ops):
            if (o[0] == "ins" and o[1] in rows) or (o[0] == "last" and L and o[1] == L):
                lo = idx
            if o[0] == "ins" and o[1] in rows:
                latest_present_send = max(latest_present_send, o[2])
        hi = len(ops)  # the first request known not to be in it
        for idx, o in enumerate(ops):
            if idx <= lo and o[0] == "ins" and o[1] not in rows:
                problems.append(f"client {i}: insert {o[1]} missing but a later request of the client is there")
                break
            if idx > lo and ((o[0] == "ins" and o[1] not in rows) or (o[0] == "last" and o[1] != L)):
                hi = idx
                break
        lasts = [o[1] for o in ops[:lo + 1] if o[0] == "last"]
        if (lasts[-1] if lasts else 0) != L:
            problems.append(f"client {i}: bk_last={L}, but the last update in its prefix set {lasts[-1] if lasts else 0}")
        for idx, o in enumerate(ops):
            if o[0] == "inc":
                k, d = o[1]
                if idx <= lo:
                    lo_sum[k] += d
                if idx < hi:
                    hi_sum[k] += d
    for k, (a, b) in cnt.items():
        if a != b:
            problems.append(f"counter {k}: a={a} b={b}: one request half in the backup")
        if not lo_sum[k] <= a <= hi_sum[k]:
            problems.append(f"counter {k}: {a} outside [{lo_sum[k]}, {hi_sum[k]}] that the clients' cuts allow")
    late = [o[1] for lg in logs for o in lg.ops
            if o[0] == "ins" and o[3] is not None and o[3] < latest_present_send and o[1] not in rows]
    if late:
        problems.append(f"{len(late)} inserts acknowledged before another insert of the backup was sent are "
                        f"missing (first: {late[:5]})")
    return problems


def test_mariabackup_under_hs_write_load_is_complete_consistent_and_matches_its_binlog_position(srv):
    if not MARIADB_BACKUP:
        pytest.skip("mariadb-backup is not installed (scripts/setup.sh installs it)")
    _tables(srv)
    srv.exec_sql("FLUSH BINARY LOGS", db=None)
    first_binlog = srv.sql("SHOW MASTER STATUS", db=None)[0][0]
    target = Path(srv.rundir) / "backup"
    shutil.rmtree(target, ignore_errors=True)

    logs = [ClientLog() for _ in range(CLIENTS)]
    threads, stop = h.start_clients(_client, logs, srv.hs_port_wr)
    try:
        time.sleep(WARMUP)
        t0 = time.time()
        rc, out = _run([MARIADB_BACKUP, "--no-defaults", "--backup", f"--target-dir={target}", "--user=root",
                        f"--socket={srv.socket}"], BACKUP_BOUND + 60)
        t1 = time.time()
        time.sleep(AFTER)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=REPLY_BOUND + 10)
    assert rc == 0, f"mariadb-backup --backup failed ({rc}):\n{out[-3000:]}"
    assert srv.running(), "mariadbd died during the backup"
    assert not any(t.is_alive() for t in threads), "a client is stuck"

    errors = [e for lg in logs for e in lg.errors]
    ends = sorted({lg.end for lg in logs})
    acked_before = sum(1 for lg in logs for o in lg.ops if o[0] == "ins" and o[3] is not None and o[3] < t0)
    acked_during = sum(1 for lg in logs for o in lg.ops if o[3] is not None and t0 <= o[3] <= t1)
    max_lat = max((o[3] - o[2] for lg in logs for o in lg.ops if o[3] is not None), default=0.0)
    info = (f"backup {t1 - t0:.2f}s; inserts acked before it {acked_before}; replies during it {acked_during}; "
            f"max reply latency {max_lat:.2f}s; client ends {ends}")
    print(info)
    assert not errors, f"error replies during the backup (first 5): {errors[:5]}; {info}"
    assert ends == ["stopped"], f"clients disconnected: {info}"
    assert acked_before >= MIN_ACKED_BEFORE, f"too little load to prove anything: {info}"
    assert t1 - t0 <= BACKUP_BOUND, f"the backup took too long: {info}"

    rc, out = _run([MARIADB_BACKUP, "--no-defaults", "--prepare", f"--target-dir={target}"], 300)
    assert rc == 0, f"mariadb-backup --prepare failed ({rc}):\n{out[-3000:]}"
    bfile, bpos = (target / "xtrabackup_binlog_info").read_text().split()[:2]
    bpos = int(bpos)

    with _Restored(target, Path(srv.rundir) / "restored") as r:
        rows = {int(x[0]) for x in r.sql("SELECT id FROM bk_ins")}
        cnt = {int(k): (int(a), int(b)) for k, a, b in r.sql("SELECT id, a, b FROM bk_cnt")}
        last = {int(c): int(s) for c, s in r.sql("SELECT client, seq FROM bk_last")}

    sent = {o[1]: o for lg in logs for o in lg.ops if o[0] == "ins"}
    # (a)
    lost = sorted(rid for rid, o in sent.items() if o[3] is not None and o[3] < t0 and rid not in rows)
    assert not lost, f"(a) {len(lost)} inserts acknowledged before the backup started are missing: {lost[:10]}; {info}"
    after = sorted(rid for rid, o in sent.items() if o[2] > t1 and rid in rows)
    assert not after, f"inserts sent after the backup ended are in it: {after[:10]}"
    assert rows <= sent.keys(), f"rows never sent: {sorted(rows - sent.keys())[:10]}"
    # (b)
    problems = _consistency(logs, rows, cnt, last)
    assert not problems, f"(b) the backup is not a consistent cut: {problems[:10]}; {info}"
    # (c)
    ins, bcnt, blast = _binlog_before(Path(srv.datadir), first_binlog, bfile, bpos)
    assert rows == ins, (f"(c) the backup's rows differ from the binlog before {bfile}:{bpos}: only in the backup "
                         f"{sorted(rows - ins)[:10]}, only in the binlog {sorted(ins - rows)[:10]}")
    for k, ab in cnt.items():
        assert bcnt.get(k, (0, 0)) == ab, f"(c) counter {k}: backup {ab}, binlog before the position {bcnt.get(k)}"
    for c, s in last.items():
        assert blast.get(c, 0) == s, f"(c) bk_last[{c}]: backup {s}, binlog before the position {blast.get(c, 0)}"
    # the cut is inside the backup's window, not at its start: the backup saw writes go on
    assert any(o[2] >= t0 and rid in rows for rid, o in sent.items()), f"no write after the start is in the backup; {info}"
    shutil.rmtree(target, ignore_errors=True)


def _reads_answered_meanwhile(r: h.HSConn, seconds: float = 3.0) -> None:
    """For `seconds` (past the 2 s a worker once waited for the backup lock), reads of row 1 of
    bk_read through r are answered, each within 0.3 s: the worker does not wait for the lock."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        r0 = time.monotonic()
        assert r.request("1\t=\t1\t1\n") == b"0\t2\t1\tr\n"
        assert time.monotonic() - r0 < 0.3, "a read waited for the backup lock"
        time.sleep(0.05)


@pytest.mark.parametrize("engine,overlap", [("Aria", True), ("MEMORY", True), ("MyISAM", True),
                                            ("InnoDB", True), ("InnoDB", False)])
def test_a_write_held_by_block_commit_waits_for_it_and_succeeds(request, srv, engine, overlap):
    """BLOCK_COMMIT held 3 s: the write is not answered meanwhile, then answered `0 1` and present.
    (InnoDB without commit overlap: the worker commits itself, as it does for the other engines.)"""
    s = srv
    if not overlap:
        s = request.getfixturevalue("srv_no_overlap")
    t = f"bk_{engine.lower()}_{'ov' if overlap else 'inline'}"
    s.exec_sql(f"DROP TABLE IF EXISTS {t}")
    s.exec_sql(f"CREATE TABLE {t} (k int primary key, v varchar(20)) ENGINE={engine}")
    c = h.hs_open(s.hs_port_wr, t, "k,v", timeout=30)
    r = h.hs_open(s.hs_port, "bk_read", "k,v", timeout=30)
    try:
        with h.backup_stage(s, "BLOCK_COMMIT"):   # mariabackup holds this for seconds
            c.send("1\t+\t2\t1\tduring\n")
            _reads_answered_meanwhile(r)
            early = c.recv_all(0.0)
        assert early == b"", f"answered while BLOCK_COMMIT was held: {early!r}"
        assert c.recv_line(timeout=5.0) == b"0\t1\n"
        assert s.sql(f"SELECT v FROM {t} WHERE k = 1") == [("during",)]
        assert c.request("1\t+\t2\t2\tafter\n") == b"0\t1\n"
    finally:
        c.close()
        r.close()


@pytest.mark.parametrize("engine", ["Aria", "MEMORY"])
def test_an_innodb_write_and_a_read_of_another_engine_in_one_batch_wait_for_block_commit(srv, engine):
    """A batch that wrote InnoDB and then reads a table of another engine becomes one the worker
    commits itself: it must not then wait for the backup lock in the worker (found by a helper:
    the worker stalled 2 s, every client of it with it, and the batch's commit failed). The read
    waits for a later batch; the write's commit waits on the commit thread; others are served."""
    t = f"bk_mixed_{engine.lower()}"
    srv.exec_sql(f"DROP TABLE IF EXISTS {t}, bk_mixed_i")
    srv.exec_sql(f"CREATE TABLE {t} (k int primary key, v varchar(20)) ENGINE={engine}")
    srv.exec_sql(f"INSERT INTO {t} VALUES (1, 'other')")
    srv.exec_sql("CREATE TABLE bk_mixed_i (k int primary key, v varchar(20)) ENGINE=InnoDB")
    w = h.HSConn(srv.hs_port_wr, timeout=30)
    r = h.hs_open(srv.hs_port, "bk_read", "k,v", timeout=30)
    try:
        assert w.request(f"P\t1\ttest\tbk_mixed_i\tPRIMARY\tk,v\nP\t2\ttest\t{t}\tPRIMARY\tk,v\n") == b"0\t1\n0\t1\n"
        with h.backup_stage(srv, "BLOCK_COMMIT"):
            w.send("1\t+\t2\t1\tduring\n2\t=\t1\t1\n")  # one batch: an InnoDB insert, then a read
            _reads_answered_meanwhile(r)
            early = w.recv_all(0.0)
        assert early == b"", f"answered while BLOCK_COMMIT was held: {early!r}"
        assert w.recv_line(timeout=5.0) == b"0\t1\n"
        assert w.recv_line(timeout=5.0) == b"0\t2\t1\tother\n"
        assert srv.sql("SELECT v FROM bk_mixed_i WHERE k = 1") == [("during",)]
    finally:
        w.close()
        r.close()


def test_uninstall_while_a_commit_waits_for_block_commit_does_not_wait_for_it(request):
    """UNINSTALL SONAME while a handed-off commit waits for BLOCK_COMMIT: the commit's wait is cut
    short (its writer closed unanswered, the row absent: nothing acknowledged) instead of holding
    the uninstall for tablesocket_lock_wait_timeout (a helper measured 48 s). INSTALL works again."""
    with h.private_server(request, "backup-uninstall", ARGS) as s:
        s.exec_sql("CREATE TABLE bk_un (k int primary key, v varchar(20)) ENGINE=InnoDB")
        w = h.hs_open(s.hs_port_wr, "bk_un", "k,v", timeout=30)
        try:
            with h.backup_stage(s, "BLOCK_COMMIT"):
                w.send("1\t+\t2\t1\theld\n")
                time.sleep(0.3)  # its commit waits for the backup lock
                t0 = time.monotonic()
                s.exec_sql("UNINSTALL SONAME 'tablesocket'", db=None)
                took = time.monotonic() - t0
                assert took < 5.0, f"UNINSTALL SONAME waited {took:.1f} s for BLOCK_COMMIT"
                assert h.wait_closed(w, 5.0) is not None, "the writer of the aborted commit was not closed"
                assert b"0\t1" not in w.buf, "a write whose commit was aborted was acknowledged"
            assert s.sql("SELECT COUNT(*) FROM bk_un") == [("0",)]
            s.exec_sql("INSTALL SONAME 'tablesocket'", db=None)
            deadline = time.monotonic() + 10
            while not h.tsserver.port_accepts(s.hs_port_wr) and time.monotonic() < deadline:
                time.sleep(0.1)
            w2 = h.hs_open(s.hs_port_wr, "bk_un", "k,v", timeout=30)
            try:
                assert w2.request("1\t+\t2\t2\tafter\n") == b"0\t1\n"
            finally:
                w2.close()
        finally:
            w.close()
