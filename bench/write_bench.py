#!/usr/bin/env python3
"""Write benchmark: single-row UPDATE by primary key, tablesocket vs SQL autocommit, durable commits.

    /var/cache/tablesocket/venv/bin/python bench/write_bench.py [--seconds 3] [--clients 1,8,64]
        [--configs nobinlog,binlog] [--no-pin] [--json FILE]

For each configuration it starts a private mariadbd (tests/integration/tsserver.py) with
innodb_flush_log_at_trx_commit=1, without the binary log and with --log-bin --sync-binlog=1, and
measures, at 1, 8 and 64 concurrent clients:

  * tablesocket: `1 = 1 <k> 1 0 U <v>` on the write port (each client one request at a time);
  * SQL: `UPDATE bench SET v = <v> WHERE k = <k>` with autocommit, over TCP (libmariadb).

Each client updates its own 100 rows, round robin, with a value that changes every time (an
unchanged row would commit nothing). The clients are one C program (compiled at run time from the
source below, against libmariadb), one thread per client: Python would be the bottleneck. Server
pinned to CPU 0, clients to CPU 1 (taskset). Each point: 0.5 s warm-up, then `--seconds` measured;
the status counters are read by the client program right at the edges of the measured window.

Printed: rows/s, Innodb_data_fsyncs per row, my_sync() calls per row (`Syncs`: binlog fsyncs),
binlog group commits per row, p50/p99 latency, and tablesocket batches per row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import tsserver  # noqa: E402

KEYS_PER_CLIENT = 100
_RUN_IDS = itertools.count(1)
MAX_CLIENTS = 64

C_SOURCE = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <mysql.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *mode, *sock_path;
static int hs_port, sql_port, nclients, keys_per_client;
static long long run_id;
static double warmup, seconds;
static atomic_int counting, stop_flag, ready_count, failed;
#define MAXLAT 2000000
typedef struct { int id; long ops; double *lat; long nlat; char err[256]; } worker_t;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static int read_line(int fd, char *buf, int cap) {
  int n = 0;
  while (n < cap - 1) {
    ssize_t r = recv(fd, buf + n, 1, 0);   /* replies are tiny; one byte at a time keeps it simple */
    if (r <= 0) return -1;
    if (buf[n++] == '\n') { buf[n] = 0; return n; }
  }
  return -1;
}

static int hs_connect(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET; a.sin_port = htons(hs_port); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return -1;
  int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void *run(void *arg) {
  worker_t *w = arg;
  int fd = -1; MYSQL *m = NULL; char buf[256], q[256];
  if (!strcmp(mode, "hs")) {
    fd = hs_connect();
    const char *p = "P\t1\ttest\tbench\tPRIMARY\tv\n";
    if (fd < 0 || send(fd, p, strlen(p), 0) < 0 || read_line(fd, buf, sizeof buf) < 0 || strcmp(buf, "0\t1\n")) {
      snprintf(w->err, sizeof w->err, "hs open failed"); atomic_store(&failed, 1);
    }
  } else {
    m = mysql_init(NULL);
    if (!mysql_real_connect(m, "127.0.0.1", "root", "", "test", sql_port, NULL, 0)) {
      snprintf(w->err, sizeof w->err, "connect: %s", mysql_error(m)); atomic_store(&failed, 1);
    }
  }
  atomic_fetch_add(&ready_count, 1);
  /* unique over runs, clients and requests: every update really changes its row */
  long long val = (run_id << 44) | ((long long)w->id << 36);
  int base = w->id * keys_per_client + 1, i = 0;
  while (!atomic_load(&stop_flag) && !atomic_load(&failed)) {
    int k = base + (i++ % keys_per_client);
    ++val;
    double t0 = now();
    if (fd >= 0) {
      int n = snprintf(q, sizeof q, "1\t=\t1\t%d\t1\t0\tU\t%lld\n", k, val);
      if (send(fd, q, n, 0) != n || read_line(fd, buf, sizeof buf) < 0 || strcmp(buf, "0\t1\t1\n")) {
        snprintf(w->err, sizeof w->err, "hs update failed: %s", buf); atomic_store(&failed, 1); break;
      }
    } else {
      int n = snprintf(q, sizeof q, "UPDATE bench SET v = %lld WHERE k = %d", val, k);
      if (mysql_real_query(m, q, n) || mysql_affected_rows(m) != 1) {
        snprintf(w->err, sizeof w->err, "sql update failed: %s (affected rows %llu)", mysql_error(m),
                 (unsigned long long)mysql_affected_rows(m));
        atomic_store(&failed, 1); break;
      }
    }
    if (atomic_load(&counting)) {
      w->ops++;
      if (w->nlat < MAXLAT) w->lat[w->nlat++] = now() - t0;
    }
  }
  if (fd >= 0) close(fd);
  if (m) mysql_close(m);
  return NULL;
}

static const char *names[] = {"Innodb_data_fsyncs", "Syncs", "Binlog_commits", "Binlog_group_commits",
                              "Tablesocket_batches", "Tablesocket_rows_written", "Com_update"};
#define NNAMES 7
static void snapshot(MYSQL *m, long long *out) {
  for (int i = 0; i < NNAMES; i++) out[i] = 0;
  if (mysql_query(m, "SHOW GLOBAL STATUS")) { fprintf(stderr, "status: %s\n", mysql_error(m)); exit(2); }
  MYSQL_RES *r = mysql_store_result(m); MYSQL_ROW row;
  while ((row = mysql_fetch_row(r)))
    for (int i = 0; i < NNAMES; i++) if (!strcasecmp(row[0], names[i])) out[i] = atoll(row[1]);
  mysql_free_result(r);
}

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
  if (argc != 10) { fprintf(stderr, "usage: wbench hs|sql HS_PORT SQL_PORT SOCKET CLIENTS KEYS WARMUP SECONDS RUN_ID\n"); return 2; }
  mode = argv[1]; hs_port = atoi(argv[2]); sql_port = atoi(argv[3]); sock_path = argv[4];
  nclients = atoi(argv[5]); keys_per_client = atoi(argv[6]); warmup = atof(argv[7]); seconds = atof(argv[8]);
  run_id = atoll(argv[9]);
  mysql_library_init(0, NULL, NULL);
  MYSQL *st = mysql_init(NULL);
  if (!mysql_real_connect(st, NULL, "root", "", NULL, 0, sock_path, 0)) { fprintf(stderr, "status conn: %s\n", mysql_error(st)); return 2; }
  worker_t *ws = calloc(nclients, sizeof *ws); pthread_t *th = calloc(nclients, sizeof *th);
  for (int i = 0; i < nclients; i++) { ws[i].id = i; ws[i].lat = malloc(sizeof(double) * MAXLAT); pthread_create(&th[i], NULL, run, &ws[i]); }
  while (atomic_load(&ready_count) < nclients) usleep(1000);
  usleep((useconds_t)(warmup * 1e6));
  long long s0[NNAMES], s1[NNAMES];
  snapshot(st, s0);
  double t0 = now(); atomic_store(&counting, 1);
  while (now() - t0 < seconds && !atomic_load(&failed)) usleep(10000);
  atomic_store(&counting, 0); double t1 = now();
  snapshot(st, s1);
  atomic_store(&stop_flag, 1);
  long ops = 0, nlat = 0;
  for (int i = 0; i < nclients; i++) { pthread_join(th[i], NULL); ops += ws[i].ops; nlat += ws[i].nlat; }
  for (int i = 0; i < nclients; i++) if (ws[i].err[0]) { fprintf(stderr, "client %d: %s\n", i, ws[i].err); return 1; }
  double *all = malloc(sizeof(double) * (nlat ? nlat : 1)); long p = 0;
  for (int i = 0; i < nclients; i++) { memcpy(all + p, ws[i].lat, sizeof(double) * ws[i].nlat); p += ws[i].nlat; }
  qsort(all, nlat, sizeof(double), cmp);
  printf("{\"ops\": %ld, \"seconds\": %.4f, \"p50_ms\": %.4f, \"p99_ms\": %.4f", ops, t1 - t0,
         nlat ? all[nlat / 2] * 1e3 : 0.0, nlat ? all[(long)(nlat * 0.99)] * 1e3 : 0.0);
  for (int i = 0; i < NNAMES; i++) printf(", \"%s\": %lld", names[i], s1[i] - s0[i]);
  printf("}\n");
  return 0;
}
"""


