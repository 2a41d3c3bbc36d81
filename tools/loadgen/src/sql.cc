// The SQL engine of ts-loadgen (--proto sql): MariaDB server-side prepared statements, driven from
// the same kind of epoll loop as the other protocols through libmariadb's non-blocking API
// (mysql_stmt_execute_start/_cont, mysql_stmt_store_result_start/_cont). One statement is in
// flight per connection: the client library cannot pipeline.
//
// Each answer is presented as a HandlerSocket reply and checked with check_hs: a row is code 0 with
// its columns as tokens (no tokens: no row), an update is code 0 with the matched-row count
// (the connection uses CLIENT_FOUND_ROWS, so an unchanged row still counts 1, as in HandlerSocket),
// an insert is code 0 without tokens, an error is code 1 with the server's message.
#include "engine.h"

#ifdef TS_LOADGEN_HAVE_SQL

#include <mysql.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>
#include <deque>
#include <vector>

#include "keygen.h"
#include "protocol.h"

namespace loadgen {
namespace {

constexpr size_t kResultBuf = 1024;  // bytes per result column (longer values count as mismatches)

struct Sql_conn {
  MYSQL *my = nullptr;
  MYSQL_STMT *stmt = nullptr;
  int fd = -1;
  uint32_t id = 0;
  enum State : uint8_t { idle, executing, storing } state = idle;
  bool dead = false;
  bool ready = false;   // a request completed without waiting: in Sql_worker::ready_
  uint32_t events = 0;  // epoll events registered
  int ret = 0;          // result of the running _start/_cont call
  int pending_status = 0;  // first turn: the status mysql_stmt_execute_start returned
  // the request in flight
  uint64_t key = 0;
  uint64_t sent_ns = 0;
  bool counted = false;
  // bound parameters: [key] for get; [c1..cn, key] for update; [key, c1..cn] for insert
  unsigned long long key_param = 0;
  Row row{};
  unsigned long value_len[3] = {0, 0, 0};
  std::vector<MYSQL_BIND> params;
  // bound result columns (get)
  std::vector<MYSQL_BIND> results;
  std::vector<char> result_buf;
  std::vector<unsigned long> result_len;
  std::vector<my_bool> result_null, result_error;

  ~Sql_conn() {
    if (stmt) mysql_stmt_close(stmt);
    if (my) mysql_close(my);
  }
};

class Sql_worker : public Worker_base {
 public:
  Sql_worker(const Config &cfg, uint32_t index, const Schedule &sched, Diag &diag)
      : cfg_(cfg), index_(index), sched_(sched), diag_(diag),
        chooser_(cfg.dist, cfg.keys, cfg.zipf_theta, cfg.zipf_scramble,
                 cfg.seed ^ (0x9e3779b97f4a7c15ull * (index + 1))) {
    chk_.proto = Proto::sql;
    chk_.op = cfg.op;
    chk_.expect = cfg.expect;
    variant_ = uint64_t(index) * 7919 + 1;
    statement_ = sql_statement(cfg.op, cfg.db, cfg.table, cfg.key_column, cfg.columns);
    ncols_ = 1;
    for (char c : cfg.columns) ncols_ += c == ',';
  }
  ~Sql_worker() override {
    if (epfd_ >= 0) ::close(epfd_);
  }

