/* Tests for net/tls: context errors name the file at fault; a non-blocking handshake over a
   socketpair against an OpenSSL client; what describe() puts into the Peer for a verified, an
   untrusted and no client certificate; bytes read before detection; partial writes; buffered
   input; close_notify and garbage. Certificates are made here with OpenSSL's API. */
#include <gtest/gtest.h>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "net/fd.h"
#include "net/tls.h"

namespace tablesocket {
namespace {

struct Pkey_free { void operator()(EVP_PKEY *p) const { EVP_PKEY_free(p); } };
struct X509_free_fn { void operator()(X509 *p) const { X509_free(p); } };
struct Ctx_free { void operator()(SSL_CTX *p) const { SSL_CTX_free(p); } };
struct Ssl_free_fn { void operator()(SSL *p) const { SSL_free(p); } };
using Pkey = std::unique_ptr<EVP_PKEY, Pkey_free>;
using Cert = std::unique_ptr<X509, X509_free_fn>;

Pkey new_key() { return Pkey(EVP_EC_gen("P-256")); }

/* A certificate for key with subject "/C=FI/O=<org>/CN=<cn>", signed by issuer_key (self-signed
   when issuer is null). */
Cert new_cert(EVP_PKEY *key, const char *org, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, bool ca) {
  Cert c(X509_new());
  X509_set_version(c.get(), 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), 86400);
  X509_set_pubkey(c.get(), key);
  X509_NAME *name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "C", MBSTRING_ASC, reinterpret_cast<const unsigned char *>("FI"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char *>(org), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char *>(cn), -1, -1, 0);
  X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer ? issuer : c.get(), c.get(), nullptr, nullptr, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(nullptr, &v3, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  X509_add_ext(c.get(), ext, -1);
  X509_EXTENSION_free(ext);
  X509_sign(c.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return c;
}

void write_pem(const std::string &path, X509 *cert, EVP_PKEY *key) {
  std::FILE *f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  if (cert) PEM_write_X509(f, cert);
  if (key) PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/ts_tls_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ca_key_ = new_key();
    ca_ = new_cert(ca_key_.get(), "Example", "Test CA", nullptr, nullptr, true);
    Pkey server_key = new_key(), client_key = new_key(), rogue_key = new_key(), other_key = new_key();
    Cert server = new_cert(server_key.get(), "Example", "127.0.0.1", ca_.get(), ca_key_.get(), false);
    Cert client = new_cert(client_key.get(), "Example", "alice", ca_.get(), ca_key_.get(), false);
    Pkey revoked_key = new_key();
    Cert revoked = new_cert(revoked_key.get(), "Example", "bob", ca_.get(), ca_key_.get(), false);
    write_pem(dir_ + "/revoked.pem", revoked.get(), revoked_key.get());
    write_crl(dir_ + "/crl.pem", X509_get_serialNumber(revoked.get()));
    Cert rogue = new_cert(rogue_key.get(), "Example", "mallory", nullptr, nullptr, false);
    write_pem(dir_ + "/ca.pem", ca_.get(), nullptr);
    write_pem(dir_ + "/server.pem", server.get(), nullptr);
    write_pem(dir_ + "/server.key", nullptr, server_key.get());
    write_pem(dir_ + "/server-both.pem", server.get(), server_key.get());
    write_pem(dir_ + "/other.key", nullptr, other_key.get());
    write_pem(dir_ + "/client.pem", client.get(), client_key.get());
    write_pem(dir_ + "/rogue.pem", rogue.get(), rogue_key.get());
    write_pem(dir_ + "/garbage.pem", nullptr, nullptr);
    std::FILE *f = std::fopen((dir_ + "/garbage.pem").c_str(), "w");
    std::fputs("not a certificate\n", f);
    std::fclose(f);
  }
  static void TearDownTestSuite() {
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }

  /* A CRL of the test CA revoking the certificate with serial `serial`. */
  static void write_crl(const std::string &path, const ASN1_INTEGER *serial) {
    X509_CRL *crl = X509_CRL_new();
    X509_CRL_set_version(crl, 1);
    X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca_.get()));
    ASN1_TIME *now = X509_gmtime_adj(nullptr, -60), *next = X509_gmtime_adj(nullptr, 86400);
    X509_CRL_set1_lastUpdate(crl, now);
    X509_CRL_set1_nextUpdate(crl, next);
    X509_REVOKED *r = X509_REVOKED_new();
    X509_REVOKED_set_serialNumber(r, const_cast<ASN1_INTEGER *>(serial));
    X509_REVOKED_set_revocationDate(r, now);
    X509_CRL_add0_revoked(crl, r);
    X509_CRL_sort(crl);
    X509_CRL_sign(crl, ca_key_.get(), EVP_sha256());
    std::FILE *f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    PEM_write_X509_CRL(f, crl);
    std::fclose(f);
    ASN1_TIME_free(now);
    ASN1_TIME_free(next);
    X509_CRL_free(crl);
  }

