#include "runner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "buffer.h"
#include "engine.h"
#include "histogram.h"
#include "keygen.h"
#include "protocol.h"

namespace loadgen {

std::atomic<bool> g_stop{false};

namespace {

void on_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

// ---- Connection set-up ---------------------------------------------------------------------------

bool is_loopback(const sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const in6_addr &a = reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a)) return a.s6_addr[12] == 127;
  }
  return false;
}

// Resolves host:port; refuses anything that is not a loopback address.
bool resolve_loopback(const std::string &host, uint16_t port, Target *t, std::string *err) {
  // Numeric addresses only (plus "localhost"): no name lookup, so no DNS traffic either.
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo *res = nullptr;
  std::string ps = std::to_string(port);
  int rc = getaddrinfo(h.c_str(), ps.c_str(), &hints, &res);
  if (rc != 0) {
    *err = "--host " + host + ": not a numeric loopback address (" + gai_strerror(rc) +
           "); use 127.0.0.1, ::1 or localhost";
    return false;
  }
  bool ok = false;
  for (addrinfo *ai = res; ai; ai = ai->ai_next) {
    if (!is_loopback(ai->ai_addr)) continue;
    std::memcpy(&t->addr, ai->ai_addr, ai->ai_addrlen);
    t->len = ai->ai_addrlen;
    t->family = ai->ai_family;
    char buf[INET6_ADDRSTRLEN] = "?";
    const void *a = ai->ai_family == AF_INET
                        ? static_cast<const void *>(&reinterpret_cast<sockaddr_in *>(ai->ai_addr)->sin_addr)
                        : static_cast<const void *>(&reinterpret_cast<sockaddr_in6 *>(ai->ai_addr)->sin6_addr);
    inet_ntop(ai->ai_family, a, buf, sizeof buf);
    t->text = ai->ai_family == AF_INET6 ? "[" + std::string(buf) + "]:" + ps : std::string(buf) + ":" + ps;
    t->address = buf;
    t->port = port;
    ok = true;
    break;
  }
  freeaddrinfo(res);
  if (!ok) *err = host + " is not a loopback address: ts-loadgen only targets 127.0.0.0/8 and ::1";
  return ok;
}

// Reads one '\n'-terminated line with a deadline (blocking socket set-up phase).
bool read_line(int fd, std::string *line, int timeout_ms, std::string *err) {
  line->clear();
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, timeout_ms);
    if (rc <= 0) {
      *err = rc == 0 ? "timed out waiting for a reply" : std::string("poll: ") + std::strerror(errno);
      return false;
    }
    char c;
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) {
      *err = n == 0 ? "server closed the connection" : std::string("read: ") + std::strerror(errno);
      return false;
    }
    if (c == '\n') return true;
    line->push_back(c);
    if (line->size() > 65536) {
      *err = "reply line too long";
      return false;
    }
  }
}

bool send_all(int fd, const std::string &s, std::string *err) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *err = std::string("send: ") + std::strerror(errno);
      return false;
    }
    off += size_t(n);
  }
  return true;
}