  bool add_connection(uint32_t id, const Target &t, std::string *err) override {
    auto c = std::make_unique<Sql_conn>();
    c->id = id;
    c->my = mysql_init(nullptr);
    if (!c->my) {
      *err = "mysql_init failed";
      return false;
    }
    unsigned int timeout = 10;
    mysql_options(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    unsigned int protocol = MYSQL_PROTOCOL_TCP;
    mysql_options(c->my, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(c->my, MYSQL_OPT_NONBLOCK, nullptr);
    // The set-up is blocking (blocking and non-blocking calls may be mixed on one connection).
    if (!mysql_real_connect(c->my, t.address.c_str(), cfg_.sql_user.c_str(), cfg_.sql_password.c_str(), nullptr,
                            t.port, nullptr, CLIENT_FOUND_ROWS)) {
      *err = "connect to " + t.text + ": " + mysql_error(c->my);
      return false;
    }
    c->fd = int(mysql_get_socket(c->my));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->stmt = mysql_stmt_init(c->my);
    if (!c->stmt || mysql_stmt_prepare(c->stmt, statement_.data(), statement_.size())) {
      *err = "prepare \"" + statement_ + "\": " + (c->stmt ? mysql_stmt_error(c->stmt) : mysql_error(c->my));
      return false;
    }
    unsigned want_params = cfg_.op == Op::get ? 1 : 1 + ncols_;
    if (mysql_stmt_param_count(c->stmt) != want_params) {
      *err = "prepare \"" + statement_ + "\": unexpected parameter count";
      return false;
    }
    if (cfg_.op == Op::get) {
      if (mysql_stmt_field_count(c->stmt) != ncols_ || ncols_ > Hs_reply::kMaxTokens) {
        *err = "prepare \"" + statement_ + "\": unexpected column count";
        return false;
      }
      c->results.assign(ncols_, MYSQL_BIND{});
      c->result_buf.assign(size_t(ncols_) * kResultBuf, 0);
      c->result_len.assign(ncols_, 0);
      c->result_null.assign(ncols_, 0);
      c->result_error.assign(ncols_, 0);
      for (unsigned i = 0; i < ncols_; ++i) {
        MYSQL_BIND &b = c->results[i];
        b.buffer_type = MYSQL_TYPE_STRING;  // temporal and numeric columns come back as text
        b.buffer = c->result_buf.data() + size_t(i) * kResultBuf;
        b.buffer_length = kResultBuf;
        b.length = &c->result_len[i];
        b.is_null = &c->result_null[i];
        b.error = &c->result_error[i];
      }
      if (mysql_stmt_bind_result(c->stmt, c->results.data())) {
        *err = std::string("bind result: ") + mysql_stmt_error(c->stmt);
        return false;
      }
    }
    c->params.assign(want_params, MYSQL_BIND{});
    MYSQL_BIND *key = nullptr;
    MYSQL_BIND *vals = nullptr;
    if (cfg_.op == Op::get) {
      key = &c->params[0];
    } else if (cfg_.op == Op::update) {
      vals = &c->params[0];
      key = &c->params[ncols_];
    } else {
      key = &c->params[0];
      vals = &c->params[1];
    }
    key->buffer_type = MYSQL_TYPE_LONGLONG;
    key->is_unsigned = 1;
    key->buffer = &c->key_param;
    if (vals) {
      char *bufs[3] = {c->row.name, c->row.email, c->row.created};
      unsigned long caps[3] = {sizeof c->row.name, sizeof c->row.email, sizeof c->row.created};
      for (int i = 0; i < 3; ++i) {
        vals[i].buffer_type = MYSQL_TYPE_STRING;
        vals[i].buffer = bufs[i];
        vals[i].buffer_length = caps[i];
        vals[i].length = &c->value_len[i];
      }
    }
    if (mysql_stmt_bind_param(c->stmt, c->params.data())) {
      *err = std::string("bind parameters: ") + mysql_stmt_error(c->stmt);
      return false;
    }
    conns_.push_back(std::move(c));
    return true;
  }

  void run() override {
    mysql_thread_init();
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    for (auto &c : conns_) {
      epoll_event ev{};
      ev.events = 0;
      ev.data.ptr = c.get();
      epoll_ctl(epfd_, EPOLL_CTL_ADD, c->fd, &ev);
    }
    live_ = uint32_t(conns_.size());
    sleep_until_ns(sched_.t_start);
    last_progress_ = now_ns();
    for (auto &c : conns_) {
      int status;
      if (start(*c, last_progress_, &status)) {
        c->ready = true;  // also when it completed at once: advance() runs in the loop
        ready_.push_back(c.get());
        c->pending_status = status;
      }
    }
    constexpr int kMaxEv = 256;
    epoll_event evs[kMaxEv];
    for (;;) {
      if (live_ == 0) break;
      if (sched_.count_mode && issued_counted_ >= quota_ && inflight_ == 0) break;
      int n = epoll_wait(epfd_, evs, kMaxEv, ready_.empty() ? 5 : 0);
      uint64_t now = now_ns();
      if (g_stop.load(std::memory_order_relaxed)) break;
      if (now >= sched_.t_end) break;
      for (int i = 0; i < n; ++i) {
        Sql_conn &c = *static_cast<Sql_conn *>(evs[i].data.ptr);
        if (c.dead || c.ready) continue;
        if (c.state == Sql_conn::idle) {  // nothing in flight: the server closed it or sent garbage
          lose(c, "event on an idle connection (closed by the server?)");
          continue;
        }
        int ready = 0;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) ready |= MYSQL_WAIT_READ;
        if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) ready |= MYSQL_WAIT_WRITE;
        ++st_.reads;
        int status = c.state == Sql_conn::executing ? mysql_stmt_execute_cont(&c.ret, c.stmt, ready)
                                                    : mysql_stmt_store_result_cont(&c.ret, c.stmt, ready);
        advance(c, status);
      }
      for (size_t k = ready_.size(); k > 0 && !ready_.empty(); --k) {
        Sql_conn &c = *ready_.front();
        ready_.pop_front();
        c.ready = false;
        int status = c.pending_status;
        c.pending_status = 0;
        if (!c.dead) advance(c, status);
      }
      if (now > last_progress_ && now - last_progress_ > uint64_t(cfg_.timeout_seconds * 1e9) && inflight_ > 0) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "thread %u: no reply for %.1f s with %" PRIu64 " requests in flight; giving up",
                      index_, cfg_.timeout_seconds, inflight_);
        diag_.report("stall", msg);
        ++st_.errors;
        ++st_.conn_errors;
        break;
      }
    }
    // Requests still in flight are abandoned: the connections are closed by the destructor.
    mysql_thread_end();
  }

