/* Server settings tablesocket falls back on, read from server internals (store/ only) and handed
   out as plain values. */
#ifndef TABLESOCKET_STORE_SERVER_SETTINGS_H
#define TABLESOCKET_STORE_SERVER_SETTINGS_H

#include <string>

namespace tablesocket {

/* The server's own TLS settings (ssl_cert, ssl_key, ssl_ca, ssl_capath, ssl_cipher) exactly as it
   was given them; all empty when the server itself does not use TLS (no ssl_* option, or
   --skip-ssl). Paths are relative to the server's working directory, its datadir. */
struct Server_tls_defaults {
  std::string cert, key, ca, capath, cipher;
};
Server_tls_defaults server_tls_defaults();

}  // namespace tablesocket
#endif
