#include "net/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "net/server.h"
#include "proto/mc/mc_binary.h"
#include "session/hs_session.h"
#include "session/mc_session.h"
#include "store/server_log.h"
#include "store/store.h"

namespace tablesocket {

namespace {
constexpr size_t kReadChunk = 16384;
constexpr unsigned char kTlsHandshakeRecord = 0x16;  // first byte of every TLS ClientHello
constexpr uint64_t kTlsLogIntervalMs = 60000;
/* A batch that wrote is committed by the worker itself, not handed off, when no read was served
   for kReadsQuietMs and at least kInlineWriters connections wrote in it: many depth-1 writers,
   which with the hand-off split into two groups taking turns at the commit (half the rows per
   commit, twice the commits and the context switches, on a CPU they saturate). Fewer writers, or
   pipelining ones, fill batches either way and gain from the overlap: their next writes are
   executed while the commit's fsync runs. */
constexpr uint64_t kReadsQuietMs = 10;
constexpr size_t kInlineWriters = 16;
/* A connection that ran no request for kActiveMs is idle (a pooled connection nobody uses): a
   batch of depth-1 writers is committed by the worker itself when every other connection of the
   worker is idle, as if those were not there (commit_inline_wanted). */
constexpr uint64_t kActiveMs = 100;
/* A batch that kInlineWriters or more connections wrote in is ended (committed inline or handed
   off) only once a loop adds no writer to it, for up to kExtendLoops loops whose polls do not
   wait: writes that arrived while it ran (clients answered by the last commit are still sending
   theirs) join it rather than wait out its commit, fsyncs included, for the next one. Before, 64
   writers split unevenly (49 rows per commit); with it, about all 64 share each commit. With
   readers about, the writers a handed-off commit answers join the batch that was open meanwhile
   the same way (end_batch's merge), rather than the two taking turns at the commit. */
constexpr unsigned kExtendLoops = 8;
int wake_tag;  // address used as epoll data for the wake eventfd

bool parked(const Connection &c) { return c.session && c.session->parked(); }

/* Some of these (writers of a batch, or of a commit) are depth-1 writers, expected back. */
bool any_depth1(const std::vector<Connection *> &writers) {
  return std::any_of(writers.begin(), writers.end(), [](const Connection *c) { return c->depth1 && !c->dead; });
}

/* The pending error of a socket epoll reported EPOLLERR for (e.g. "Connection reset by peer"). */
std::string socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0) return "socket error";
  return strerror(err);
}
}  // namespace

Worker::Worker(unsigned id, const Config &cfg, Server &server) : id_(id), cfg_(cfg), server_(server) {}

Worker::~Worker() {
  request_stop();
  join();
  std::lock_guard<std::mutex> g(handoff_mutex_);
  for (auto &h : handoff_) ::close(h.fd);
  handoff_.clear();
}

bool Worker::start(std::string *error) {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid()) {
    *error = std::string("cannot create epoll/eventfd: ") + strerror(errno);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &wake_tag;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
    *error = std::string("epoll_ctl: ") + strerror(errno);
    return false;
  }
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::exception &e) {
    *error = std::string("cannot start worker thread: ") + e.what();
    return false;
  }
  return true;
}

void Worker::request_stop() {
  stop_.store(true);
  wake();
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

bool Worker::hand_off(int fd, const Port *port, const Peer &peer) {
  {
    std::lock_guard<std::mutex> g(handoff_mutex_);
    if (handoff_closed_) return false;  // it has stopped (the server is stopping)
    handoff_.push_back(Handoff{fd, port, peer});
    counters_.connections.fetch_add(1, std::memory_order_relaxed);
  }
  wake();
  return true;
}

void Worker::adopt(int fd, const Port *port, const Peer &peer) {
  counters_.connections.fetch_add(1, std::memory_order_relaxed);
  add_connection(fd, port, Peer(peer));
}

void Worker::wake() {
  if (!wake_.valid()) return;
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void Worker::run() {
  try {
    if (wait_for_server_start(stop_)) {
      char name[64];
      snprintf(name, sizeof name, "tablesocket worker %u", id_);
      std::unique_ptr<Store> store = make_mariadb_store(counters_, name, cfg_);
      if (store) {
        serve(*store);
        /* Stopping (UNINSTALL SONAME, shutdown): a commit held up by BACKUP STAGE BLOCK_COMMIT
           would hold this up for tablesocket_lock_wait_timeout. */
        if (stop_.load(std::memory_order_relaxed)) store->abort_commit_wait();
        end_batch(true);  // ends the open batch and answers (or closes) the writers of every commit
        for (auto &c : conns_) close_connection(*c);
        reap_dead();
        pending_.clear();
      }
      store_ = nullptr;
      /* store (and its THD) is destroyed here, on the thread that created it. */
    }
  } catch (const std::exception &e) {
    log_error("worker %u stopped: %s", id_, e.what());
  }
  for (auto &c : conns_) close_connection(*c);
  reap_dead();
  std::lock_guard<std::mutex> g(handoff_mutex_);
  handoff_closed_ = true;  // a worker still accepting keeps what it accepts from now on
  for (auto &h : handoff_) {
    ::close(h.fd);
    counters_.connections.fetch_sub(1, std::memory_order_relaxed);
    server_.connection_gone(h.peer);
  }
  handoff_.clear();
}

void Worker::adopt_new_connections() {
  std::vector<Handoff> fresh;
  {
    std::lock_guard<std::mutex> g(handoff_mutex_);
    fresh.swap(handoff_);
  }
  for (auto &h : fresh) add_connection(h.fd, h.port, std::move(h.peer));
}

void Worker::add_connection(int fd, const Port *port, Peer &&peer) {
  auto c = std::make_unique<Connection>();
  c->fd.reset(fd);
  c->port = port;
  c->peer = std::move(peer);
  c->accepted_ms = c->last_io_ms = c->request_since_ms = now_ms_;
  c->id = server_.next_connection_id.fetch_add(1, std::memory_order_relaxed);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.ptr = c.get();
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev) != 0) {
    counters_.connections.fetch_sub(1, std::memory_order_relaxed);
    server_.connection_gone(c->peer);
    return;  // Fd closes it
  }
  c->registered = ev.events;
  if (c->peer.unix_socket) {
    start_session(*c);  // never TLS
  } else {
    c->transport = Transport::undecided;  // the first byte tells
    ++unsettled_;
  }
  conns_.push_back(std::move(c));
}

void Worker::watch_listener(Listener &l, bool on) {
  if (!on) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, l.port->fd.get(), nullptr);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.ptr = &l;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, l.port->fd.get(), &ev) != 0)
    log_warning("worker %u cannot poll the %s port: %s", id_, l.port->name.c_str(), strerror(errno));
}