 private:
  uint64_t next_key() {
    if (cfg_.sequential_keys()) {
      uint64_t k = seq_next_;
      seq_next_ += seq_stride_;
      return k;
    }
    return chooser_.next();
  }

  // Starts the next request on an idle connection unless the schedule or the quota is over.
  // Returns false if nothing was started; else *status is the result of mysql_stmt_execute_start.
  bool start(Sql_conn &c, uint64_t now, int *status) {
    if (c.dead || now >= sched_.t_end || g_stop.load(std::memory_order_relaxed)) return false;
    bool measured = now >= sched_.t_measure;
    bool counted = sched_.count_mode && measured;
    if (sched_.count_mode && measured && issued_counted_ >= quota_) return false;
    uint64_t k = next_key();
    c.key = k;
    c.key_param = k;
    c.counted = counted;
    if (counted) ++issued_counted_;
    if (cfg_.op != Op::get) {
      uint64_t variant = 0;
      if (cfg_.vary_writes) variant = ++variant_;
      make_row(k, variant, &c.row);
      c.value_len[0] = c.row.name_len;
      c.value_len[1] = c.row.email_len;
      c.value_len[2] = c.row.created_len;
    }
    ++inflight_;
    ++st_.writes;
    c.state = Sql_conn::executing;
    c.sent_ns = now_ns();
    *status = mysql_stmt_execute_start(&c.ret, c.stmt);
    return true;
  }

  void issue(Sql_conn &c, uint64_t now) {
    int status;
    if (start(c, now, &status)) advance(c, status);
  }

  // After a _start/_cont call: wait for the socket, or go on with the next step of the request,
  // and after its answer with the next request. A request that completes at once (its answer was
  // already there: the server ran as soon as it was woken) is finished on the next loop turn,
  // after the other connections' events, so that one fast connection cannot monopolize the loop.
  void advance(Sql_conn &c, int status) {
    for (;;) {
      if (status != 0) {
        want(c, status);
        return;
      }
      if (c.state == Sql_conn::executing && c.ret == 0 && cfg_.op == Op::get) {
        c.state = Sql_conn::storing;
        status = mysql_stmt_store_result_start(&c.ret, c.stmt);
        continue;
      }
      if (!finish(c)) return;
      if (!start(c, now_ns(), &status)) {
        want(c, 0);
        return;
      }
      if (status == 0) {
        c.ready = true;
        ready_.push_back(&c);
        return;
      }
    }
  }

