/* HandlerSocket request parser: one line in, one Request out, no allocation in the steady state.

   Two passes over a line: memchr finds the LF, then a tokenizer records every TAB-separated token
   as a raw Value in scratch.values (grown only up to the number of tokens actually on the line,
   which is capped by Limits::max_tokens). The grammar then walks that token array; decoded values
   (NULL check + in-place unescape) are compacted towards the front of the same array. That is safe
   because every command has at least one non-value token before its first value, so the write
   index always trails the read index. */
#include "proto/hs/hs_protocol.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tablesocket {
namespace hs {

namespace {

constexpr char kEscapePrefix = 0x01;
constexpr unsigned char kEscapeShift = 0x40;

Parse_result make_error(size_t consumed, const char *msg) {
  Parse_result r;
  r.status = Parse_status::error;
  r.consumed = consumed;
  r.error_code = 2;
  r.error_message = msg;
  return r;
}

Parse_result make_fatal(size_t consumed, const char *msg) {
  Parse_result r;
  r.status = Parse_status::fatal;
  r.consumed = consumed;
  r.error_code = 2;
  r.error_message = msg;
  return r;
}

/* Grows scratch storage; false instead of an exception when memory is exhausted. */
template <class T>
bool grow_to(std::vector<T> &v, size_t n) noexcept {
  try {
    v.resize(n);
    return true;
  } catch (...) {
    return false;
  }
}

inline bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

/* Strict decimal uint32: at least one digit, nothing but digits, no overflow. */
inline bool parse_u32(const Value &t, uint32_t *out) {
  if (t.len == 0) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < t.len; ++i) {
    const char c = t.ptr[i];
    if (!is_digit(c)) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > 0xffffffffu) return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

inline bool all_digits(const Value &t) {
  if (t.len == 0) return false;
  for (size_t i = 0; i < t.len; ++i)
    if (!is_digit(t.ptr[i])) return false;
  return true;
}

/* A negative number ("-1"): not a modify op ('-' alone is), but a limit or offset out of range. */
inline bool negative_number(const Value &t) {
  if (t.len < 2 || t.ptr[0] != '-') return false;
  for (size_t i = 1; i < t.len; ++i)
    if (!is_digit(t.ptr[i])) return false;
  return true;
}

inline bool token_is(const Value &t, char c) { return t.len == 1 && t.ptr[0] == c; }

/* NULL (a lone 0x00) or an unescaped string, in place. escapes: the line holds a 0x01 at all;
   *bad is set when a value's escape is malformed (the request then fails as a whole). */
inline Value decode_value(const Value &t, bool escapes, bool *bad) {
  Value v;
  if (t.len == 1 && t.ptr[0] == '\0') return v;  // ptr == nullptr: NULL
  v.ptr = t.ptr;
  v.len = t.len;
  if (escapes) {
    const size_t len = unescape_in_place(const_cast<char *>(t.ptr), t.len);
    if (len == kBadEscape) *bad = true;
    else v.len = len;
  }
  return v;
}

inline bool parse_exec_op(const Value &t, Exec_op *op) {
  if (t.len == 1) {
    switch (t.ptr[0]) {
      case '=': *op = Exec_op::eq; return true;
      case '>': *op = Exec_op::gt; return true;
      case '<': *op = Exec_op::lt; return true;
      case '+': *op = Exec_op::insert; return true;
      case 'L': *op = Exec_op::last_prefix; return true;
      default: return false;
    }
  }
  if (t.len == 2 && t.ptr[1] == '=') {
    switch (t.ptr[0]) {
      case '>': *op = Exec_op::ge; return true;
      case '<': *op = Exec_op::le; return true;
      case '+': *op = Exec_op::upsert; return true;
      default: return false;
    }
  }
  if (t.len == 2 && t.ptr[0] == 'M') {
    if (t.ptr[1] == '-') { *op = Exec_op::merge_desc; return true; }
    if (t.ptr[1] == '+') { *op = Exec_op::merge_asc; return true; }
  }
  return false;
}

inline bool parse_compare_op(const Value &t, Compare_op *op) {
  if (t.len == 1) {
    switch (t.ptr[0]) {
      case '=': *op = Compare_op::eq; return true;
      case '<': *op = Compare_op::lt; return true;
      case '>': *op = Compare_op::gt; return true;
      default: return false;
    }
  }
  if (t.len == 2 && t.ptr[1] == '=') {
    switch (t.ptr[0]) {
      case '!': *op = Compare_op::ne; return true;
      case '<': *op = Compare_op::le; return true;
      case '>': *op = Compare_op::ge; return true;
      default: return false;
    }
  }
  return false;
}

inline bool parse_modify_op(const Value &t, Modify_op *op, bool *returns_rows) {
  if (t.len == 0 || t.len > 2) return false;
  if (t.len == 2 && t.ptr[1] != '?') return false;
  switch (t.ptr[0]) {
    case 'U': *op = Modify_op::update; break;
    case '+': *op = Modify_op::increment; break;
    case '-': *op = Modify_op::decrement; break;
    case 'D': *op = Modify_op::remove; break;
    default: return false;
  }
  *returns_rows = t.len == 2;
  return true;
}

enum class Tokenize_status { ok, too_many, no_memory };

/* Splits [line, end) at TABs into scratch.values[0, *ntok). Fails when the line holds more than
   max_tokens tokens. Storage grows only with the tokens actually present. *escapes_out tells
   whether the line contains an escape byte (0x01) anywhere, so values can skip unescaping. */
Tokenize_status tokenize(const char *line, const char *end, uint32_t max_tokens, std::vector<Value> &store,
              size_t *ntok_out, bool *escapes_out) {
  Value *tok = store.data();
  size_t cap = store.size();
  size_t n = 0;
  const char *start = line;
  Tokenize_status status = Tokenize_status::too_many;

  auto emit = [&](const char *tend) -> bool {
    if (n == cap) {
      if (n >= max_tokens) return false;
      size_t want = cap < 16 ? 16 : cap * 2;
      if (want > max_tokens) want = max_tokens;
      if (!grow_to(store, want)) {
        status = Tokenize_status::no_memory;
        return false;
      }
      tok = store.data();
      cap = store.size();
    }
    tok[n].ptr = start;
    tok[n].len = static_cast<size_t>(tend - start);
    ++n;
    start = tend + 1;
    return true;
  };

  const char *p = line;
  bool escapes = false;
#if defined(__SSE2__)
  const __m128i tab = _mm_set1_epi8('\t');
  const __m128i esc = _mm_set1_epi8(0x01);
  __m128i any_esc = _mm_setzero_si128();
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    any_esc = _mm_or_si128(any_esc, _mm_cmpeq_epi8(v, esc));
    unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, tab)));
    while (m) {
      if (!emit(p + __builtin_ctz(m))) return status;
      m &= m - 1;
    }
    p += 16;
  }
  escapes = _mm_movemask_epi8(any_esc) != 0;