void Worker::poll_listeners(bool on) {
  if (on) {
    listeners_.clear();
    listeners_.reserve(server_.ports().size());  // their addresses are epoll tags: no reallocation
    for (auto &p : server_.ports()) listeners_.push_back(Listener{p.get(), 0});
  }
  for (Listener &l : listeners_)
    if (!l.paused_until_ms) watch_listener(l, on);  // a paused one is not in the poll set
  if (!on) listeners_.clear();
  listening_ = on;
}

void Worker::listener_ready(Listener &l) {
  if (server_.accept_ready(*l.port, *this, counters_, kAcceptsPerLoop)) return;
  /* Out of descriptors: polled again after a pause (level-triggered, it would wake us at once). */
  watch_listener(l, false);
  l.paused_until_ms = now_ms_ + kAcceptPauseMs;
}

void Worker::resume_listeners() {
  for (Listener &l : listeners_) {
    if (!l.paused_until_ms || now_ms_ < l.paused_until_ms) continue;
    l.paused_until_ms = 0;
    watch_listener(l, true);
  }
}

void Worker::start_session(Connection &c) {
  if (c.port->protocol == Protocol::mc)
    c.session = std::make_unique<Mc_session>(*store_, cfg_, c.peer, counters_, &server_);
  else
    c.session = std::make_unique<Hs_session>(*store_, cfg_, c.port->hs_policy, c.peer, counters_);
}

size_t Worker::input_cap(const Connection &c) const {
  if (c.session && c.session->pre_login_capped()) return kPreLoginInput;
  /* One maximal request (an HS line, or a memcached line plus its data block) plus a read chunk. */
  size_t biggest = std::max<size_t>(cfg_.max_request_size, cfg_.mc_max_value_size + 4096);
  return biggest + kReadChunk;
}

bool Worker::pre_login_overflow(const Connection &c) const {
  return !c.dead && c.session && c.session->pre_login_capped() && c.in.size() >= kPreLoginInput;
}

bool Worker::snapshot(std::vector<Connection_info> &out, unsigned timeout_ms) {
  std::unique_lock<std::mutex> lk(snapshot_mutex_);
  const uint64_t ticket = ++snapshots_asked_;
  snapshot_wanted_.store(true, std::memory_order_relaxed);
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  if (!snapshot_cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
                             [&] { return snapshots_taken_ >= ticket; }))
    return false;
  out.insert(out.end(), snapshot_.begin(), snapshot_.end());
  return true;
}

void Worker::publish_snapshot() {
  snapshot_wanted_.store(false, std::memory_order_relaxed);
  std::vector<Connection_info> v;
  v.reserve(conns_.size());
  for (const auto &cp : conns_) {
    const Connection &c = *cp;
    if (c.dead) continue;
    Connection_info i;
    i.id = c.id;
    i.worker = id_;
    i.port = c.port ? c.port->name : "";
    if (c.peer.unix_socket) {
      i.remote = "unix socket";
    } else {
      char port[8] = "";
      const sockaddr *sa = reinterpret_cast<const sockaddr *>(&c.peer.addr);
      if (sa->sa_family == AF_INET)
        snprintf(port, sizeof port, "%u", ntohs(reinterpret_cast<const sockaddr_in *>(sa)->sin_port));
      else if (sa->sa_family == AF_INET6)
        snprintf(port, sizeof port, "%u", ntohs(reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_port));
      i.remote = c.peer.ip + (port[0] ? std::string(":") + port : std::string());
    }
    if (c.session) c.session->account(&i.user, &i.host);
    i.tls = c.tls != nullptr;
    i.connected_s = (now_ms_ - c.accepted_ms) / 1000;
    i.idle_s = (now_ms_ - c.last_io_ms) / 1000;
    if (c.transport == Transport::undecided) i.state = "connecting";
    else if (c.transport == Transport::tls_handshake) i.state = "TLS handshake";
    else if (c.close_after_flush) i.state = "closing";
    else if (c.commit_wait) i.state = "waiting for its commit";
    else if (c.session && c.session->parked()) i.state = "waiting for a lock";
    else if (c.session && c.session->awaiting_login()) i.state = "waiting for login";
    else if (c.out.size() >= cfg_.output_high_water) i.state = "waiting for the client to read";
    else if (c.pending) i.state = "queued";
    else i.state = "idle";
    i.input_bytes = c.in.size();
    i.output_bytes = c.out.size();
    v.push_back(std::move(i));
  }
  {
    std::lock_guard<std::mutex> g(snapshot_mutex_);
    snapshot_.swap(v);
    snapshots_taken_ = snapshots_asked_;
  }
  snapshot_cv_.notify_all();
}

void Worker::mark_pending(Connection &c) {
  if (!c.pending && !c.dead && !c.commit_wait) {  // release_writers() marks a waiting one later
    c.pending = true;
    pending_.push_back(&c);
  }
}

void Worker::unmark_pending(Connection &c) {
  if (!c.pending) return;
  pending_.erase(std::find(pending_.begin(), pending_.end(), &c));
  c.pending = false;
}

/* Buffer bytes a connection may hold whatever the server-wide total: an ordinary connection never
   needs more, so it is never closed for what other connections hold. */
constexpr int64_t kFreeBufferBytes = 256 << 10;

bool Worker::over_buffer_memory(Connection &c) {
  const int64_t now = int64_t(c.in.capacity() + c.out.capacity() + (c.session ? c.session->retained_bytes() : 0));
  const int64_t delta = now - c.accounted;
  if (delta == 0) return false;
  c.accounted = now;
  const int64_t total = server_.buffer_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  return delta > 0 && now > kFreeBufferBytes && uint64_t(total) > cfg_.max_buffer_memory;
}

bool Worker::enforce_buffer_memory(Connection &c) {
  if (c.dead || !over_buffer_memory(c)) return false;
  counters_.add(counters_.buffer_memory_closes);
  if (now_ms_ - last_memory_log_ms_ >= 60000 || last_memory_log_ms_ == 0) {  // at most once a minute
    last_memory_log_ms_ = now_ms_;
    log_warning("closed a connection from %s: all connections' buffers together hold %lld bytes, over "
                "tablesocket_max_buffer_memory (%llu)", c.peer.ip.c_str(),
                (long long)server_.buffer_bytes.load(std::memory_order_relaxed),
                (unsigned long long)cfg_.max_buffer_memory);
  }
  close_connection(c);
  return true;
}

bool Worker::request_arriving(const Connection &c) {
  /* Over TLS, part of a record stays inside OpenSSL until the rest comes: a request arriving too
     (its first bytes are in that record), though nothing of it is in the input buffer yet. */
  return !c.in.empty() || (c.session && c.session->mid_request()) ||
         (c.transport == Transport::tls && c.tls && c.tls->mid_record());
}