  static Tls_settings settings(bool with_ca = true) {
    Tls_settings s;
    s.cert = dir_ + "/server.pem";
    s.key = dir_ + "/server.key";
    if (with_ca) s.ca = dir_ + "/ca.pem";
    return s;
  }

  /* A non-blocking client SSL on one end of a socketpair; the server end is server_fd. */
  struct Pair {
    Fd server_fd, client_fd;
    std::unique_ptr<SSL_CTX, Ctx_free> client_ctx;
    std::unique_ptr<SSL, Ssl_free_fn> client;
  };
  static Pair make_pair(const char *client_cert_pem, int client_max_version = 0) {
    Pair p;
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    p.server_fd.reset(sv[0]);
    p.client_fd.reset(sv[1]);
    p.client_ctx.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_load_verify_locations(p.client_ctx.get(), (dir_ + "/ca.pem").c_str(), nullptr);
    SSL_CTX_set_verify(p.client_ctx.get(), SSL_VERIFY_PEER, nullptr);
    if (client_max_version) SSL_CTX_set_max_proto_version(p.client_ctx.get(), client_max_version);
    if (client_cert_pem) {
      std::string path = dir_ + "/" + client_cert_pem;
      EXPECT_EQ(SSL_CTX_use_certificate_file(p.client_ctx.get(), path.c_str(), SSL_FILETYPE_PEM), 1);
      EXPECT_EQ(SSL_CTX_use_PrivateKey_file(p.client_ctx.get(), path.c_str(), SSL_FILETYPE_PEM), 1);
    }
    p.client.reset(SSL_new(p.client_ctx.get()));
    SSL_set_fd(p.client.get(), p.client_fd.get());
    SSL_set_connect_state(p.client.get());
    return p;
  }

  /* Steps client and server handshakes alternately until both are done (or one fails). */
  static Tls_status handshake(Pair &p, Tls_conn &server) {
    bool client_done = false;
    Tls_status st = Tls_status::want_read;
    for (int i = 0; i < 100; ++i) {
      if (!client_done) {
        int rc = SSL_do_handshake(p.client.get());
        if (rc == 1) client_done = true;
        else {
          int e = SSL_get_error(p.client.get(), rc);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            ERR_clear_error();
            client_done = true;  // the client gave up; the server will see it
          }
        }
      }
      if (st != Tls_status::done) st = server.handshake();
      if (st == Tls_status::error || st == Tls_status::eof) return st;
      if (client_done && st == Tls_status::done) {
        /* TLS 1.3: the client's verdict on its certificate arrives with its next read. */
        char b;
        SSL_read(p.client.get(), &b, 1);
        ERR_clear_error();
        return st;
      }
    }
    return st;
  }

  /* A server connection (default settings, a client without a certificate) past its handshake;
     the connection holds its own reference to the context. */
  struct Connected {
    Pair p;
    std::unique_ptr<Tls_conn> server;
  };
  static void connect(Connected *c) {
    std::string error;
    auto ctx = Tls_context::create(settings(), &error);
    ASSERT_NE(ctx, nullptr) << error;
    c->p = make_pair(nullptr);
    c->server = ctx->accept(c->p.server_fd.get(), "");
    ASSERT_EQ(handshake(c->p, *c->server), Tls_status::done) << c->server->error_text();
  }

  static std::string dir_;
  static Pkey ca_key_;
  static Cert ca_;
};
std::string Tls::dir_;
Pkey Tls::ca_key_;
Cert Tls::ca_;

