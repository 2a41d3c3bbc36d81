/* Who is on the other end of a connection, as the network layer knows it. Filled at accept (the
   address) and after a TLS handshake (the tls fields); sessions read it to authenticate and to
   decide whether a cleartext password may cross the wire. No server headers. */
#ifndef TABLESOCKET_COMMON_PEER_H
#define TABLESOCKET_COMMON_PEER_H

#include <sys/socket.h>

#include <string>

namespace tablesocket {

struct Peer {
  sockaddr_storage addr{};  // the remote address (zeroed for a unix-socket connection)
  socklen_t addr_len = 0;
  std::string ip;           // numeric remote address ("127.0.0.1", "::1"); "" for a unix socket
  bool unix_socket = false;
  /* The connection holds one of its address's tablesocket_max_connections_per_host slots (the
     network layer gives it back at close). */
  bool host_slot = false;

  /* Set by the network layer once a TLS handshake completed on this connection. */
  bool tls = false;
  /* A client certificate was presented and verified against the configured CA. The names are
     in OpenSSL's one-line form ("/C=FI/O=Example/CN=alice"), as MariaDB's REQUIRE SUBJECT and
     REQUIRE ISSUER compare them. */
  bool cert_verified = false;
  std::string cert_subject, cert_issuer, cert_cn;
  std::string tls_cipher;   // the negotiated cipher suite (for REQUIRE CIPHER)

  /* True when a password may be sent in clear on this connection without exposing it: TLS, or a
     unix socket (readable only on this host). */
  bool confidential() const { return tls || unix_socket; }
};

}  // namespace tablesocket
#endif
