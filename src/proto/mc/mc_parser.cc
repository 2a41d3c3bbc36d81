/* memcached request parser: classic text commands and meta commands.

   Follows memcached 1.6's process_command_ascii step by step, because the order of its checks
   decides which error a bad line gets and whether "noreply" silences it:
     - the line ends at the first LF; one CR before it is dropped; a NUL ends it early (memcached
       handles the line as a C string);
     - tokens are separated by spaces only (a TAB is part of a token); memcached tokenizes at most
       23 tokens (MAX_TOKENS 24 with the terminal one), so "ntokens" below is min(tokens, 23) + 1
       just like memcached's, and only get-family commands look further;
     - per command: token-count check ("ERROR", never silenced) -> noreply from the last token
       -> key length -> numbers -> sizes. */
#include "proto/mc/mc_protocol.h"

#include <cstring>

namespace tablesocket {
namespace mc {

namespace {

constexpr size_t kMaxTokens = 24;  // memcached MAX_TOKENS, including the terminal token
constexpr size_t kMaxMetaTokens = 20;  // MFLAG_MAX_OPT_LENGTH

const char kErr[] = "ERROR";
const char kBadFormat[] = "CLIENT_ERROR bad command line format";
const char kBadChunk[] = "CLIENT_ERROR bad data chunk";
const char kTooLarge[] = "SERVER_ERROR object too large for cache";
const char kBadExptime[] = "CLIENT_ERROR invalid exptime argument";
const char kBadDelta[] = "CLIENT_ERROR invalid numeric delta argument";
const char kDeleteUsage[] = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
const char kLineTooLong[] = "CLIENT_ERROR line too long";
/* A get line longer than the multiget limit (memcached has none): said before the close, so the
   client learns why rather than see its connection drop. */
const char kGetLineTooLong[] = "SERVER_ERROR get line too long (tablesocket_max_request_size)";
const char kTooManyKeys[] = "SERVER_ERROR out of memory writing get response (more keys than tablesocket_max_tokens)";
const char kBadClass[] = "BADCLASS invalid class id";
const char kNoClasses[] = "NOTSTARTED no items to crawl";
const char kShutdown[] = "ERROR: shutdown not enabled";
const char kMemlimitSmall[] = "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m";
const char kMemlimitUnit[] = "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes";
const char kMemlimitInnodb[] =
    "MEMLIMIT_ADJUST_FAILED items are rows of InnoDB tables: their memory is innodb_buffer_pool_size";
const char kOptsTooLongMg[] = "CLIENT_ERROR options flags are too long";
const char kOptsTooLong[] = "CLIENT_ERROR options flags too long";
const char kDuplicateFlag[] = "CLIENT_ERROR duplicate flag";
const char kInvalidFlag[] = "CLIENT_ERROR invalid flag";
const char kInvalidOrDuplicate[] = "CLIENT_ERROR invalid or duplicate flag";
const char kBadToken[] = "CLIENT_ERROR bad token in command line format";
const char kDecodeKey[] = "CLIENT_ERROR error decoding key";
const char kMLength[] = "CLIENT_ERROR incorrect length for M token";
const char kBadInitial[] = "CLIENT_ERROR invalid numeric initial value";
const char kBadMetaDelta[] = "CLIENT_ERROR invalid numeric delta value";
const char kOpaqueTooLong[] = "CLIENT_ERROR opaque token too long";
const char kMsMode[] = "CLIENT_ERROR invalid mode for ms M token";
const char kMaMode[] = "CLIENT_ERROR invalid mode for ma M token";

struct Token {
  const char *p;
  size_t n;
  std::string_view view() const { return {p, n}; }
  bool is(const char *s) const {
    const size_t m = std::strlen(s);
    return n == m && std::memcmp(p, s, m) == 0;
  }
};

Mc_parse_result make_error(size_t consumed, const char *msg, bool reply = true, uint64_t swallow = 0) {
  Mc_parse_result r;
  r.status = Mc_parse_status::error;
  r.consumed = consumed;
  r.error = msg;
  r.reply = reply;
  r.swallow = swallow;
  return r;
}

Mc_parse_result make_fatal(const char *msg, bool reply) {
  Mc_parse_result r;
  r.status = Mc_parse_status::fatal;
  r.error = msg;
  r.reply = reply;
  return r;
}

Mc_parse_result make_complete(size_t consumed) {
  Mc_parse_result r;
  r.status = Mc_parse_status::complete;
  r.consumed = consumed;
  return r;
}

Mc_parse_result need_more() { return Mc_parse_result(); }

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

/* ---- strict numbers ---- */

bool parse_u64(const char *p, size_t n, uint64_t *out) {
  if (n == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!is_digit(p[i])) return false;
    const uint64_t d = static_cast<uint64_t>(p[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool parse_u32(const char *p, size_t n, uint32_t *out) {
  uint64_t v;
  if (!parse_u64(p, n, &v) || v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool parse_i32(const char *p, size_t n, int32_t *out) {
  bool neg = false;
  if (n > 0 && p[0] == '-') {
    neg = true;
    ++p;
    --n;
  }
  uint64_t v;
  if (!parse_u64(p, n, &v)) return false;
  if (neg ? v > 2147483648ull : v > 2147483647ull) return false;
  *out = neg ? static_cast<int32_t>(-static_cast<int64_t>(v)) : static_cast<int32_t>(v);
  return true;
}

inline bool parse_u64(const Token &t, uint64_t *out) { return parse_u64(t.p, t.n, out); }
/* Digits, however many, after a '+' (or a '-' where signed): what strtoul/strtol take. */
bool is_number(const Token &t, bool is_signed) {
  size_t i = t.n > 1 && (t.p[0] == '+' || (is_signed && t.p[0] == '-')) ? 1 : 0;
  if (i == t.n) return false;
  for (; i < t.n; ++i)
    if (!is_digit(t.p[i])) return false;
  return true;
}
inline bool parse_u32(const Token &t, uint32_t *out) { return parse_u32(t.p, t.n, out); }
inline bool parse_i32(const Token &t, int32_t *out) { return parse_i32(t.p, t.n, out); }

/* <bytes> of a storage command: memcached rejects negatives and anything above INT_MAX - 2. */
bool parse_data_length(const Token &t, uint32_t *out) {
  uint64_t v;
  if (!parse_u64(t, &v) || v > kMaxDataLength) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

/* ---- keys ---- */

bool key_ok(const Token &t, const Mc_limits &limits) {
  if (t.n > kMaxKeyLength) return false;
  if (limits.strict_keys) {
    for (size_t i = 0; i < t.n; ++i) {
      const unsigned char c = static_cast<unsigned char>(t.p[i]);
      if (c <= 0x20 || c == 0x7f) return false;
    }
  }
  return true;
}

/* ---- tokenizer ---- */

/* Splits [s, e) at spaces like memcached's tokenize_command: at most kMaxTokens - 1 tokens are
   recorded; returns memcached's ntokens (recorded tokens + the terminal one). */
size_t tokenize(const char *s, const char *e, Token *tok) {
  size_t n = 0;
  const char *p = s;
  while (p < e) {
    while (p < e && *p == ' ') ++p;
    if (p == e) break;
    const char *start = p;
    const void *sp = std::memchr(p, ' ', static_cast<size_t>(e - p));
    p = sp ? static_cast<const char *>(sp) : e;
    tok[n].p = start;
    tok[n].n = static_cast<size_t>(p - start);
    if (++n == kMaxTokens - 1) break;
  }
  return n + 1;
}

/* The key list of a get-family line: every space-separated token in [p, e). */
Mc_parse_result collect_keys(const char *p, const char *e, size_t consumed, const Mc_limits &limits,
                             Mc_request *out) {
  std::vector<std::string_view> &keys = out->keys;
  keys.clear();
  while (p < e) {
    while (p < e && *p == ' ') ++p;
    if (p == e) break;
    const char *start = p;
    const void *sp = std::memchr(p, ' ', static_cast<size_t>(e - p));
    p = sp ? static_cast<const char *>(sp) : e;
    const Token t{start, static_cast<size_t>(p - start)};
    if (!key_ok(t, limits)) return make_error(consumed, kBadFormat);
    if (keys.size() >= limits.max_keys) return make_error(consumed, kTooManyKeys);
    try {
      keys.push_back(t.view());
    } catch (...) {
      return make_error(consumed, kTooManyKeys);
    }
  }
  return make_complete(consumed);
}

/* ---- line limits ---- */

enum class Tri : uint8_t { no, yes, maybe };

/* memcached keeps reading a line without LF past 2048 bytes only when it is a multiget: at most
   100 leading spaces, then "get " or "gets ". The multi-key touches "gat " and "gats " are taken
   as long too: memcached answers those when the whole line arrives in one read (up to its 16 KB
   buffer) and closes the connection when it does not, so a client batching touches would lose its
   connection by chance. maybe: the bytes so far are a prefix of one of them. */
Tri multiget_line(const char *p, size_t n) {
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  if (i > 100) return Tri::no;
  if (i == n) return Tri::maybe;
  const char *q = p + i;
  const size_t m = n - i;
  bool maybe = false;
  for (std::string_view cmd : {std::string_view("get "), std::string_view("gets "), std::string_view("gat "),
                               std::string_view("gats ")}) {
    const size_t k = m < cmd.size() ? m : cmd.size();
    if (std::memcmp(q, cmd.data(), k) != 0) continue;
    if (m >= cmd.size()) return Tri::yes;
    maybe = true;
  }
  return maybe ? Tri::maybe : Tri::no;
}

/* ---- classic commands; tok[0] is the command, nt is memcached's ntokens ---- */

inline bool last_is_noreply(const Token *tok, size_t nt) { return tok[nt - 2].is("noreply"); }

Mc_parse_result parse_get(Mc_command cmd, const Token *tok, size_t nt, const char *line_end,
                          size_t consumed, const Mc_limits &limits, Mc_request *out) {
  if (nt < 3) return make_error(consumed, kErr);
  out->command = cmd;
  const char *keys_from = tok[1].p;
  if (cmd == Mc_command::gat || cmd == Mc_command::gats) {
    if (!parse_i32(tok[1], &out->exptime)) return make_error(consumed, kBadExptime);
    keys_from = tok[1].p + tok[1].n;
  }
  return collect_keys(keys_from, line_end, consumed, limits, out);
}

/* set/add/replace/append/prepend/cas <key> <flags> <exptime> <bytes> [<cas>] [noreply] */
Mc_parse_result parse_storage(Mc_store_op op, const Token *tok, size_t nt, const char *buf,
                              size_t len, size_t line_consumed, const Mc_limits &limits,
                              Mc_request *out) {
  const bool is_cas = op == Mc_store_op::cas;
  const size_t want = is_cas ? 7 : 6;
  if (nt != want && nt != want + 1) return make_error(line_consumed, kErr);
  static const Mc_command cmds[] = {Mc_command::set, Mc_command::add, Mc_command::replace,
                                    Mc_command::append, Mc_command::prepend, Mc_command::cas};
  out->command = cmds[static_cast<int>(op)];
  out->store_op = op;
  out->noreply = last_is_noreply(tok, nt);
  const bool reply = !out->noreply;
  if (!key_ok(tok[1], limits)) return make_error(line_consumed, kBadFormat, reply);
  out->raw_key = tok[1].view();
  if (!parse_data_length(tok[4], &out->bytes)) return make_error(line_consumed, kBadFormat, reply);
  if (!parse_u32(tok[2], &out->client_flags) || !parse_i32(tok[3], &out->exptime)) {
    /* Numbers past 32 bits, which memcached cuts down and stores: refused (flags and exptimes
       are 32-bit here, never silently changed), and the data block skipped, so the client gets
       one reply for the command as from memcached. Anything else that is not a number has its
       data block read as a command line, as in memcached. */
    if (is_number(tok[2], false) && is_number(tok[3], true) && out->bytes <= limits.max_value_size)
      return make_error(line_consumed, kBadFormat, reply, uint64_t(out->bytes) + 2);
    return make_error(line_consumed, kBadFormat, reply);
  }
  if (is_cas && !parse_u64(tok[5], &out->cas_unique)) return make_error(line_consumed, kBadFormat, reply);
  if (out->bytes > limits.max_value_size)
    return make_error(line_consumed, kTooLarge, reply, uint64_t(out->bytes) + 2);

  const size_t total = line_consumed + out->bytes + 2;
  if (len < total) return need_more();
  const char *data = buf + line_consumed;
  if (data[out->bytes] != '\r' || data[out->bytes + 1] != '\n')
    return make_error(total, kBadChunk, reply);
  out->data = std::string_view(data, out->bytes);
  return make_complete(total);
}

Mc_parse_result parse_delete(const Token *tok, size_t nt, size_t consumed, const Mc_limits &limits,
                             Mc_request *out) {
  if (nt < 3 || nt > 5) return make_error(consumed, kErr);
  out->command = Mc_command::del;
  if (nt > 3) {
    const bool hold_is_zero = tok[2].is("0");
    out->noreply = last_is_noreply(tok, nt);
    const bool valid = (nt == 4 && (hold_is_zero || out->noreply)) ||
                       (nt == 5 && hold_is_zero && out->noreply);
    if (!valid) return make_error(consumed, kDeleteUsage, !out->noreply);
  }
  if (!key_ok(tok[1], limits)) return make_error(consumed, kBadFormat, !out->noreply);
  out->raw_key = tok[1].view();
  return make_complete(consumed);
}

Mc_parse_result parse_arith(bool incr, const Token *tok, size_t nt, size_t consumed,
                            const Mc_limits &limits, Mc_request *out) {
  if (nt != 4 && nt != 5) return make_error(consumed, kErr);
  out->command = incr ? Mc_command::incr : Mc_command::decr;
  out->incr = incr;
  out->noreply = last_is_noreply(tok, nt);
  if (!key_ok(tok[1], limits)) return make_error(consumed, kBadFormat, !out->noreply);
  out->raw_key = tok[1].view();
  if (!parse_u64(tok[2], &out->delta)) return make_error(consumed, kBadDelta, !out->noreply);
  return make_complete(consumed);
}

Mc_parse_result parse_touch(const Token *tok, size_t nt, size_t consumed, const Mc_limits &limits,
                            Mc_request *out) {
  if (nt != 4 && nt != 5) return make_error(consumed, kErr);
  out->command = Mc_command::touch;
  out->noreply = last_is_noreply(tok, nt);
  if (!key_ok(tok[1], limits)) return make_error(consumed, kBadFormat, !out->noreply);
  out->raw_key = tok[1].view();
  if (!parse_i32(tok[2], &out->exptime)) return make_error(consumed, kBadExptime, !out->noreply);
  return make_complete(consumed);
}

Mc_parse_result parse_flush_all(const Token *tok, size_t nt, size_t consumed, Mc_request *out) {
  if (nt < 2 || nt > 4) return make_error(consumed, kErr);
  out->command = Mc_command::flush_all;
  out->noreply = last_is_noreply(tok, nt);
  if (nt != (out->noreply ? 3u : 2u)) {
    if (!parse_i32(tok[1], &out->delay)) return make_error(consumed, kBadExptime, !out->noreply);
    out->has_delay = true;
  }
  return make_complete(consumed);
}

Mc_parse_result parse_verbosity(const Token *tok, size_t nt, size_t consumed, Mc_request *out) {
  if (nt != 3 && nt != 4) return make_error(consumed, kErr);
  out->command = Mc_command::verbosity;
  out->noreply = last_is_noreply(tok, nt);
  if (!parse_u32(tok[1], &out->verbosity)) return make_error(consumed, kBadFormat, !out->noreply);
  return make_complete(consumed);
}

/* "cache_memlimit <megabytes> [noreply]": memcached's answers to a bad value; a good one cannot be
   applied (the items are InnoDB rows, cached in its buffer pool), which memcached's own
   MEMLIMIT_ADJUST_FAILED says. Every answer is silenced by noreply, as in memcached (an unknown
   command's ERROR there would put a client that sent noreply one reply out of step). */
Mc_parse_result parse_cache_memlimit(const Token *tok, size_t nt, size_t consumed, Mc_request *out) {
  if (nt != 3 && nt != 4) return make_error(consumed, kErr);
  out->noreply = last_is_noreply(tok, nt);
  const bool reply = !out->noreply;
  uint32_t mb;
  if (!parse_u32(tok[1], &mb)) return make_error(consumed, kErr, reply);
  if (mb < 8) return make_error(consumed, kMemlimitSmall, reply);
  if (mb > 1000000000) return make_error(consumed, kMemlimitUnit, reply);
  return make_error(consumed, kMemlimitInnodb, reply);
}

/* "lru_crawler metadump <all|hash|id,id,...>" (memcached's classes are 1..63); other lru_crawler
   commands are unknown ("ERROR"), as is a metadump with more or fewer arguments. */
Mc_parse_result parse_lru_crawler(const Token *tok, size_t nt, size_t consumed, Mc_request *out) {
  if (nt != 4 || !tok[1].is("metadump")) return make_error(consumed, kErr);
  out->command = Mc_command::metadump;
  const std::string_view arg = tok[2].view();
  if (arg == "all" || arg == "hash") {
    out->dump_class_1 = true;
    return make_complete(consumed);
  }
  /* memcached's strtok_r on ",": empty elements are skipped; any other element must be a class. */
  size_t i = 0, ids = 0;
  while (i < arg.size()) {
    size_t comma = arg.find(',', i);
    if (comma == std::string_view::npos) comma = arg.size();
    const std::string_view id = arg.substr(i, comma - i);
    i = comma + 1;
    if (id.empty()) continue;
    const std::string_view digits = id[0] == '+' ? id.substr(1) : id;  // strtoul takes a '+'
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
      return make_error(consumed, kBadClass);
    uint32_t v = 0;
    for (char ch : digits) v = std::min<uint32_t>(v * 10 + uint32_t(ch - '0'), 1000);
    if (v < 1 || v > 63) return make_error(consumed, kBadClass);
    if (v == 1) out->dump_class_1 = true;
    ++ids;
  }
  if (ids == 0) return make_error(consumed, kNoClasses);
  return make_complete(consumed);
}

Mc_parse_result parse_stats(const Token *tok, size_t nt, const char *line_end, size_t consumed,
                            Mc_request *out) {
  out->command = Mc_command::stats;
  /* Arguments beyond memcached's 23 tokens are counted too (memcached ignores them). */
  uint32_t n = 0;
  for (size_t i = 1; i + 1 < nt; ++i) {
    if (n < kMaxStatsArgs) out->stats_args[n] = tok[i].view();
    ++n;
  }
  if (nt == kMaxTokens) {
    const char *p = tok[nt - 2].p + tok[nt - 2].n;
    while (p < line_end) {
      while (p < line_end && *p == ' ') ++p;
      if (p == line_end) break;
      const void *sp = std::memchr(p, ' ', static_cast<size_t>(line_end - p));
      p = sp ? static_cast<const char *>(sp) : line_end;
      ++n;
    }
  }
  out->nstats_args = n;
  return make_complete(consumed);
}

/* ---- meta commands ---- */

enum class Preparse { ok, failed };

/* memcached's _meta_flag_preparse over tok[start, nt - 1): unknown and duplicate flags stop at
   once; other bad flags are remembered (the last message wins; F keeps the previous one) and
   reported after the whole list was read. */
Preparse meta_preparse(const Token *tok, size_t start, size_t nt, Mc_request *out, const char **err) {
  Mc_meta &m = out->meta;
  const char *errstr = kBadFormat;
  bool has_error = false;
  out->nmeta_flags = 0;
  for (size_t i = start; i + 1 < nt; ++i) {
    const Token &t = tok[i];
    const unsigned char o = static_cast<unsigned char>(t.p[0]);
    if (o >= 127 || m.has(static_cast<char>(o))) {
      *err = kDuplicateFlag;
      return Preparse::failed;
    }
    m.seen[o >> 6] |= uint64_t(1) << (o & 63);
    const char *a = t.p + 1;
    const size_t an = t.n - 1;
    switch (o) {
      case 'b': {
        m.base64_key = true;
        const size_t k = base64_decode(out->raw_key.data(), out->raw_key.size(), out->key_buf,
                                       sizeof out->key_buf);
        out->key_len = static_cast<uint8_t>(k);
        if (k == 0) {
          errstr = kDecodeKey;
          has_error = true;
        }
        break;
      }
      case 'N':
        m.vivify = true;
        if (!parse_i32(a, an, &m.vivify_ttl)) {
          errstr = kBadToken;
          has_error = true;
        }
        break;
      case 'T':
        if (!parse_i32(a, an, &m.ttl)) {
          errstr = kBadToken;
          has_error = true;
        } else {
          m.has_ttl = true;
        }
        break;
      case 'R':
        if (!parse_i32(a, an, &m.recache_ttl)) {
          errstr = kBadToken;
          has_error = true;
        } else {
          m.has_recache = true;
        }
        break;
      case 'l': case 'O': case 'P': case 'L': case 'k': case 's': case 't': case 'c': case 'f':
      case 'h':
        break;
      case 'v': m.return_value = true; break;
      case 'u': m.no_update = true; break;
      case 'q': out->noreply = true; break;
      case 'I': m.invalidate = true; break;
      case 'F':
        if (!parse_u32(a, an, &m.client_flags))
          has_error = true;  // memcached leaves the message as it was
        else
          m.has_client_flags = true;
        break;
      case 'C':
        if (!parse_u64(a, an, &m.compare_cas)) {
          errstr = kBadToken;
          has_error = true;
        } else {
          m.has_compare_cas = true;
        }
        break;
      case 'M':
        if (t.n != 2) {
          errstr = kMLength;
          has_error = true;
        } else {
          m.mode = t.p[1];
        }
        break;
      case 'J':
        if (!parse_u64(a, an, &m.initial)) {
          errstr = kBadInitial;
          has_error = true;
        }
        break;
      case 'D':
        if (!parse_u64(a, an, &m.delta)) {
          errstr = kBadMetaDelta;
          has_error = true;
        }
        break;
      default:
        *err = kInvalidFlag;
        return Preparse::failed;
    }
    out->meta_flags[out->nmeta_flags].flag = static_cast<char>(o);
    out->meta_flags[out->nmeta_flags].arg = std::string_view(a, an);
    ++out->nmeta_flags;
  }
  if (has_error) {
    *err = errstr;
    return Preparse::failed;
  }
  return Preparse::ok;
}

bool opaque_too_long(const Mc_request &rq) {
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i)
    if (rq.meta_flags[i].flag == 'O' && rq.meta_flags[i].arg.size() + 1 > kMaxOpaqueLength)
      return true;
  return false;
}

/* mg / md / ma <key> <flags>* */
Mc_parse_result parse_meta_keyed(Mc_command cmd, const Token *tok, size_t nt, size_t consumed,
                                 const Mc_limits &limits, Mc_request *out) {
  if (nt < 3) return make_error(consumed, kErr);
  out->command = cmd;
  if (!key_ok(tok[1], limits)) return make_error(consumed, kBadFormat);
  out->raw_key = tok[1].view();
  if (nt > kMaxMetaTokens)
    return make_error(consumed, cmd == Mc_command::mg ? kOptsTooLongMg : kOptsTooLong);
  const char *err = nullptr;
  if (meta_preparse(tok, 2, nt, out, &err) != Preparse::ok)
    return make_error(consumed, cmd == Mc_command::mg ? err : kInvalidOrDuplicate);
  if (cmd == Mc_command::ma) {
    switch (out->meta.mode) {
      case 0: case 'I': case '+': out->incr = true; break;
      case 'D': case '-': out->incr = false; break;
      default: return make_error(consumed, kMaMode);
    }
    out->delta = out->meta.delta;
  }
  if (opaque_too_long(*out)) return make_error(consumed, kOpaqueTooLong);
  if (out->meta.has_ttl) out->exptime = out->meta.ttl;
  return make_complete(consumed);
}

/* ms <key> <datalen> <flags>*\r\n<data>\r\n */
Mc_parse_result parse_ms(const Token *tok, size_t nt, const char *buf, size_t len,
                         size_t line_consumed, const Mc_limits &limits, Mc_request *out) {
  if (nt < 3) return make_error(line_consumed, kErr);
  out->command = Mc_command::ms;
  if (!key_ok(tok[1], limits)) return make_error(line_consumed, kBadFormat);
  out->raw_key = tok[1].view();
  if (nt == 3) return make_error(line_consumed, kBadFormat);
  if (nt > kMaxMetaTokens) return make_error(line_consumed, kOptsTooLong);
  if (!parse_data_length(tok[2], &out->bytes)) return make_error(line_consumed, kBadFormat);

  /* From here on memcached swallows the data block after an error. */
  const uint64_t swallow = uint64_t(out->bytes) + 2;
  const char *err = nullptr;
  if (meta_preparse(tok, 3, nt, out, &err) != Preparse::ok)
    return make_error(line_consumed, err, true, swallow);
  const Mc_meta &m = out->meta;
  switch (m.mode) {
    case 0: case 'S': out->store_op = Mc_store_op::set; break;
    case 'E': out->store_op = Mc_store_op::add; break;
    case 'A': out->store_op = Mc_store_op::append; break;
    case 'P': out->store_op = Mc_store_op::prepend; break;
    case 'R': out->store_op = Mc_store_op::replace; break;
    default: return make_error(line_consumed, kMsMode, true, swallow);
  }
  if (opaque_too_long(*out)) return make_error(line_consumed, kOpaqueTooLong, true, swallow);
  if (m.has_compare_cas) {
    out->cas_unique = m.compare_cas;
    if (out->store_op == Mc_store_op::set || out->store_op == Mc_store_op::replace)
      out->store_op = Mc_store_op::cas;
  }
  out->client_flags = m.client_flags;
  if (m.has_ttl) out->exptime = m.ttl;
  if (out->bytes > limits.max_value_size) return make_error(line_consumed, kTooLarge, true, swallow);

  const size_t total = line_consumed + out->bytes + 2;
  if (len < total) return need_more();
  const char *data = buf + line_consumed;
  if (data[out->bytes] != '\r' || data[out->bytes + 1] != '\n')
    return make_error(total, kBadChunk, true);  // ms always reports it, q or not
  out->data = std::string_view(data, out->bytes);
  return make_complete(total);
}

/* me <key> [b] */
Mc_parse_result parse_me(const Token *tok, size_t nt, size_t consumed, const Mc_limits &limits,
                         Mc_request *out) {
  out->command = Mc_command::me;
  if (nt < 3 || !key_ok(tok[1], limits)) return make_error(consumed, kBadFormat);
  out->raw_key = tok[1].view();
  if (nt >= 4 && tok[2].is("b")) {
    const size_t k = base64_decode(out->raw_key.data(), out->raw_key.size(), out->key_buf,
                                   sizeof out->key_buf);
    if (k == 0) return make_error(consumed, kBadFormat);
    out->key_len = static_cast<uint8_t>(k);
    out->meta.base64_key = true;
  }
  return make_complete(consumed);
}

void reset(Mc_request *out) {
  out->command = Mc_command::version;
  out->noreply = false;
  out->raw_key = std::string_view();
  out->keys.clear();
  out->store_op = Mc_store_op::set;
  out->client_flags = 0;
  out->exptime = 0;
  out->bytes = 0;
  out->cas_unique = 0;
  out->data = std::string_view();
  out->delta = 0;
  out->incr = true;
  out->has_delay = false;
  out->delay = 0;
  out->verbosity = 0;
  out->dump_class_1 = false;
  out->nstats_args = 0;
  out->nmeta_flags = 0;
  out->meta = Mc_meta();
  out->key_len = 0;
}

}  // namespace

Mc_parse_result parse_request(char *buf, size_t len, const Mc_limits &limits, Mc_request *out) {
  if (len == 0) return need_more();

  /* Find the LF without looking past the longest acceptable line. */
  size_t limit = limits.max_line;
  size_t scan = len <= limit ? len : limit + 1;
  const char *nl = static_cast<const char *>(std::memchr(buf, '\n', scan));
  if (!nl && len > limit) {
    if (multiget_line(buf, len) == Tri::no) return make_fatal(kLineTooLong, false);
    const size_t big = limits.max_multiget_line > limit ? limits.max_multiget_line : limit;
    const size_t scan2 = len <= big ? len : big + 1;
    nl = static_cast<const char *>(std::memchr(buf + scan, '\n', scan2 - scan));
    limit = big;
    scan = scan2;
  }
  if (!nl) {
    if (len <= limit) return need_more();
    if (limit > limits.max_line) return make_fatal(kGetLineTooLong, true);
    return make_fatal(kLineTooLong, false);
  }
  const size_t line_len = static_cast<size_t>(nl - buf);
  const size_t consumed = line_len + 1;

  /* The command line: one CR before the LF dropped, cut at a NUL. */
  const char *end = nl;
  if (end != buf && end[-1] == '\r') --end;
  if (const void *z = std::memchr(buf, '\0', static_cast<size_t>(end - buf)))
    end = static_cast<const char *>(z);

  reset(out);
  Token tok[kMaxTokens];
  const size_t nt = tokenize(buf, end, tok);
  if (nt < 2 || tok[0].n < 2) return make_error(consumed, kErr);

  const Token &c = tok[0];
  const char first = c.p[0];
  if (first == 'm' && c.n == 2) {
    switch (c.p[1]) {
      case 'g': return parse_meta_keyed(Mc_command::mg, tok, nt, consumed, limits, out);
      case 's': return parse_ms(tok, nt, buf, len, consumed, limits, out);
      case 'd': return parse_meta_keyed(Mc_command::md, tok, nt, consumed, limits, out);
      case 'a': return parse_meta_keyed(Mc_command::ma, tok, nt, consumed, limits, out);
      case 'n': out->command = Mc_command::mn; return make_complete(consumed);
      case 'e': return parse_me(tok, nt, consumed, limits, out);
      default: return make_error(consumed, kErr);
    }
  }
  switch (first) {
    case 'g':
      if (nt < 3) return make_error(consumed, kErr);
      if (c.is("get")) return parse_get(Mc_command::get, tok, nt, end, consumed, limits, out);
      if (c.is("gets")) return parse_get(Mc_command::gets, tok, nt, end, consumed, limits, out);
      if (c.is("gat")) return parse_get(Mc_command::gat, tok, nt, end, consumed, limits, out);
      if (c.is("gats")) return parse_get(Mc_command::gats, tok, nt, end, consumed, limits, out);
      return make_error(consumed, kErr);
    case 's':
      if (c.is("set")) return parse_storage(Mc_store_op::set, tok, nt, buf, len, consumed, limits, out);
      if (c.is("stats")) return parse_stats(tok, nt, end, consumed, out);
      if (c.is("shutdown")) return make_error(consumed, kShutdown);
      return make_error(consumed, kErr);
    case 'a':
      if (c.is("add")) return parse_storage(Mc_store_op::add, tok, nt, buf, len, consumed, limits, out);
      if (c.is("append"))
        return parse_storage(Mc_store_op::append, tok, nt, buf, len, consumed, limits, out);
      return make_error(consumed, kErr);
    case 'c':
      if (c.is("cas")) return parse_storage(Mc_store_op::cas, tok, nt, buf, len, consumed, limits, out);
      if (c.is("cache_memlimit")) return parse_cache_memlimit(tok, nt, consumed, out);
      return make_error(consumed, kErr);
    case 'i':
      if (c.is("incr")) return parse_arith(true, tok, nt, consumed, limits, out);
      return make_error(consumed, kErr);
    case 'd':
      if (c.is("delete")) return parse_delete(tok, nt, consumed, limits, out);
      if (c.is("decr")) return parse_arith(false, tok, nt, consumed, limits, out);
      return make_error(consumed, kErr);
    case 't':
      if (c.is("touch")) return parse_touch(tok, nt, consumed, limits, out);
      return make_error(consumed, kErr);
    default:
      break;
  }
  if (c.is("replace")) return parse_storage(Mc_store_op::replace, tok, nt, buf, len, consumed, limits, out);
  if (c.is("prepend")) return parse_storage(Mc_store_op::prepend, tok, nt, buf, len, consumed, limits, out);
  if (c.is("bget")) {
    if (nt < 3) return make_error(consumed, kErr);
    return parse_get(Mc_command::get, tok, nt, end, consumed, limits, out);
  }
  if (c.is("flush_all")) return parse_flush_all(tok, nt, consumed, out);
  if (c.is("version")) {
    out->command = Mc_command::version;
    return make_complete(consumed);
  }
  if (c.is("quit")) {
    out->command = Mc_command::quit;
    return make_complete(consumed);
  }
  if (c.is("verbosity")) return parse_verbosity(tok, nt, consumed, out);
  if (c.is("lru_crawler")) return parse_lru_crawler(tok, nt, consumed, out);
  /* An HTTP request line: memcached closes without a word. */
  const Token &last = tok[nt - 2];
  if (last.n >= 5 && std::memcmp(last.p, "HTTP/", 5) == 0) return make_fatal(kErr, false);
  return make_error(consumed, kErr);
}

}  // namespace mc
}  // namespace tablesocket
