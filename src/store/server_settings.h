/* Server settings tablesocket falls back on, read from server internals (store/ only) and handed
   out as plain values. */
#ifndef TABLESOCKET_STORE_SERVER_SETTINGS_H
#define TABLESOCKET_STORE_SERVER_SETTINGS_H

#include <cstdint>
#include <string>

namespace tablesocket {

/* The server's own TLS settings (ssl_cert, ssl_key, ssl_ca, ssl_capath, ssl_cipher, ssl_crl,
   ssl_crlpath) exactly as it was given them; all empty when the server itself does not use TLS (no
   ssl_* option, or --skip-ssl). Paths are relative to the server's working directory, its
   datadir. versions: the server's tls_version bits (set whether or not it uses TLS). */
struct Server_tls_defaults {
  std::string cert, key, ca, capath, cipher, crl, crlpath;
  unsigned versions = 0;
};
Server_tls_defaults server_tls_defaults();

/* Changes whenever the server reloads its own TLS context (FLUSH SSL); 0 while it has none. */
uintptr_t server_tls_generation();

/* The server's own SQL TCP port (0 with skip-networking) and unix socket path, which tablesocket's
   listeners must not take. */
unsigned server_sql_port();
std::string server_sql_socket();

/* Whether the server knows a character set of this name (as tablesocket_character_set). */
bool known_character_set(const char *name);

}  // namespace tablesocket
#endif
