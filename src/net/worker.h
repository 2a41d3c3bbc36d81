/* One epoll worker thread: owns its connections, its Store and its counters. */
#ifndef TABLESOCKET_NET_WORKER_H
#define TABLESOCKET_NET_WORKER_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/byte_buffer.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/conn_info.h"
#include "common/peer.h"
#include "common/stats.h"
#include "net/fd.h"
#include "net/tls.h"
#include "session/session.h"

namespace tablesocket {

struct Port;
class Server;
class Store;

/* How a connection's bytes cross the wire. A TCP connection starts undecided: its first byte is
   either a TLS handshake record (0x16) or plaintext. A unix-socket connection is plain from the
   start. */
enum class Transport : unsigned char {
  plain,          // recv/send
  undecided,      // nothing read yet
  tls_handshake,  // TLS handshake in progress
  tls,            // SSL_read/SSL_write
};

struct Connection {
  Fd fd;
  const Port *port = nullptr;
  Peer peer;                   // who connected; the session keeps a reference
  Byte_buffer in, out;
  /* Created once the transport is settled (plaintext decided, or TLS handshake completed), so a
     session always sees its Peer final, TLS identity included. Null before. */
  std::unique_ptr<Session> session;
  std::unique_ptr<Tls_conn> tls;  // from the first TLS byte on
  uint64_t accepted_ms = 0;    // when the worker adopted it (handshake timeout)
  uint64_t last_io_ms = 0;
  uint32_t registered = 0;     // epoll events currently registered
  Transport transport = Transport::plain;
  bool tls_wants_write = false;    // the handshake or SSL_read waits until the socket is writable
  bool tls_write_wants_read = false;  // SSL_write waits until the socket is readable
  bool read_closed = false;    // peer sent EOF
  bool peer_gone = false;      // reset (or a send failed): requests it sent still run, replies go nowhere
  bool close_after_flush = false;
  bool dead = false;           // closed; freed at the end of the loop iteration
  bool pending = false;        // in the worker's pending list
  bool commit_wait = false;    // wrote in a batch whose commit is in flight: replies and requests wait
  bool batch_writer = false;   // wrote in the batch still open (in Worker::batch_writers_)
  bool depth1 = false;         // its last run that wrote ran that one request alone (a closed-loop writer)
  uint64_t answered_by = 0;    // a depth-1 writer: the answering (Worker::answering_) it is expected back from
  uint64_t retry_at_ms = 0;    // parked: not tried again before this
  uint64_t parked_since_ms = 0;  // parked (for a lock) since, 0 when not
  bool waits_batch = false;    // a write the open batch refused waits for it to end (Worker::write_waiters_)
  int64_t accounted = 0;       // buffer bytes counted in Server::buffer_bytes for this connection
  /* When the request at the front of its input began to arrive (its first byte came into an empty
     buffer) or the one before it completed: a request arriving for longer than the idle timeout
     closes the connection, however often its bytes trickle in. */
  uint64_t request_since_ms = 0;
  uint64_t kernel_queued = 0;  // bytes in the socket's send queue when the idle check last looked
  uint64_t last_request_ms = 0;  // when a request of it last ran
  bool active = false;         // in Worker::active_ (ran a request within about kActiveMs)
  uint64_t id = 0;             // the server's connection number
};

class Worker {
 public:
  Worker(unsigned id, const Config &cfg, Server &server);
  ~Worker();
  bool start(std::string *error);
  void request_stop();
  void join();
  /* Called by another worker that accepted fd for this one: this worker takes ownership of it.
     False (fd not taken) once this worker has stopped. */
  bool hand_off(int fd, const Port *port, const Peer &peer);
  /* Called on this worker's thread (Server::accept_ready): it serves fd from now on. */
  void adopt(int fd, const Port *port, const Peer &peer);
  /* Wakes the worker's poll (from any thread). */
  void wake();
  int64_t load() const { return counters_.connections.load(std::memory_order_relaxed); }
  /* From any thread: appends a snapshot of this worker's connections, which the worker takes
     between batches. False (nothing appended) if it did not answer within timeout_ms. */
  bool snapshot(std::vector<Connection_info> &out, unsigned timeout_ms);
  const Counters &counters() const { return counters_; }

