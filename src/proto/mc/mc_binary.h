/* memcached's binary protocol: request parser and response encoder, matching memcached 1.6.18
   (proto_bin.c, protocol_binary.h). memcached deprecated it in 1.6 but still serves it, and many
   clients speak nothing else or default to it: Dalli 3.0 (Ruby), memjs (Node), spymemcached and
   xmemcached's binary mode (Java), libmemcached's BINARY_PROTOCOL (pylibmc binary=True, PHP
   Memcached::OPT_BINARY_PROTOCOL). Pure code: no sockets, no server headers, no allocation.

   A request: a 24-byte header (magic 0x80, opcode, key length (2), extras length, data type,
   vbucket (2), total body length (4), opaque (4), cas (8); big-endian), then extras, key, value.
   A response: magic 0x81, the request's opcode, key length, extras length, data type 0, status (2),
   body length, the request's opaque, a cas; then extras, key, value (an error: its message).

   How a connection uses the parser (the same states as the text parser's):
       r = parse_binary_request(in.data(), in.size(), limits, &rq)
       need_more -> read more (a complete request is at most 24 + 255 + 250 + max_value_size bytes)
       complete  -> in.consume(r.consumed); execute rq
       error     -> encode_bin_error(out, rq.opcode, rq.opaque, r.error); in.consume(r.consumed);
                    then discard r.swallow more bytes as they arrive (the request's unread body)
       fatal     -> if (r.reply) encode_bin_error(...); close the connection

   What memcached does and so do we: an over-long key (> 250) or a request whose shape does not
   fit its opcode (extras/key/body lengths) is answered "Invalid arguments" and the connection
   closed; a key + extras longer than the body is "Unknown command" and closed; a magic other than
   0x80 closes at once, silently; an unknown opcode is "Unknown command" and its body discarded; a
   value larger than the item size limit is "Too large." and its value discarded.
   Deliberate differences: memcached discards the body of an unknown command counted from after
   its extras and key (so it also eats bytes of the next request): we discard exactly its body.
   STAT, TOUCH and GAT must carry no value (memcached ignores one and then parses it as the next
   request): "Invalid arguments" and closed, like the other shape errors. */
#ifndef TABLESOCKET_PROTO_MC_BINARY_H
#define TABLESOCKET_PROTO_MC_BINARY_H

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/byte_buffer.h"
#include "proto/mc/mc_protocol.h"

namespace tablesocket {
namespace mc {

constexpr unsigned char kBinaryResponseMagic = 0x81;
constexpr size_t kMaxSaslBody = 1024;  // a SASL mechanism's data (PLAIN: authzid, user, password)

/* Opcodes memcached 1.6.18 serves. The quiet variants ('q') answer only errors (and get hits). */
enum class Bin_op : uint8_t {
  get = 0x00, set = 0x01, add = 0x02, replace = 0x03, del = 0x04, incr = 0x05, decr = 0x06,
  quit = 0x07, flush = 0x08, getq = 0x09, noop = 0x0a, version = 0x0b, getk = 0x0c, getkq = 0x0d,
  append = 0x0e, prepend = 0x0f, stat = 0x10, setq = 0x11, addq = 0x12, replaceq = 0x13,
  delq = 0x14, incrq = 0x15, decrq = 0x16, quitq = 0x17, flushq = 0x18, appendq = 0x19,
  prependq = 0x1a, touch = 0x1c, gat = 0x1d, gatq = 0x1e, sasl_list_mechs = 0x20,
  sasl_auth = 0x21, sasl_step = 0x22, gatk = 0x23, gatkq = 0x24,
};

enum class Bin_status : uint16_t {
  ok = 0x0000,
  key_enoent = 0x0001,       // "Not found"
  key_eexists = 0x0002,      // "Data exists for key."
  e2big = 0x0003,            // "Too large."
  einval = 0x0004,           // "Invalid arguments"
  not_stored = 0x0005,       // "Not stored."
  delta_badval = 0x0006,     // "Non-numeric server-side value for incr or decr"
  auth_error = 0x0020,       // "Auth failure."
  auth_continue = 0x0021,
  unknown_command = 0x0081,  // "Unknown command"
  enomem = 0x0082,           // "Out of memory"
  not_supported = 0x0083,
  internal_error = 0x0084,
  ebusy = 0x0085,
  etmpfail = 0x0086,
};

/* memcached's message for a status (write_bin_error's texts; our own for the statuses memcached
   never sends with its default text). */
const char *bin_status_text(Bin_status st);

struct Bin_request {
  uint8_t opcode = 0;            // as sent: every response echoes it (GETQ's hit says GETQ)
  Bin_op op = Bin_op::noop;      // the opcode with its quiet variant mapped to the plain one
  bool quiet = false;            // a 'q' opcode: successes are not answered (get hits are)
  unsigned char opaque[4] = {};  // echoed as sent
  uint64_t cas = 0;
  std::string_view key;          // up to 250 bytes, any bytes
  std::string_view value;        // set/add/replace/append/prepend, SASL data
  uint32_t flags = 0;            // set/add/replace
  uint32_t exptime = 0;          // set/add/replace, incr/decr, touch/gat, flush (as sent)
  bool has_exptime = false;      // flush: the extras were sent
  uint64_t delta = 0, initial = 0;  // incr/decr
  /* incr/decr: an expiration of 0xffffffff means "do not create a missing counter". */
  bool creates() const { return exptime != 0xffffffffu; }
};

struct Bin_parse_result {
  Mc_parse_status status = Mc_parse_status::need_more;
  size_t consumed = 0;   // complete/error: bytes to drop from the front of the buffer
  uint64_t swallow = 0;  // error: bytes to discard after `consumed`, as they arrive
  Bin_status error = Bin_status::ok;  // error/fatal: the status to answer with
  bool reply = true;     // fatal: false when memcached closes without a word (a bad magic)
};

/* Parses one request from buf[0, len); never reads past len. On complete (and on errors that
   answer a request), out->opcode/opaque are set; the views point into buf. Uses
   limits.max_value_size for values. */
Bin_parse_result parse_binary_request(const char *buf, size_t len, const Mc_limits &limits, Bin_request *out);

/* A response: header, then extras, key, value. */
void encode_bin_response(Byte_buffer &out, const Bin_request &rq, Bin_status st, uint64_t cas,
                         std::string_view extras, std::string_view key, std::string_view value);
/* An error response whose body is message, or bin_status_text(st) when message is empty. */
void encode_bin_error(Byte_buffer &out, const Bin_request &rq, Bin_status st, std::string_view message = {});
/* The 4-byte big-endian extras of a get/touch hit (the item's client flags). */
inline void put_be32(char *p, uint32_t v) {
  p[0] = char(v >> 24); p[1] = char(v >> 16); p[2] = char(v >> 8); p[3] = char(v);
}
inline void put_be64(char *p, uint64_t v) {
  put_be32(p, uint32_t(v >> 32));
  put_be32(p + 4, uint32_t(v));
}

}  // namespace mc
}  // namespace tablesocket
#endif
