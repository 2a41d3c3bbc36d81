/* One client connection as INFORMATION_SCHEMA.TABLESOCKET_CONNECTIONS shows it: a snapshot the
   connection's worker takes between batches. No server headers. */
#ifndef TABLESOCKET_COMMON_CONN_INFO_H
#define TABLESOCKET_COMMON_CONN_INFO_H

#include <cstdint>
#include <string>

namespace tablesocket {

struct Connection_info {
  uint64_t id = 0;        // the server's connection number (in accept order)
  unsigned worker = 0;    // the worker thread serving it ("tablesocket worker N")
  std::string port;       // the listener: hs, hs_wr, mc, mc_socket
  std::string remote;     // "ip:port", or "unix socket"
  std::string user, host; // the MariaDB account it acts as; empty when it has not logged in
  bool tls = false;
  uint64_t connected_s = 0, idle_s = 0;
  const char *state = ""; // what it is doing: see Worker::publish_snapshot()
  uint64_t input_bytes = 0, output_bytes = 0;  // buffered: unparsed requests, unsent replies
};

}  // namespace tablesocket
#endif