void Worker::read_input(Connection &c) {
  if (!request_arriving(c)) c.request_since_ms = now_ms_;  // what comes now starts a request
  if (c.transport != Transport::plain)
    read_input_unsettled(c);
  else
    read_plain(c);
  enforce_buffer_memory(c);
}

void Worker::read_plain(Connection &c) {
  /* The input buffer never holds more than one maximal request plus one read chunk beyond what the
     session has consumed; a parked session's buffer must not move at all. */
  const size_t cap = input_cap(c);
  while (!c.read_closed && !c.session->parked() && c.in.size() < cap) {
    size_t room = std::min(kReadChunk, cap - c.in.size());
    ssize_t n = ::recv(c.fd.get(), c.in.prepare(room), room, 0);
    if (n > 0) {
      c.in.wrote(size_t(n));
      c.last_io_ms = now_ms_;
      counters_.add(counters_.bytes_received, uint64_t(n));
      if (size_t(n) < room) break;
      continue;
    }
    if (n == 0) { c.read_closed = true; break; }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (c.peer_gone) c.read_closed = true;  // after a reset nothing more comes (and epoll no longer watches it)
      break;
    }
    peer_reset(c);
    return;
  }
  if (!c.in.empty() || c.read_closed) mark_pending(c);
}

void Worker::peer_reset(Connection &c) {
  if (c.dead) return;
  if (c.peer_gone) {  // reading what it had sent before the reset came to the reset itself
    c.read_closed = true;
    return;
  }
  /* A request waiting for a lock goes on waiting and then runs, with what came after it, as after
     a plain close (and as SQL's statement waiting for a row lock runs when its client is gone):
     whether a client's writes happen must not depend on the moment its reset arrived. The same
     over TLS once the handshake is done: what it sent before, decrypted, runs. */
  if (!c.session || (c.transport != Transport::plain && c.transport != Transport::tls)) {
    close_connection(c);
    return;
  }
  c.peer_gone = true;
  c.session->answers_discarded = true;  // its reads are skipped; its writes still run
  c.out.clear();
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);  // its error would be reported every loop
  c.registered = 0;
  /* What the kernel received before the reset is still there to read, beyond what the input
     buffer holds (a pipeline of megabytes): it is read as the session consumes its input
     (serve()), and runs as if the client had closed after sending it. */
  read_after_reset(c);
  if (c.dead) return;
  if (c.in.empty() && c.read_closed) {
    close_connection(c);
    return;
  }
  mark_pending(c);
}

void Worker::read_after_reset(Connection &c) {
  if (c.read_closed || c.dead) return;
  if (c.tls && c.tls->failed()) {
    c.read_closed = true;  // OpenSSL read up to the reset (a partial record at the end is lost)
    mark_pending(c);
  } else if (c.tls) {
    read_tls(c);
  } else {
    read_plain(c);
  }
}

void Worker::read_input_unsettled(Connection &c) {
  switch (c.transport) {
    case Transport::undecided: read_first_bytes(c); break;
    case Transport::tls_handshake: continue_handshake(c); break;
    case Transport::tls: read_tls(c); break;
    case Transport::plain: break;
  }
}