int open_connection(const Config &cfg, const Target &t, std::string *err) {
  int fd = ::socket(t.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr *>(&t.addr), t.len) != 0) {
    *err = "connect to " + t.text + ": " + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (cfg.proto == Proto::hs) {
    std::vector<std::string> lines;
    if (!cfg.hs_auth.empty()) lines.push_back(hs_auth_line(cfg.hs_auth));
    std::string cols = cfg.sequential_keys() ? cfg.key_column + "," + cfg.columns : cfg.columns;
    lines.push_back(hs_open_index_line(cfg.db, cfg.table, cfg.index, cols));
    std::string all;
    for (auto &l : lines) all += l;
    if (!send_all(fd, all, err)) {
      ::close(fd);
      return -1;
    }
    for (auto &l : lines) {
      std::string reply;
      if (!read_line(fd, &reply, 5000, err)) {
        *err = "HandlerSocket set-up: " + *err;
        ::close(fd);
        return -1;
      }
      if (reply != "0\t1") {
        std::string req = l.substr(0, l.size() - 1);
        if (req[0] == 'A') req = "A\t1\t<secret>";
        *err = "HandlerSocket set-up \"" + printable(req) + "\" answered \"" + printable(reply) + "\"";
        ::close(fd);
        return -1;
      }
    }
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  return fd;
}

// ---- Per-thread engine ---------------------------------------------------------------------------

struct Inflight {
  uint64_t key;
  uint64_t sent_ns;
  bool counted;  // count mode: issued in the measured phase
};

struct Conn {
  int fd = -1;
  uint32_t id = 0;
  Buffer in;
  Buffer out;
  std::vector<Inflight> ring;  // capacity = depth; FIFO: replies come back in request order
  uint32_t head = 0, count = 0;
  uint32_t unstamped = 0;      // newest entries not yet given a send time
  bool dead = false;
  bool want_out = false;
  uint64_t issued = 0;         // requests sent on this socket (--reconnect)

  void push(uint64_t key, bool counted) {
    uint32_t i = head + count;
    if (i >= ring.size()) i -= uint32_t(ring.size());
    ring[i] = {key, 0, counted};
    ++count;
    ++unstamped;
  }
  Inflight pop() {
    Inflight f = ring[head];
    if (++head == ring.size()) head = 0;
    --count;
    return f;
  }
  void stamp(uint64_t t) {
    uint32_t i = head + count - unstamped;
    for (uint32_t k = 0; k < unstamped; ++k, ++i) {
      if (i >= ring.size()) i -= uint32_t(ring.size());
      ring[i].sent_ns = t;
    }
    unstamped = 0;
  }
};

class Worker : public Worker_base {
 public:
  Worker(const Config &cfg, uint32_t index, const Schedule &sched, Diag &diag)
      : cfg_(cfg), index_(index), sched_(sched), diag_(diag),
        chooser_(cfg.dist, cfg.keys, cfg.zipf_theta, cfg.zipf_scramble,
                 cfg.seed ^ (0x9e3779b97f4a7c15ull * (index + 1))) {
    req_.proto = cfg.proto;
    req_.op = cfg.op;
    req_.key_prefix = cfg.key_prefix;
    chk_.proto = cfg.proto;
    chk_.op = cfg.op;
    chk_.expect = cfg.expect;
    chk_.key_prefix = cfg.key_prefix;
    variant_ = uint64_t(index) * 7919 + 1;
  }
  ~Worker() override {
    for (auto &c : conns_)
      if (c.fd >= 0) ::close(c.fd);
    if (epfd_ >= 0) ::close(epfd_);
  }

  bool add_connection(uint32_t id, const Target &t, std::string *err) override {
    int fd = open_connection(cfg_, t, err);
    if (fd < 0) return false;
    target_ = t;
    add_conn(fd, id);
    return true;
  }

  void add_conn(int fd, uint32_t id) {
    Conn c;
    c.fd = fd;
    c.id = id;
    c.ring.resize(cfg_.depth);
    c.in.reserve(64 * 1024);
    c.out.reserve(size_t(cfg_.depth) * 160 + 256);
    conns_.push_back(std::move(c));
  }

  void run() override {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    for (auto &c : conns_) watch(c);
    live_ = uint32_t(conns_.size());
    sleep_until_ns(sched_.t_start);
    last_progress_ = now_ns();
    for (auto &c : conns_) {
      fill(c, last_progress_);
      flush(c);
    }
    constexpr int kMaxEv = 256;
    epoll_event evs[kMaxEv];
    for (;;) {
      int n = epoll_wait(epfd_, evs, kMaxEv, 5);
      uint64_t now = now_ns();
      if (g_stop.load(std::memory_order_relaxed)) break;
      if (now >= sched_.t_end) break;
      for (int i = 0; i < n; ++i) {
        Conn &c = *static_cast<Conn *>(evs[i].data.ptr);
        if (c.dead) continue;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
          on_readable(c);
          if (c.dead) continue;
          if (used_up(c) && c.count == 0) {
            reopen(c);
            if (c.dead) continue;
          }
          fill(c, now_ns());
          flush(c);
        } else if (evs[i].events & EPOLLOUT) {
          flush(c);
        }
      }
      if (live_ == 0) break;
      if (sched_.count_mode && issue_done() && inflight_total() == 0) break;
      if (now > last_progress_ && now - last_progress_ > uint64_t(cfg_.timeout_seconds * 1e9) && inflight_total() > 0) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "thread %u: no reply for %.1f s with %" PRIu64 " requests in flight; giving up",
                      index_, cfg_.timeout_seconds, inflight_total());
        diag_.report("stall", msg);
        ++st_.errors;
        ++st_.conn_errors;
        break;
      }
    }
  }

 private:
  uint64_t inflight_total() const { return inflight_; }
  bool issue_done() const { return sched_.count_mode && issued_counted_ >= quota_; }

  void kill(Conn &c, const char *why) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "thread %u connection %u: %s (%u requests in flight lost)", index_, c.id, why,
                  c.count);
    diag_.report("connection", msg);
    ++st_.errors;
    ++st_.conn_errors;
    c.dead = true;
    inflight_ -= c.count;
    c.count = 0;
    c.unstamped = 0;
    if (c.fd >= 0) ::close(c.fd);  // also removes it from the epoll set
    c.fd = -1;
    --live_;
  }

  // --reconnect: every request on the old socket is answered; a new one takes its place.
  void reopen(Conn &c) {
    ::close(c.fd);  // also removes it from the epoll set
    std::string err;
    c.fd = open_connection(cfg_, target_, &err);
    c.issued = 0;
    c.want_out = false;
    if (c.fd < 0) {
      kill(c, ("reconnect: " + err).c_str());
      return;
    }
    watch(c);
    ++st_.reconnects;
  }

  void watch(Conn &c) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &c;
    epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev);
  }

  // --reconnect: this socket has carried its share of requests.
  bool used_up(const Conn &c) const { return cfg_.reconnect && c.issued >= cfg_.reconnect; }

  uint64_t next_key() {
    if (cfg_.sequential_keys()) {
      uint64_t k = seq_next_;
      seq_next_ += seq_stride_;
      return k;
    }
    return chooser_.next();
  }

  void fill(Conn &c, uint64_t now) {
    if (now >= sched_.t_end) return;
    while (c.count < cfg_.depth && !used_up(c)) {
      bool measured = now >= sched_.t_measure;
      bool counted = sched_.count_mode && measured;
      if (sched_.count_mode && measured && issued_counted_ >= quota_) return;
      uint64_t k = next_key();
      uint64_t variant = 0;
      if (cfg_.vary_writes) {
        variant_ += 1;
        variant = variant_;
      }
      encode_request(req_, k, variant, c.out);
      c.push(k, counted);
      ++c.issued;
      ++inflight_;
      if (counted) ++issued_counted_;
    }
  }

  void flush(Conn &c) {
    if (c.unstamped) c.stamp(now_ns());
    if (!c.out.empty()) {
      ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      ++st_.writes;
      if (w > 0) {
        st_.bytes_out += uint64_t(w);
        c.out.consume(size_t(w));
      } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        kill(c, std::strerror(errno));
        return;
      }
    }
    bool want = !c.out.empty();
    if (want != c.want_out) {
      epoll_event ev{};
      ev.events = want ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
      ev.data.ptr = &c;
      epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
      c.want_out = want;
    }
  }

  void account(Conn &c, Outcome o, const char *why) {
    (void)c;
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
  }

  void on_readable(Conn &c) {
    if (c.in.tail_room() < 16 * 1024) c.in.prepare(16 * 1024);
    ssize_t r = ::read(c.fd, c.in.tail(), c.in.tail_room());
    ++st_.reads;
    if (r == 0) {
      kill(c, "server closed the connection");
      return;
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      kill(c, std::strerror(errno));
      return;
    }
    uint64_t t = now_ns();
    c.in.wrote(size_t(r));
    st_.bytes_in += uint64_t(r);
    bool in_window = t >= sched_.t_measure && t < sched_.t_end;
    char why[512];
    why[0] = 0;
    while (!c.in.empty()) {
      if (c.count == 0) {
        std::string m = "unsolicited bytes \"" + printable(c.in.view(), 60) + "\"";
        kill(c, m.c_str());
        return;
      }
      Parse_result pr;
      Outcome o;
      uint64_t key = c.ring[c.head].key;
      if (cfg_.proto == Proto::hs) {
        pr = parse_hs_reply(c.in.data(), c.in.size(), &hs_);
        if (pr.status != Parse_status::complete) goto not_complete;
        o = check_hs(chk_, hs_, key, why, sizeof why);
      } else {
        if (cfg_.proto == Proto::mc_text)
          pr = parse_mc_text_reply(c.in.data(), c.in.size(), &kv_);
        else if (cfg_.proto == Proto::mc_meta)
          pr = parse_mc_meta_reply(c.in.data(), c.in.size(), &kv_);
        else
          pr = parse_resp_reply(c.in.data(), c.in.size(), &kv_);
        if (pr.status != Parse_status::complete) goto not_complete;
        o = check_kv(chk_, kv_, key, why, sizeof why);
      }
      {
        Inflight f = c.pop();
        --inflight_;
        account(c, o, why);
        ++st_.all_replies;
        bool counted = sched_.count_mode ? f.counted : in_window;
        if (counted) {
          ++st_.ops;
          st_.hist.record(t > f.sent_ns ? t - f.sent_ns : 0);
          st_.last_counted_ns = t;
        }
        c.in.consume(pr.consumed);
        continue;
      }
    not_complete:
      if (pr.status == Parse_status::need_more) break;
      {
        std::string m = std::string("protocol error: ") + pr.error + " in \"" + printable(c.in.view(), 80) + "\"";
        kill(c, m.c_str());
        return;
      }
    }
    last_progress_ = t;
    replies_seen.store(st_.all_replies, std::memory_order_relaxed);
  }

  const Config &cfg_;
  uint32_t index_;
  const Schedule &sched_;  // final before run() is called
  Diag &diag_;
  Key_chooser chooser_;
  Request_spec req_;
  Check_spec chk_;
  std::vector<Conn> conns_;
  Target target_{};
  int epfd_ = -1;
  uint32_t live_ = 0;
  uint64_t variant_ = 0;
  uint64_t last_progress_ = 0;
  uint64_t inflight_ = 0;  // requests sent or queued on live connections, not yet answered
  Hs_reply hs_;
  Kv_reply kv_;
};

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::string fmt_us(uint64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", double(ns) / 1000.0);
  return b;
}

}  // namespace