 private:
  void run();
  void serve(Store &store);
  void adopt_new_connections();
  void add_connection(int fd, const Port *port, Peer &&peer);
  /* The listeners this worker polls (Server::ports(), EPOLLEXCLUSIVE), each paused for a moment
     when accept() runs out of descriptors. Their addresses are the epoll tags of the listeners. */
  struct Listener {
    Port *port;
    uint64_t paused_until_ms;  // 0: polled
  };
  std::vector<Listener> listeners_;
  bool listening_ = false;  // poll_listeners(true) has run (listeners_ may be empty: no ports)
  void watch_listener(Listener &l, bool on);  // adds it to the poll set, or takes it out
  void poll_listeners(bool on);
  void listener_ready(Listener &l);
  void resume_listeners();
  static constexpr uint64_t kAcceptPauseMs = 50;
  static constexpr unsigned kAcceptsPerLoop = 64;
  void read_input(Connection &c);
  void read_plain(Connection &c);
  /* Brings Server::buffer_bytes in step with c's buffers. True when c's buffers grew beyond their
     free allowance while all buffers together are over max_buffer_memory: c must be closed. */
  bool over_buffer_memory(Connection &c);
  /* Accounts c's buffers and closes c if over_buffer_memory(). True if c was closed. */
  bool enforce_buffer_memory(Connection &c);
  void read_input_unsettled(Connection &c);
  void read_first_bytes(Connection &c);
  void start_session(Connection &c);
  void refuse_plaintext(Connection &c);
  void start_tls(Connection &c);
  void continue_handshake(Connection &c);
  void tls_handshake_failed(Connection &c, const std::string &why);
  void read_tls(Connection &c);
  void tls_event(Connection &c, uint32_t events);
  void flush_output(Connection &c);
  bool send_plain(Connection &c);
  bool send_tls(Connection &c);
  void update_interest(Connection &c);
  void mark_pending(Connection &c);
  void unmark_pending(Connection &c);  // takes c off the pending list
  /* How much unconsumed input c may buffer: one maximal request plus a read chunk; before a login
     the configuration requires (and without a verified client certificate, which may stand for
     one), kPreLoginInput: a login line is short, and a client that has not said who it is must
     not fill tablesocket_max_buffer_memory for everybody else. */
  size_t input_cap(const Connection &c) const;
  /* Before such a login, an incomplete request that fills kPreLoginInput: closed. */
  bool pre_login_overflow(const Connection &c) const;
  void close_connection(Connection &c);
  /* The peer reset the connection (or a send to it failed; over TLS, also a broken record): what
     it sent before still runs, as after its EOF (memcached's noreply writes, a pipeline's tail),
     with the replies discarded; closed once that input is used up. Nothing buffered: closed now.
     A TLS handshake that has not finished is closed. */
  void peer_reset(Connection &c);
  /* Reads, after the reset, what the kernel (or OpenSSL) still holds of what the peer sent. */
  void read_after_reset(Connection &c);
  /* Part of a request has come and the rest has not (in the input buffer, the session, or a TLS
     record OpenSSL holds): its time limit runs (tablesocket_idle_timeout). */
  static bool request_arriving(const Connection &c);
  /* After its batch (or the commit it waited for): flush, close if finished, read what waited. */
  void settle(Connection &c);
  /* Ends the store's batch (hands its commit off, or commits it) unless it wrote and the previous
     commit is still running, in which case it stays open; then answers the writers of a previous
     commit that finished. force: waits for the commit in flight instead (at exit). */
  void end_batch(bool force);
  /* The batch, if it wrote, would be committed by the worker itself (Store::end_batch's
     nobody_waiting): many depth-1 writers and no reader about. */
  bool commit_inline_wanted();
  /* It is worth keeping the open batch open for one more loop (which polls without waiting):
     many depth-1 writers wrote in it, and more joined it in this loop (joined). */
  bool extend_batch(bool joined) const;
  /* When the commit in flight is done and answered writers (answered): rather than hand the
     open batch off, answer them and keep it open for their next writes (extend_batch). */
  bool merge_wanted(const std::vector<Connection *> &answered) const;
  /* Depth-1 writers answered by a commit are expected to write again at once: the next batch
     waits for them (up to tablesocket_commit_rejoin_wait from its first write) rather than
     commit without them. begin_answering() starts a new set; expect_back(c) adds c to it if c is
     such a writer; came_back(c) takes c out of it when its next request ran (or it closed). */
  void begin_answering();
  void expect_back(Connection &c);
  void came_back(Connection &c);
  uint64_t rejoin_wait_ns() const;  // how long the open batch may still wait for them, 0: not
  void release_write_waiters();
  void release_writers(std::vector<Connection *> &writers, bool lost);
  /* Its output answers writes not durable yet: not sent, no EPOLLOUT interest. */
  static bool held(const Connection &c) { return c.commit_wait || (c.session && c.session->wrote_in_batch); }
  void reap_dead();
  void check_idle(uint64_t now_ms);
  /* A connection the server closes after its last answer (a fatal request error, quit, a login
     refused): its sending side is shut down and the socket kept open a moment (kLingerMs), reading
     and discarding what the client still sends, before it is closed. Closing a socket with unread
     input makes the kernel answer with a reset, which can destroy the answer the client has not
     read yet (e.g. the error that explains the close). */
  void linger(Fd fd);
  void reap_lingering(bool all);
  struct Lingering {
    Fd fd;
    uint64_t until_ms;
  };
  std::vector<Lingering> lingering_;
  static constexpr uint64_t kLingerMs = 1000;
  static constexpr size_t kMaxLingering = 1024;