void Worker::read_first_bytes(Connection &c) {
  /* An ordinary first read: a plaintext connection keeps these bytes as its input, a TLS one hands
     them to the handshake. No peeking, so plaintext pays nothing for the detection. */
  ssize_t n;
  do n = ::recv(c.fd.get(), c.in.prepare(kReadChunk), kReadChunk, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {  // closed (or failed) before saying anything: nothing to answer
    close_connection(c);
    return;
  }
  c.in.wrote(size_t(n));
  c.last_io_ms = now_ms_;
  --unsettled_;
  c.transport = Transport::plain;
  if (static_cast<unsigned char>(c.in.data()[0]) == kTlsHandshakeRecord) {
    start_tls(c);
    return;
  }
  if (cfg_.require_tls) {
    refuse_plaintext(c);
    return;
  }
  counters_.add(counters_.bytes_received, c.in.size());
  start_session(c);
  if (size_t(n) < kReadChunk) {  // a short read: nothing more is waiting now (no recv to hear EAGAIN)
    if (!enforce_buffer_memory(c)) mark_pending(c);
    return;
  }
  read_input(c);  // whatever else is waiting, then the connection is pending
}

void Worker::refuse_plaintext(Connection &c) {
  /* One protocol-appropriate error, then close. The reply is tiny and the socket fresh, so it is
     sent at once (as the "too many connections" refusal is); FIN goes after it, and input already
     waiting is drained so that the close does not turn into a reset that could overtake it. */
  static const char hs_msg[] = "1\t1\ttls_required\n";
  static const char mc_msg[] = "SERVER_ERROR TLS required\r\n";
  counters_.add(counters_.tls_refused);
  if (c.port->protocol == Protocol::mc && c.in.size() && static_cast<unsigned char>(c.in.data()[0]) == 0x80) {
    /* A binary-protocol client reads a binary response: "Auth failure" with the reason, echoing
       its opcode and opaque (it took the text line for a malformed packet). */
    mc::Bin_request rq;
    if (c.in.size() > 1) rq.opcode = static_cast<uint8_t>(c.in.data()[1]);
    if (c.in.size() >= 16) memcpy(rq.opaque, c.in.data() + 12, sizeof rq.opaque);
    Byte_buffer out;
    mc::encode_bin_error(out, rq, mc::Bin_status::auth_error, "TLS required");
    (void)!::send(c.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } else if (c.port->protocol == Protocol::mc) {
    (void)!::send(c.fd.get(), mc_msg, sizeof mc_msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  } else {
    (void)!::send(c.fd.get(), hs_msg, sizeof hs_msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::shutdown(c.fd.get(), SHUT_WR);
  char sink[4096];
  for (int i = 0; i < 16 && ::recv(c.fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {}
  close_connection(c);
}

void Worker::start_tls(Connection &c) {
  std::shared_ptr<const Tls_context> ctx = server_.tls_context();
  if (ctx) c.tls = ctx->accept(c.fd.get(), c.in.view());
  c.in.clear();
  if (!c.tls) {
    tls_handshake_failed(c, ctx ? "out of memory" : "TLS is not configured (no certificate)");
    return;
  }
  c.transport = Transport::tls_handshake;
  ++unsettled_;
  continue_handshake(c);
}

void Worker::continue_handshake(Connection &c) {
  switch (c.tls->handshake()) {
    case Tls_status::done:
      --unsettled_;
      c.transport = Transport::tls;
      c.tls_wants_write = false;
      c.tls->describe(c.peer);
      counters_.add(counters_.tls_connections);
      c.last_io_ms = now_ms_;
      start_session(c);
      read_tls(c);  // requests may already be decrypted and buffered: epoll would not report them
      return;
    case Tls_status::want_read: c.tls_wants_write = false; return;
    case Tls_status::want_write: c.tls_wants_write = true; return;
    case Tls_status::eof:
    case Tls_status::error: tls_handshake_failed(c, c.tls->error_text()); return;
  }
}

void Worker::tls_handshake_failed(Connection &c, const std::string &why) {
  /* Counted always; logged at most once a minute per worker, so a port scanner cannot flood the
     error log. */
  counters_.add(counters_.tls_handshake_failures);
  if (tls_log_ms_ && now_ms_ - tls_log_ms_ < kTlsLogIntervalMs) {
    ++tls_log_suppressed_;
  } else {
    char more[64] = "";
    if (tls_log_suppressed_)
      snprintf(more, sizeof more, " (and %llu more since the last report)", (unsigned long long)tls_log_suppressed_);
    log_warning("TLS handshake from %s on the %s port failed: %s%s", c.peer.ip.c_str(), c.port->name.c_str(),
                why.empty() ? "unknown error" : why.c_str(), more);
    tls_log_ms_ = now_ms_;
    tls_log_suppressed_ = 0;
  }
  close_connection(c);
}

void Worker::read_tls(Connection &c) {
  /* As read_input, through SSL_read. SSL_read returns at most one record, so it is repeated until
     it wants more from the socket; what stays decrypted inside OpenSSL when the buffer is full or
     the session parked is picked up after the next batch (has_buffered_input). */
  const size_t cap = input_cap(c);
  c.tls_wants_write = false;
  while (!c.read_closed && !c.session->parked() && c.in.size() < cap) {
    size_t room = std::min(kReadChunk, cap - c.in.size());
    size_t got = 0;
    Tls_status st = c.tls->read(c.in.prepare(room), room, &got);
    if (st == Tls_status::done) {
      c.in.wrote(got);
      c.last_io_ms = now_ms_;
      counters_.add(counters_.bytes_received, got);
      continue;
    }
    if (st == Tls_status::want_read) {
      if (c.peer_gone) c.read_closed = true;  // as read_plain: nothing more comes after a reset
      break;
    }
    if (st == Tls_status::want_write) { c.tls_wants_write = true; break; }
    if (st == Tls_status::eof || c.peer_gone) { c.read_closed = true; break; }
    /* A reset (or a broken record): the records decrypted before it still run, as a plaintext
       connection's requests do after its reset. */
    peer_reset(c);
    return;
  }
  if (!c.in.empty() || c.read_closed) mark_pending(c);
}

void Worker::tls_event(Connection &c, uint32_t events) {
  if (c.transport == Transport::tls_handshake) {
    continue_handshake(c);  // readable, writable or hung up: the handshake finds out which
  } else {
    if ((events & EPOLLOUT) || (c.tls_write_wants_read && (events & (EPOLLIN | EPOLLHUP)))) flush_output(c);
    if (c.dead) return;
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) || (c.tls_wants_write && (events & EPOLLOUT)))
      read_input(c);
    if ((events & EPOLLHUP) && !c.dead && !(events & EPOLLIN)) { c.read_closed = true; mark_pending(c); }
    /* close_notify came while replies were queued, and they are out now: the batch closes it. (A
       plaintext half-close keeps reporting EPOLLRDHUP and gets there by itself; close_notify
       leaves nothing for epoll to report.) */
    if (!c.dead && c.read_closed && c.out.empty()) mark_pending(c);
  }
  update_interest(c);
}

void Worker::flush_output(Connection &c) {
  if (held(c)) return;  // answers writes whose commit is not durable yet
  if (!(c.tls ? send_tls(c) : send_plain(c))) return;  // closed
  if (c.out.empty()) {
    c.out.shrink_if_idle(1 << 16);
    over_buffer_memory(c);  // only shrank: accounted, never a reason to close
    if (c.close_after_flush) { close_connection(c); return; }
  }
  if (c.out.size() > cfg_.max_output_buffer) {
    counters_.add(counters_.protocol_errors);
    close_connection(c);
    return;
  }
  /* A session that stopped at the output high water resumes once its replies drain. */
  if (!c.pending && !c.in.empty() && c.session && !c.session->parked() && c.out.size() < cfg_.output_high_water)
    mark_pending(c);
}

bool Worker::send_plain(Connection &c) {
  if (c.peer_gone) {
    c.out.clear();
    return true;
  }
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.consume(size_t(n));
      c.last_io_ms = now_ms_;
      counters_.add(counters_.bytes_sent, uint64_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    peer_reset(c);
    return !c.dead;
  }
  return true;
}

bool Worker::send_tls(Connection &c) {
  /* Partial writes are on, and the buffer may move between retries (it only grows at the end and
     is consumed from the front after a successful write, so a retry starts with the same bytes). */
  c.tls_write_wants_read = false;
  if (c.peer_gone) {
    c.out.clear();
    return true;
  }
  while (!c.out.empty()) {
    size_t put = 0;
    switch (c.tls->write(c.out.data(), c.out.size(), &put)) {
      case Tls_status::done:
        c.out.consume(put);
        c.last_io_ms = now_ms_;
        counters_.add(counters_.bytes_sent, put);
        continue;
      case Tls_status::want_write: return true;
      case Tls_status::want_read: c.tls_write_wants_read = true; return true;
      case Tls_status::eof:
      case Tls_status::error: peer_reset(c); return !c.dead;
    }
  }
  return true;
}

void Worker::update_interest(Connection &c) {
  if (c.dead || c.peer_gone) return;
  uint32_t want;
  if (c.transport == Transport::tls_handshake) {
    /* Only what the handshake waits for (no EPOLLRDHUP: a half-closed peer would report it again
       and again while the handshake waits to write). */
    want = c.tls_wants_write ? EPOLLOUT : EPOLLIN;
  } else {
    want = EPOLLRDHUP;
    const bool accept_input = !c.read_closed && !c.close_after_flush && !parked(c) &&
                              c.out.size() < cfg_.output_high_water &&
                              c.in.size() < input_cap(c);
    if (accept_input || c.tls_write_wants_read) want |= EPOLLIN;
    if ((!c.out.empty() && !held(c)) || c.tls_wants_write) want |= EPOLLOUT;
  }
  if (want == c.registered) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &c;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) == 0) c.registered = want;
}

void Worker::close_connection(Connection &c) {
  if (c.dead) return;
  came_back(c);
  c.dead = true;
  any_dead_ = true;
  if (c.transport == Transport::tls_handshake || c.transport == Transport::undecided) --unsettled_;
  if (c.tls) {
    c.tls->shutdown();  // close_notify, unless the connection failed
    c.tls.reset();
  }
  if (c.close_after_flush && c.out.empty() && !c.read_closed) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);  // it stays open a moment
    linger(std::move(c.fd));  // its last answer went out: let the client read it
  }
  c.fd.reset();  // closing the socket takes it out of the epoll set
  /* A request of it queued for a row lock on a session of its own is cancelled first: that job
     uses the session's account (its principal). */
  if (store_) store_->forget_requester(&c);
  c.session.reset();  // releases its open indexes (table references) right away
  server_.buffer_bytes.fetch_sub(c.accounted, std::memory_order_relaxed);
  c.accounted = 0;
  counters_.connections.fetch_sub(1, std::memory_order_relaxed);
  server_.connection_gone(c.peer);
}

void Worker::linger(Fd fd) {
  if (!fd.valid() || lingering_.size() >= kMaxLingering) return;  // closed at once (fd's destructor)
  if (::shutdown(fd.get(), SHUT_WR) != 0) return;
  lingering_.push_back(Lingering{std::move(fd), now_ms_ + kLingerMs});
}

void Worker::reap_lingering(bool all) {
  char scratch[4096];
  size_t kept = 0;
  for (size_t i = 0; i < lingering_.size(); ++i) {
    Lingering &l = lingering_[i];
    bool done = all || now_ms_ >= l.until_ms;
    /* Whatever the client sent after the answer is discarded (at most 64 KB per socket per loop);
       its end of stream, or an error, ends the wait. */
    for (int n = 0; !done && n < 16; ++n) {
      const ssize_t r = ::recv(l.fd.get(), scratch, sizeof scratch, MSG_DONTWAIT);
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) done = true;
      break;
    }
    if (done) continue;  // closed by the Fd's destructor when the vector drops it
    if (kept != i) lingering_[kept] = std::move(l);
    ++kept;
  }
  lingering_.resize(kept);
}