int run(const Config &cfg) {
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  Target target;
  std::string err;
  if (!resolve_loopback(cfg.host, cfg.port, &target, &err)) {
    std::fprintf(stderr, "ts-loadgen: %s\n", err.c_str());
    return 2;
  }

  std::printf("ts-loadgen: proto=%s op=%s%s target=%s conns=%u depth=%u threads=%u\n", proto_name(cfg.proto),
              op_name(cfg.op), cfg.load ? " (load)" : "", target.text.c_str(), cfg.conns, cfg.depth, cfg.threads);
  if (cfg.sequential_keys()) {
    uint64_t first = cfg.load ? 1 : cfg.insert_start;
    std::printf("ts-loadgen: keys sequential from %s%" PRIu64 "%s seed=%" PRIu64 " expect=%s\n",
                cfg.key_prefix.c_str(), first, cfg.load ? (" to " + std::to_string(cfg.keys)).c_str() : "",
                cfg.seed, expect_name(cfg.expect));
  } else {
    char dist[64];
    if (cfg.dist == Dist::zipf)
      std::snprintf(dist, sizeof dist, "zipf(theta=%g%s)", cfg.zipf_theta, cfg.zipf_scramble ? ",scrambled" : "");
    else
      std::snprintf(dist, sizeof dist, "uniform");
    std::printf("ts-loadgen: keys=%" PRIu64 " prefix=\"%s\" dist=%s seed=%" PRIu64 " expect=%s\n", cfg.keys,
                cfg.key_prefix.c_str(), dist, cfg.seed, expect_name(cfg.expect));
  }
  if (cfg.requests)
    std::printf("ts-loadgen: warm-up %.1f s, then %" PRIu64 " requests\n", cfg.warmup_seconds, cfg.requests);
  else
    std::printf("ts-loadgen: warm-up %.1f s, then %.1f s measured\n", cfg.warmup_seconds, cfg.seconds);
  std::fflush(stdout);

  Diag diag(cfg.print_errors);
  std::vector<std::unique_ptr<Worker_base>> workers;
  Schedule sched{};
  sched.count_mode = cfg.requests > 0;
  if (cfg.proto == Proto::sql && !sql_library_init(&err)) {
    std::fprintf(stderr, "ts-loadgen: %s\n", err.c_str());
    return 2;
  }
  for (uint32_t t = 0; t < cfg.threads; ++t) {
    if (cfg.proto == Proto::sql) {
      auto w = make_sql_worker(cfg, t, sched, diag, &err);
      if (!w) {
        std::fprintf(stderr, "ts-loadgen: %s\n", err.c_str());
        return 2;
      }
      workers.push_back(std::move(w));
    } else {
      workers.emplace_back(new Worker(cfg, t, sched, diag));
    }
  }

  // Connect everything first (blocking, with the HS handshake or the SQL log-in and statement
  // preparation), then start all threads together.
  for (uint32_t i = 0; i < cfg.conns; ++i) {
    if (!workers[i % cfg.threads]->add_connection(i, target, &err)) {
      std::fprintf(stderr, "ts-loadgen: connection %u: %s\n", i, err.c_str());
      return 2;
    }
  }

  // Split the request count and the key sequences between threads.
  for (uint32_t t = 0; t < cfg.threads; ++t) {
    uint64_t share = cfg.requests / cfg.threads + (t < cfg.requests % cfg.threads ? 1 : 0);
    workers[t]->set_quota(share);
    if (cfg.load) {  // thread t writes keys (K*t/T, K*(t+1)/T]
      uint64_t lo = cfg.keys * t / cfg.threads + 1, hi = cfg.keys * (t + 1) / cfg.threads;
      workers[t]->set_sequence(lo, 1);
      workers[t]->set_quota(hi + 1 - lo);
    } else if (cfg.op == Op::insert) {
      workers[t]->set_sequence(cfg.insert_start + t, cfg.threads);
    }
  }

  uint64_t now = now_ns();
  sched.t_start = now + 20 * 1000000ull;  // let the threads get ready
  sched.t_measure = sched.t_start + uint64_t(cfg.warmup_seconds * 1e9);
  sched.t_end = sched.count_mode ? UINT64_MAX : sched.t_measure + uint64_t(cfg.seconds * 1e9);
  double cpu0 = cpu_seconds();
  std::vector<std::thread> threads;
  std::atomic<uint32_t> finished{0};
  for (auto &w : workers)
    threads.emplace_back([&w, &finished] {
      w->run();
      finished.fetch_add(1);
    });
  // --print-window: "WINDOW start|end <monotonic ns>" on stdout at the edges of the measured
  // window, so that a caller can sample server-side counters (CPU time, status) around it.
  std::thread marker;
  if (cfg.print_window && !sched.count_mode) {
    marker = std::thread([&sched, &finished, n = cfg.threads] {
      auto wait_until = [&](uint64_t t) {
        for (;;) {
          uint64_t now = now_ns();
          if (now >= t) return true;
          if (finished.load() == n || g_stop.load()) return false;
          sleep_until_ns(std::min<uint64_t>(t, now + 10000000ull));
        }
      };
      if (!wait_until(sched.t_measure)) return;
      std::printf("WINDOW start %" PRIu64 "\n", now_ns());
      std::fflush(stdout);
      if (!wait_until(sched.t_end)) return;
      std::printf("WINDOW end %" PRIu64 "\n", now_ns());
      std::fflush(stdout);
    });
  }

  if (cfg.progress) {
    uint64_t last = 0, tick = sched.t_start + 1000000000ull;
    for (;;) {
      while (now_ns() < tick && finished.load() < cfg.threads && !g_stop.load()) usleep(10000);
      if (finished.load() == cfg.threads || g_stop.load()) break;
      uint64_t sum = 0;
      for (auto &w : workers) sum += w->replies_seen.load(std::memory_order_relaxed);
      double at = double(tick - sched.t_start) / 1e9;
      std::printf("ts-loadgen: %6.1f s  %10" PRIu64 " replies/s%s\n", at, sum - last,
                  tick <= sched.t_measure ? "  (warm-up)" : "");
      std::fflush(stdout);
      last = sum;
      tick += 1000000000ull;
    }
  }
  for (auto &th : threads) th.join();
  if (marker.joinable()) marker.join();
  double cpu = cpu_seconds() - cpu0;
  uint64_t t_done = now_ns();

  Stats total;
  for (auto &w : workers) total.merge(w->stats());

  double seconds;
  if (sched.count_mode)
    seconds = total.last_counted_ns > sched.t_measure ? double(total.last_counted_ns - sched.t_measure) / 1e9 : 0.0;
  else {
    /* A run that ended before its window began (the server gone during the warm-up) measured
       nothing: 0 s, not an unsigned difference gone round. */
    const uint64_t end = t_done < sched.t_end ? t_done : sched.t_end;
    seconds = end > sched.t_measure ? double(end - sched.t_measure) / 1e9 : 0.0;
  }
  double wall = double(t_done - sched.t_start) / 1e9;
  double ops_per_sec = seconds > 0 ? double(total.ops) / seconds : 0.0;
  const Histogram &h = total.hist;
  uint64_t p50 = h.percentile(0.50), p90 = h.percentile(0.90), p99 = h.percentile(0.99),
           p999 = h.percentile(0.999);

  std::printf("ops          %" PRIu64 " in %.3f s = %.0f ops/s\n", total.ops, seconds, ops_per_sec);
  std::printf("latency us   min %s  p50 %s  p90 %s  p99 %s  p999 %s  max %s  mean %.1f\n", fmt_us(h.min()).c_str(),
              fmt_us(p50).c_str(), fmt_us(p90).c_str(), fmt_us(p99).c_str(), fmt_us(p999).c_str(),
              fmt_us(h.max()).c_str(), h.mean() / 1000.0);
  if (cfg.ladder && h.count()) {
    std::printf("latency ladder (us):\n");
    for (double q : {0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.995, 0.999, 0.9999, 0.99999, 1.0})
      std::printf("  p%-8g %10s  (%" PRIu64 " requests above)\n", q * 100, fmt_us(h.percentile(q)).c_str(),
                  h.count() - uint64_t(std::ceil(q * double(h.count()))));
  }
  std::printf("replies      %" PRIu64 " (incl. warm-up): ok %" PRIu64 ", misses %" PRIu64 ", errors %" PRIu64
              ", mismatches %" PRIu64 "; lost connections %" PRIu64 "\n",
              total.all_replies, total.ok, total.misses, total.errors, total.mismatches, total.conn_errors);
  if (cfg.reconnect) std::printf("reconnects   %" PRIu64 " (a new connection every %" PRIu64 " requests)\n", total.reconnects, cfg.reconnect);
  double per = total.all_replies ? 1.0 / double(total.all_replies) : 0.0;
  std::printf("client       cpu %.0f%% of one core over %.1f s; per reply: %.3f reads, %.3f writes, %.1f B out, %.1f B in\n",
              wall > 0 ? 100.0 * cpu / wall : 0.0, wall, double(total.reads) * per, double(total.writes) * per,
              double(total.bytes_out) * per, double(total.bytes_in) * per);
  if (total.errors || total.mismatches)
    std::printf("WARNING      %" PRIu64 " errors and %" PRIu64 " mismatches: the figures above are not a clean run\n",
                total.errors, total.mismatches);
  /* Nothing answered in the window (a server that stalls every request for less than --timeout,
     or a window shorter than it): no figure at all, not a clean run of zero. */
  const bool nothing_measured = !sched.count_mode && total.ops == 0;
  if (nothing_measured)
    std::printf("WARNING      no reply was counted in the measured window: nothing was measured\n");
  if (cfg.vary_writes)
    std::printf("note         --vary-writes changed `created`: reload (--load) before reading with --expect\n");
  if (g_stop.load()) std::printf("note         interrupted\n");
  if (cfg.json) {
    std::printf(
        "{\"proto\":\"%s\",\"op\":\"%s\",\"load\":%s,\"conns\":%u,\"depth\":%u,\"threads\":%u,\"keys\":%" PRIu64
        ",\"dist\":\"%s\",\"zipf_theta\":%g,\"seed\":%" PRIu64 ",\"expect\":\"%s\",\"ops\":%" PRIu64
        ",\"seconds\":%.3f,\"ops_per_sec\":%.1f,\"latency_us\":{\"min\":%s,\"p50\":%s,\"p90\":%s,\"p99\":%s,"
        "\"p999\":%s,\"max\":%s,\"mean\":%.1f},\"replies\":%" PRIu64 ",\"ok\":%" PRIu64 ",\"misses\":%" PRIu64
        ",\"errors\":%" PRIu64 ",\"mismatches\":%" PRIu64 ",\"lost_connections\":%" PRIu64
        ",\"client_cpu_pct\":%.1f,\"reconnects\":%" PRIu64 "}\n",
        proto_name(cfg.proto), op_name(cfg.op), cfg.load ? "true" : "false", cfg.conns, cfg.depth, cfg.threads,
        cfg.keys, cfg.dist == Dist::zipf ? "zipf" : "uniform", cfg.zipf_theta, cfg.seed, expect_name(cfg.expect),
        total.ops, seconds, ops_per_sec, fmt_us(h.min()).c_str(), fmt_us(p50).c_str(), fmt_us(p90).c_str(),
        fmt_us(p99).c_str(), fmt_us(p999).c_str(), fmt_us(h.max()).c_str(), h.mean() / 1000.0, total.all_replies,
        total.ok, total.misses, total.errors, total.mismatches, total.conn_errors, wall > 0 ? 100.0 * cpu / wall : 0.0,
        total.reconnects);
  }
  std::printf("RESULT proto=%s conns=%u depth=%u ops=%" PRIu64 " seconds=%.3f ops_per_sec=%.0f p50_us=%s p99_us=%s "
              "p999_us=%s errors=%" PRIu64 " mismatches=%" PRIu64 " op=%s threads=%u misses=%" PRIu64 " seed=%" PRIu64
              "\n",
              proto_name(cfg.proto), cfg.conns, cfg.depth, total.ops, seconds, ops_per_sec, fmt_us(p50).c_str(),
              fmt_us(p99).c_str(), fmt_us(p999).c_str(), total.errors, total.mismatches, op_name(cfg.op), cfg.threads,
              total.misses, cfg.seed);
  std::fflush(stdout);
  if (total.errors || total.mismatches) return 1;
  if (nothing_measured) return 1;
  if (g_stop.load()) return 1;
  if (sched.count_mode && total.ops < cfg.requests) return 1;
  return 0;
}

}  // namespace loadgen
