#!/usr/bin/env python3
"""Timelines benchmark: "the newest 20 messages of the users I follow", three ways.

    /var/cache/tablesocket/venv/bin/python bench/timeline_bench.py [--seconds 15] [--procs 8] ...

Starts a private mariadbd with build/tablesocket.so (tests/integration/tsserver.py; loopback
only), loads 10,000 users, 1,000,000 messages and ~430,000 follow edges (about 43 followees per
user, skewed), then measures timelines per second for random users with:

  (a) tablesocket, one round trip: `1 M- 1 0 20 0 @ 0 ^ 2 1 <user> 1000` -- the server reads the
      user's followees from the follower table and k-way merges their messages (groups + N
      index entries);
  (b) SQL: SELECT m.* FROM follower f JOIN message m ON m.user_id = f.user_id
      WHERE f.follower_id = ? ORDER BY m.id DESC LIMIT 20, as a text query and as a
      server-side prepared statement (PREPARE once per connection, EXECUTE ... USING <user>);
  (c) a stored procedure doing the bounded pull-model merge in SQL: a cursor over the user's
      followees, each followee's newest N ids into a temporary table, then the top N overall
      joined back to message (see bench/TIMELINE.md).

Before measuring it checks, on a sample of users, that all of them return identical rows. The
server (all of its threads) is pinned to one CPU and the client processes to another
(--server-cpu / --client-cpu), each client process drives one connection with one request
outstanding. Prints a markdown table: timelines/s, latency percentiles and the ratio vs SQL.

Needs PyMySQL (the test venv has it). Total run time: about 2-3 minutes.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import multiprocessing as mp
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import tsserver  # noqa: E402

N_DEFAULT = 20

TIMELINE_SQL = ("SELECT m.id, m.user_id, m.body FROM follower f JOIN message m ON m.user_id = f.user_id "
                "WHERE f.follower_id = {u} ORDER BY m.id DESC LIMIT {n}")
# Not asked for, shown for honesty: the hand-optimised "deferred join" (sort ids from the covering
# index by_user, then read only N rows) that a careful SQL user would write.
DEFERRED_SQL = ("SELECT m.id, m.user_id, m.body FROM message m JOIN (SELECT m2.id FROM follower f "
                "JOIN message m2 ON m2.user_id = f.user_id WHERE f.follower_id = {u} "
                "ORDER BY m2.id DESC LIMIT {n}) t ON m.id = t.id ORDER BY m.id DESC")

# The pull-model k-way merge in SQL. For every followee (a cursor over follower's primary key),
# its newest N message ids (one dive into by_user(user_id, id), N index entries, no row reads) go
# into a per-connection temporary table; the newest N of those are the timeline, joined back to
# message for the bodies. Bounded like the server's merge (nothing outside the followees' newest
# N is read), but it reads followees * N index entries instead of followees + N, and pays a
# statement per followee.
PROCEDURE = """
CREATE PROCEDURE timeline(IN p_user INT, IN p_n INT)
READS SQL DATA
BEGIN
  DECLARE done INT DEFAULT 0;
  DECLARE f INT;
  DECLARE cur CURSOR FOR SELECT user_id FROM follower WHERE follower_id = p_user;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1;
  CREATE TEMPORARY TABLE IF NOT EXISTS tl_candidates (id BIGINT NOT NULL PRIMARY KEY) ENGINE=MEMORY;
  DELETE FROM tl_candidates;
  OPEN cur;
  followees: LOOP
    FETCH cur INTO f;
    IF done THEN LEAVE followees; END IF;
    INSERT INTO tl_candidates SELECT id FROM message WHERE user_id = f ORDER BY id DESC LIMIT p_n;
  END LOOP;
  CLOSE cur;
  SELECT m.id, m.user_id, m.body
    FROM (SELECT id FROM tl_candidates ORDER BY id DESC LIMIT p_n) c
    JOIN message m ON m.id = c.id
   ORDER BY m.id DESC;
