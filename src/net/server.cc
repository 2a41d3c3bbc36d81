#include "net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "common/clock.h"
#include "net/worker.h"
#include "store/server_log.h"

namespace tablesocket {

Server::Server(const Config &cfg) : cfg_(cfg), host_slots(cfg.max_connections_per_host) {}

Server::~Server() { stop(); }

bool Server::add_port(const std::string &name, Protocol protocol, unsigned port, bool writable,
                      const std::string &secret, std::string *error) {
  if (port == 0) return true;  // listener disabled
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(cfg_.address.empty() ? nullptr : cfg_.address.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    *error = "tablesocket_address '" + cfg_.address + "' cannot be resolved: " + gai_strerror(rc);
    return false;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo *)> guard(res, freeaddrinfo);
  Fd fd(socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol));
  if (!fd.valid()) {
    *error = std::string("socket(): ") + strerror(errno);
    return false;
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  /* TCP keepalive, which accepted connections inherit (no call per connection): a peer that
     vanished (host down, cable cut) is found and its connection closed within about 7 minutes,
     though memcached connections have no idle timeout by default. */
  const int keep_idle = 300, keep_interval = 30, keep_count = 4;
  setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE, &keep_idle, sizeof keep_idle);
  setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL, &keep_interval, sizeof keep_interval);
  setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPCNT, &keep_count, sizeof keep_count);
  if (bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    *error = "cannot bind " + name + " listener to " + cfg_.address + ":" + service + ": " + strerror(errno);
    return false;
  }
  if (listen(fd.get(), int(cfg_.backlog)) != 0) {
    *error = "listen() on " + cfg_.address + ":" + service + ": " + strerror(errno);
    return false;
  }
  auto p = std::make_unique<Port>();
  p->name = name;
  p->protocol = protocol;
  p->hs_policy.writable = writable;
  p->hs_policy.plain_secret = secret;
  p->port = port;
  p->fd = std::move(fd);
  ports_.push_back(std::move(p));
  return true;
}

bool Server::add_unix_port(const std::string &name, Protocol protocol, const std::string &path,
                           std::string *error) {
  if (path.empty()) return true;
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    *error = "unix socket path too long: " + path;
    return false;
  }
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = std::string("socket(AF_UNIX): ") + strerror(errno);
    return false;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    /* A socket file left by a process that is gone is replaced; one a live process listens on is
       not taken over (as mariadbd refuses its own --socket then). */
    Fd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (probe.valid() && (connect(probe.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 ||
                          errno == EAGAIN)) {  // EAGAIN: listening, its backlog full
      *error = "another process is listening on unix socket " + path;
      return false;
    }
    unlink(path.c_str());
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || listen(fd.get(), int(cfg_.backlog)) != 0) {
    *error = "cannot listen on unix socket " + path + ": " + strerror(errno);
    return false;
  }
  auto p = std::make_unique<Port>();
  p->name = name;
  p->protocol = protocol;
  p->unix_path = path;
  p->fd = std::move(fd);
  ports_.push_back(std::move(p));
  return true;
}

bool Server::start(std::string *error) {
  if ((cfg_.hs_port && (cfg_.hs_port == cfg_.hs_port_wr || cfg_.hs_port == cfg_.mc_port)) ||
      (cfg_.hs_port_wr && cfg_.hs_port_wr == cfg_.mc_port)) {
    *error = "tablesocket_hs_port, tablesocket_hs_port_wr and tablesocket_mc_port must differ";
    return false;
  }
  /* Taken first, the server's own SQL port made it abort, blaming another server. */
  for (const auto &[name, port] : {std::pair<const char *, unsigned>{"tablesocket_hs_port", cfg_.hs_port},
                                   {"tablesocket_hs_port_wr", cfg_.hs_port_wr}, {"tablesocket_mc_port", cfg_.mc_port}})
    if (port && port == cfg_.server_sql_port) {
      *error = std::string(name) + " " + std::to_string(port) + " is the server's own SQL port (port)";
      return false;
    }
  if (!cfg_.mc_socket.empty() && cfg_.mc_socket == cfg_.server_sql_socket) {
    *error = "tablesocket_mc_socket '" + cfg_.mc_socket + "' is the server's own SQL socket (socket)";
    return false;
  }
  if (!cfg_.ssl_cert.empty() || !cfg_.ssl_key.empty()) {
    if (!reload_tls(tls_settings(cfg_), error)) return false;
  } else if (cfg_.require_tls) {
    *error = "tablesocket_require_tls is ON but no TLS certificate is configured (set tablesocket_ssl_cert "
             "and tablesocket_ssl_key, or the server's ssl_cert and ssl_key)";
    return false;
  }
  if (!add_port("hs", Protocol::hs, cfg_.hs_port, false, cfg_.plain_secret, error) ||
      !add_port("hs_wr", Protocol::hs, cfg_.hs_port_wr, true, cfg_.plain_secret_wr, error) ||
      !add_port("mc", Protocol::mc, cfg_.mc_port, true, "", error) ||
      !add_unix_port("mc_socket", Protocol::mc, cfg_.mc_socket, error)) {
    ports_.clear();
    return false;
  }
  tick_wake_.reset(eventfd(0, EFD_CLOEXEC));
  if (!tick_wake_.valid()) {
    *error = std::string("eventfd: ") + strerror(errno);
    ports_.clear();
    return false;
  }
  for (unsigned i = 0; i < cfg_.threads; ++i) {
    auto w = std::make_unique<Worker>(i, cfg_, *this);
    if (!w->start(error)) {
      workers_.push_back(std::move(w));
      stop();
      return false;
    }
    workers_.push_back(std::move(w));
  }
  try {
    ticker_ = std::thread([this] { tick_loop(); });
  } catch (const std::exception &e) {
    *error = std::string("cannot start the tick thread: ") + e.what();
    stop();
    return false;
  }
  started_ = true;
  accepting_.store(true);
  for (auto &w : workers_) w->wake();  // they poll the listeners from now on
  return true;
}

