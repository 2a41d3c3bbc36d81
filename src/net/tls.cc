#include "net/tls.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace tablesocket {

void Ssl_ctx_free::operator()(ssl_ctx_st *p) const { SSL_CTX_free(p); }
void Ssl_free::operator()(ssl_st *p) const { SSL_free(p); }
void Bio_method_free::operator()(bio_method_st *p) const { BIO_meth_free(p); }

namespace {

struct X509_free_fn { void operator()(X509 *p) const { X509_free(p); } };
struct Openssl_free_fn { void operator()(void *p) const { OPENSSL_free(p); } };

/* OpenSSL's reason for the oldest queued error (the root cause), then clears the queue. */
std::string openssl_reason(const char *fallback) {
  unsigned long e = ERR_peek_error();
  std::string out;
  if (e) {
    const char *r = ERR_reason_error_string(e);
    if (r) {
      out = r;
    } else {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof buf);
      out = buf;
    }
  }
  ERR_clear_error();
  return out.empty() ? fallback : out;
}

/* Checked before OpenSSL opens the file, for an error message with the system's reason. */
bool readable_file(const std::string &path, const char *what, std::string *error) {
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f) {
    *error = std::string("cannot read the TLS ") + what + " '" + path + "': " + strerror(errno);
    return false;
  }
  std::fclose(f);
  return true;
}

bool readable_dir(const std::string &path, const char *what, std::string *error) {
  DIR *d = opendir(path.c_str());
  if (!d) {
    *error = std::string("cannot read the TLS ") + what + " '" + path + "': " + strerror(errno);
    return false;
  }
  closedir(d);
  return true;
}

/* The handshake goes on whatever the client certificate's verification says; the result is kept
   (SSL_get_verify_result) and only a verified certificate's names reach the Peer. */
int keep_going_verify_callback(int, X509_STORE_CTX *) { return 1; }

std::string name_oneline(X509_NAME *name) {
  std::unique_ptr<char, Openssl_free_fn> s(X509_NAME_oneline(name, nullptr, 0));
  return s ? std::string(s.get()) : std::string();
}

/* The subject's (last) commonName as UTF-8; "" if there is none or it holds a NUL byte. */
std::string common_name(X509_NAME *name) {
  int idx = -1, last = -1;
  while ((idx = X509_NAME_get_index_by_NID(name, NID_commonName, idx)) >= 0) last = idx;
  if (last < 0) return "";
  ASN1_STRING *data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, last));
  unsigned char *utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, data);
  if (len < 0) return "";
  std::unique_ptr<unsigned char, Openssl_free_fn> guard(utf8);
  if (std::memchr(utf8, 0, size_t(len))) return "";
  return std::string(reinterpret_cast<const char *>(utf8), size_t(len));
}

}  // namespace

/* The BIO under every Tls_conn: recv/send on the connection's fd (send with MSG_NOSIGNAL, so a
   peer that vanished is an error rather than SIGPIPE), after first replaying the bytes the worker
   read before it knew the connection was TLS. */