TEST_F(Tls, AMissingCertificateFileIsNamedWithTheSystemReason) {
  Tls_settings s = settings();
  s.cert = dir_ + "/nonexistent.pem";
  std::string error;
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_EQ(error, "cannot read the TLS certificate '" + s.cert + "': No such file or directory");
}

TEST_F(Tls, AFileThatIsNotACertificateIsNamed) {
  Tls_settings s = settings();
  s.cert = dir_ + "/garbage.pem";
  std::string error;
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_EQ(error.rfind("cannot use the TLS certificate '" + s.cert + "': ", 0), 0u) << error;
}

TEST_F(Tls, AKeyOfAnotherCertificateIsRefusedNamingBothFiles) {
  Tls_settings s = settings();
  s.key = dir_ + "/other.key";
  std::string error;
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_NE(error.find("'" + s.key + "'"), std::string::npos) << error;
  EXPECT_NE(error.find("'" + s.cert + "'"), std::string::npos) << error;
}

TEST_F(Tls, AMissingCaFileAndAnUnknownCipherAreRefused) {
  Tls_settings s = settings();
  s.ca = dir_ + "/nonexistent-ca.pem";
  std::string error;
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_EQ(error, "cannot read the TLS CA file '" + s.ca + "': No such file or directory");
  s = settings();
  s.cipher = "NO-SUCH-CIPHER";
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_EQ(error, "the TLS cipher list 'NO-SUCH-CIPHER' selects no cipher");
}

TEST_F(Tls, ACertificateFileHoldingTheKeyIsEnough) {
  Tls_settings s;
  s.cert = dir_ + "/server-both.pem";
  std::string error;
  auto ctx = Tls_context::create(s, &error);
  ASSERT_NE(ctx, nullptr) << error;
  EXPECT_FALSE(ctx->verifies_clients());
}

TEST_F(Tls, AVerifiedClientCertificateFillsThePeer) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  EXPECT_TRUE(ctx->verifies_clients());
  Pair p = make_pair("client.pem");
  auto server = ctx->accept(p.server_fd.get(), "");
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
  Peer peer;
  server->describe(peer);
  EXPECT_TRUE(peer.tls);
  EXPECT_TRUE(peer.confidential());
  EXPECT_TRUE(peer.cert_verified);
  EXPECT_EQ(peer.cert_subject, "/C=FI/O=Example/CN=alice");
  EXPECT_EQ(peer.cert_issuer, "/C=FI/O=Example/CN=Test CA");
  EXPECT_EQ(peer.cert_cn, "alice");
  EXPECT_EQ(peer.tls_cipher, SSL_get_cipher_name(p.client.get()));
  EXPECT_FALSE(peer.tls_cipher.empty());
}

TEST_F(Tls, AnUntrustedClientCertificateCompletesTheHandshakeButIsNotVerified) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  Pair p = make_pair("rogue.pem");
  auto server = ctx->accept(p.server_fd.get(), "");
  ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
  Peer peer;
  server->describe(peer);
  EXPECT_TRUE(peer.tls);
  EXPECT_FALSE(peer.cert_verified);
  EXPECT_EQ(peer.cert_subject, "");  // names of an unverified certificate are not handed out
  EXPECT_EQ(peer.cert_cn, "");
}

