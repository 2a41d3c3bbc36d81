/* What MariaDB stores for an account in mysql.global_priv.Priv (a JSON object), reduced to what a
   login needs. Pure: parsed from the JSON text, no server headers, unit-tested. */
#ifndef TABLESOCKET_COMMON_ACCOUNT_RECORD_H
#define TABLESOCKET_COMMON_ACCOUNT_RECORD_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tablesocket {

struct Auth_method {
  std::string plugin;       // "mysql_native_password", "ed25519", "unix_socket", ...
  std::string auth_string;  // for mysql_native_password: "" or "*" + 40 hex digits
};

struct Account_record {
  /* Every way the account may log in (IDENTIFIED VIA a OR b ...): the top-level plugin, or the
     "auth_or" list when present. */
  std::vector<Auth_method> methods;
  bool account_locked = false;
  int64_t password_last_changed = -1;  // unix time; 0 = PASSWORD EXPIRE; -1 = not recorded
  int64_t password_lifetime = -1;      // days; -1 = the server default; 0 = never expires
  int ssl_type = 0;                    // 0 none, 1 REQUIRE SSL, 2 REQUIRE X509, 3 REQUIRE SUBJECT/ISSUER/CIPHER
  std::string ssl_cipher, x509_issuer, x509_subject;
  int64_t max_user_connections = 0;    // 0 = no limit of its own
  int64_t max_questions = 0;           // MAX_QUERIES_PER_HOUR; 0 = none
  int64_t max_updates = 0;             // MAX_UPDATES_PER_HOUR; 0 = none
  int64_t max_connections = 0;         // MAX_CONNECTIONS_PER_HOUR; 0 = none
  std::string default_role;
};

/* Parses a Priv value. False (and *error set) when it is not a JSON object of the expected form. */
bool parse_account_record(std::string_view json, Account_record *out, std::string *error);

/* Exactly 2*n hex digits (either case) → n bytes. False (out undefined) for anything else. */
bool hex_decode(std::string_view hex, unsigned char *out, size_t n);

/* Equality of two secrets in time that depends only on their lengths, not on where they differ. */
bool equal_constant_time(std::string_view a, std::string_view b);

/* "*" + 40 hex digits (either case) → the 20-byte SHA1(SHA1(password)). False if not that form. */
bool native_hash_stage2(std::string_view auth_string, unsigned char out[20]);

/* Splits "user@host", "'user'@'host'", "`user`@`host`" or "user" (host "%") into its parts.
   False when the text is not one of those forms. */
bool split_account_name(std::string_view text, std::string *user, std::string *host);

}  // namespace tablesocket
#endif
