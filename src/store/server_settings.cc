#include "store/server_incl.h"

#include "store/server_settings.h"

namespace tablesocket {

Server_tls_defaults server_tls_defaults() {
  Server_tls_defaults d;
  if (!opt_use_ssl) return d;  // --skip-ssl, or no ssl option at all: the server offers no TLS
  auto str = [](const char *v) { return std::string(v ? v : ""); };
  d.cert = str(opt_ssl_cert);
  d.key = str(opt_ssl_key);
  d.ca = str(opt_ssl_ca);
  d.capath = str(opt_ssl_capath);
  d.cipher = str(opt_ssl_cipher);
  return d;
}

}  // namespace tablesocket
