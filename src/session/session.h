/* What the network layer needs from a protocol session (HandlerSocket now, memcached later). */
#ifndef TABLESOCKET_SESSION_SESSION_H
#define TABLESOCKET_SESSION_SESSION_H

#include "common/byte_buffer.h"

namespace tablesocket {

enum class Session_outcome : unsigned char {
  idle,     // all complete requests executed; waiting for more input
  parked,   // a request waits for a lock: retry soon; the input buffer must not move meanwhile
  yielded,  // stopped early (request quota or output high water): run again soon
  close,    // fatal protocol error: flush what is queued, then close
};

class Session {
 public:
  virtual ~Session() = default;
  /* Executes up to max_requests complete requests from in (consuming them), appending to out. */
  virtual Session_outcome run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) = 0;
  virtual bool parked() const = 0;

  /* Set when a write of this session succeeded in the current batch; the worker clears it after
     the batch commits (and closes the connection if the commit failed). */
  bool wrote_in_batch = false;
};

}  // namespace tablesocket
#endif