struct Tls_bio {
  static int read(BIO *b, char *data, int len) {
    BIO_clear_retry_flags(b);
    auto *c = static_cast<Tls_conn *>(BIO_get_data(b));
    if (len <= 0) return 0;
    if (c->prefix_used_ < c->prefix_.size()) {
      size_t n = std::min(size_t(len), c->prefix_.size() - c->prefix_used_);
      std::memcpy(data, c->prefix_.data() + c->prefix_used_, n);
      c->prefix_used_ += n;
      if (c->prefix_used_ == c->prefix_.size()) {
        std::string().swap(c->prefix_);
        c->prefix_used_ = 0;
      }
      return int(n);
    }
    for (;;) {
      ssize_t n = ::recv(c->fd_, data, size_t(len), 0);
      if (n >= 0) return int(n);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
      return -1;
    }
  }
  static int write(BIO *b, const char *data, int len) {
    BIO_clear_retry_flags(b);
    auto *c = static_cast<Tls_conn *>(BIO_get_data(b));
    if (len <= 0) return 0;
    for (;;) {
      ssize_t n = ::send(c->fd_, data, size_t(len), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return int(n);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
      return -1;
    }
  }
  static long ctrl(BIO *, int cmd, long, void *) {
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is buffered here
  }
  static int create(BIO *b) {
    BIO_set_init(b, 1);
    return 1;
  }
};

std::shared_ptr<Tls_context> Tls_context::create(const Tls_settings &s, std::string *error) {
  ERR_clear_error();
  auto t = std::make_shared<Tls_context>(Key());
  t->ctx_.reset(SSL_CTX_new(TLS_server_method()));
  if (!t->ctx_) {
    *error = "cannot create a TLS context: " + openssl_reason("out of memory");
    return nullptr;
  }
  SSL_CTX *ctx = t->ctx_.get();
  const unsigned both = Tls_settings::kTls12 | Tls_settings::kTls13;
  const unsigned versions = s.versions & both ? s.versions & both : both;
  SSL_CTX_set_min_proto_version(ctx, versions & Tls_settings::kTls12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, versions & Tls_settings::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  /* IGNORE_UNEXPECTED_EOF: a TCP close between records is an end of input, as on a plaintext
     connection (a request cut short is never executed: it lacks its terminator). */
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_dh_auto(ctx, 1);
  SSL_CTX_sess_set_cache_size(ctx, 1024);  // TLS 1.2 session ids; TLS 1.3 tickets are stateless
  static const unsigned char kSessionContext[] = "tablesocket";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);

  if (!s.cipher.empty()) {
    /* As the server does with ssl_cipher: one list for TLS 1.2 cipher names and TLS 1.3 suites;
       an error only if it selects nothing for either. */
    int ok12 = SSL_CTX_set_cipher_list(ctx, s.cipher.c_str());
    int ok13 = SSL_CTX_set_ciphersuites(ctx, s.cipher.c_str());
    ERR_clear_error();
    if (!ok12 && !ok13) {
      *error = "the TLS cipher list '" + s.cipher + "' selects no cipher";
      return nullptr;
    }
  }

  /* As the server: a key file alone is also the certificate file, and the other way round. */
  const std::string &cert = s.cert.empty() ? s.key : s.cert;
  const std::string &key = s.key.empty() ? cert : s.key;
  if (cert.empty()) {
    *error = "no TLS certificate configured";
    return nullptr;
  }
  if (!readable_file(cert, "certificate", error)) return nullptr;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) <= 0) {
    *error = "cannot use the TLS certificate '" + cert + "': " + openssl_reason("not a PEM certificate");
    return nullptr;
  }
  if (!readable_file(key, "key", error)) return nullptr;
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) <= 0) {
    *error = "cannot use the TLS key '" + key + "' with the certificate '" + cert + "': " +
             openssl_reason("not a PEM private key");
    return nullptr;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    *error = "the TLS key '" + key + "' does not match the certificate '" + cert + "': " +
             openssl_reason("key mismatch");
    return nullptr;
  }

  if (!s.ca.empty() || !s.capath.empty()) {
    if (!s.ca.empty() && !readable_file(s.ca, "CA file", error)) return nullptr;
    if (!s.capath.empty() && !readable_dir(s.capath, "CA directory", error)) return nullptr;
    if (SSL_CTX_load_verify_locations(ctx, s.ca.empty() ? nullptr : s.ca.c_str(),
                                      s.capath.empty() ? nullptr : s.capath.c_str()) != 1) {
      *error = "cannot load the TLS CA '" + (s.ca.empty() ? s.capath : s.ca) + "': " +
               openssl_reason("no certificates");
      return nullptr;
    }
    if (!s.ca.empty()) {
      /* Tells clients which CAs are accepted (helps one holding several certificates choose). */
      STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(s.ca.c_str());
      if (names) SSL_CTX_set_client_CA_list(ctx, names);
      ERR_clear_error();
    }
    if (!s.crl.empty() || !s.crlpath.empty()) {
      /* As the server's ssl_crl/ssl_crlpath: every certificate of a client's chain is checked,
         and one whose issuer has no CRL loaded does not verify. */
      if (!s.crl.empty() && !readable_file(s.crl, "CRL file", error)) return nullptr;
      if (!s.crlpath.empty() && !readable_dir(s.crlpath, "CRL directory", error)) return nullptr;
      X509_STORE *store = SSL_CTX_get_cert_store(ctx);
      if (X509_STORE_load_locations(store, s.crl.empty() ? nullptr : s.crl.c_str(),
                                    s.crlpath.empty() ? nullptr : s.crlpath.c_str()) != 1 ||
          X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL) != 1) {
        *error = "cannot load the TLS CRL '" + (s.crl.empty() ? s.crlpath : s.crl) + "': " +
                 openssl_reason("no CRL");
        return nullptr;
      }
    }
    /* Request, not require: a connection without a certificate still completes its handshake. */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_CLIENT_ONCE, keep_going_verify_callback);
    t->verifies_clients_ = true;
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }

  t->bio_method_.reset(BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tablesocket socket"));
  if (!t->bio_method_ || !BIO_meth_set_read(t->bio_method_.get(), Tls_bio::read) ||
      !BIO_meth_set_write(t->bio_method_.get(), Tls_bio::write) ||
      !BIO_meth_set_ctrl(t->bio_method_.get(), Tls_bio::ctrl) ||
      !BIO_meth_set_create(t->bio_method_.get(), Tls_bio::create)) {
    *error = "cannot create the TLS socket BIO: " + openssl_reason("out of memory");
    return nullptr;
  }
  ERR_clear_error();
  return t;
}

