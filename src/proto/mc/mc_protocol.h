/* memcached text protocol (classic ASCII commands + meta commands): request parser and reply
   encoder, matching memcached 1.6 (checked byte for byte against memcached 1.6.18).
   Pure code: no sockets, no server headers, no allocation sized by a number the client sent.
   References: memcached doc/protocol.txt, proto_text.c (process_*_command, _meta_flag_preparse),
   util.c (safe_strto*), base64.c.

   How a connection uses the parser:

     loop:
       r = parse_request(in.data(), in.size(), limits, &rq)
       need_more -> read more bytes (the caller never has to buffer more than
                    max_line (or max_multiget_line) + max_value_size + 2 bytes for one request)
       complete  -> in.consume(r.consumed); execute rq; reply unless rq.noreply says otherwise
       error     -> if (r.reply) send r.error + "\r\n"; in.consume(r.consumed);
                    then discard r.swallow more bytes of the stream (they may not have arrived yet)
       fatal     -> if (r.reply) send r.error + "\r\n"; close the connection

   Differences from memcached that are deliberate (everything else aims to be byte-exact):
     - Numbers are parsed strictly: ASCII digits only (a leading '-' only where the value is
       signed), no overflow. memcached uses strtol/strtoul and so also accepts "+5", "5\tjunk",
       and silently truncates 64-bit values to 32 bits ("set k 4294967297 0 1" stores flags 1,
       "set k 0 0 4294967297" reads a 1-byte value). Those lines get the error memcached gives
       for a non-number instead.
     - A line longer than max_line is fatal even when its LF arrived in the same read (memcached
       only checks the length while no LF is buffered, so the outcome depends on packet timing).
     - Errors memcached detects only while executing (an over-long opaque in ma after the delta
       was applied, ...) are reported before anything runs.
     - "lru_crawler metadump <classes|all|hash>" lists the keys (memcached-tool's dump and keys use
       it); every item is in slab class 1. The other admin commands (slabs, lru, the other
       lru_crawler commands, watch, cache_memlimit, extstore, refresh_certs) are unknown commands
       ("ERROR"); "shutdown" answers like memcached without -A. */
#ifndef TABLESOCKET_PROTO_MC_PROTOCOL_H
#define TABLESOCKET_PROTO_MC_PROTOCOL_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"

namespace tablesocket {
namespace mc {

constexpr size_t kMaxKeyLength = 250;        // KEY_MAX_LENGTH
constexpr size_t kMaxOpaqueLength = 32;      // MFLAG_MAX_OPAQUE_LENGTH, counting the 'O'
constexpr size_t kMaxMetaFlags = 17;         // "mg <key>" + 17 flags = 20 tokens incl. terminal
constexpr size_t kMaxStatsArgs = 4;
constexpr uint32_t kMaxDataLength = 2147483645;  // INT_MAX - 2: larger is a format error

enum class Mc_command : uint8_t {
  get, gets, gat, gats,                          // multi-key retrieval ("bget" parses as get)
  set, add, replace, append, prepend, cas,       // classic storage, with a data block
  del,                                           // delete <key> [0] [noreply]
  incr, decr, touch,
  flush_all, version, stats, verbosity, quit,
  metadump,                                      // lru_crawler metadump <classes|all|hash>
  mg, ms, md, ma, mn, me,                        // meta
};

/* What a storage request asks for; set for the classic storage commands and for ms. */
enum class Mc_store_op : uint8_t { set, add, replace, append, prepend, cas };

/* One meta flag as sent: its character and the token text after it (may be empty). */
struct Mc_meta_flag {
  char flag = 0;
  std::string_view arg;
};

/* Typed view of the meta flags (what memcached's _meta_flag_preparse extracts). */
struct Mc_meta {
  bool base64_key = false;    // b: the key was sent base64-encoded (Mc_request::key() is decoded)
  bool return_value = false;  // v
  bool no_update = false;     // u: no LRU bump / access-time update
  bool invalidate = false;    // I: ms with C: mark stale if older; md: mark stale instead of deleting
  bool has_ttl = false;       // T<ttl>: mg/ma: update TTL; ms: exptime; md with I: new TTL
  int32_t ttl = 0;
  bool vivify = false;        // N<ttl>: autovivify on miss (mg, ma)
  int32_t vivify_ttl = 0;
  bool has_recache = false;   // R<ttl>: mg: win token if remaining TTL is below this
  int32_t recache_ttl = 0;
  bool has_client_flags = false;  // F<flags> (ms)
  uint32_t client_flags = 0;
  bool has_compare_cas = false;   // C<cas> (ms, md, ma)
  uint64_t compare_cas = 0;
  char mode = 0;              // M<c>: ms: E A P R S; ma: I + D -  (0 when absent)
  uint64_t initial = 0;       // J<n>: ma autovivify value
  uint64_t delta = 1;         // D<n>: ma delta
  uint64_t seen[2] = {0, 0};  // bit c set when flag c (1..126) was sent
  bool has(char c) const {
    const unsigned u = static_cast<unsigned char>(c);
    return u < 128 && ((seen[u >> 6] >> (u & 63)) & 1);
  }
};

/* A parsed request. Views point into the caller's buffer (which parse_request never modifies),
   except key() of a base64 ('b') meta key, which points into key_buf. Reuse one Mc_request per
   connection: keys keeps its capacity (bounded by Mc_limits::max_keys and by the keys actually
   sent). Copying is fine; key() stays valid in the copy. */
struct Mc_request {
  Mc_command command = Mc_command::version;