  unsigned id_;
  const Config &cfg_;
  Server &server_;
  Counters counters_;
  uint64_t last_memory_log_ms_ = 0;
  /* Snapshots for INFORMATION_SCHEMA: asked for by another thread, taken by this one. */
  void publish_snapshot();
  std::atomic<bool> snapshot_wanted_{false};
  std::mutex snapshot_mutex_;
  std::condition_variable snapshot_cv_;
  uint64_t snapshots_asked_ = 0, snapshots_taken_ = 0;  // under snapshot_mutex_
  std::vector<Connection_info> snapshot_;               // under snapshot_mutex_
  Fd epoll_, wake_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex handoff_mutex_;  // worker -> worker hand-offs only; never taken on the request path
  struct Handoff { int fd; const Port *port; Peer peer; };
  std::vector<Handoff> handoff_;
  bool handoff_closed_ = false;  // under handoff_mutex_: run() has ended
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<Connection *> pending_;
  std::vector<Connection *> batch_;
  std::vector<Connection *> awaiting_;  // commit_wait connections (the in-flight commit's writers)
  std::vector<Connection *> batch_writers_;  // connections that wrote in the store's current batch
  std::vector<Connection *> write_waiters_;  // waits_batch connections
  bool batch_open_ = false;     // the batch wrote and waits (across loops) for the previous commit
  bool batch_closed_ = false;   // ... and takes no more writes (Store::close_batch_to_writes)
  uint64_t open_since_ms_ = 0;
  bool any_dead_ = false;
  uint64_t now_ms_ = 0;
  /* When a request that read (rather than wrote) was last served: while reads come, a batch's
     commit is handed off so they are served during its fsync; without them the worker commits
     itself (Store::end_batch's nobody_waiting). */
  uint64_t last_read_ms_ = 0;
  /* Connections that ran a request lately (pruned every kActiveMs / 4 of those idle for longer
     than kActiveMs): a pool's idle connections are not among them. */
  std::vector<Connection *> active_;
  uint64_t active_pruned_ms_ = 0;
  bool others_active();  // a connection not writing in the open batch ran a request lately
  /* Loops the open batch has been kept open for writes that arrived while it ran (see
     kExtendLoops in worker.cc); 0 when it is not being extended. */
  unsigned extend_loops_ = 0;
  uint64_t answering_ = 0;      // answerings of writers so far (Connection::answered_by)
  size_t expected_ = 0;         // depth-1 writers of the last answering that have not run again
  uint64_t rejoin_since_ns_ = 0;  // when the open batch began to wait for them (its first write, or the merge)
  Store *store_ = nullptr;      // the worker's store, while serve() runs
  size_t unsettled_ = 0;        // connections undecided or in a TLS handshake
  uint64_t tls_log_ms_ = 0;     // last TLS failure written to the error log
  uint64_t tls_log_suppressed_ = 0;
};

}  // namespace tablesocket
#endif