void Worker::reap_dead() {
  if (!any_dead_) return;
  any_dead_ = false;
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), [](Connection *c) { return c->dead; }),
                 pending_.end());
  awaiting_.erase(std::remove_if(awaiting_.begin(), awaiting_.end(), [](Connection *c) { return c->dead; }),
                  awaiting_.end());
  batch_writers_.erase(std::remove_if(batch_writers_.begin(), batch_writers_.end(), [](Connection *c) { return c->dead; }),
                       batch_writers_.end());
  write_waiters_.erase(std::remove_if(write_waiters_.begin(), write_waiters_.end(), [](Connection *c) { return c->dead; }),
                       write_waiters_.end());
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](Connection *c) { return c->dead; }), active_.end());
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const std::unique_ptr<Connection> &c) { return c->dead; }),
               conns_.end());
}

void Worker::check_idle(uint64_t now) {
  const uint64_t idle_limit = uint64_t(cfg_.idle_timeout_s) * 1000;
  const uint64_t mc_idle_limit = uint64_t(cfg_.mc_idle_timeout_s) * 1000;
  const uint64_t handshake_limit = uint64_t(cfg_.tls_handshake_timeout_s) * 1000;
  const uint64_t login_limit = cfg_.require_auth ? uint64_t(cfg_.login_timeout_s) * 1000 : 0;
  if (!idle_limit && !mc_idle_limit && !unsettled_ && !login_limit) return;
  for (auto &c : conns_) {
    if (c->dead) continue;
    if (c->transport == Transport::tls_handshake) {
      if (now - c->accepted_ms > handshake_limit) {
        char why[64];
        snprintf(why, sizeof why, "not completed within %u s", cfg_.tls_handshake_timeout_s.get());
        tls_handshake_failed(*c, why);
      }
      continue;
    }
    if (c->transport == Transport::undecided && cfg_.require_tls) {
      /* Silent since it connected: it can do nothing before a TLS handshake, so it gets the
         handshake's time limit rather than the idle timeout. */
      if (now - c->accepted_ms > handshake_limit) {
        counters_.add(counters_.timeouts);
        close_connection(*c);
      }
      continue;
    }
    /* A connection silent since it connected has no session yet; it has not logged in either. */
    const bool awaiting_login =
        c->session ? c->session->awaiting_login()
                   : c->port->protocol == Protocol::mc ? Mc_session::login_required(cfg_) : Hs_session::login_required(cfg_);
    if (login_limit && awaiting_login && !parked(*c) && now - c->accepted_ms > login_limit) {
      /* Connected, but not logged in within tablesocket_login_timeout. */
      counters_.add(counters_.timeouts);
      close_connection(*c);
      continue;
    }
    if (parked(*c) || c->pending || c->commit_wait) continue;
    /* memcached connections have a limit of their own, none by default: memcached closes none,
       and its clients' pools reuse a connection idle for hours without checking it first. */
    const uint64_t quiet_limit = c->port->protocol == Protocol::mc ? mc_idle_limit : idle_limit;
    if (quiet_limit && now - c->last_io_ms > quiet_limit) {
      /* Replies still in the kernel's send queue that the client reads, slowly, are traffic too:
         while that queue keeps shrinking the connection is not idle (a client reading megabytes
         of replies at a few kB/s gets no EPOLLOUT, and no send, for a long time). */
      int queued = 0;
      if (ioctl(c->fd.get(), SIOCOUTQ, &queued) == 0 && queued > 0 && uint64_t(queued) != c->kernel_queued) {
        c->kernel_queued = uint64_t(queued);
        c->last_io_ms = now;
        continue;
      }
      counters_.add(counters_.timeouts);
      close_connection(*c);
      continue;
    }
    /* A request still incomplete an idle timeout after it began to arrive (a byte now and then
       keeps last_io fresh): the connection is closed as an idle one is. Not while its replies are
       held back for a client that does not read them (its input then waits for us). */
    if (idle_limit && request_arriving(*c) && c->out.size() < cfg_.output_high_water &&
        now - c->request_since_ms > idle_limit) {
      counters_.add(counters_.timeouts);
      close_connection(*c);
    }
  }
}

void Worker::settle(Connection &c) {
  /* After a batch (or the commit its writes waited for): send what it answered, close what is
     finished, read what waited. */
  if (!c.out.empty()) flush_output(c);
  if (c.dead) return;
  if (c.close_after_flush && c.out.empty()) {
    close_connection(c);  // e.g. memcached's quit: nothing left to send
    return;
  }
  if (c.read_closed && c.out.empty() && !c.pending && (c.in.empty() || !c.session->parked())) {
    close_connection(c);  // peer is gone and everything it asked for was answered
    return;
  }
  /* Input that arrived while the connection was paused is read now; so is input OpenSSL already
     took off the socket (epoll does not report it). */
  if (!c.pending && !c.read_closed && !c.session->parked() && c.out.size() < cfg_.output_high_water &&
      ((c.registered & EPOLLIN) == 0 || (c.tls && c.tls->has_buffered_input())))
    read_input(c);
  update_interest(c);
}

