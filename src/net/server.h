/* The network front: listening sockets, N epoll worker threads, and a thread for the once-a-second
   tick. Every worker polls every listener (EPOLLEXCLUSIVE: one worker is woken per new client) and
   accepts on its own thread, so a new connection costs no thread switch; a worker keeps what it
   accepts unless another has fewer connections, which is then handed it. Connections stay on
   their worker for life; each worker owns its connections, its Store (its THD and open tables)
   and its counters, so the request path takes no lock shared between workers. */
#ifndef TABLESOCKET_NET_SERVER_H
#define TABLESOCKET_NET_SERVER_H

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/conn_info.h"
#include "common/stats.h"
#include "net/fd.h"
#include "net/host_slots.h"
#include "net/tls.h"
#include "session/hs_session.h"

namespace tablesocket {

class Worker;

enum class Protocol : unsigned char { hs, mc };

/* One listening socket and what connections accepted on it speak. */
struct Port {
  std::string name;  // for logs: "hs", "hs_wr"
  Protocol protocol = Protocol::hs;
  Hs_port_policy hs_policy;
  unsigned port = 0;
  std::string unix_path;  // set for a unix-socket listener (removed again at stop)
  Fd fd;
};

class Server final : public Counters_source {
 public:
  explicit Server(const Config &cfg);
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  /* Binds the listeners and starts the threads. On failure returns false with *error set and
     leaves nothing running. */
  bool start(std::string *error);
  /* Stops accepting, closes every connection, joins every thread. Idempotent. */
  void stop();

  /* Sums every worker's counters into out. */
  void sum_counters(Counters &out) const override;
  /* Every worker's connections (see Worker::snapshot); a worker that does not answer within
     timeout_ms (in a long batch) is left out. */
  std::vector<Connection_info> connections(unsigned timeout_ms) const;
  const Config &config() const { return cfg_; }
  /* For the dynamic system variables' update (plugin/): only Live<> fields may change. */
  Config &live_config() { return cfg_; }
  /* The TLS context every TCP listener offers, or nullptr when no certificate is configured. */
  std::shared_ptr<const Tls_context> tls_context() const {
    std::lock_guard<std::mutex> g(tls_mutex_);
    return tls_;
  }
  /* The TLS settings a configuration names (paths already resolved against the server's). */
  static Tls_settings tls_settings(const Config &cfg);
  /* Loads s into a new context that handshakes from now on use (connections already encrypted
     keep theirs). On failure returns false with *error set, and the context in use stays. */
  bool reload_tls(const Tls_settings &s, std::string *error);
  /* Called on the server's tick thread about once a second, from start() to stop() (not while
     the plugin's own locks are held): the plugin follows the server's FLUSH SSL with it. Set
     before start(). */
  void set_tick(std::function<void(Server &)> tick) { tick_ = std::move(tick); }

  /* The listeners, which every worker polls once accepting() (fixed from then to stop()). */
  const std::vector<std::unique_ptr<Port>> &ports() const { return ports_; }
  /* start() has started every worker: they may poll the listeners. */
  bool accepting() const { return accepting_.load(std::memory_order_acquire); }
  /* Called by a worker whose poll found p readable: accepts what is waiting (at most `max`),
     keeping each connection unless another worker has fewer, and counting into `counters` (the
     calling worker's). False when accept() is out of descriptors or memory: the caller stops
     polling p for a moment rather than spin on it. */
  bool accept_ready(Port &p, Worker &self, Counters &counters, unsigned max);

 private:
  bool add_port(const std::string &name, Protocol protocol, unsigned port, bool writable,
                const std::string &secret, std::string *error);
  bool add_unix_port(const std::string &name, Protocol protocol, const std::string &path, std::string *error);
  bool register_port(std::unique_ptr<Port> p, std::string *error);
  void tick_loop();
  void refuse(const Port &p, int fd, const char *what);

  Config cfg_;
  mutable std::mutex tls_mutex_;        // guards tls_ (taken once per TLS handshake and at a reload)
  std::shared_ptr<const Tls_context> tls_;
  std::function<void(Server &)> tick_;
  uint64_t last_tick_ms_ = 0;
  std::vector<std::unique_ptr<Port>> ports_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Fd tick_wake_;
  std::thread ticker_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> accepting_{false};
  std::atomic<uint64_t> last_accept_error_log_ms_{0};
  bool started_ = false;

 public:
  /* Connections alive across all workers (checked against max_connections at accept). */
  std::atomic<int64_t> live_connections{0};
  /* Slots per client address (tablesocket_max_connections_per_host). */
  Host_slots host_slots;
  /* A connection handed to a worker is gone: its place in live_connections and its address's slot. */
  void connection_gone(const Peer &peer) {
    live_connections.fetch_sub(1, std::memory_order_relaxed);
    if (peer.host_slot) host_slots.give_back(peer.ip);
  }
  /* Bytes allocated by every connection's input and output buffers (checked against
     max_buffer_memory when a connection's buffers grow). */
  std::atomic<int64_t> buffer_bytes{0};
  std::atomic<uint64_t> next_connection_id{1};
};

}  // namespace tablesocket
#endif