  // Registers the socket events the client library waits for (none: the connection is idle).
  void want(Sql_conn &c, int status) {
    uint32_t ev = 0;
    if (status & MYSQL_WAIT_READ) ev |= EPOLLIN;
    if (status & MYSQL_WAIT_WRITE) ev |= EPOLLOUT;
    if (status & MYSQL_WAIT_EXCEPT) ev |= EPOLLPRI;
    if (status != 0 && ev == 0) ev = EPOLLIN;  // a pure timeout wait: no timeouts are configured
    if (ev != c.events) {
      epoll_event e{};
      e.events = ev;
      e.data.ptr = &c;
      epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &e);
      c.events = ev;
    }
  }

  void lose(Sql_conn &c, const char *why) {
    char msg[640];
    std::snprintf(msg, sizeof msg, "thread %u connection %u: %s", index_, c.id, why);
    diag_.report("connection", msg);
    ++st_.errors;
    ++st_.conn_errors;
    c.dead = true;
    if (c.state != Sql_conn::idle) --inflight_;
    c.state = Sql_conn::idle;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
    --live_;
  }

  // The request's statement is done (or failed): check the answer and account for it. Returns
  // false if the connection was lost.
  bool finish(Sql_conn &c) {
    uint64_t t = now_ns();
    char why[512];
    why[0] = 0;
    Outcome o;
    bool lost = false;
    if (c.ret != 0) {
      unsigned int e = mysql_stmt_errno(c.stmt);
      std::snprintf(msg_, sizeof msg_, "%u %s", e, mysql_stmt_error(c.stmt));
      reply_.code = 1;
      reply_.n = 1;
      reply_.ntokens = 1;
      reply_.tokens[0] = Field{msg_, std::strlen(msg_)};
      o = check_hs(chk_, reply_, c.key, why, sizeof why);
      // CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED: the connection is gone
      lost = e == 2006 || e == 2013 || e == 2055;
    } else if (cfg_.op == Op::get) {
      o = check_row(c, why, sizeof why);
    } else {
      reply_.code = 0;
      reply_.n = 1;
      if (cfg_.op == Op::update) {
        int len = std::snprintf(msg_, sizeof msg_, "%llu", (unsigned long long)mysql_stmt_affected_rows(c.stmt));
        reply_.ntokens = 1;
        reply_.tokens[0] = Field{msg_, size_t(len)};
      } else {
        reply_.ntokens = 0;
      }
      o = check_hs(chk_, reply_, c.key, why, sizeof why);
    }
    c.state = Sql_conn::idle;
    --inflight_;
    switch (o) {
      case Outcome::ok: ++st_.ok; break;
      case Outcome::miss: ++st_.misses; break;
      case Outcome::error:
        ++st_.errors;
        diag_.report("error", why);
        break;
      case Outcome::mismatch:
        ++st_.mismatches;
        diag_.report("mismatch", why);
        break;
    }
    ++st_.all_replies;
    bool counted = sched_.count_mode ? c.counted : (t >= sched_.t_measure && t < sched_.t_end);
    if (counted) {
      ++st_.ops;
      st_.hist.record(t > c.sent_ns ? t - c.sent_ns : 0);
      st_.last_counted_ns = t;
    }
    last_progress_ = t;
    replies_seen.store(st_.all_replies, std::memory_order_relaxed);
    if (lost) {
      // the error itself was counted above; the connection is not counted twice
      --st_.errors;
      lose(c, msg_);
      return false;
    }
    return true;
  }

  Outcome check_row(Sql_conn &c, char *why, size_t cap) {
    my_ulonglong rows = mysql_stmt_num_rows(c.stmt);
    reply_.code = 0;
    reply_.n = ncols_;
    reply_.ntokens = 0;
    Outcome o;
    if (rows > 1) {
      o = Outcome::mismatch;
      std::snprintf(why, cap, "key %llu: %llu rows, expected 1", (unsigned long long)c.key, (unsigned long long)rows);
    } else {
      bool truncated = false;
      if (rows == 1) {
        int rc = mysql_stmt_fetch(c.stmt);  // from the stored result: no I/O
        truncated = rc == MYSQL_DATA_TRUNCATED;
        if (rc == 0 || truncated) {
          reply_.ntokens = ncols_;
          for (unsigned i = 0; i < ncols_; ++i) {
            if (c.result_null[i])
              reply_.tokens[i] = Field{};
            else
              reply_.tokens[i] = Field{c.result_buf.data() + size_t(i) * kResultBuf,
                                       c.result_len[i] < kResultBuf ? c.result_len[i] : kResultBuf};
          }
        }
      }
      if (truncated) {
        o = Outcome::mismatch;
        std::snprintf(why, cap, "key %llu: a value is longer than %zu bytes", (unsigned long long)c.key, kResultBuf);
      } else {
        o = check_hs(chk_, reply_, c.key, why, cap);
      }
    }
    mysql_stmt_free_result(c.stmt);  // a stored result: no I/O
    return o;
  }

  const Config &cfg_;
  uint32_t index_;
  const Schedule &sched_;
  Diag &diag_;
  Key_chooser chooser_;
  Check_spec chk_;
  std::string statement_;
  unsigned ncols_ = 0;
  std::vector<std::unique_ptr<Sql_conn>> conns_;  // stable addresses: buffers are bound by pointer
  std::deque<Sql_conn *> ready_;                  // requests completed without waiting
  int epfd_ = -1;
  uint32_t live_ = 0;
  uint64_t inflight_ = 0;
  uint64_t variant_ = 0;
  uint64_t last_progress_ = 0;
  Hs_reply reply_;
  char msg_[512];
};

}  // namespace

bool sql_available() { return true; }

bool sql_library_init(std::string *err) {
  if (mysql_library_init(0, nullptr, nullptr)) {
    *err = "mysql_library_init failed";
    return false;
  }
  return true;
}

std::unique_ptr<Worker_base> make_sql_worker(const Config &cfg, uint32_t index, const Schedule &sched, Diag &diag,
                                             std::string *) {
  return std::make_unique<Sql_worker>(cfg, index, sched, diag);
}

}  // namespace loadgen

#else  // built without libmariadb

namespace loadgen {

bool sql_available() { return false; }

bool sql_library_init(std::string *err) {
  *err = "built without libmariadb: --proto sql is not available";
  return false;
}

std::unique_ptr<Worker_base> make_sql_worker(const Config &, uint32_t, const Schedule &, Diag &, std::string *err) {
  *err = "built without libmariadb: --proto sql is not available";
  return nullptr;
}

}  // namespace loadgen

#endif
