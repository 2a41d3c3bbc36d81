/* What the network layer needs from a protocol session (HandlerSocket now, memcached later). */
#ifndef TABLESOCKET_SESSION_SESSION_H
#define TABLESOCKET_SESSION_SESSION_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/byte_buffer.h"
#include "common/clock.h"
#include "common/peer.h"

namespace tablesocket {

/* Before a login the configuration requires (and without a verified client certificate, which
   may stand for one): the longest request line a session accepts (a login line is far shorter)
   and the unconsumed input the network layer holds for the connection, so that clients that have
   not said who they are cannot fill tablesocket_max_buffer_memory for everybody else. */
constexpr size_t kPreLoginLine = 8192;
constexpr size_t kPreLoginInput = 16384;

enum class Session_outcome : unsigned char {
  idle,     // all complete requests executed; waiting for more input
  parked,   // a request waits for a lock: retry soon; the input buffer must not move meanwhile
  yielded,  // stopped early (request quota or output high water): run again soon
  close,    // fatal protocol error: flush what is queued, then close
};

class Session {
 public:
  explicit Session(const Peer &peer) : peer_(peer) {}
  virtual ~Session() = default;
  /* Executes up to max_requests complete requests from in (consuming them), appending to out. */
  virtual Session_outcome run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) = 0;
  virtual bool parked() const = 0;
  /* The account the connection acts as ("" when it has not logged in), for monitoring. */
  virtual void account(std::string *user, std::string *host) const { user->clear(); host->clear(); }
  /* True while the connection may do nothing until it logs in (tablesocket_require_auth). */
  virtual bool awaiting_login() const { return false; }
  /* Before that login, and without a verified client certificate (which may stand for one): the
     input is held to kPreLoginInput, a HandlerSocket line to kPreLoginLine. */
  bool pre_login_capped() const { return !peer_.cert_verified && awaiting_login(); }
  /* Heap the session keeps between requests (e.g. HandlerSocket's open indexes), counted with the
     connection's buffers against tablesocket_max_buffer_memory. */
  virtual size_t retained_bytes() const { return 0; }
  /* True while a request's bytes are still being consumed as they come (memcached skipping the
     data of a refused store): its input may be empty and the request still not over. */
  virtual bool mid_request() const { return false; }

  /* Set once the peer is gone (reset): nobody will read the answers, so requests that only read
     are skipped; writes it sent still run. */
  bool answers_discarded = false;

  /* Set when a write of this session succeeded in the current batch; the worker clears it after
     the batch commits (and closes the connection if the commit failed). */
  bool wrote_in_batch = false;

 protected:
  const Peer &peer_;  // owned by the connection, which outlives its session

  /* The lock-wait policy every protocol shares: true while a request that met a busy table or
     row may keep waiting (it is parked and retried), false once timeout_ms have passed since it
     first had to wait. */
  bool may_wait_longer(unsigned timeout_ms) {
    const uint64_t now = monotonic_ms();
    if (!lock_wait_since_ms_) lock_wait_since_ms_ = now;
    return now - lock_wait_since_ms_ < timeout_ms;
  }
  /* The request was answered: the next one that has to wait starts its own clock (the store's
     too, which keeps how long a write has met a row lock). */
  void lock_wait_over() {
    lock_wait_since_ms_ = 0;
    lock_wait_ended();
  }
  virtual void lock_wait_ended() {}
  /* True while a request already counted runs again (a parked request retried, a get going on
     with its next part): the request-kind counters count it once. */
  bool retrying_ = false;

 private:
  uint64_t lock_wait_since_ms_ = 0;
};

}  // namespace tablesocket
#endif
