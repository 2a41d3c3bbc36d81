#include "store/server_incl.h"

#include "store/server_settings.h"

#ifndef HAVE_OPENSSL
/* mysqld.h declares it only for the server's own build (HAVE_OPENSSL is a compile flag there);
   Debian's mariadbd has OpenSSL and exports it. */
extern struct st_VioSSLFd *ssl_acceptor_fd;
#endif

namespace tablesocket {

/* The ssl_* variables and tls_version are read-only: the strings never change once the server runs. */
Server_tls_defaults server_tls_defaults() {
  Server_tls_defaults d;
  d.versions = unsigned(tls_version & (VIO_TLSv1_2 | VIO_TLSv1_3));
  if (!opt_use_ssl) return d;  // --skip-ssl, or no ssl option at all: the server offers no TLS
  auto str = [](const char *v) { return std::string(v ? v : ""); };
  d.cert = str(opt_ssl_cert);
  d.key = str(opt_ssl_key);
  d.ca = str(opt_ssl_ca);
  d.capath = str(opt_ssl_capath);
  d.cipher = str(opt_ssl_cipher);
  d.crl = str(opt_ssl_crl);
  d.crlpath = str(opt_ssl_crlpath);
  return d;
}

uintptr_t server_tls_generation() {
  mysql_rwlock_rdlock(&LOCK_ssl_refresh);  // reinit_ssl() swaps ssl_acceptor_fd under it
  uintptr_t g = reinterpret_cast<uintptr_t>(ssl_acceptor_fd);
  mysql_rwlock_unlock(&LOCK_ssl_refresh);
  return g;
}

unsigned server_sql_port() { return opt_disable_networking ? 0 : mysqld_port; }

std::string server_sql_socket() { return mysqld_unix_port ? mysqld_unix_port : ""; }

bool known_character_set(const char *name) {
  return name && get_charset_by_csname(name, MY_CS_PRIMARY, MYF(0)) != nullptr;
}

}  // namespace tablesocket