std::unique_ptr<Tls_conn> Tls_context::accept(int fd, std::string_view already_read) const {
  ERR_clear_error();
  auto c = std::make_unique<Tls_conn>(Tls_conn::Key());
  c->context_ = shared_from_this();
  c->fd_ = fd;
  c->prefix_.assign(already_read.data(), already_read.size());
  c->ssl_.reset(SSL_new(ctx_.get()));
  BIO *bio = c->ssl_ ? BIO_new(bio_method_.get()) : nullptr;
  if (!bio) {
    ERR_clear_error();
    return nullptr;
  }
  BIO_set_data(bio, c.get());
  SSL_set_bio(c->ssl_.get(), bio, bio);  // the SSL owns the BIO now
  SSL_set_accept_state(c->ssl_.get());
  return c;
}

Tls_conn::~Tls_conn() = default;

Tls_status Tls_conn::result(int rc) {
  const int saved_errno = errno;
  switch (SSL_get_error(ssl_.get(), rc)) {
    case SSL_ERROR_WANT_READ: return Tls_status::want_read;
    case SSL_ERROR_WANT_WRITE: return Tls_status::want_write;
    case SSL_ERROR_ZERO_RETURN: return Tls_status::eof;
    case SSL_ERROR_SYSCALL: {
      failed_ = true;
      std::string why = openssl_reason("");
      if (why.empty()) why = saved_errno ? strerror(saved_errno) : "connection closed by the peer";
      error_ = why;
      return Tls_status::error;
    }
    default:
      failed_ = true;
      error_ = openssl_reason("TLS protocol error");
      return Tls_status::error;
  }
}

Tls_status Tls_conn::handshake() {
  ERR_clear_error();
  errno = 0;
  int rc = SSL_do_handshake(ssl_.get());
  if (rc == 1) return Tls_status::done;
  Tls_status st = result(rc);
  if (st == Tls_status::eof) {  // close_notify before the handshake finished
    failed_ = true;
    error_ = "connection closed by the peer";
    return Tls_status::error;
  }
  return st;
}

Tls_status Tls_conn::read(char *buf, size_t n, size_t *got) {
  ERR_clear_error();
  errno = 0;
  size_t got_n = 0;
  int rc = SSL_read_ex(ssl_.get(), buf, n, &got_n);
  if (rc == 1) {
    *got = got_n;
    return Tls_status::done;
  }
  *got = 0;
  return result(rc);
}

Tls_status Tls_conn::write(const char *buf, size_t n, size_t *put) {
  ERR_clear_error();
  errno = 0;
  size_t put_n = 0;
  int rc = SSL_write_ex(ssl_.get(), buf, n, &put_n);
  if (rc == 1) {
    *put = put_n;
    return Tls_status::done;
  }
  *put = 0;
  return result(rc);
}

bool Tls_conn::has_buffered_input() const {
  return SSL_has_pending(ssl_.get()) || prefix_used_ < prefix_.size();
}

bool Tls_conn::mid_record() const {
  /* "RB": the header was read and the body is awaited (nothing is buffered then); bytes of a
     header not yet whole are buffered. */
  return has_buffered_input() || std::strcmp(SSL_rstate_string(ssl_.get()), "RB") == 0;
}

void Tls_conn::describe(Peer &peer) const {
  SSL *ssl = ssl_.get();
  peer.tls = true;
  const char *cipher = SSL_get_cipher_name(ssl);
  peer.tls_cipher = cipher ? cipher : "";
  peer.cert_verified = false;
  peer.cert_subject.clear();
  peer.cert_issuer.clear();
  peer.cert_cn.clear();
  std::unique_ptr<X509, X509_free_fn> cert(SSL_get1_peer_certificate(ssl));
  if (!cert || SSL_get_verify_result(ssl) != X509_V_OK) return;
  peer.cert_verified = true;
  peer.cert_subject = name_oneline(X509_get_subject_name(cert.get()));
  peer.cert_issuer = name_oneline(X509_get_issuer_name(cert.get()));
  peer.cert_cn = common_name(X509_get_subject_name(cert.get()));
}

void Tls_conn::shutdown() {
  if (shut_down_ || failed_ || !ssl_ || !SSL_is_init_finished(ssl_.get())) return;
  shut_down_ = true;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_.get());  // queues and tries to send close_notify; never waits
  ERR_clear_error();
}

}  // namespace tablesocket