TEST_F(Tls, NoClientCertificateAndNoCaConfigured) {
  std::string error;
  for (bool with_ca : {true, false}) {
    auto ctx = Tls_context::create(settings(with_ca), &error);
    ASSERT_NE(ctx, nullptr) << error;
    Pair p = make_pair(with_ca ? nullptr : "client.pem");  // without a CA, none is even asked for
    auto server = ctx->accept(p.server_fd.get(), "");
    ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
    Peer peer;
    server->describe(peer);
    EXPECT_TRUE(peer.tls);
    EXPECT_FALSE(peer.cert_verified);
    EXPECT_EQ(peer.cert_subject, "");
  }
}

TEST_F(Tls, BytesReadBeforeDetectionAreReplayedToTheHandshake) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  Pair p = make_pair("client.pem");
  ASSERT_EQ(SSL_do_handshake(p.client.get()), -1);  // sends the ClientHello
  char first[7];
  ASSERT_EQ(::recv(p.server_fd.get(), first, sizeof first, 0), ssize_t(sizeof first));
  EXPECT_EQ(static_cast<unsigned char>(first[0]), 0x16);
  auto server = ctx->accept(p.server_fd.get(), std::string_view(first, sizeof first));
  ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
}

TEST_F(Tls, DataBothWaysWithPartialWritesBufferedInputAndCloseNotify) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(connect(&c));
  Pair &p = c.p;
  Tls_conn *server = c.server.get();

  /* Client -> server: one record, read in small pieces: the rest stays buffered in OpenSSL,
     where epoll cannot see it. */
  ASSERT_EQ(SSL_write(p.client.get(), "hello, tablesocket", 18), 18);
  char buf[8];
  size_t got = 0;
  ASSERT_EQ(server->read(buf, 5, &got), Tls_status::done);
  EXPECT_EQ(std::string(buf, got), "hello");
  EXPECT_TRUE(server->has_buffered_input());
  std::string rest;
  while (server->has_buffered_input() && server->read(buf, sizeof buf, &got) == Tls_status::done)
    rest.append(buf, got);
  EXPECT_EQ(rest, ", tablesocket");
  EXPECT_EQ(server->read(buf, sizeof buf, &got), Tls_status::want_read);

  /* Server -> client: 1 MiB through a socket buffer far smaller: partial writes, retried from the
     same bytes in a buffer that moves, while the client reads. */
  std::string out(1 << 20, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = char(i * 131 % 251);
  std::string pending = out, in;
  bool saw_want_write = false, saw_partial = false;
  auto rbuf = std::make_unique<char[]>(65536);
  for (int rounds = 0; (!pending.empty() || in.size() < out.size()) && rounds < 100000; ++rounds) {
    if (!pending.empty()) {
      std::string moved = pending;  // a different address every time
      size_t put = 0;
      Tls_status st = server->write(moved.data(), moved.size(), &put);
      if (st == Tls_status::done) {
        saw_partial |= put < moved.size();
        pending.erase(0, put);
      } else {
        ASSERT_EQ(st, Tls_status::want_write) << server->error_text();
        saw_want_write = true;
      }
    }
    if (!saw_want_write) continue;  // the client reads only once the socket buffer was full
    int n = SSL_read(p.client.get(), rbuf.get(), 65536);
    if (n > 0) in.append(rbuf.get(), size_t(n));
    else ERR_clear_error();
  }
  EXPECT_TRUE(saw_partial);
  EXPECT_TRUE(saw_want_write);
  EXPECT_EQ(in.size(), out.size());
  EXPECT_TRUE(in == out);

  /* close_notify from the client is the end of input. */
  SSL_shutdown(p.client.get());
  EXPECT_EQ(server->read(buf, sizeof buf, &got), Tls_status::eof);
  server->shutdown();  // answers with its own close_notify, without waiting
  EXPECT_EQ(SSL_read(p.client.get(), buf, sizeof buf), 0);
  EXPECT_EQ(SSL_get_error(p.client.get(), 0), SSL_ERROR_ZERO_RETURN);
  ERR_clear_error();
}