void Worker::release_writers(std::vector<Connection *> &writers, bool lost) {
  if (!lost && !writers.empty()) begin_answering();
  for (Connection *c : writers) {
    if (c->dead) continue;
    c->commit_wait = false;
    c->session->wrote_in_batch = false;
    if (lost) {
      close_connection(*c);  // its acknowledged writes were rolled back: no false answers
      continue;
    }
    expect_back(*c);
    /* Requests that arrived meanwhile (read then, not run) go to the next batch. */
    if (!c->in.empty() || c->read_closed) mark_pending(*c);
    settle(*c);
  }
  writers.clear();
}

void Worker::end_batch(bool force) {
  Store &store = *store_;
  /* The previous batch's commit, if it is done (or, for a batch that wrote and cannot wait any
     longer, once it is done). A batch that wrote is handed off only after it: one commit in flight,
     batches commit in order. Meanwhile the batch stays open and the loop goes on, so reads (and
     other clients' writes) are served while that commit runs. After ddl_check_interval, or at
     once when that commit waits for the backup lock, it takes no more writes (they wait in
     write_waiters_ for it to end): a commit can wait long, at BACKUP STAGE BLOCK_COMMIT for as
     long as mariabackup holds it, and the worker goes on serving reads meanwhile rather than wait
     with them (a read of a row the open batch wrote waits, as its writer does, for the commit: so
     the sooner the batch stops taking writes, the fewer such reads). A spent row budget makes
     the worker wait, for kInlineCommitWaitMs at most: a commit that takes longer (a binary log
     waiting for disk space) gets the batch a fresh budget, closed to writes, and its reads go on,
     as SQL's reads go on while SQL's commits wait. */
  bool reaped = false, lost_before = false;
  if (store.commit_in_flight()) {
    const bool budget_spent = store.batch_wrote() && store.batch_budget_spent();
    /* Waited for once: a batch already closed to writes sits behind a commit that takes long. */
    const unsigned wait_ms = force ? Store::kWaitForever : budget_spent && !batch_closed_ ? Store::kInlineCommitWaitMs : 0;
    reaped = store.reap_commit(wait_ms, &lost_before);
    if (!reaped && budget_spent) {
      store.renew_batch_budget();
      batch_closed_ = true;
    }
    if (!reaped && store.batch_wrote()) {
      if (!batch_open_) {
        batch_open_ = true;
        open_since_ms_ = now_ms_;
      }
      if (!batch_closed_ && (now_ms_ - open_since_ms_ >= cfg_.ddl_check_interval_ms || store.commit_waits_for_lock())) {
        store.close_batch_to_writes();
        batch_closed_ = true;
      }
      return;  // serve() ends its statements
    }
  }
  std::vector<Connection *> before;
  if (reaped) before.swap(awaiting_);
  if (reaped && !force && !lost_before && merge_wanted(before)) {
    /* The commit that just finished answered its writers while this batch, which wrote too, was
       open: hand it off now and those writers' next writes form the batch after it, so the
       writers stay split in two groups taking turns at the commit (readers about: no inline
       commit). Instead they are answered first and the batch stays open for their next writes
       (extend_batch). Its later passes read a fresh snapshot (serve() ends its statements after
       every loop), so no read that runs after they are answered misses their writes. */
    batch_open_ = false;
    release_write_waiters();
    release_writers(before, false);
    rejoin_since_ns_ = monotonic_ns();  // the batch waits for them from now
    extend_loops_ = 1;
    return;
  }
  /* Without a batch of the worker's, writers are those whose write a session of its own committed
     (the lock queue): durable already. */
  if (store.in_batch() || !batch_writers_.empty()) {
    bool handed_off = false, lost = false;
    if (store.in_batch()) {
      handed_off = store.end_batch(commit_inline_wanted());
      counters_.add(counters_.batches);
      lost = !handed_off && store.batch_lost_writes();
    }
    std::vector<Connection *> writers;
    writers.swap(batch_writers_);
    /* A batch that only read (or whose writers are none of them depth-1) leaves the writers the
       last commit answered expected. */
    if (!handed_off && !lost && any_depth1(writers)) begin_answering();
    for (Connection *c : writers) {
      c->batch_writer = false;
      if (c->dead) continue;
      if (handed_off) {
        /* Its replies (and its further requests) wait until the commit is durable. */
        c->commit_wait = true;
        unmark_pending(*c);
        awaiting_.push_back(c);
        update_interest(*c);
        continue;
      }
      c->session->wrote_in_batch = false;
      if (lost) {
        close_connection(*c);  // its acknowledged writes were rolled back: no false answers
        continue;
      }
      expect_back(*c);
      settle(*c);
    }
  }
  batch_open_ = false;
  batch_closed_ = false;
  /* Writes refused while the commit in flight was held up run once it is done (a writer of the
     batch just handed off waits for that one's commit first: release_writers() queues it). */
  if (reaped || !store.commit_in_flight()) release_write_waiters();
  /* Answered only now: the batch that just ended read (possibly) without their writes, and none
     of its reads may come after they hear that their writes are done. */
  if (reaped) release_writers(before, lost_before);
  if (force && store.commit_in_flight()) end_batch(true);  // the batch just handed off: its writers too
}

void Worker::release_write_waiters() {
  for (Connection *c : write_waiters_) {
    c->waits_batch = false;
    if (!c->dead && !c->commit_wait) mark_pending(*c);
  }
  write_waiters_.clear();
}

bool Worker::merge_wanted(const std::vector<Connection *> &answered) const {
  const Store &store = *store_;
  if (answered.empty() || batch_closed_ || !store.batch_wrote() || store.batch_budget_spent()) return false;
  return answered.size() + batch_writers_.size() >= kInlineWriters || any_depth1(answered);
}

void Worker::begin_answering() {
  ++answering_;
  expected_ = 0;
}

void Worker::expect_back(Connection &c) {
  if (!c.depth1 || c.read_closed) return;
  c.answered_by = answering_;
  ++expected_;
}

void Worker::came_back(Connection &c) {
  if (c.answered_by != answering_ || !c.answered_by) return;
  c.answered_by = 0;
  if (expected_) --expected_;
}

uint64_t Worker::rejoin_wait_ns() const {
  /* Depth-1 writers a commit just answered send their next writes within tens of microseconds
     (on loopback); the batch the first of them opens waits until the last has come, for at most
     tablesocket_commit_rejoin_wait from its first write, rather than be committed with some of
     them while the rest wait out its commit and form the next batch, half of the writers in
     each. A bound on the whole wait, not on the gap between two of them: writers coming back one
     by one must not hold a batch open one wait each. */
  if (!expected_ || batch_writers_.empty()) return 0;
  const uint64_t wait = uint64_t(cfg_.commit_rejoin_wait_us) * 1000;
  const uint64_t since = monotonic_ns() - rejoin_since_ns_;
  return since < wait ? wait - since : 0;
}