#endif
  for (; p < end; ++p) {
    if (*p == '\t') {
      if (!emit(p)) return status;
    } else if (*p == 0x01) {
      escapes = true;
    }
  }
  if (!emit(end)) return status;
  *ntok_out = n;
  *escapes_out = escapes;
  return Tokenize_status::ok;
}

/* ---- commands; tok[0] is the command token, values are compacted into tok[0..) ---- */

Parse_result parse_open(Value *tok, size_t n, size_t consumed, Request *out) {
  out->command = Command::open_index;
  Open_index_request &o = out->open;
  o = Open_index_request();
  if (n < 2 || !parse_u32(tok[1], &o.index_id)) return make_error(consumed, "indexid");
  if (n < 3) return make_error(consumed, "dbname");
  if (n < 4) return make_error(consumed, "tablename");
  /* Empty tokens after the filter columns (a trailing tab) are ignored, as HandlerSocket ignores
     whatever follows them; anything else there is an error. */
  while (n > 7 && tok[n - 1].len == 0) --n;
  if (n > 7) return make_error(consumed, "syntax");
  /* Names are taken as sent, like HandlerSocket (which does not unescape them either). */
  o.db = std::string_view(tok[2].ptr, tok[2].len);
  o.table = std::string_view(tok[3].ptr, tok[3].len);
  if (n > 4) o.index = std::string_view(tok[4].ptr, tok[4].len);
  if (n > 5) o.columns = std::string_view(tok[5].ptr, tok[5].len);
  if (n > 6) o.filter_columns = std::string_view(tok[6].ptr, tok[6].len);
  Parse_result r;
  r.status = Parse_status::complete;
  r.consumed = consumed;
  return r;
}

Parse_result parse_auth(Value *tok, size_t n, size_t consumed, bool esc, Request *out) {
  out->command = Command::auth;
  Auth_request &a = out->auth;
  a = Auth_request();
  /* The type is passed as sent (possibly empty); the dispatcher answers "authtype" for a bad one. */
  if (n > 1) a.type = std::string_view(tok[1].ptr, tok[1].len);
  size_t w = 0;
  bool bad = false;
  for (size_t r = 2; r < n; ++r) tok[w++] = decode_value(tok[r], esc, &bad);
  if (bad) return make_error(consumed, "escape");
  a.args = tok;
  a.nargs = static_cast<uint32_t>(w);
  Parse_result r;
  r.status = Parse_status::complete;
  r.consumed = consumed;
  return r;
}