END
"""

WORDS = ("the a of to and in is it you that he was for on are with as his they be at one have this "
         "from or had by hot word but what some we can out other were all there when up use your how "
         "said an each she which do their time if will way about many then them write would like so "
         "these her long make thing see him two has look more day could go come did number sound no "
         "most people my over know water than call first who may down side been now find").split()


# --------------------------------------------------------------------------------------------------
# data


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cumulative(weights):
    return list(itertools.accumulate(weights))


def generate(args, tmpdir: Path) -> dict:
    """Write message.tsv and follower.tsv for LOAD DATA; return statistics."""
    rng = random.Random(args.seed)
    users = list(range(1, args.users + 1))
    # Posting activity: skewed (log-normal), independent of popularity.
    post_w = cumulative(rng.lognormvariate(0, 1.0) for _ in users)
    authors = rng.choices(users, cum_weights=post_w, k=args.messages)
    text = " ".join(rng.choice(WORDS) for _ in range(200000))
    with open(tmpdir / "message.tsv", "w") as f:
        out = []
        for i, u in enumerate(authors, 1):       # ids in time order
            ln = rng.randint(20, 140)
            off = rng.randrange(len(text) - ln)
            out.append(f"{i}\t{u}\t{text[off:off + ln].strip()}\n")
            if len(out) == 50000:
                f.writelines(out)
                out.clear()
        f.writelines(out)
    # Following: how many users each one follows is log-normal (mean about avg_followees, a few
    # follow hundreds); whom is skewed toward popular users (Zipf-like over a random ranking).
    sigma = 1.0
    mu = math.log(args.avg_followees) - sigma * sigma / 2
    ranking = users[:]
    rng.shuffle(ranking)
    pop_w = cumulative(1.0 / (r + 1) ** 0.7 for r in range(len(ranking)))
    edges = 0
    counts = []
    with open(tmpdir / "follower.tsv", "w") as f:
        for u in users:                          # sorted by (follower_id, user_id): the PK order
            want = min(int(rng.lognormvariate(mu, sigma)), args.users - 1)
            chosen: set = set()
            for _ in range(20):
                if len(chosen) >= want:
                    break
                chosen.update(rng.choices(ranking, cum_weights=pop_w, k=want - len(chosen)))
                chosen.discard(u)
            chosen_l = sorted(chosen)[:want] if len(chosen) > want else sorted(chosen)
            counts.append(len(chosen_l))
            edges += len(chosen_l)
            f.writelines(f"{v}\t{u}\n" for v in chosen_l)
    return {"edges": edges, "avg_followees": edges / len(users), "max_followees": max(counts),
            "no_followees": sum(1 for c in counts if c == 0),
            "median_followees": statistics.median(counts)}


def sql_connect(server, db="test"):
    import pymysql
    conv = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
    return pymysql.connect(unix_socket=server["socket"], user="root", password="", database=db,
                           charset="utf8mb4", use_unicode=False, conv=conv, autocommit=True,
                           read_timeout=600, write_timeout=600, local_infile=True)


def load(conn, tmpdir: Path) -> None:
    with conn.cursor() as c:
        c.execute("DROP TABLE IF EXISTS message, follower")
        c.execute("DROP PROCEDURE IF EXISTS timeline")
        c.execute("CREATE TABLE message (id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, "
                  "body VARCHAR(140) NOT NULL) ENGINE=InnoDB")
        c.execute("CREATE TABLE follower (user_id INT NOT NULL, follower_id INT NOT NULL, "
                  "PRIMARY KEY (follower_id, user_id)) ENGINE=InnoDB")
        for table, cols in (("message", "(id, user_id, body)"), ("follower", "(user_id, follower_id)")):
            path = str(tmpdir / f"{table}.tsv").replace("'", "''")
            c.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table} "
                      f"FIELDS TERMINATED BY '\\t' ESCAPED BY '' LINES TERMINATED BY '\\n' {cols}")
        # The secondary index after the load: a sorted build, much faster than 1M random inserts.
        c.execute("ALTER TABLE message ADD KEY by_user (user_id, id)")
        c.execute("ANALYZE TABLE message, follower")
        c.fetchall()
        c.execute(PROCEDURE)


# --------------------------------------------------------------------------------------------------
# the three ways


def hs_unescape(tok: bytes):
    if tok == b"\x00":
        return None
    if b"\x01" not in tok:
        return tok
    out, i = bytearray(), 0
    while i < len(tok):
        if tok[i] == 1 and i + 1 < len(tok):
            out.append(tok[i + 1] - 0x40)
            i += 2
        else:
            out.append(tok[i])
            i += 1
    return bytes(out)


class TSConn:
    """A minimal HS client: one request outstanding, one reply line."""

    def __init__(self, server: dict, n: int):
        self.sock = socket.create_connection(("127.0.0.1", server["hs_port"]))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.n = n
        r = self._round(b"P\t1\ttest\tmessage\tby_user\tid,user_id,body\n"
                        b"P\t2\ttest\tfollower\tPRIMARY\tuser_id\n", 2)
        assert r == b"0\t1\n0\t1\n", r

    def _round(self, data: bytes, lines: int = 1) -> bytes:
        self.sock.sendall(data)
        buf = self.sock.recv(1 << 20)
        while buf.count(b"\n") < lines:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def raw(self, user: int) -> bytes:
        return self._round(b"1\tM-\t1\t0\t%d\t0\t@\t0\t^\t2\t1\t%d\t1000\n" % (self.n, user))

    def rows(self, user: int):
        toks = self.raw(user).rstrip(b"\n").split(b"\t")
        assert toks[:2] == [b"0", b"3"], toks[:3]
        v = [hs_unescape(t) for t in toks[2:]]
        return [tuple(v[i:i + 3]) for i in range(0, len(v), 3)]


class SQLConn:
    def __init__(self, server: dict, n: int, mode: str):
        self.conn = sql_connect(server)
        self.cur = self.conn.cursor()
        self.n, self.mode = n, mode
        if mode in ("prepared", "deferred"):
            q = (TIMELINE_SQL if mode == "prepared" else DEFERRED_SQL).format(u="?", n=n)
            self.cur.execute("PREPARE tl FROM '%s'" % q.replace("'", "''"))

    def rows(self, user: int):
        c = self.cur
        if self.mode == "text":
            c.execute(TIMELINE_SQL.format(u=int(user), n=self.n))
        elif self.mode in ("prepared", "deferred"):
            c.execute("EXECUTE tl USING %d" % int(user))
        else:
            c.execute("CALL timeline(%d, %d)" % (int(user), self.n))
        rows = c.fetchall()
        if self.mode == "procedure":
            while c.nextset():
                pass
        return [tuple(r) for r in rows]

    raw = rows


class TSClientConn:
    """The same request through the project's Python client (clients/python): Index.timeline."""

    def __init__(self, server: dict, n: int):
        sys.path.insert(0, str(REPO / "clients" / "python" / "src"))
        import tablesocket

        self.client = tablesocket.Client("127.0.0.1", server["hs_port"], timeout=60)
        self.msgs = self.client.open_index("test", "message", "by_user", ["id", "user_id", "body"])
        self.followees = self.client.open_index("test", "follower", "PRIMARY", ["user_id"])
        self.n = n

    def rows(self, user: int):
        return self.msgs.timeline(self.followees, [user], self.n, max_groups=1000)

    raw = rows


