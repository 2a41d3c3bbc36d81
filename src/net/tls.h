/* TLS for tablesocket's TCP listeners (OpenSSL). One Tls_context per Server, built at start from
   the configured certificate; one Tls_conn per connection whose first byte was a TLS handshake
   record. Everything is non-blocking: each call reports what it waits for, and the worker turns
   that into epoll interest. No server headers, no sockets beyond the fd it is given, no logging:
   errors come back as values and text. */
#ifndef TABLESOCKET_NET_TLS_H
#define TABLESOCKET_NET_TLS_H

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/peer.h"

/* OpenSSL's own type names (typedef struct ssl_st SSL, ...), so this header needs no OpenSSL. */
struct ssl_st;
struct ssl_ctx_st;
struct bio_method_st;

namespace tablesocket {

/* Paths as configured (relative ones are relative to the server's working directory, the datadir,
   as for the server's own ssl_cert). Empty key = the key is in the certificate file. crl/crlpath:
   certificate revocation lists client certificates are checked against (every certificate of the
   chain), as the server's ssl_crl/ssl_crlpath. versions: the protocol versions allowed, as the
   server's tls_version bits (kTls12 | kTls13); 0 = both. Versions below 1.2 are never offered. */
struct Tls_settings {
  std::string cert, key, ca, capath, cipher, crl, crlpath;
  unsigned versions = 0;
  static constexpr unsigned kTls12 = 4, kTls13 = 8;  // the server's VIO_TLSv1_2 / VIO_TLSv1_3
};

/* What a non-blocking TLS step did. */
enum class Tls_status : unsigned char {
  done,        // the step completed (handshake finished, or bytes were moved)
  want_read,   // wait until the socket is readable, then repeat the same call
  want_write,  // wait until the socket is writable, then repeat the same call
  eof,         // the peer closed (close_notify, or a TCP close between records)
  error,       // protocol or socket error: the connection is unusable
};

struct Ssl_ctx_free { void operator()(ssl_ctx_st *p) const; };
struct Ssl_free { void operator()(ssl_st *p) const; };
struct Bio_method_free { void operator()(bio_method_st *p) const; };

class Tls_conn;

class Tls_context : public std::enable_shared_from_this<Tls_context> {
  struct Key { explicit Key() = default; };  // only create() makes one

 public:
  explicit Tls_context(Key) {}
  /* Loads the certificate, key, CA and CRLs and sets the policy (TLS 1.2 and/or 1.3, server
     cipher preference, no renegotiation; a client certificate is requested, not required, when a
     CA is configured). Returns nullptr with *error naming the file or setting at fault.
     Thread-safe once built. */
  static std::shared_ptr<Tls_context> create(const Tls_settings &s, std::string *error);

  /* A server-side TLS connection on fd (not owned). already_read: bytes the caller took from fd
     before it knew this was TLS; they are handed to the handshake first. nullptr on allocation
     failure. The connection keeps this context alive (a reload may replace it meanwhile). */
  std::unique_ptr<Tls_conn> accept(int fd, std::string_view already_read) const;

  /* True when client certificates are requested and verified (a CA is configured). */
  bool verifies_clients() const { return verifies_clients_; }

 private:
  std::unique_ptr<ssl_ctx_st, Ssl_ctx_free> ctx_;
  std::unique_ptr<bio_method_st, Bio_method_free> bio_method_;  // reads/writes the fd without SIGPIPE
  bool verifies_clients_ = false;
};

/* One connection's TLS state. Every call may be repeated after want_read/want_write; read and
   write must be repeated with the same first bytes (the output buffer may move, not change). */
class Tls_conn {
  struct Key { explicit Key() = default; };  // only Tls_context::accept() makes one

 public:
  explicit Tls_conn(Key) {}
  ~Tls_conn();
  Tls_conn(const Tls_conn &) = delete;
  Tls_conn &operator=(const Tls_conn &) = delete;

  /* Advances the server handshake. done: finished, describe() is meaningful. */
  Tls_status handshake();
  /* Decrypts up to n bytes into buf. done: *got > 0 bytes were stored. */
  Tls_status read(char *buf, size_t n, size_t *got);
  /* Encrypts and sends up to n bytes (partial writes allowed). done: *put > 0 bytes were taken. */
  Tls_status write(const char *buf, size_t n, size_t *put);
  /* Bytes already taken off the socket but not yet returned by read(): epoll will not report them,
     so the caller must read again before waiting. */
  bool has_buffered_input() const;
  /* Part of a record has come (some of its header, or its header and not all of its body): the
     peer is sending something, though read() has nothing to return yet. */
  bool mid_record() const;
  /* Fills peer's TLS fields after a completed handshake: tls, tls_cipher, and, for a client
     certificate that verified against the configured CA, cert_verified and the subject, issuer
     (X509_NAME_oneline form, as MariaDB's REQUIRE SUBJECT/ISSUER compare) and commonName. */
  void describe(Peer &peer) const;
  /* Sends close_notify once, without waiting for the peer's (best effort; never blocks). */
  void shutdown();
  /* A fatal error happened (reset, protocol error): nothing more can be read or written. */
  bool failed() const { return failed_; }
  /* Why the last call returned error ("" when unknown): OpenSSL's reason or the socket error. */
  const std::string &error_text() const { return error_; }

 private:
  friend class Tls_context;
  friend struct Tls_bio;
  Tls_status result(int rc);  // maps an OpenSSL failure

  std::shared_ptr<const Tls_context> context_;  // outlives ssl_ (declared first, destroyed last)
  std::unique_ptr<ssl_st, Ssl_free> ssl_;
  int fd_ = -1;
  std::string prefix_;       // bytes read from fd before TLS was detected, fed to OpenSSL first
  size_t prefix_used_ = 0;
  std::string error_;
  bool failed_ = false;      // a fatal error happened: no close_notify may follow
  bool shut_down_ = false;
};

}  // namespace tablesocket
#endif
