// Wire protocols of ts-loadgen: request encoders, incremental reply parsers and answer verification.
// Pure code (no sockets), unit-tested in tests/protocol_test.cc.
//
// Reply parsers share one contract: parse_*(buf, len, &reply) looks at the bytes received so far and
//   - returns {need_more, 0} when buf does not yet hold a whole reply (nothing is modified), or
//   - returns {complete, n} with the reply's n bytes (n <= len) decoded into *reply, whose pointers
//     point into buf and stay valid until those bytes are consumed, or
//   - returns {protocol_error, 0, message} when the bytes cannot be a reply: the stream is lost.
// Only the HandlerSocket parser writes to buf (it unescapes a complete line in place).
#ifndef TS_LOADGEN_PROTOCOL_H
#define TS_LOADGEN_PROTOCOL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "buffer.h"

namespace loadgen {

enum class Proto : uint8_t { hs, mc_text, mc_meta, resp, sql };
enum class Op : uint8_t { get, update, insert, set };
enum class Expect : uint8_t { none, hs_user, kv_user };

const char *proto_name(Proto p);
const char *op_name(Op o);
const char *expect_name(Expect e);

enum class Parse_status : uint8_t { complete, need_more, protocol_error };

struct Parse_result {
  Parse_status status = Parse_status::need_more;
  size_t consumed = 0;
  const char *error = nullptr;  // static message for protocol_error
};

// A decoded token. ptr == nullptr means SQL NULL (HandlerSocket's lone 0x00).
struct Field {
  const char *ptr = nullptr;
  size_t len = 0;
  bool is_null() const { return ptr == nullptr; }
  std::string_view view() const { return ptr ? std::string_view(ptr, len) : std::string_view(); }
};

// ---- HandlerSocket -------------------------------------------------------------------------------

// One reply line: "<code>\t<n>[\t<token>...]\n".
//   success of a read:   code 0, n = number of columns, tokens = the row values (0 tokens: no row)
//   success of a write:  code 0, n = 1, tokens = [modified count] for U/D, [] or [insert id] for +
//   error:               code != 0, n = 1, tokens = [message] (usually)
struct Hs_reply {
  static constexpr uint32_t kMaxTokens = 32;
  uint32_t code = 0;
  uint32_t n = 0;
  uint32_t ntokens = 0;            // all tokens after n (may exceed kMaxTokens)
  Field tokens[kMaxTokens];        // the first kMaxTokens of them, unescaped
};

// Unescapes the complete line in place, so buf must be writable.
Parse_result parse_hs_reply(char *buf, size_t len, Hs_reply *out);

// Appends HandlerSocket's escaped form of s (bytes 0x00-0x0f become 0x01, byte + 0x40).
void hs_escape(Buffer &out, std::string_view s);

// ---- memcached, text and meta ------------------------------------------------------------------

struct Kv_reply {
  enum Kind : uint8_t {
    value,        // mc-text VALUE, mc-meta VA, RESP bulk string
    miss,         // mc-text END, mc-meta EN, RESP $-1 / _ (null)
    stored,       // mc-text STORED, mc-meta HD, RESP +OK (any simple string)
    not_stored,   // mc-text NOT_STORED/EXISTS/NOT_FOUND, mc-meta NS/EX/NF
    error,        // ERROR, CLIENT_ERROR, SERVER_ERROR, RESP -ERR
    integer,      // RESP :n
  };
  Kind kind = miss;
  Field data;   // value bytes; for error/not_stored/stored: the line (without CRLF)
  Field key;    // mc-text VALUE: the key echoed by the server
  uint32_t flags = 0;  // mc-text VALUE flags
  int64_t integer_value = 0;
};

constexpr size_t kMaxLine = 4096;  // longest reply header line accepted before giving up

Parse_result parse_mc_text_reply(const char *buf, size_t len, Kv_reply *out);
Parse_result parse_mc_meta_reply(const char *buf, size_t len, Kv_reply *out);
Parse_result parse_resp_reply(const char *buf, size_t len, Kv_reply *out);

// ---- The data model shared with the data loader ---------------------------------------------------
// Row for key k: user_name = "user<k>", user_email = "user<k>@example.com",
// created = "2010-01-01 00:00:00". The kv value is the three joined with '|'.
// variant != 0 (only written by --vary-writes) replaces the time of day of `created` with
// (variant % 86400) seconds, so repeated writes change the row.

struct Row {
  char name[32];
  size_t name_len;
  char email[48];
  size_t email_len;
  char created[20];
  size_t created_len;
};
void make_row(uint64_t k, uint64_t variant, Row *row);
// "user<k>|user<k>@example.com|<created>" into out (at least 128 bytes); returns its length.
size_t make_kv_value(uint64_t k, uint64_t variant, char *out);

// ---- Requests --------------------------------------------------------------------------------------

struct Request_spec {
  Proto proto = Proto::hs;
  Op op = Op::get;
  std::string key_prefix;
};

// Appends one request for key k to out. variant as for make_row (0 = canonical row).
void encode_request(const Request_spec &spec, uint64_t k, uint64_t variant, Buffer &out);

// SQL (--proto sql): the statement prepared for op, with one `?` per value. Identifiers are quoted
// with backticks. get: SELECT <columns> FROM <db>.<table> WHERE <key> = ?;
// update: UPDATE ... SET c1 = ?, ... WHERE <key> = ?; insert: INSERT INTO ... (<key>, c1, ...) VALUES (?, ...).
std::string sql_statement(Op op, std::string_view db, std::string_view table, std::string_view key_column,
                          std::string_view columns);
// `name` with backticks, inner backticks doubled.
std::string sql_quote_ident(std::string_view name);

// HandlerSocket connection set-up lines.
std::string hs_open_index_line(std::string_view db, std::string_view table, std::string_view index,
                               std::string_view columns);
std::string hs_auth_line(std::string_view secret);

// ---- Verification ----------------------------------------------------------------------------------

enum class Outcome : uint8_t {
  ok,        // success and (if checked) the expected answer
  miss,      // read of a missing key, with --expect none (with an --expect model it is a mismatch)
  error,     // the server reported an error (or refused the write)
  mismatch,  // a success reply whose content is not the expected one
};

struct Check_spec {
  Proto proto = Proto::hs;
  Op op = Op::get;
  Expect expect = Expect::none;
  std::string key_prefix;
};

// Checks the reply to the request for key k. SQL answers are checked with check_hs (spec.proto
// Proto::sql): the SQL engine presents them as HandlerSocket replies (code 0 and the row's
// columns, no tokens for no row; an update's affected-row count; code 1 and the message for an
// error). On anything but ok, writes a one-line human-readable
// explanation into why (if non-null; at most why_cap bytes, NUL-terminated).
Outcome check_hs(const Check_spec &spec, const Hs_reply &r, uint64_t k, char *why, size_t why_cap);
Outcome check_kv(const Check_spec &spec, const Kv_reply &r, uint64_t k, char *why, size_t why_cap);

// Printable form of bytes (C-style escapes, truncated to max bytes) for diagnostics.
std::string printable(std::string_view s, size_t max = 120);

}  // namespace loadgen
#endif