  /* noreply: classic "noreply" as the last token, or the meta q flag. The parser only records
     it; which replies a caller then suppresses follows memcached:
       classic commands: every reply, including errors found after the line parsed;
       mg: EN only;  ms: HD only;  md: HD only;  ma: HD only for an existing item (an
       autovivified one still answers);  errors from meta commands are always sent. */
  bool noreply = false;

  /* Single-key commands (storage, delete, incr/decr, touch, meta except mn). */
  std::string_view raw_key;    // as sent (base64 text when meta.base64_key)
  std::string_view key() const {
    return meta.base64_key ? std::string_view(key_buf, key_len) : raw_key;
  }

  /* get/gets/gat/gats: every key in order (gat/gats may have none: memcached answers "END"). */
  std::vector<std::string_view> keys;

  /* Storage (classic and ms). */
  Mc_store_op store_op = Mc_store_op::set;
  uint32_t client_flags = 0;   // classic <flags>; ms: F
  int32_t exptime = 0;         // classic <exptime>, touch/gat/gats <exptime>; ms: T
  uint32_t bytes = 0;          // declared length, <= Mc_limits::max_value_size
  uint64_t cas_unique = 0;     // cas <cas unique>; ms: C (store_op becomes cas for set/replace)
  std::string_view data;       // the data block, without its CRLF

  uint64_t delta = 0;          // incr/decr <value>; ma: D (default 1)
  bool incr = true;            // incr vs decr, and ma's mode

  bool has_delay = false;      // flush_all [delay]
  int32_t delay = 0;
  uint32_t verbosity = 0;
  bool dump_class_1 = false;   // metadump: class 1 (where every item is) among the classes asked for

  std::string_view stats_args[kMaxStatsArgs];  // "stats <args...>"; the first kMaxStatsArgs
  uint32_t nstats_args = 0;                    // all args (may exceed kMaxStatsArgs)

  /* Meta: every flag in request order (return flags are written in this order), and the
     typed view. */
  Mc_meta_flag meta_flags[kMaxMetaFlags];
  uint32_t nmeta_flags = 0;
  Mc_meta meta;