def make_conn(kind: str, server: dict, n: int):
    if kind == "tablesocket":
        return TSConn(server, n)
    if kind == "tablesocket-client":
        return TSClientConn(server, n)
    return SQLConn(server, n, kind)


def worker(kind, server, n, users, seed, start_at, seconds, cpu, out):
    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        conn = make_conn(kind, server, n)
        rng = random.Random(seed)
        while time.time() < start_at:            # warm-up until everyone starts
            conn.raw(rng.randint(1, users))
        end = start_at + seconds
        lat = []
        now = time.perf_counter
        while time.time() < end:
            u = rng.randint(1, users)
            t0 = now()
            conn.raw(u)
            lat.append(now() - t0)
        out.put((len(lat), lat[::max(1, len(lat) // 20000)]))
    except BaseException as e:  # pragma: no cover - reported by the parent
        out.put(e)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all of its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(kind, server, args, seconds: float) -> dict:
    """One closed-loop run of `seconds` with args.procs connections: completed timelines, server
    CPU seconds, sampled latencies."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    start_at = time.time() + args.warmup + 0.5
    procs = [ctx.Process(target=worker, args=(kind, server, args.n, args.users, 1000 * i + 7 + int(start_at),
                                             start_at, seconds, args.client_cpu, q), daemon=True)
             for i in range(args.procs)]
    for p in procs:
        p.start()
    while time.time() < start_at:
        time.sleep(0.005)
    cpu0 = cpu_seconds(server["pid"])
    time.sleep(seconds)
    cpu1 = cpu_seconds(server["pid"])
    results = [q.get(timeout=args.warmup + seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    errs = [r for r in results if isinstance(r, BaseException)]
    if errs:
        raise RuntimeError(f"{kind}: worker failed: {errs[0]!r}")
    return {"count": sum(r[0] for r in results), "cpu": cpu1 - cpu0, "seconds": seconds,
            "lat": [x for r in results for x in r[1]]}


def summarize(runs: list) -> dict:
    total = sum(r["count"] for r in runs)
    secs = sum(r["seconds"] for r in runs)
    cpu = sum(r["cpu"] for r in runs)
    lat = sorted(x for r in runs for x in r["lat"])

    def pct(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return {"count": total, "rate": total / secs, "p50": pct(0.5), "p99": pct(0.99),
            "cpu_us": cpu / max(total, 1) * 1e6, "cpu_share": cpu / secs,
            "rates": [r["count"] / r["seconds"] for r in runs]}


# --------------------------------------------------------------------------------------------------


def pin_server(pid: int, cpu: int) -> None:
    r = subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], capture_output=True, text=True)
    if r.returncode != 0:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), {cpu})
            except OSError:
                pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--messages", type=int, default=1000000)
    ap.add_argument("--avg-followees", type=float, default=43.0)
    ap.add_argument("-n", type=int, default=N_DEFAULT, help="timeline length (default 20)")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per method, in total")
    ap.add_argument("--rounds", type=int, default=3, help="rounds the seconds are split into; every "
                    "round measures every method in turn")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each measurement")
    ap.add_argument("--procs", type=int, default=8, help="client processes (one connection each)")
    ap.add_argument("--verify", type=int, default=300, help="users whose timelines are compared")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--no-pin", action="store_true", help="do not pin the server or the clients")
    ap.add_argument("--methods", default="tablesocket,tablesocket-client,text,prepared,procedure,deferred",
                    help="comma-separated, from: tablesocket (raw socket), tablesocket-client (the "
                         "Python client's Index.timeline), text, prepared, procedure, deferred")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--buffer-pool", default="1G")
    args = ap.parse_args(argv)
    if args.no_pin:
        args.server_cpu = args.client_cpu = None
    elif args.client_cpu is not None:
        os.sched_setaffinity(0, {args.client_cpu})
    t_begin = time.monotonic()

    for attempt in range(3):   # free ports are picked racily; on a busy machine retry
        srv = tsserver.MariaDBServer("tablesocket", name="bench",
                                     extra_args=[f"--innodb-buffer-pool-size={args.buffer_pool}",
                                                 "--innodb-log-file-size=512M", "--local-infile=1"])
        try:
            srv.start()
            break
        except tsserver.ServerError as e:
            srv.cleanup()
            if attempt == 2:
                raise
            log(f"server start failed, retrying: {str(e).splitlines()[0]}")
    try:
        if args.server_cpu is not None:
            pin_server(srv.pid, args.server_cpu)
        server = {"socket": srv.socket, "hs_port": srv.hs_port, "pid": srv.pid}
        log(f"server {srv}")
        t0 = time.monotonic()
        stats = generate(args, srv.tmpdir)
        t_gen = time.monotonic() - t0
        log(f"generated data in {t_gen:.1f}s: {stats}")
        conn = sql_connect(server)
        t0 = time.monotonic()
        load(conn, srv.tmpdir)
        t_load = time.monotonic() - t0
        log(f"loaded in {t_load:.1f}s")
        with conn.cursor() as c:
            c.execute("EXPLAIN " + TIMELINE_SQL.format(u=1, n=args.n))
            explain = [tuple(x.decode() if isinstance(x, bytes) else x for x in r) for r in c.fetchall()]
            c.execute("SELECT COUNT(*) FROM message")
            nmsg = int(c.fetchone()[0])

        # identical rows from every method on a sample of users (plus users who follow nobody)
        rng = random.Random(args.seed + 1)
        sample = [rng.randint(1, args.users) for _ in range(args.verify)]
        with conn.cursor() as c:
            c.execute("SELECT u.seq FROM seq_1_to_%d u LEFT JOIN follower f ON f.follower_id = u.seq "
                      "WHERE f.follower_id IS NULL LIMIT 3" % args.users)
            sample += [int(r[0]) for r in c.fetchall()]
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        conns = {m: make_conn(m, server, args.n) for m in methods}
        nonempty = 0
        for u in sample:
            ref = None
            for m, cn in conns.items():
                got = cn.rows(u)
                if ref is None:
                    ref = (m, got)
                elif got != ref[1]:
                    raise SystemExit(f"MISMATCH for user {u}: {ref[0]} gave {ref[1][:3]}..., {m} gave {got[:3]}...")
            nonempty += bool(ref[1])
        log(f"verified {len(sample)} users ({nonempty} non-empty timelines): {', '.join(methods)} identical")
        del conns

        # Rounds, the methods interleaved in each, so that a change in the machine's background
        # load hits every method alike.
        runs: dict = {m: [] for m in methods}
        per_round = args.seconds / args.rounds
        for rnd in range(1, args.rounds + 1):
            for m in methods:
                if args.server_cpu is not None:
                    pin_server(srv.pid, args.server_cpu)
                runs[m].append(measure(m, server, args, per_round))
                log(f"round {rnd}/{args.rounds} {m}: {runs[m][-1]['count'] / per_round:,.0f} timelines/s")
        results = {m: summarize(runs[m]) for m in methods}
    finally:
        srv.cleanup()

    names = {
        "tablesocket": "tablesocket `M-` with `^` (one round trip)",
        "tablesocket-client": "tablesocket, through the Python client's `Index.timeline`",
        "text": "SQL JOIN … ORDER BY id DESC LIMIT N (text query)",
        "prepared": "SQL JOIN, prepared statement (EXECUTE … USING)",
        "procedure": "stored procedure (cursor + temporary table)",
        "deferred": "(extra) SQL deferred join, prepared: ids from the covering index, then N rows",
    }
    ref = max((m for m in ("text", "prepared") if m in results), key=lambda m: results[m]["rate"], default=None)
    print()
    print(f"Timelines of N={args.n} newest messages, {args.users:,} users, {nmsg:,} messages, "
          f"{stats['edges']:,} follow edges ({stats['avg_followees']:.1f} followees per user on average, "
          f"median {stats['median_followees']:.0f}, max {stats['max_followees']}); "
          f"{args.procs} client connections, {args.seconds:.0f}s per method in {args.rounds} interleaved rounds"
          + ("" if args.server_cpu is None else
             f"; server pinned to CPU {args.server_cpu}, clients to CPU {args.client_cpu}") + ".")
    print()
    print("| method | timelines/s | vs SQL | server CPU µs / timeline | vs SQL | server CPU used "
          "| p50 ms | p99 ms | timelines/s per round |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in methods:
        r = results[m]
        ratio = f"{r['rate'] / results[ref]['rate']:.1f}x" if ref else "-"
        cratio = f"{results[ref]['cpu_us'] / r['cpu_us']:.1f}x" if ref and r["cpu_us"] else "-"
        print(f"| {names.get(m, m)} | {r['rate']:,.0f} | {ratio} | {r['cpu_us']:,.0f} | {cratio} "
              f"| {r['cpu_share'] * 100:.0f}% | {r['p50']:.2f} | {r['p99']:.2f} "
              f"| {' / '.join(f'{x:,.0f}' for x in r['rates'])} |")
    if ref:
        print()
        print(f"\"vs SQL\": against the faster plain SQL JOIN ({names[ref]}); CPU ratio = SQL's server CPU "
              "per timeline / this method's.")
    print()
    print(f"Data generated in {t_gen:.0f}s, loaded (LOAD DATA + index build) in {t_load:.0f}s; "
          f"total run {time.monotonic() - t_begin:.0f}s.")
    print("EXPLAIN of the SQL query:")
    for r in explain:
        print("    " + " | ".join("" if v is None else str(v) for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