bool Worker::others_active() {
  if (now_ms_ - active_pruned_ms_ >= kActiveMs / 4) {
    active_pruned_ms_ = now_ms_;
    active_.erase(std::remove_if(active_.begin(), active_.end(),
                                 [&](Connection *c) {
                                   if (now_ms_ - c->last_request_ms <= kActiveMs) return false;
                                   c->active = false;
                                   return true;
                                 }),
                  active_.end());
  }
  /* (A writer of the batch may have run its write long ago: waiting for the commit before.) */
  return std::any_of(active_.begin(), active_.end(), [](const Connection *c) { return !c->batch_writer && !c->dead; });
}

bool Worker::commit_inline_wanted() {
  if (batch_writers_.empty()) return false;
  /* Every connection of this worker is a depth-1 writer waiting for this commit, or idle (no
     request for kActiveMs: a pool's spare connections, which disabled this before): handed off, it
     would let nobody run meanwhile, and cost each write two thread switches (a lone writer: 3.25
     context switches per row, HandlerSocket's inline commit 1; 1x1 to 8x1 updates +20-40% rows/s,
     with or without the binary log). Pipelining writers keep the hand-off (measured before: their
     next writes fill the next batch, and inline commits lost 16-28% at 4x64). */
  if (std::all_of(batch_writers_.begin(), batch_writers_.end(), [](const Connection *c) { return c->depth1; }) &&
      (int64_t(batch_writers_.size()) >= counters_.connections.load(std::memory_order_relaxed) ||
       !others_active()))
    return true;
  return now_ms_ - last_read_ms_ > kReadsQuietMs && batch_writers_.size() >= kInlineWriters;
}

bool Worker::extend_batch(bool joined) const {
  const Store &store = *store_;
  if (!store.batch_wrote() || store.commit_in_flight() || store.batch_budget_spent()) return false;
  return (joined && extend_loops_ < kExtendLoops && batch_writers_.size() >= kInlineWriters) || rejoin_wait_ns();
}