Parse_result parse_exec(Value *tok, size_t n, size_t consumed, bool esc, Parse_scratch &scratch,
                        Request *out) {
  out->command = Command::exec;
  Exec_request &e = out->exec;
  e = Exec_request();
  if (!parse_u32(tok[0], &e.index_id)) return make_error(consumed, "indexid");
  if (n < 2 || !parse_exec_op(tok[1], &e.op)) return make_error(consumed, "op");
  uint32_t vlen;
  if (n < 3 || !parse_u32(tok[2], &vlen) || vlen == 0 || vlen > n - 3)
    return make_error(consumed, "klen");

  size_t i = 3;
  size_t w = 0;  // next free slot for a decoded value; always < i
  bool bad = false;  // a malformed escape in some value
  for (const size_t kend = i + vlen; i < kend; ++i) tok[w++] = decode_value(tok[i], esc, &bad);
  e.keys = tok;
  e.nkeys = vlen;
  /* Empty tokens that end the line where a limit, an offset, IN, a filter or a modify op could
     start (a trailing tab, "... 5 0 \t") are ignored, as HandlerSocket's parser ignores what
     follows once it reaches the end; an empty token followed by more is still an error. */
  const auto drop_trailing_empty = [&](size_t at) {
    if (at < n && tok[at].len == 0) {
      size_t j = at;
      while (j < n && tok[j].len == 0) ++j;
      if (j == n) n = at;
    }
  };
  drop_trailing_empty(i);

  /* [<limit> [<offset>]] */
  if (i < n && negative_number(tok[i])) return make_error(consumed, "limit");
  if (i < n && all_digits(tok[i])) {
    if (!parse_u32(tok[i], &e.limit)) return make_error(consumed, "limit");
    e.has_limit = true;
    ++i;
    drop_trailing_empty(i);
    if (i < n && negative_number(tok[i])) return make_error(consumed, "offset");
    if (i < n && all_digits(tok[i])) {
      if (!parse_u32(tok[i], &e.offset)) return make_error(consumed, "offset");
      ++i;
      drop_trailing_empty(i);
    }
  }

  /* [@ <icol> <ivlen> <iv1..ivn>] or [@ <icol> ^ <id2> <vlen2> <k1..kn> <limit2>] */
  if (i < n && token_is(tok[i], '@')) {
    ++i;
    if (i >= n || !parse_u32(tok[i], &e.in_column)) return make_error(consumed, "incol");
    ++i;
    if (i < n && token_is(tok[i], '^')) {
      /* tablesocket: the IN values are the first column of the rows another open index finds
         for k1..kn (e.g. the followees of a user), so a timeline is one round trip. */
      ++i;
      if (i >= n || !parse_u32(tok[i], &e.in_index_id)) return make_error(consumed, "insource");
      ++i;
      uint32_t klen2;
      /* klen2 keys and the limit must follow this token (n - i >= 1 here: no underflow). */
      if (i >= n || !parse_u32(tok[i], &klen2) || klen2 == 0 || size_t(klen2) + 2 > n - i)
        return make_error(consumed, "insource");
      ++i;
      e.in_keys = tok + w;
      e.nin_keys = klen2;
      for (const size_t iend = i + klen2; i < iend; ++i) tok[w++] = decode_value(tok[i], esc, &bad);
      if (i >= n || !parse_u32(tok[i], &e.in_limit) || e.in_limit == 0) return make_error(consumed, "insource");
      ++i;
      e.has_in = true;
      e.in_from_index = true;
    } else {
    uint32_t ivlen;
    if (i >= n || !parse_u32(tok[i], &ivlen) || ivlen == 0 || ivlen > n - i - 1)
      return make_error(consumed, "invalueslen");
    ++i;
    e.has_in = true;
    e.in_values = tok + w;
    e.nin_values = ivlen;
    for (const size_t iend = i + ivlen; i < iend; ++i) tok[w++] = decode_value(tok[i], esc, &bad);
    }
  }

  /* [F|W <fop> <fcol> <fval>]... */
  size_t nf = 0;
  while (i < n && tok[i].len > 0 && (tok[i].ptr[0] == 'F' || tok[i].ptr[0] == 'W')) {
    if (tok[i].len != 1) return make_error(consumed, "filtertype");
    if (nf == scratch.filters.size()) {
      /* At most one filter per 4 tokens actually on the line. */
      size_t want = nf < 4 ? 4 : nf * 2;
      const size_t bound = n / 4 + 1;
      if (want > bound) want = bound;
      if (!grow_to(scratch.filters, want)) return make_fatal(consumed, "nomemory");
    }
    Filter &f = scratch.filters[nf];
    f.type = tok[i].ptr[0] == 'F' ? Filter_type::skip : Filter_type::stop;
    if (i + 1 >= n || !parse_compare_op(tok[i + 1], &f.op)) return make_error(consumed, "filterop");
    if (i + 2 >= n || !parse_u32(tok[i + 2], &f.column)) return make_error(consumed, "filterfld");
    if (i + 3 >= n) return make_error(consumed, "filterval");
    f.value = decode_value(tok[i + 3], esc, &bad);
    i += 4;
    ++nf;
  }
  if (nf) {
    e.filters = scratch.filters.data();
    e.nfilters = static_cast<uint32_t>(nf);
  }

  /* [<mop> <m1..mk>] */
  drop_trailing_empty(i);
  if (i < n) {
    if (!parse_modify_op(tok[i], &e.mod, &e.mod_returns_rows)) return make_error(consumed, "modop");
    ++i;
    e.mod_values = tok + w;
    e.nmod_values = static_cast<uint32_t>(n - i);
    for (; i < n; ++i) tok[w++] = decode_value(tok[i], esc, &bad);
  }
  /* 0x01 must be followed by a byte of 0x40 or more (HandlerSocket cut the value there, storing
     what came before it): a malformed value fails the request rather than store other bytes. */
  if (bad) return make_error(consumed, "escape");

  Parse_result r;
  r.status = Parse_status::complete;
  r.consumed = consumed;
  return r;
}

}  // namespace

