// ts-loadgen: closed-loop, pipelined load generator for HandlerSocket, memcached (text and meta)
// and RESP servers on the loopback interface, verifying every answer. See tools/loadgen/README.md.
#include <getopt.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "config.h"
#include "engine.h"
#include "runner.h"

using namespace loadgen;

namespace {

const char kUsage[] = R"(usage: ts-loadgen --proto hs|mc-text|mc-meta|resp|sql [options]

Target (loopback only):
  --host H               127.0.0.1 (default), localhost, ::1 or any 127.x.y.z; others are refused
  --port P               default: hs 9998 (9999 for writes), mc-* 11211, resp 6379, sql 3306

Load shape:
  -c, --conns N          connections (default 1)
  -d, --depth D          requests in flight per connection, pipelined (default 1)
  -t, --threads T        event-loop threads; connections are spread over them (default 1)
  --reconnect N          close each connection after N requests are answered and open a new one
                         (connect, and HS's open index, block its thread); 1: a connection per
                         request, as clients without persistent connections do (default: never)
  --seconds S            measured duration (default 5)
  --warmup-seconds W     run, but do not count, for W seconds first (default 1)
  --requests N           measure exactly N requests instead of a duration
  --progress             print replies/s every second

Keys:
  --keys K               keys are 1..K (default 100000)
  --dist uniform|zipf    key popularity (default uniform)
  --zipf-theta X         Zipf exponent, > 0 (default 0.99); key 1 is the hottest
  --zipf-scramble        spread the hot keys over 1..K by a fixed hash
  --seed S               RNG seed (default: random; always printed)
  --key-prefix STR       key on the wire = STR + decimal key (e.g. "user:" for memcached)

Operation:
  --op get|update|insert|set
                         hs, sql: get (default), update (the row's columns), insert (new keys);
                         mc-*/resp: get (default), set
  --insert-start N       --op insert: first key (default K + 1), then counting up
  --load                 write keys 1..K once and stop: HS/SQL insert, memcached/RESP set.
                         Values are the model below. Depth/conns/threads apply.
  --vary-writes          update/set write a `created` time that changes with every request
                         (the row really changes; reads with --expect fail until reloaded)

Verification (every reply is parsed and checked):
  --expect none|hs-user|kv-user|auto
                         none: replies must be well-formed successes (misses are counted)
                         hs-user: row of key k is "user<k>", "user<k>@example.com",
                                  "2010-01-01 00:00:00"; writes must report 1 row
                         kv-user: value of key k is "user<k>|user<k>@example.com|2010-01-01 00:00:00"
                         auto (default): hs-user for hs and sql with the default columns,
                         kv-user for mc-*/resp, none otherwise
  --print-errors N       print the first N errors/mismatches (default 5)
  --timeout S            give up when nothing is answered for S seconds (default 10)

HandlerSocket:
  --db NAME --table NAME --index NAME    default test, user, PRIMARY
  --columns LIST         columns read/updated (default user_name,user_email,created)
  --key-column NAME      key column for inserts (default user_id)
  --hs-auth SECRET       send "A 1 SECRET" first

SQL (MariaDB server-side prepared statements, libmariadb's non-blocking API; --db, --table,
--columns and --key-column as above; depth 1: the client library does not pipeline):
  --sql-user NAME        default root
  --sql-password PW      default empty

Output:
  --json                 also print a JSON summary line
  --ladder               also print latency percentiles from p10 to p99.999 and max
  --print-window         print "WINDOW start <ns>" and "WINDOW end <ns>" (CLOCK_MONOTONIC) on
                         stdout, flushed, when the measured window opens and closes
  The last line is always:
  RESULT proto=.. conns=.. depth=.. ops=.. seconds=.. ops_per_sec=.. p50_us=.. p99_us=.. p999_us=..
         errors=.. mismatches=.. op=.. threads=.. misses=.. seed=..
Exit status: 0 clean, 1 errors or mismatches (or fewer requests than asked), 2 could not run.
)";

[[noreturn]] void die(const char *fmt, const char *arg) {
  std::fprintf(stderr, "ts-loadgen: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, "\n(ts-loadgen --help for usage)\n");
  std::exit(2);
}

uint64_t parse_u64_arg(const char *opt, const char *s, uint64_t min, uint64_t max) {
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || !end || *end || s[0] == '-' || s[0] == 0 || v < min || v > max) {
    std::fprintf(stderr, "ts-loadgen: %s: bad value \"%s\" (expected %" PRIu64 "..%" PRIu64 ")\n", opt, s, min, max);
    std::exit(2);
  }
  return v;
}

double parse_double_arg(const char *opt, const char *s, double min, double max) {
  char *end = nullptr;
  double v = std::strtod(s, &end);
  if (!end || *end || s[0] == 0 || !(v >= min && v <= max)) {
    std::fprintf(stderr, "ts-loadgen: %s: bad value \"%s\" (expected %g..%g)\n", opt, s, min, max);
    std::exit(2);
  }
  return v;
}

size_t count_columns(const std::string &cols) {
  if (cols.empty()) return 0;
  size_t n = 1;
  for (char c : cols) n += c == ',';
  return n;
}

enum Opt_id {
  o_proto = 1000, o_host, o_port, o_seconds, o_warmup, o_requests, o_keys, o_dist, o_theta, o_scramble, o_seed,
  o_prefix, o_op, o_insert_start, o_load, o_vary, o_expect, o_print_errors, o_timeout, o_db, o_table, o_index,
  o_columns, o_key_column, o_hs_auth, o_json, o_progress, o_ladder, o_help, o_sql_user, o_sql_password,
  o_print_window, o_reconnect,
};

}  // namespace

int main(int argc, char **argv) {
  static const option longopts[] = {
      {"proto", required_argument, nullptr, o_proto},
      {"host", required_argument, nullptr, o_host},
      {"port", required_argument, nullptr, o_port},
      {"conns", required_argument, nullptr, 'c'},
      {"depth", required_argument, nullptr, 'd'},
      {"threads", required_argument, nullptr, 't'},
      {"reconnect", required_argument, nullptr, o_reconnect},
      {"seconds", required_argument, nullptr, o_seconds},
      {"warmup-seconds", required_argument, nullptr, o_warmup},
      {"requests", required_argument, nullptr, o_requests},
      {"keys", required_argument, nullptr, o_keys},
      {"dist", required_argument, nullptr, o_dist},
      {"zipf-theta", required_argument, nullptr, o_theta},
      {"zipf-scramble", no_argument, nullptr, o_scramble},
      {"seed", required_argument, nullptr, o_seed},
      {"key-prefix", required_argument, nullptr, o_prefix},
      {"op", required_argument, nullptr, o_op},
      {"insert-start", required_argument, nullptr, o_insert_start},
      {"load", no_argument, nullptr, o_load},
      {"vary-writes", no_argument, nullptr, o_vary},
      {"expect", required_argument, nullptr, o_expect},
      {"print-errors", required_argument, nullptr, o_print_errors},
      {"timeout", required_argument, nullptr, o_timeout},
      {"db", required_argument, nullptr, o_db},
      {"table", required_argument, nullptr, o_table},
      {"index", required_argument, nullptr, o_index},
      {"columns", required_argument, nullptr, o_columns},
      {"key-column", required_argument, nullptr, o_key_column},
      {"hs-auth", required_argument, nullptr, o_hs_auth},
      {"sql-user", required_argument, nullptr, o_sql_user},
      {"sql-password", required_argument, nullptr, o_sql_password},
      {"print-window", no_argument, nullptr, o_print_window},
      {"json", no_argument, nullptr, o_json},
      {"progress", no_argument, nullptr, o_progress},
      {"ladder", no_argument, nullptr, o_ladder},
      {"help", no_argument, nullptr, o_help},
      {nullptr, 0, nullptr, 0},
  };
  Config cfg;
  std::string proto, op, expect = "auto", dist = "uniform";
  bool warmup_given = false;
  int ch;
  while ((ch = getopt_long(argc, argv, "c:d:t:h", longopts, nullptr)) != -1) {
    switch (ch) {
      case o_proto: proto = optarg; break;
      case o_host: cfg.host = optarg; break;
      case o_port: cfg.port = uint16_t(parse_u64_arg("--port", optarg, 1, 65535)); break;
      case 'c': cfg.conns = uint32_t(parse_u64_arg("--conns", optarg, 1, 100000)); break;
      case 'd': cfg.depth = uint32_t(parse_u64_arg("--depth", optarg, 1, 1000000)); break;
      case 't': cfg.threads = uint32_t(parse_u64_arg("--threads", optarg, 1, 1024)); break;
      case o_reconnect: cfg.reconnect = parse_u64_arg("--reconnect", optarg, 1, UINT64_MAX / 2); break;
      case o_seconds: cfg.seconds = parse_double_arg("--seconds", optarg, 0.001, 1e7); break;
      case o_warmup:
        cfg.warmup_seconds = parse_double_arg("--warmup-seconds", optarg, 0, 1e7);
        warmup_given = true;
        break;
      case o_requests: cfg.requests = parse_u64_arg("--requests", optarg, 1, UINT64_MAX / 2); break;
      case o_keys: cfg.keys = parse_u64_arg("--keys", optarg, 1, uint64_t(1) << 62); break;
      case o_dist: dist = optarg; break;
      case o_theta: cfg.zipf_theta = parse_double_arg("--zipf-theta", optarg, 1e-6, 100); break;
      case o_scramble: cfg.zipf_scramble = true; break;
      case o_seed:
        cfg.seed = parse_u64_arg("--seed", optarg, 0, UINT64_MAX);
        cfg.seed_given = true;
        break;
      case o_prefix: cfg.key_prefix = optarg; break;
      case o_op: op = optarg; break;
      case o_insert_start: cfg.insert_start = parse_u64_arg("--insert-start", optarg, 0, uint64_t(1) << 62); break;
      case o_load: cfg.load = true; break;
      case o_vary: cfg.vary_writes = true; break;
      case o_expect: expect = optarg; break;
      case o_print_errors: cfg.print_errors = uint32_t(parse_u64_arg("--print-errors", optarg, 0, 1000000)); break;
      case o_timeout: cfg.timeout_seconds = parse_double_arg("--timeout", optarg, 0.01, 1e6); break;
      case o_db: cfg.db = optarg; break;
      case o_table: cfg.table = optarg; break;
      case o_index: cfg.index = optarg; break;
      case o_columns: cfg.columns = optarg; break;
      case o_key_column: cfg.key_column = optarg; break;
      case o_hs_auth: cfg.hs_auth = optarg; break;
      case o_sql_user: cfg.sql_user = optarg; break;
      case o_sql_password: cfg.sql_password = optarg; break;
      case o_print_window: cfg.print_window = true; break;
      case o_json: cfg.json = true; break;
      case o_progress: cfg.progress = true; break;
      case o_ladder: cfg.ladder = true; break;
      case 'h':
      case o_help: std::fputs(kUsage, stdout); return 0;
      default: std::fputs(kUsage, stderr); return 2;
    }
  }
  if (optind < argc) die("unexpected argument \"%s\"", argv[optind]);

  if (proto == "hs") cfg.proto = Proto::hs;
  else if (proto == "mc-text") cfg.proto = Proto::mc_text;
  else if (proto == "mc-meta") cfg.proto = Proto::mc_meta;
  else if (proto == "resp") cfg.proto = Proto::resp;
  else if (proto == "sql") cfg.proto = Proto::sql;
  else if (proto.empty()) die("%s--proto is required (hs, mc-text, mc-meta, resp, sql)", "");
  else die("unknown --proto \"%s\"", proto.c_str());
  bool is_sql = cfg.proto == Proto::sql;
  bool is_hs = cfg.proto == Proto::hs || is_sql;  // rows of columns, ops get/update/insert
  if (is_sql && !sql_available())
    die("%s--proto sql: this ts-loadgen was built without libmariadb (install libmariadb-dev, rebuild)", "");
  if (is_sql && cfg.depth != 1)
    die("%s--proto sql: depth must be 1 (the MariaDB client library does not pipeline); use more --conns", "");
  if (is_sql && !cfg.key_prefix.empty()) die("%s--proto sql: keys are numbers; --key-prefix does not apply", "");
  if (is_sql && cfg.reconnect) die("%s--reconnect applies to hs, mc-* and resp", "");

  if (cfg.load) {
    if (!op.empty() && op != (is_hs ? "insert" : "set")) die("--load writes rows; it cannot be combined with --op %s", op.c_str());
    cfg.op = is_hs ? Op::insert : Op::set;
    if (cfg.requests) die("%s--load writes exactly --keys requests; drop --requests", "");
    cfg.requests = cfg.keys;
    if (warmup_given && cfg.warmup_seconds > 0) die("%s--load has no warm-up", "");
    cfg.warmup_seconds = 0;
  } else if (op.empty() || op == "get") {
    cfg.op = Op::get;
  } else if (op == "update" && is_hs) {
    cfg.op = Op::update;
  } else if (op == "insert" && is_hs) {
    cfg.op = Op::insert;
  } else if (op == "set" && !is_hs) {
    cfg.op = Op::set;
  } else {
    die("--op %s does not apply to this --proto (hs, sql: get, update, insert; mc-*/resp: get, set)", op.c_str());
  }
  if (cfg.op == Op::insert && cfg.insert_start == 0) cfg.insert_start = cfg.load ? 1 : cfg.keys + 1;

  if (dist == "uniform") cfg.dist = Dist::uniform;
  else if (dist == "zipf" || dist == "zipfian") cfg.dist = Dist::zipf;
  else die("unknown --dist \"%s\" (uniform, zipf)", dist.c_str());

  const std::string default_cols = Config().columns;
  if (expect == "auto") {
    if (is_hs) cfg.expect = cfg.columns == default_cols ? Expect::hs_user : Expect::none;
    else cfg.expect = Expect::kv_user;
  } else if (expect == "none") {
    cfg.expect = Expect::none;
  } else if (expect == "hs-user") {
    if (!is_hs) die("--expect %s applies to --proto hs and sql only", expect.c_str());
    if (count_columns(cfg.columns) != 3) die("--expect hs-user needs 3 columns (name, email, created), got \"%s\"", cfg.columns.c_str());
    cfg.expect = Expect::hs_user;
  } else if (expect == "kv-user") {
    if (is_hs) die("--expect %s applies to memcached and RESP; use hs-user", expect.c_str());
    cfg.expect = Expect::kv_user;
  } else {
    die("unknown --expect \"%s\" (none, hs-user, kv-user, auto)", expect.c_str());
  }
  if (is_hs && cfg.write_op() && count_columns(cfg.columns) != 3)
    die("HS and SQL writes store the 3-column user row; --columns has to name 3 columns, got \"%s\"", cfg.columns.c_str());
  if (cfg.vary_writes && !cfg.write_op()) die("%s--vary-writes needs a write op (update, set)", "");
  if (cfg.vary_writes && cfg.op == Op::insert) die("%s--vary-writes applies to update and set", "");

  if (cfg.port == 0) {
    if (is_sql) cfg.port = 3306;
    else if (is_hs) cfg.port = cfg.write_op() ? 9999 : 9998;
    else if (cfg.proto == Proto::resp) cfg.port = 6379;
    else cfg.port = 11211;
  }
  if (cfg.threads > cfg.conns) cfg.threads = cfg.conns;
  if (!cfg.seed_given) {
    std::random_device rd;
    cfg.seed = (uint64_t(rd()) << 32) ^ rd() ^
               uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return run(cfg);
}