TEST_F(Tls, PartOfARecordIsARecordUnderWay) {
  /* The idle timer of a connection trickling a request in (tablesocket_idle_timeout) must see a
     record of which only part has come, though read() has nothing to return yet. */
  Connected c;
  ASSERT_NO_FATAL_FAILURE(connect(&c));
  Pair &p = c.p;
  Tls_conn *server = c.server.get();
  char buf[64];
  size_t got = 0;
  EXPECT_EQ(server->read(buf, sizeof buf, &got), Tls_status::want_read);
  EXPECT_FALSE(server->mid_record());  // idle: nothing under way
  /* The client's records go to memory, and the test sends what it likes of them. */
  BIO *mem = BIO_new(BIO_s_mem());
  SSL_set0_wbio(p.client.get(), mem);
  ASSERT_EQ(SSL_write(p.client.get(), "get k\r\n", 7), 7);
  char *rec = nullptr;
  const long len = BIO_get_mem_data(mem, &rec);
  ASSERT_GT(len, 6);
  const std::string record(rec, size_t(len));
  size_t sent = 0;
  for (size_t upto : {size_t(1), size_t(5), record.size() - 1}) {
    ASSERT_EQ(::write(p.client_fd.get(), record.data() + sent, upto - sent), ssize_t(upto - sent));
    sent = upto;
    EXPECT_EQ(server->read(buf, sizeof buf, &got), Tls_status::want_read) << upto;
    EXPECT_TRUE(server->mid_record()) << "after " << upto << " of " << record.size() << " bytes";
  }
  ASSERT_EQ(::write(p.client_fd.get(), record.data() + sent, record.size() - sent), ssize_t(record.size() - sent));
  ASSERT_EQ(server->read(buf, sizeof buf, &got), Tls_status::done);
  EXPECT_EQ(std::string(buf, got), "get k\r\n");
  EXPECT_EQ(server->read(buf, sizeof buf, &got), Tls_status::want_read);
  EXPECT_FALSE(server->mid_record());  // the whole record came and was read
}

TEST_F(Tls, GarbageAfterTheHandshakeByteIsAnErrorWithAReason) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  Pair p = make_pair(nullptr);
  const char garbage[] = "\x16\x03\x01\xff\xffthis is not a ClientHello at all";
  auto server = ctx->accept(p.server_fd.get(), std::string_view(garbage, sizeof garbage - 1));
  Tls_status st = server->handshake();
  EXPECT_EQ(st, Tls_status::error);
  EXPECT_FALSE(server->error_text().empty());
  server->shutdown();  // after a failure: nothing is sent, nothing breaks
}

TEST_F(Tls, APeerThatClosesMidHandshakeIsAnError) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  Pair p = make_pair(nullptr);
  ASSERT_EQ(SSL_do_handshake(p.client.get()), -1);
  char hello[16384];
  ssize_t n = ::recv(p.server_fd.get(), hello, sizeof hello, 0);
  ASSERT_GT(n, 10);
  p.client.reset();
  p.client_fd.reset();
  auto server = ctx->accept(p.server_fd.get(), std::string_view(hello, size_t(n) / 2));
  EXPECT_EQ(server->handshake(), Tls_status::error);
}