  char key_buf[kMaxKeyLength];  // decoded base64 key
  uint8_t key_len = 0;
};

struct Mc_limits {
  /* Bytes of a command line before its LF (a CR before the LF counts). memcached closes the
     connection once more than 2048 bytes are buffered without an LF. */
  size_t max_line = 2048;
  /* The same for lines that start (after at most 100 spaces) with "get ", "gets ", "gat " or
     "gats ": memcached grows its buffer for get and gets without bound (and answers a gat line
     that arrived in one read); we stop here (fatal, like any over-long line). */
  size_t max_multiget_line = 1 << 20;
  /* Keys in one get/gets/gat/gats; more is an error (memcached has no such limit). */
  uint32_t max_keys = 10000;
  /* Largest data block; a larger <bytes> is refused without waiting for the data. memcached's
     own limit is its item size (-I, 1 MiB) minus the item header, so a few dozen bytes less. */
  uint32_t max_value_size = 1 << 20;
  /* Reject keys with bytes <= 0x20 or 0x7f. memcached documents that keys have no control
     characters but does not check it (it accepts "a\tb" and "a\x01b"), so this is off. */
  bool strict_keys = false;
};

enum class Mc_parse_status : uint8_t {
  complete,   // *out holds a request; consumed = its line and data block
  need_more,  // nothing wrong so far; call again with more bytes (nothing was consumed)
  error,      // a bad request: reply r.error (when r.reply), consume, swallow, continue
  fatal,      // close the connection (after sending r.error when r.reply)
};

struct Mc_parse_result {
  Mc_parse_status status = Mc_parse_status::need_more;
  /* complete/error: bytes to drop from the front of the buffer (always within len).
     fatal: unspecified. */
  size_t consumed = 0;
  /* error only: bytes to discard after `consumed`, as they arrive (memcached's conn_swallow):
     the data block of a storage request refused before its data was read (too large, or an
     ms whose flags are bad). Blind: memcached does not check that they end in CRLF. memcached
     writes the error reply only after the swallow completes. */
  uint64_t swallow = 0;
  /* error/fatal: the complete reply line without CRLF, e.g. "ERROR",
     "CLIENT_ERROR bad command line format", "SERVER_ERROR object too large for cache".
     A static string. */
  const char *error = nullptr;
  /* error/fatal: false when memcached sends nothing: a classic command whose last token was
     "noreply" (errors found before the token count was checked still reply), or a fatal close
     (over-long line, an HTTP request line) where memcached just closes. */
  bool reply = true;
};

/* Parses one request from buf[0, len). Never modifies buf (it is char* for symmetry with the
   other parsers) and never reads past len. On complete, *out is filled and views point into buf
   (and out->key_buf). On error, *out is partially filled and unspecified. */
Mc_parse_result parse_request(char *buf, size_t len, const Mc_limits &limits, Mc_request *out);

/* Bytes to drop from a buffer of `avail` bytes while swallowing; updates *remaining. */
inline size_t swallow_step(uint64_t *remaining, size_t avail) {
  const size_t n = *remaining < avail ? static_cast<size_t>(*remaining) : avail;
  *remaining -= n;
  return n;
}

/* ---- base64 exactly as memcached's base64.c ----
   decode: characters outside the alphabet are skipped; the number of alphabet characters
   (including '=') must be a non-zero multiple of 4; decoding stops after the first block that
   holds padding; more than two '=' in that block fails. Returns the decoded length, 0 on
   failure or when out_cap is too small (it needs count/4*3 bytes). */
size_t base64_decode(const char *src, size_t len, char *out, size_t out_cap);
/* Standard base64 with '=' padding; out needs base64_encoded_length(len) bytes. */
size_t base64_encoded_length(size_t len);
size_t base64_encode(const char *src, size_t len, char *out);
void append_base64(Byte_buffer &out, const char *src, size_t len);

/* ---- memcached's binary protocol (mc_binary.h) ----
   memcached picks the protocol from a connection's first byte: 0x80 (a binary request's magic)
   makes it a binary connection for its life. */
constexpr unsigned char kBinaryRequestMagic = 0x80;
constexpr size_t kBinaryHeaderLength = 24;
inline bool starts_binary_request(const char *buf, size_t len) {
  return len > 0 && static_cast<unsigned char>(buf[0]) == kBinaryRequestMagic;
}

/* ---- Encoder: appends exactly memcached's reply bytes to out. ---- */

enum class Mc_reply : uint8_t {
  stored,      // STORED
  not_stored,  // NOT_STORED
  exists,      // EXISTS
  not_found,   // NOT_FOUND
  deleted,     // DELETED
  touched,     // TOUCHED
  ok,          // OK
  end,         // END
  error,       // ERROR
  reset,       // RESET
};
void encode_reply(Byte_buffer &out, Mc_reply r);
/* line + "\r\n" (e.g. Mc_parse_result::error, or any preformatted reply line). */
void encode_line(Byte_buffer &out, std::string_view line);
void encode_client_error(Byte_buffer &out, std::string_view msg);  // "CLIENT_ERROR <msg>\r\n"
void encode_server_error(Byte_buffer &out, std::string_view msg);  // "SERVER_ERROR <msg>\r\n"
/* "VALUE <key> <flags> <bytes>[ <cas>]\r\n"; the caller appends the data and "\r\n". */
void encode_value_header(Byte_buffer &out, std::string_view key, uint32_t flags, size_t bytes,
                         bool with_cas, uint64_t cas);
/* The whole VALUE entry: header, data, "\r\n" (the caller ends the list with Mc_reply::end). */
void encode_value(Byte_buffer &out, std::string_view key, uint32_t flags, std::string_view data,
                  bool with_cas, uint64_t cas);
void encode_number(Byte_buffer &out, uint64_t v);  // incr/decr result: "<v>\r\n"
void encode_stat(Byte_buffer &out, std::string_view name, std::string_view value);  // "STAT n v\r\n"
void encode_stat(Byte_buffer &out, std::string_view name, uint64_t value);
void encode_version(Byte_buffer &out, std::string_view version);  // "VERSION <v>\r\n"

/* Meta replies. */
enum class Mc_meta_code : uint8_t {
  hd,  // HD  success without a value
  en,  // EN  mg miss
  ns,  // NS  not stored
  ex,  // EX  cas mismatch
  nf,  // NF  not found
  mn,  // MN  reply to mn
};

/* What the store knows about the item a meta command touched, for its return flags. */
struct Mc_item_info {
  uint64_t cas = 0;            // c
  uint32_t client_flags = 0;   // f
  uint32_t size = 0;           // s (value bytes)
  int64_t ttl = -1;            // t: remaining seconds, -1 when the item never expires
  uint32_t last_access = 0;    // l: seconds since the last access
  bool fetched = false;        // h: fetched before
  bool key_binary = false;     // the item's key came base64-encoded (k prints it base64 + " b")
  bool won = false;            // W (mg): this client won the recache token
  bool stale = false;          // X (mg)
  bool token_sent = false;     // Z (mg): a win token was already handed out
};

/* The return flags memcached appends for rq, in request order (each as " <flag><value>"):
     mg hit (item != null): s t c f l h O k, then Z X W as set in *item
     mg miss:               O k
     ms:                    O k c     (c is item->cas, or 0 without an item, as memcached prints)
     md:                    O k
     ma hit:                c t O k
     ma miss:               O k
   k prints the key (base64 and " b" for a binary key: item->key_binary on an mg hit, else the
   request's b flag); O echoes the opaque token as sent. Other commands append nothing. */
void append_meta_flags(Byte_buffer &out, const Mc_request &rq, const Mc_item_info *item);

/* "<code><return flags>\r\n" */
void encode_meta(Byte_buffer &out, Mc_meta_code code, const Mc_request &rq,
                 const Mc_item_info *item);
/* "VA <data.size()><return flags>\r\n<data>\r\n" (mg/ma with v) */
void encode_meta_value(Byte_buffer &out, const Mc_request &rq, const Mc_item_info *item,
                       std::string_view data);
/* The pieces, for a caller that streams the value: "VA <bytes>" ... "\r\n" */
void encode_meta_value_header(Byte_buffer &out, size_t bytes);
void encode_meta_code(Byte_buffer &out, Mc_meta_code code);  // "HD" etc., no CRLF
void end_meta_line(Byte_buffer &out);                        // "\r\n"

/* me (debug) reply: "ME <key> exp=<exp> la=<la> cas=<cas> fetch=<yes|no> cls=<cls> size=<size>\r\n"
   (a binary key is printed base64, without " b"); a miss is encode_meta(out, en, ...). */
struct Mc_debug_info {
  int64_t exp = -1;        // memcached prints now - exptime, i.e. MINUS the seconds left
                           // ("exp=-100" = 100 s to live), and -1 for "never expires"
  uint64_t last_access = 0;
  uint64_t cas = 0;
  bool fetched = false;
  uint32_t slab_class = 0;
  uint64_t total_size = 0;
};
void encode_meta_debug(Byte_buffer &out, std::string_view key, bool key_binary,
                       const Mc_debug_info &info);

}  // namespace mc
}  // namespace tablesocket
#endif
