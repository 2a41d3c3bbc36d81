// Run configuration of ts-loadgen (filled by the command line, see options.cc).
#ifndef TS_LOADGEN_CONFIG_H
#define TS_LOADGEN_CONFIG_H

#include <cstdint>
#include <string>

#include "keygen.h"
#include "protocol.h"

namespace loadgen {

struct Config {
  Proto proto = Proto::hs;
  Op op = Op::get;
  Expect expect = Expect::none;

  std::string host = "127.0.0.1";
  uint16_t port = 0;

  uint32_t conns = 1;
  uint32_t depth = 1;
  uint32_t threads = 1;
  uint64_t reconnect = 0;       // > 0: a connection is closed and opened anew after this many requests

  double seconds = 5.0;         // measured duration (time mode)
  double warmup_seconds = 1.0;  // before measuring (not counted)
  uint64_t requests = 0;        // > 0: count mode, this many measured requests in total

  uint64_t keys = 100000;       // keys are 1..keys
  Dist dist = Dist::uniform;
  double zipf_theta = 0.99;
  bool zipf_scramble = false;
  uint64_t seed = 0;
  bool seed_given = false;
  std::string key_prefix;

  bool load = false;            // write keys 1..keys once (HS insert / mc set / RESP SET), then stop
  uint64_t insert_start = 0;    // --op insert: first key (0: keys + 1)
  bool vary_writes = false;     // update/set write a varying `created` so rows really change

  // HandlerSocket
  std::string db = "test";
  std::string table = "user";
  std::string index = "PRIMARY";
  std::string columns = "user_name,user_email,created";
  std::string key_column = "user_id";
  std::string hs_auth;          // if set, "A\t1\t<secret>" is sent first

  // SQL (--proto sql): log-in; the statement uses db, table, key_column and columns above
  std::string sql_user = "root";
  std::string sql_password;

  bool json = false;
  uint32_t print_errors = 5;    // how many error/mismatch details to print
  double timeout_seconds = 10.0;  // no reply for this long with requests in flight: give up
  bool progress = false;        // print ops/s every second
  bool ladder = false;          // print a percentile ladder
  bool print_window = false;    // print "WINDOW start|end" when the measured window opens/closes

  bool write_op() const { return op == Op::update || op == Op::insert || op == Op::set; }
  bool sequential_keys() const { return op == Op::insert || load; }
};

}  // namespace loadgen
#endif