void Server::stop() {
  if (stopping_.exchange(true)) return;
  if (tick_wake_.valid()) {
    uint64_t one = 1;
    (void)!::write(tick_wake_.get(), &one, sizeof one);
  }
  if (ticker_.joinable()) ticker_.join();
  /* Workers stop polling the listeners when they stop; only then are the listeners closed (a
     worker never accepts on a descriptor number that may have been reused). Clients still in the
     backlog are refused then. */
  for (auto &w : workers_) w->request_stop();
  for (auto &w : workers_) w->join();
  workers_.clear();
  for (auto &p : ports_) {
    p->fd.reset();
    if (!p->unix_path.empty()) unlink(p->unix_path.c_str());
  }
  ports_.clear();  // sessions referred to their port's policy: only now is it safe to free
}

Tls_settings Server::tls_settings(const Config &cfg) {
  Tls_settings ts;
  ts.cert = cfg.ssl_cert;
  ts.key = cfg.ssl_key;
  ts.ca = cfg.ssl_ca;
  ts.capath = cfg.ssl_capath;
  ts.cipher = cfg.ssl_cipher;
  ts.crl = cfg.ssl_crl;
  ts.crlpath = cfg.ssl_crlpath;
  ts.versions = cfg.tls_versions;
  return ts;
}

bool Server::reload_tls(const Tls_settings &s, std::string *error) {
  std::shared_ptr<const Tls_context> fresh = Tls_context::create(s, error);  // files read unlocked
  if (!fresh) return false;
  std::lock_guard<std::mutex> g(tls_mutex_);
  tls_.swap(fresh);
  return true;  // the old context goes when its last connection does
}

void Server::tick_loop() {
  pollfd pfd{tick_wake_.get(), POLLIN, 0};
  while (!stopping_.load()) {
    (void)::poll(&pfd, 1, 500);
    if (stopping_.load()) break;
    uint64_t now = monotonic_ms();
    if (tick_ && now - last_tick_ms_ >= 1000) {
      last_tick_ms_ = now;
      tick_(*this);
    }
  }
}

bool Server::accept_ready(Port &p, Worker &self, Counters &counters, unsigned max) {
  for (unsigned k = 0; k < max && !stopping_.load(std::memory_order_relaxed); ++k) {
    Peer peer;
    peer.addr_len = sizeof peer.addr;
    int fd = accept4(p.fd.get(), reinterpret_cast<sockaddr *>(&peer.addr), &peer.addr_len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* Out of descriptors or memory: the listener stays readable; the caller stops polling
           it for a moment instead of spinning, and it is said (at most once a minute). */
        uint64_t now = monotonic_ms(), last = last_accept_error_log_ms_.load();
        if (now - last >= 60000 && last_accept_error_log_ms_.compare_exchange_strong(last, now))
          log_warning("cannot accept on the %s port: %s (raise open_files_limit or lower "
                      "tablesocket_max_connections)", p.name.c_str(), strerror(errno));
        return false;
      }
      return true;  // EAGAIN (another worker took it): nothing more to accept
    }
    if (live_connections.load(std::memory_order_relaxed) >= int64_t(cfg_.max_connections)) {
      refuse(p, fd, "");
      counters.add(counters.connections_rejected);
      continue;
    }
    if (!p.unix_path.empty()) {
      peer.unix_socket = true;
      peer.addr = sockaddr_storage{};
      peer.addr_len = 0;
    } else {
      char host[NI_MAXHOST];
      if (getnameinfo(reinterpret_cast<sockaddr *>(&peer.addr), peer.addr_len, host, sizeof host, nullptr, 0,
                      NI_NUMERICHOST) == 0)
        peer.ip = host;
      /* Unix-socket clients are local and share no address: only TCP clients are counted. */
      if (host_slots.enabled()) {
        if (!host_slots.take(peer.ip)) {
          refuse(p, fd, " from this address");
          counters.add(counters.connections_rejected_per_host);
          continue;
        }
        peer.host_slot = true;
      }
    }
    counters.add(counters.connections_total);  // accepted: the refused ones are counted apart
    int one = 1;
    if (p.unix_path.empty()) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* This worker keeps it unless another has fewer connections (ties stay: no thread switch). */
    Worker *best = &self;
    for (auto &w : workers_)
      if (w->load() < best->load()) best = w.get();
    live_connections.fetch_add(1, std::memory_order_relaxed);
    if (best == &self || !best->hand_off(fd, &p, peer)) self.adopt(fd, &p, peer);
  }
  return true;
}

/* A connection over a limit gets one line saying so (HandlerSocket's error form, or memcached's
   own line) and is closed; `what` follows "Too many open connections" on memcached's. */
void Server::refuse(const Port &p, int fd, const char *what) {
  std::string msg = p.protocol == Protocol::mc
                        ? std::string("ERROR Too many open connections") + what + "\r\n"
                        : std::string("1\t1\ttoomanyconnections\n");
  (void)!::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(fd);
}

std::vector<Connection_info> Server::connections(unsigned timeout_ms) const {
  std::vector<Connection_info> out;
  for (auto &w : workers_) w->snapshot(out, timeout_ms);
  return out;
}

void Server::sum_counters(Counters &out) const {
  for (auto &w : workers_) add_counters(out, w->counters());
}

}  // namespace tablesocket