def build_client(workdir: Path) -> Path:
    src = workdir / "wbench.c"
    exe = workdir / "wbench"
    src.write_text(C_SOURCE)
    flags = subprocess.run(["mariadb_config", "--cflags", "--libs"], check=True, capture_output=True,
                           text=True).stdout.split()
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(src), *flags], check=True)
    return exe


class PinnedServer(tsserver.MariaDBServer):
    def __init__(self, *a, cpu: str | None = "0", **kw):
        self.cpu = cpu
        super().__init__(*a, **kw)

    def command(self):
        cmd = super().command()
        return (["taskset", "-c", self.cpu] + cmd) if self.cpu is not None else cmd


CONFIGS = {
    "nobinlog": ["--innodb-flush-log-at-trx-commit=1"],
    "binlog": ["--innodb-flush-log-at-trx-commit=1", "--log-bin=binlog", "--server-id=1", "--sync-binlog=1"],
}
COMMON = ["--innodb-buffer-pool-size=256M", "--innodb-log-file-size=512M", "--max-connections=300"]


def run_point(exe: Path, srv, mode: str, clients: int, seconds: float, pin: bool) -> dict:
    cmd = [str(exe), mode, str(srv.hs_port_wr), str(srv.sql_port), srv.socket, str(clients),
           str(KEYS_PER_CLIENT), "0.5", str(seconds), str(next(_RUN_IDS))]
    if pin:
        cmd = ["taskset", "-c", "1"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr}{r.stdout}")
    d = json.loads(r.stdout.strip().splitlines()[-1])
    ops = max(1, d["ops"])
    d.update(mode=mode, clients=clients, rows_per_s=d["ops"] / d["seconds"],
             fsyncs_per_row=d["Innodb_data_fsyncs"] / ops, syncs_per_row=d["Syncs"] / ops,
             group_commits_per_row=d["Binlog_group_commits"] / ops, batches_per_row=d["Tablesocket_batches"] / ops)
    return d


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--configs", default="nobinlog,binlog")
    ap.add_argument("--repeat", type=int, default=3,
                    help="measure each point this many times, tablesocket and SQL interleaved (median shown)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and clients to CPUs 0 and 1")
    ap.add_argument("--json", help="also write every measured point to this file")
    a = ap.parse_args()
    clients = [int(c) for c in a.clients.split(",")]
    configs = a.configs.split(",")
    assert max(clients) <= MAX_CLIENTS and all(c in CONFIGS for c in configs)
    pin = bool(not a.no_pin and (os.cpu_count() or 1) >= 2 and shutil.which("taskset"))
    results = []
    with tempfile.TemporaryDirectory(prefix="write-bench-") as tmp:
        exe = build_client(Path(tmp))
        for cfg in configs:
            srv = PinnedServer("tablesocket", name=f"bench-{cfg}", extra_args=COMMON + CONFIGS[cfg],
                               cpu="0" if pin else None)
            try:
                srv.start()
                srv.exec_sql("CREATE TABLE bench (k int primary key, v bigint not null, "
                             "pad char(100) not null default '') ENGINE=InnoDB")
                srv.exec_sql(f"INSERT INTO bench (k, v) SELECT seq, 0 FROM seq_1_to_{MAX_CLIENTS * KEYS_PER_CLIENT}")
                for n in clients:
                    for rep in range(a.repeat):
                        for mode in (("hs", "sql") if rep % 2 == 0 else ("sql", "hs")):
                            d = run_point(exe, srv, mode, n, a.seconds, pin)
                            d["config"], d["rep"] = cfg, rep
                            results.append(d)
                            print(f"# {cfg:8s} {mode:3s} {n:3d} clients: {d['rows_per_s']:9.0f} rows/s, "
                                  f"{d['fsyncs_per_row']:.3f} InnoDB fsyncs/row, {d['syncs_per_row']:.3f} other syncs/row, "
                                  f"p50 {d['p50_ms']:.2f} ms, p99 {d['p99_ms']:.2f} ms", file=sys.stderr, flush=True)
            finally:
                srv.stop()
                shutil.rmtree(srv.rundir, ignore_errors=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))

    print(f"\nSingle-row UPDATE by primary key, innodb_flush_log_at_trx_commit=1; {a.seconds:g} s per "
          f"measurement, median of {a.repeat} (min-max), tablesocket and SQL interleaved; "
          f"{'server on CPU 0, clients on CPU 1' if pin else 'not pinned'}; {os.cpu_count()} CPUs.\n")
    print("| binlog | clients | tablesocket rows/s | SQL rows/s | ratio | tablesocket fsyncs/row "
          "(InnoDB + binlog) | SQL fsyncs/row (InnoDB + binlog) | tablesocket rows/batch | tablesocket p50 / p99 ms "
          "| SQL p50 / p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def agg(cfg, mode, n):
        pts = [d for d in results if d["config"] == cfg and d["mode"] == mode and d["clients"] == n]
        m = {k: _median([d[k] for d in pts]) for k in ("rows_per_s", "fsyncs_per_row", "syncs_per_row",
                                                         "batches_per_row", "p50_ms", "p99_ms")}
        m["range"] = (min(d["rows_per_s"] for d in pts), max(d["rows_per_s"] for d in pts))
        return m

    for cfg in configs:
        for n in clients:
            t, s_ = agg(cfg, "hs", n), agg(cfg, "sql", n)
            label = "off" if cfg == "nobinlog" else "sync_binlog=1"
            print(f"| {label} | {n} | {t['rows_per_s']:,.0f} ({t['range'][0]:,.0f}-{t['range'][1]:,.0f}) | "
                  f"{s_['rows_per_s']:,.0f} ({s_['range'][0]:,.0f}-{s_['range'][1]:,.0f}) | "
                  f"{t['rows_per_s'] / max(1.0, s_['rows_per_s']):.2f}x | "
                  f"{t['fsyncs_per_row']:.3f} + {t['syncs_per_row']:.3f} | {s_['fsyncs_per_row']:.3f} + {s_['syncs_per_row']:.3f} | "
                  f"{1 / max(1e-9, t['batches_per_row']):.1f} | {t['p50_ms']:.2f} / {t['p99_ms']:.2f} | "
                  f"{s_['p50_ms']:.2f} / {s_['p99_ms']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