TEST_F(Tls, ARevokedClientCertificateIsNotVerifiedWithACrl) {
  std::string error;
  Tls_settings s = settings();
  s.crl = dir_ + "/crl.pem";
  auto ctx = Tls_context::create(s, &error);
  ASSERT_NE(ctx, nullptr) << error;
  struct Case { const char *cert; bool verified; const char *cn; };
  for (const Case &c : {Case{"client.pem", true, "alice"}, Case{"revoked.pem", false, ""}}) {
    SCOPED_TRACE(c.cert);
    Pair p = make_pair(c.cert);
    auto server = ctx->accept(p.server_fd.get(), "");
    ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
    Peer peer;
    server->describe(peer);
    EXPECT_EQ(peer.cert_verified, c.verified);
    EXPECT_EQ(peer.cert_cn, c.cn);
  }
  /* Without the CRL the same certificate verifies: the CRL is what refused it. */
  auto plain = Tls_context::create(settings(), &error);
  ASSERT_NE(plain, nullptr) << error;
  Pair p = make_pair("revoked.pem");
  auto server = plain->accept(p.server_fd.get(), "");
  ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
  Peer peer;
  server->describe(peer);
  EXPECT_TRUE(peer.cert_verified);
}

TEST_F(Tls, ACrlThatCannotBeReadOrHoldsNoCrlIsNamed) {
  std::string error;
  Tls_settings s = settings();
  s.crl = dir_ + "/nope.pem";
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_NE(error.find("cannot read the TLS CRL file '" + s.crl + "'"), std::string::npos) << error;
  s.crl = dir_ + "/garbage.pem";
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_NE(error.find("cannot load the TLS CRL '" + s.crl + "'"), std::string::npos) << error;
  s.crl.clear();
  s.crlpath = dir_ + "/nodir";
  EXPECT_EQ(Tls_context::create(s, &error), nullptr);
  EXPECT_NE(error.find("cannot read the TLS CRL directory"), std::string::npos) << error;
}

TEST_F(Tls, VersionsLimitTheProtocol) {
  std::string error;
  struct Case { unsigned versions; int client_max; bool ok; int negotiated; };
  const Case cases[] = {
      {0, 0, true, TLS1_3_VERSION},
      {0, TLS1_2_VERSION, true, TLS1_2_VERSION},
      {Tls_settings::kTls13, TLS1_2_VERSION, false, 0},  // tls_version=TLSv1.3: a 1.2-only client fails
      {Tls_settings::kTls13, 0, true, TLS1_3_VERSION},
      {Tls_settings::kTls12, 0, true, TLS1_2_VERSION},   // tls_version=TLSv1.2: 1.3 is not offered
      {Tls_settings::kTls12 | 2 | 1, TLS1_1_VERSION, false, 0},  // 1.0 and 1.1 are never offered
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.versions) + " " + std::to_string(c.client_max));
    Tls_settings s = settings();
    s.versions = c.versions;
    auto ctx = Tls_context::create(s, &error);
    ASSERT_NE(ctx, nullptr) << error;
    Pair p = make_pair(nullptr, c.client_max);
    if (c.client_max == TLS1_1_VERSION) SSL_set_security_level(p.client.get(), 0);
    auto server = ctx->accept(p.server_fd.get(), "");
    Tls_status st = handshake(p, *server);
    if (c.ok) {
      ASSERT_EQ(st, Tls_status::done) << server->error_text();
      EXPECT_EQ(SSL_version(p.client.get()), c.negotiated);
    } else {
      EXPECT_NE(st, Tls_status::done);
    }
  }
}

TEST_F(Tls, AConnectionKeepsItsContextAfterTheContextIsReplaced) {
  std::string error;
  auto ctx = Tls_context::create(settings(), &error);
  ASSERT_NE(ctx, nullptr) << error;
  Pair p = make_pair("client.pem");
  auto server = ctx->accept(p.server_fd.get(), "");
  ctx.reset();  // a reload dropped the server's reference: the connection holds its own
  ASSERT_EQ(handshake(p, *server), Tls_status::done) << server->error_text();
  ASSERT_EQ(SSL_write(p.client.get(), "ping", 4), 4);
  char buf[8];
  size_t got = 0;
  ASSERT_EQ(server->read(buf, sizeof buf, &got), Tls_status::done);
  EXPECT_EQ(std::string(buf, got), "ping");
}

}  // namespace
}  // namespace tablesocket
