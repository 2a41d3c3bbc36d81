/* HandlerSocket wire protocol: request parser and response encoder.
   Pure code: no sockets, no server headers, no allocation sized by a number the client sent.
   Reference: plugin/handler_socket/docs-en/protocol.en.txt and hstcpsvr_worker.cpp in MariaDB. */
#ifndef TABLESOCKET_PROTO_HS_PROTOCOL_H
#define TABLESOCKET_PROTO_HS_PROTOCOL_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"
#include "common/query.h"

namespace tablesocket {
namespace hs {

/* A decoded protocol value (see common/query.h): ptr == nullptr means SQL NULL (a lone 0x00 on
   the wire); an empty string has a non-null ptr and len 0. Points into the caller's input buffer. */
using Value = tablesocket::Datum;

enum class Command : uint8_t {
  open_index,  // P <indexid> <db> <table> <index> <columns> [<fcolumns>]
  auth,        // A <type> <args...>
  exec,        // <indexid> <op> <vlen> <v1..vn> [LIM] [IN] [FILTER...] [MOD]
};

/* The op token of an exec request. */
enum class Exec_op : uint8_t {
  eq,            // =
  gt,            // >
  ge,            // >=
  lt,            // <
  le,            // <=
  insert,        // +
  last_prefix,   // L   tablesocket: rows whose first vlen key parts equal v1..vn, newest (highest) first
  upsert,        // +=  tablesocket: insert, or update the row with the same unique key (write issue)
  merge_desc,    // M-  tablesocket: newest N rows over the IN list's groups (k-way merge)
  merge_asc,     // M+  tablesocket: oldest N rows over the IN list's groups
};

/* Filters (F = skip, W = stop) and modify ops (U + - D) use the shared types of common/query.h. */
using tablesocket::Compare_op;
using tablesocket::Filter;
using tablesocket::Filter_type;
using tablesocket::Modify_op;

struct Open_index_request {
  uint32_t index_id = 0;
  std::string_view db, table, index;  // index: name, "PRIMARY", a decimal number, or empty (= PRIMARY)
  std::string_view columns;           // comma-separated, may be empty
  std::string_view filter_columns;    // comma-separated, may be empty (also when absent)
};

struct Exec_request {
  uint32_t index_id = 0;
  Exec_op op = Exec_op::eq;
  const Value *keys = nullptr;  // vlen values (for insert/upsert: column values)
  uint32_t nkeys = 0;
  uint32_t limit = 1;   // as sent; HandlerSocket treats 0 as 1, the parser does not change it
  uint32_t offset = 0;
  bool has_limit = false;
  bool has_in = false;
  uint32_t in_column = 0;        // key part the IN list replaces (not range-checked here)
  const Value *in_values = nullptr;
  uint32_t nin_values = 0;       // >= 1 when has_in (unless in_from_index)
  bool in_from_index = false;    // `@ <icol> ^ <id2> <vlen2> <k..> <limit2>`: IN values come from
  uint32_t in_index_id = 0;      //   the first column of index id2's rows equal to in_keys,
  const Value *in_keys = nullptr;  // at most in_limit of them
  uint32_t nin_keys = 0;
  uint32_t in_limit = 0;
  const Filter *filters = nullptr;
  uint32_t nfilters = 0;
  Modify_op mod = Modify_op::none;
  bool mod_returns_rows = false;  // '?' suffix: reply with pre-image rows instead of a count
  const Value *mod_values = nullptr;
  uint32_t nmod_values = 0;
};

struct Auth_request {
  std::string_view type;        // "1" for HandlerSocket's shared secret
  const Value *args = nullptr;  // remaining tokens, unescaped
  uint32_t nargs = 0;
};

struct Request {
  Command command = Command::exec;
  Open_index_request open;
  Exec_request exec;
  Auth_request auth;
};

struct Limits {
  size_t max_line = 1 << 20;     // bytes in one request line, excluding the LF
  uint32_t max_tokens = 10000;   // TAB-separated tokens in one line
};

enum class Parse_status : uint8_t {
  complete,   // a request was parsed; *consumed = bytes of the line including LF
  need_more,  // no LF yet and the bytes so far are within max_line; nothing was modified
  error,      // a malformed line; *consumed = bytes to drop (the whole line, through the LF), the
              // connection can continue with the next line. error_message is the wire message.
  fatal,      // the line exceeds max_line (or tokens exceed max_tokens before an LF is seen):
              // reply with the error and close; *consumed is unspecified.
};

/* Per-connection (or per-worker) reusable storage for parsed values; capacity only grows up to
   what real input needed (bounded by Limits::max_tokens). Request pointers stay valid until the next
   parse_request call with the same scratch. */
struct Parse_scratch {
  std::vector<Value> values;
  std::vector<Filter> filters;
};

struct Parse_result {
  Parse_status status;
  size_t consumed = 0;
  uint32_t error_code = 2;             // HandlerSocket error code for the reply (2 = client error)
  const char *error_message = nullptr; // static string, e.g. "cmd", "op", "syntax", "toolong"
};

/* Parses one request line from buf[0, len). The line (up to its LF) is unescaped in place, so buf
   must be writable and stay alive while *out is used. A CR right before the LF is ignored.
   Error messages follow HandlerSocket where it has one ("cmd", "op", "klen", "invalueslen",
   "filtertype", "filterfld", "modop", "authtype"); new ones are short lowercase words.
   On error, out->command is set when the first token named a command (P, A, or a number), so a
   dispatcher can answer "unauth" first as HandlerSocket does; other fields of *out are unspecified. */
Parse_result parse_request(char *buf, size_t len, const Limits &limits, Parse_scratch &scratch,
                           Request *out);

/* ---- Encoder: appends exactly HandlerSocket's response bytes to out. ---- */

/* "<code>\t1\n" when msg is empty, else "<code>\t1\t<msg>\n". msg is written as-is (not escaped). */
void encode_status(Byte_buffer &out, uint32_t code, std::string_view msg);
/* "<code>\t1\t<value>\n" */
void encode_number(Byte_buffer &out, uint32_t code, uint64_t value);
/* Starts a row reply "0\t<ncols>"; returns the offset to pass to cancel_rows(). */
size_t begin_rows(Byte_buffer &out, size_t ncols);
/* Appends "\t" + escaped value, or "\t\0" for NULL (ptr == nullptr). */
void append_value(Byte_buffer &out, const char *ptr, size_t len);
void end_rows(Byte_buffer &out);                 // appends "\n"
void cancel_rows(Byte_buffer &out, size_t mark); // truncates back to mark

/* Escaping used on the wire: bytes 0x00-0x0f become 0x01, byte+0x40. */
void escape_into(Byte_buffer &out, const char *p, size_t n);
/* Unescapes in place; returns the new length, or kBadEscape (the bytes then undefined) when a
   0x01 ends the value or is followed by a byte below 0x40. */
constexpr size_t kBadEscape = SIZE_MAX;
size_t unescape_in_place(char *p, size_t n);

}  // namespace hs
}  // namespace tablesocket
#endif