void Worker::serve(Store &store) {
  store_ = &store;
  store.set_commit_notify(wake_.get());  // the commit thread wakes us when a commit is durable
  std::vector<epoll_event> events(512);
  uint64_t last_ddl_check = 0, last_idle_check = monotonic_ms();
  now_ms_ = last_idle_check;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (store.killed()) break;  // server shutdown: our THD was killed
    if (!listening_ && server_.accepting()) poll_listeners(true);
    bool any_paused = false;
    for (const Listener &l : listeners_) any_paused |= l.paused_until_ms != 0;
    bool any_parked = false;
    for (Connection *c : pending_) any_parked |= c->session && c->session->parked();
    int timeout;
    if (!pending_.empty() && !any_parked)
      timeout = 0;
    else if (any_parked)
      timeout = 2;
    else
      timeout = store.open_table_count() ? int(cfg_.ddl_check_interval_ms) : 100;
    if (any_paused) timeout = std::min(timeout, int(kAcceptPauseMs));
    if (extend_loops_) timeout = 0;  // the batch waits only for what has already arrived
    uint64_t rejoin_ns = 0;
    if (store.batch_wrote() && !store.commit_in_flight()) rejoin_ns = rejoin_wait_ns();
    if (batch_open_ && !batch_closed_) {  // the commit thread's eventfd ends the wait; this bounds it
      const uint64_t left = cfg_.ddl_check_interval_ms - std::min<uint64_t>(cfg_.ddl_check_interval_ms, now_ms_ - open_since_ms_);
      timeout = std::min(timeout, int(left));
    }
    int n;
    if (rejoin_ns && (timeout < 0 || rejoin_ns < uint64_t(timeout) * 1000000)) {
      /* Writers just answered are still to come: the open batch waits for them, briefly. */
      const timespec ts{0, long(rejoin_ns)};
      n = epoll_pwait2(epoll_.get(), events.data(), int(events.size()), &ts, nullptr);
    } else {
      n = epoll_wait(epoll_.get(), events.data(), int(events.size()), timeout);
    }
    if (n < 0 && errno != EINTR) break;
    now_ms_ = monotonic_ms();
    if (any_paused) resume_listeners();
    if (snapshot_wanted_.load(std::memory_order_relaxed)) publish_snapshot();
    for (int i = 0; i < n; ++i) {
      epoll_event &ev = events[i];
      if (ev.data.ptr == &wake_tag) {
        uint64_t v;
        while (::read(wake_.get(), &v, sizeof v) > 0) {}
        adopt_new_connections();  // a finished commit is taken by end_batch() below
        continue;
      }
      if (!listeners_.empty() && ev.data.ptr >= static_cast<void *>(listeners_.data()) &&
          ev.data.ptr < static_cast<void *>(listeners_.data() + listeners_.size())) {
        listener_ready(*static_cast<Listener *>(ev.data.ptr));
        continue;
      }
      Connection &c = *static_cast<Connection *>(ev.data.ptr);
      if (c.dead) continue;
      if (ev.events & EPOLLERR) {
        /* Reset before its first read: what it sent before the reset is there to read all the
           same (a client that pipelines memcached noreply sets and resets runs them). */
        if (c.transport == Transport::undecided) {
          read_first_bytes(c);
          if (c.dead) continue;
        }
        if (c.transport == Transport::tls_handshake) {
          /* The client's last handshake message (and requests after it) may have come before its
             reset: finish with them if they did; the connection then goes on as a reset one. */
          const std::string why = socket_error(c.fd.get());
          continue_handshake(c);
          if (!c.dead && c.transport == Transport::tls_handshake) tls_handshake_failed(c, why);
          if (c.dead) continue;
        }
        /* It reads what arrived before the reset (none while parked) and closes a connection
           with no session yet. */
        if (!c.peer_gone) peer_reset(c);
        continue;
      }
      if (c.tls) { tls_event(c, ev.events); continue; }
      if (ev.events & EPOLLOUT) flush_output(c);
      if (c.dead) continue;
      if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) read_input(c);
      if ((ev.events & EPOLLHUP) && !c.dead && !(ev.events & EPOLLIN)) { c.read_closed = true; mark_pending(c); }
      /* Its first byte began a TLS handshake; or its output drained on EPOLLOUT, which must not
         stay registered (level-triggered: the worker would spin until the client spoke again). */
      if (!c.dead && (c.tls || (c.out.empty() && (c.registered & EPOLLOUT)))) update_interest(c);
    }

    /* A write queued for a row lock has its outcome: its connection asks again now, not at its
       next retry (up to 8 ms later). */
    if (store.take_queue_results())
      for (Connection *c : pending_)
        if (parked(*c)) c->retry_at_ms = 0;

    /* One batch: every connection with complete input runs its requests; one commit for all. */
    const size_t writers_before = batch_writers_.size();
    if (!pending_.empty()) {
      batch_.swap(pending_);
      pending_.clear();
      for (Connection *c : batch_) c->pending = false;
      /* The connection whose requests spent the batch's row budget goes last in the next batch,
         behind the ones deferred for it. */
      Connection *spent_by = nullptr;
      for (Connection *c : batch_) {
        if (c->dead) continue;
        if (!c->session) {  // hung up before its transport was settled: nothing to answer
          close_connection(*c);
          continue;
        }
        if (c->session->parked() && now_ms_ < c->retry_at_ms) {
          /* Waiting for a lock: tried again at retry_at_ms (1-8 ms), not on every loop (busy
             readers make loops short; under FLUSH TABLES WITH READ LOCK 16 parked writers were
             tried 560,000 times a second). */
          mark_pending(*c);
          continue;
        }
        if (store.batch_budget_spent()) {
          mark_pending(*c);  // runs first thing in the next batch
          continue;
        }
        const uint64_t dirty_before = store.reads_of_written_tables();
        const uint64_t refused_before = store.writes_refused_closed();
        const uint64_t requests_before = counters_.executions.load(std::memory_order_relaxed);
        const bool wrote_before = c->session->wrote_in_batch;
        const size_t in_before = c->in.size();
        store.set_requester(c);
        store.begin_turn(cfg_.max_turn_rows);
        Session_outcome o = c->session->run(c->in, c->out, cfg_.max_requests_per_batch);
        store.set_requester(nullptr);
        if (c->in.size() != in_before && !c->session->mid_request()) c->request_since_ms = now_ms_;  // the next request begins
        if (c->peer_gone && !c->read_closed && !c->dead) read_after_reset(*c);  // the rest of what it sent before its reset
        if (counters_.executions.load(std::memory_order_relaxed) != requests_before) {
          c->last_request_ms = now_ms_;
          if (!c->active) {
            c->active = true;
            active_.push_back(c);
          }
          const bool wrote = c->session->wrote_in_batch && !wrote_before;
          if (wrote) c->depth1 = counters_.executions.load(std::memory_order_relaxed) - requests_before == 1 && c->in.empty();
          came_back(*c);
        }
        /* It read a table this batch wrote: what it saw may not be committed yet, so its replies
           wait for the commit as a writer's do (and are never sent if the commit fails). */
        if (store.reads_of_written_tables() != dirty_before) {
          c->session->wrote_in_batch = true;
          last_read_ms_ = now_ms_;
        } else if (!c->session->wrote_in_batch && !c->out.empty()) {
          last_read_ms_ = now_ms_;  // answered without writing: a reader (see kReadsQuietMs)
        }
        if (o == Session_outcome::idle && pre_login_overflow(*c)) {
          /* Its one request fills what a connection may hold before it logs in (a login line is
             far shorter): it will never log in with it. */
          counters_.add(counters_.errors);
          close_connection(*c);
          continue;
        }
        c->in.shrink_if_idle(1 << 16);  // when empty after a large request
        if (enforce_buffer_memory(*c)) continue;  // its replies grew past what the server may hold
        if (o == Session_outcome::yielded && store.batch_budget_spent() && !spent_by) {
          spent_by = c;
          o = Session_outcome::idle;  // marked pending after the loop
        }
        /* Replies to reads need no commit: send them now rather than after the whole batch.
           Anything after a write waits for the commit (a reply to a write means it is durable). */
        if (!c->session->wrote_in_batch && !c->out.empty()) flush_output(*c);
        if (c->dead) continue;
        if (o != Session_outcome::parked) c->parked_since_ms = 0;
        switch (o) {
          case Session_outcome::idle: break;
          case Session_outcome::parked:
            if (store.writes_refused_closed() == refused_before) {
              /* A lock someone else holds: tried again in the next millisecond, backing off to
                 every 8 ms as the wait grows (many clients waiting on one row held by SQL). */
              if (!c->parked_since_ms) c->parked_since_ms = now_ms_;
              c->retry_at_ms = now_ms_ + 1 + std::min<uint64_t>(7, (now_ms_ - c->parked_since_ms) / 16);
              mark_pending(*c);
            } else if (!c->waits_batch) {
              c->waits_batch = true;  // a write the open batch no longer takes: after that batch
              write_waiters_.push_back(c);
            }
            break;
          case Session_outcome::yielded:
            /* Over the output high water it waits for EPOLLOUT to drain its replies (flush_output
               resumes it); retrying at once would spin while the client does not read. */
            if (c->out.size() < cfg_.output_high_water) mark_pending(*c);
            break;
          case Session_outcome::close: c->close_after_flush = true; c->in.clear(); break;
        }
      }
      if (spent_by && !spent_by->dead) {
        /* Last in line, even if flushing its replies already queued it again. */
        unmark_pending(*spent_by);
        if (!spent_by->close_after_flush) mark_pending(*spent_by);
      }
      for (Connection *c : batch_) {
        if (c->dead) continue;
        if (c->session->wrote_in_batch) {
          /* Its replies wait for the batch's commit, which may be several loops away. */
          if (!c->batch_writer) {
            c->batch_writer = true;
            if (batch_writers_.empty()) rejoin_since_ns_ = monotonic_ns();
            batch_writers_.push_back(c);
          }
          continue;
        }
        settle(*c);
      }
      batch_.clear();
    }
    if (extend_batch(batch_writers_.size() > writers_before)) {
      ++extend_loops_;
    } else {
      extend_loops_ = 0;
      end_batch(false);
    }
    /* A batch still open (waiting for the commit in flight, or taking late writes) ends its
       statements: the next loop's requests read a fresh snapshot. */
    if (store.in_batch()) store.end_statements();
    for (Connection *c : pending_) update_interest(*c);

    if (now_ms_ - last_ddl_check >= cfg_.ddl_check_interval_ms || store.open_table_count() == 0 ||
        pending_.empty()) {
      store.yield_to_ddl();
      last_ddl_check = now_ms_;
    }
    if (now_ms_ - last_idle_check >= 1000) {
      check_idle(now_ms_);
      last_idle_check = now_ms_;
    }
    reap_dead();
    if (!lingering_.empty()) reap_lingering(false);
  }
  poll_listeners(false);  // what waits in the backlog is another worker's, or refused at stop
  reap_lingering(true);
}

}  // namespace tablesocket