size_t unescape_in_place(char *p, size_t n) {
  if (n == 0) return 0;
  char *q = static_cast<char *>(std::memchr(p, kEscapePrefix, n));
  if (!q) return n;
  char *w = q;
  const char *r = q;
  const char *const end = p + n;
  while (r < end) {
    if (*r == kEscapePrefix) {
      if (r + 1 == end || static_cast<unsigned char>(r[1]) < kEscapeShift) return kBadEscape;
      *w++ = static_cast<char>(static_cast<unsigned char>(r[1]) - kEscapeShift);
      r += 2;
      /* Copy the run up to the next escape with one memmove. */
      const char *next = static_cast<const char *>(std::memchr(r, kEscapePrefix, end - r));
      const char *stop = next ? next : end;
      const size_t run = static_cast<size_t>(stop - r);
      if (run) {
        std::memmove(w, r, run);
        w += run;
        r = stop;
      }
    } else {
      *w++ = *r++;
    }
  }
  return static_cast<size_t>(w - p);
}

Parse_result parse_request(char *buf, size_t len, const Limits &limits, Parse_scratch &scratch,
                           Request *out) {
  /* Never look further than the longest acceptable line: max_line bytes, a CR, the LF. */
  const size_t max_line = limits.max_line;
  size_t scan = len;
  if (len >= 2 && max_line <= len - 2) scan = max_line + 2;
  char *const nl = len ? static_cast<char *>(std::memchr(buf, '\n', scan)) : nullptr;
  if (!nl) {
    /* A prefix of a line that can still fit (a final CR may be dropped once the LF arrives). */
    if (len <= max_line || (len == max_line + 1 && buf[len - 1] == '\r')) {
      Parse_result r;
      r.status = Parse_status::need_more;
      return r;
    }
    return make_fatal(len, "toolong");
  }
  const size_t consumed = static_cast<size_t>(nl - buf) + 1;
  const char *end = nl;
  if (end != buf && end[-1] == '\r') --end;
  const size_t line_len = static_cast<size_t>(end - buf);
  if (line_len > max_line) return make_fatal(consumed, "toolong");
  if (line_len == 0) return make_error(consumed, "cmd");

  size_t ntok;
  bool esc;
  switch (tokenize(buf, end, limits.max_tokens, scratch.values, &ntok, &esc)) {
    case Tokenize_status::ok: break;
    case Tokenize_status::too_many: return make_fatal(consumed, "toomanytokens");
    case Tokenize_status::no_memory: return make_fatal(consumed, "nomemory");
  }
  Value *tok = scratch.values.data();

  const Value &cmd = tok[0];
  if (cmd.len == 1) {
    if (cmd.ptr[0] == 'P') return parse_open(tok, ntok, consumed, out);
    if (cmd.ptr[0] == 'A') return parse_auth(tok, ntok, consumed, esc, out);
  }
  if (cmd.len > 0 && is_digit(cmd.ptr[0])) return parse_exec(tok, ntok, consumed, esc, scratch, out);
  return make_error(consumed, "cmd");
}

}  // namespace hs
}  // namespace tablesocket
