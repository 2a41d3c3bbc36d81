#include "protocol.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace loadgen {

const char *proto_name(Proto p) {
  switch (p) {
    case Proto::hs: return "hs";
    case Proto::mc_text: return "mc-text";
    case Proto::mc_meta: return "mc-meta";
    case Proto::resp: return "resp";
    case Proto::sql: return "sql";
  }
  return "?";
}

const char *op_name(Op o) {
  switch (o) {
    case Op::get: return "get";
    case Op::update: return "update";
    case Op::insert: return "insert";
    case Op::set: return "set";
  }
  return "?";
}

const char *expect_name(Expect e) {
  switch (e) {
    case Expect::none: return "none";
    case Expect::hs_user: return "hs-user";
    case Expect::kv_user: return "kv-user";
  }
  return "?";
}

namespace {

Parse_result need_more() { return {Parse_status::need_more, 0, nullptr}; }
Parse_result complete(size_t n) { return {Parse_status::complete, n, nullptr}; }
Parse_result fail(const char *msg) { return {Parse_status::protocol_error, 0, msg}; }

// Parses a non-empty run of decimal digits [p, e) into *v (no overflow past 2^63).
bool parse_u64(const char *p, const char *e, uint64_t *v) {
  if (p == e || e - p > 18) return false;
  uint64_t x = 0;
  for (; p < e; ++p) {
    if (*p < '0' || *p > '9') return false;
    x = x * 10 + uint64_t(*p - '0');
  }
  *v = x;
  return true;
}

bool starts_with(const char *p, size_t n, std::string_view s) {
  return n >= s.size() && std::memcmp(p, s.data(), s.size()) == 0;
}

// A line "<word>" or "<word> ..." (word followed by the end of the line or a space).
bool is_word(const char *p, size_t n, std::string_view w) {
  return starts_with(p, n, w) && (n == w.size() || p[w.size()] == ' ');
}

// Finds the CRLF-terminated first line of buf. Returns false with *r set when the caller must
// return (need more bytes, or a protocol error); else *line_len excludes CRLF and *hdr includes it.
bool crlf_line(const char *buf, size_t len, size_t *line_len, size_t *hdr, Parse_result *r) {
  size_t scan = len < kMaxLine ? len : kMaxLine;
  const char *nl = static_cast<const char *>(std::memchr(buf, '\n', scan));
  if (!nl) {
    *r = len >= kMaxLine ? fail("reply line too long") : need_more();
    return false;
  }
  if (nl == buf || nl[-1] != '\r') {
    *r = fail("reply line not terminated by CRLF");
    return false;
  }
  *line_len = size_t(nl - buf) - 1;
  *hdr = size_t(nl - buf) + 1;
  return true;
}

// Status lines common to both memcached protocols; returns true if the line was one of them.
bool mc_common_status(const char *p, size_t n, Kv_reply *out) {
  if (is_word(p, n, "ERROR") || is_word(p, n, "CLIENT_ERROR") || is_word(p, n, "SERVER_ERROR")) {
    out->kind = Kv_reply::error;
    out->data = {p, n};
    return true;
  }
  return false;
}

size_t append_str(char *dst, size_t at, const char *s, size_t n) {
  std::memcpy(dst + at, s, n);
  return at + n;
}

}  // namespace

// ---- HandlerSocket -------------------------------------------------------------------------------

Parse_result parse_hs_reply(char *buf, size_t len, Hs_reply *out) {
  constexpr size_t kMaxHsLine = 64 << 20;
  char *nl = static_cast<char *>(std::memchr(buf, '\n', len));
  if (!nl) return len > kMaxHsLine ? fail("reply line too long") : need_more();
  char *p = buf;
  char *end = nl;
  if (end > p && end[-1] == '\r') --end;  // tolerated, HandlerSocket does not send it

  char *tab = static_cast<char *>(std::memchr(p, '\t', size_t(end - p)));
  uint64_t code, n;
  if (!tab || !parse_u64(p, tab, &code)) return fail("HS reply: bad status code");
  p = tab + 1;
  tab = static_cast<char *>(std::memchr(p, '\t', size_t(end - p)));
  char *ne = tab ? tab : end;
  if (!parse_u64(p, ne, &n)) return fail("HS reply: bad column count");
  out->code = uint32_t(code);
  out->n = uint32_t(n);
  out->ntokens = 0;
  p = ne;
  while (p < end) {  // *p == '\t': a token starts after it (possibly empty)
    char *s = p + 1;
    char *e = static_cast<char *>(std::memchr(s, '\t', size_t(end - s)));
    if (!e) e = end;
    if (out->ntokens < Hs_reply::kMaxTokens) {
      Field &f = out->tokens[out->ntokens];
      if (e - s == 1 && *s == '\0') {
        f.ptr = nullptr;
        f.len = 0;
      } else {
        char *w = s;
        for (char *q = s; q < e; ++q) {
          if (*q == '\x01' && q + 1 < e) {
            *w++ = char(q[1] - 0x40);
            ++q;
          } else {
            *w++ = *q;
          }
        }
        f.ptr = s;
        f.len = size_t(w - s);
      }
    }
    ++out->ntokens;
    p = e;
  }
  return complete(size_t(nl - buf) + 1);
}

void hs_escape(Buffer &out, std::string_view s) {
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x0f) {
      out.push_back('\x01');
      out.push_back(char(u + 0x40));
    } else {
      out.push_back(c);
    }
  }
}

// ---- memcached text --------------------------------------------------------------------------------

Parse_result parse_mc_text_reply(const char *buf, size_t len, Kv_reply *out) {
  Parse_result r;
  size_t n, hdr;
  if (!crlf_line(buf, len, &n, &hdr, &r)) return r;
  const char *p = buf;
  if (starts_with(p, n, "VALUE ")) {
    // VALUE <key> <flags> <bytes> [<cas unique>]
    const char *e = p + n;
    const char *k = p + 6;
    const char *ke = static_cast<const char *>(std::memchr(k, ' ', size_t(e - k)));
    if (!ke || ke == k) return fail("mc VALUE: bad key");
    const char *f = ke + 1;
    const char *fe = static_cast<const char *>(std::memchr(f, ' ', size_t(e - f)));
    uint64_t flags, bytes;
    if (!fe || !parse_u64(f, fe, &flags) || flags > 0xffffffffu) return fail("mc VALUE: bad flags");
    const char *b = fe + 1;
    const char *be = static_cast<const char *>(std::memchr(b, ' ', size_t(e - b)));
    if (!be) be = e;
    if (!parse_u64(b, be, &bytes) || bytes > (1u << 30)) return fail("mc VALUE: bad length");
    size_t total = hdr + bytes + 2 + 5;
    if (len < total) return need_more();
    const char *d = buf + hdr;
    if (d[bytes] != '\r' || d[bytes + 1] != '\n') return fail("mc VALUE: data not followed by CRLF");
    if (std::memcmp(d + bytes + 2, "END\r\n", 5) != 0) return fail("mc VALUE: no END after the value");
    out->kind = Kv_reply::value;
    out->key = {k, size_t(ke - k)};
    out->flags = uint32_t(flags);
    out->data = {d, size_t(bytes)};
    return complete(total);
  }
  out->key = {};
  out->data = {p, n};
  if (n == 3 && std::memcmp(p, "END", 3) == 0) {
    out->kind = Kv_reply::miss;
    out->data = {};
  } else if (n == 6 && std::memcmp(p, "STORED", 6) == 0) {
    out->kind = Kv_reply::stored;
  } else if ((n == 10 && std::memcmp(p, "NOT_STORED", 10) == 0) ||
             (n == 6 && std::memcmp(p, "EXISTS", 6) == 0) ||
             (n == 9 && std::memcmp(p, "NOT_FOUND", 9) == 0)) {
    out->kind = Kv_reply::not_stored;
  } else if (!mc_common_status(p, n, out)) {
    return fail("mc: unexpected reply line");
  }
  return complete(hdr);
}

// ---- memcached meta ----------------------------------------------------------------------------------

Parse_result parse_mc_meta_reply(const char *buf, size_t len, Kv_reply *out) {
  Parse_result r;
  size_t n, hdr;
  if (!crlf_line(buf, len, &n, &hdr, &r)) return r;
  const char *p = buf;
  out->key = {};
  out->flags = 0;
  if (is_word(p, n, "VA")) {
    // VA <size> <flags>*
    const char *e = p + n;
    const char *s = p + 3;
    if (s > e) return fail("mc meta VA: no size");
    const char *se = static_cast<const char *>(std::memchr(s, ' ', size_t(e - s)));
    if (!se) se = e;
    uint64_t bytes;
    if (!parse_u64(s, se, &bytes) || bytes > (1u << 30)) return fail("mc meta VA: bad size");
    size_t total = hdr + bytes + 2;
    if (len < total) return need_more();
    const char *d = buf + hdr;
    if (d[bytes] != '\r' || d[bytes + 1] != '\n') return fail("mc meta VA: data not followed by CRLF");
    out->kind = Kv_reply::value;
    out->data = {d, size_t(bytes)};
    return complete(total);
  }
  out->data = {p, n};
  if (n == 2 && std::memcmp(p, "EN", 2) == 0) {
    out->kind = Kv_reply::miss;
    out->data = {};
  } else if (is_word(p, n, "HD")) {
    out->kind = Kv_reply::stored;
  } else if (is_word(p, n, "NS") || is_word(p, n, "EX") || is_word(p, n, "NF")) {
    out->kind = Kv_reply::not_stored;
  } else if (!mc_common_status(p, n, out)) {
    return fail("mc meta: unexpected reply line");
  }
  return complete(hdr);
}

// ---- RESP ------------------------------------------------------------------------------------------

Parse_result parse_resp_reply(const char *buf, size_t len, Kv_reply *out) {
  if (len == 0) return need_more();
  Parse_result r;
  size_t n, hdr;
  if (!crlf_line(buf, len, &n, &hdr, &r)) return r;
  const char *p = buf + 1;
  size_t pn = n - 1;
  if (n == 0) return fail("RESP: empty line");
  out->key = {};
  switch (buf[0]) {
    case '$': {
      if (pn == 2 && p[0] == '-' && p[1] == '1') {
        out->kind = Kv_reply::miss;
        out->data = {};
        return complete(hdr);
      }
      uint64_t bytes;
      if (!parse_u64(p, p + pn, &bytes) || bytes > (1u << 30)) return fail("RESP: bad bulk length");
      size_t total = hdr + bytes + 2;
      if (len < total) return need_more();
      const char *d = buf + hdr;
      if (d[bytes] != '\r' || d[bytes + 1] != '\n') return fail("RESP: bulk data not followed by CRLF");
      out->kind = Kv_reply::value;
      out->data = {d, size_t(bytes)};
      return complete(total);
    }
    case '+':
      out->kind = Kv_reply::stored;
      out->data = {p, pn};
      return complete(hdr);
    case '-':
      out->kind = Kv_reply::error;
      out->data = {p, pn};
      return complete(hdr);
    case ':': {
      bool neg = pn > 0 && p[0] == '-';
      uint64_t v;
      if (!parse_u64(p + neg, p + pn, &v)) return fail("RESP: bad integer");
      out->kind = Kv_reply::integer;
      out->integer_value = neg ? -int64_t(v) : int64_t(v);
      out->data = {p, pn};
      return complete(hdr);
    }
    case '_':
      if (pn != 0) return fail("RESP: bad null");
      out->kind = Kv_reply::miss;
      out->data = {};
      return complete(hdr);
    default:
      return fail("RESP: unexpected reply type");
  }
}

// ---- Data model ------------------------------------------------------------------------------------

void make_row(uint64_t k, uint64_t variant, Row *row) {
  char num[20];
  size_t nl = format_uint(num, k);
  size_t at = append_str(row->name, 0, "user", 4);
  at = append_str(row->name, at, num, nl);
  row->name_len = at;
  at = append_str(row->email, 0, row->name, row->name_len);
  at = append_str(row->email, at, "@example.com", 12);
  row->email_len = at;
  std::memcpy(row->created, "2010-01-01 00:00:00", 19);
  row->created_len = 19;
  if (variant != 0) {
    uint64_t s = variant % 86400;
    unsigned hh = unsigned(s / 3600), mm = unsigned(s / 60 % 60), ss = unsigned(s % 60);
    row->created[11] = char('0' + hh / 10);
    row->created[12] = char('0' + hh % 10);
    row->created[14] = char('0' + mm / 10);
    row->created[15] = char('0' + mm % 10);
    row->created[17] = char('0' + ss / 10);
    row->created[18] = char('0' + ss % 10);
  }
}

size_t make_kv_value(uint64_t k, uint64_t variant, char *out) {
  Row row;
  make_row(k, variant, &row);
  size_t at = append_str(out, 0, row.name, row.name_len);
  out[at++] = '|';
  at = append_str(out, at, row.email, row.email_len);
  out[at++] = '|';
  return append_str(out, at, row.created, row.created_len);
}

// ---- Requests --------------------------------------------------------------------------------------

namespace {

void append_key(const std::string &prefix, uint64_t k, Buffer &out) {
  out.append(prefix);
  out.append_uint(k);
}

}  // namespace

void encode_request(const Request_spec &spec, uint64_t k, uint64_t variant, Buffer &out) {
  switch (spec.proto) {
    case Proto::hs: {
      // Key prefixes are expected to be plain text; escape them anyway.
      auto key = [&] {
        if (!spec.key_prefix.empty()) hs_escape(out, spec.key_prefix);
        out.append_uint(k);
      };
      if (spec.op == Op::insert) {
        Row row;
        make_row(k, variant, &row);
        out.append("1\t+\t4\t", 6);
        key();
        out.push_back('\t');
        out.append(row.name, row.name_len);
        out.push_back('\t');
        out.append(row.email, row.email_len);
        out.push_back('\t');
        out.append(row.created, row.created_len);
        out.push_back('\n');
        return;
      }
      out.append("1\t=\t1\t", 6);
      key();
      if (spec.op == Op::update) {
        Row row;
        make_row(k, variant, &row);
        out.append("\t1\t0\tU\t", 7);
        out.append(row.name, row.name_len);
        out.push_back('\t');
        out.append(row.email, row.email_len);
        out.push_back('\t');
        out.append(row.created, row.created_len);
      }
      out.push_back('\n');
      return;
    }
    case Proto::mc_text:
    case Proto::mc_meta: {
      bool meta = spec.proto == Proto::mc_meta;
      if (spec.op == Op::set) {
        char v[128];
        size_t vn = make_kv_value(k, variant, v);
        out.append(meta ? "ms " : "set ", meta ? 3 : 4);
        append_key(spec.key_prefix, k, out);
        out.append(meta ? " " : " 0 0 ", meta ? 1 : 5);
        out.append_uint(vn);
        out.append("\r\n", 2);
        out.append(v, vn);
        out.append("\r\n", 2);
      } else {
        out.append(meta ? "mg " : "get ", meta ? 3 : 4);
        append_key(spec.key_prefix, k, out);
        out.append(meta ? " v\r\n" : "\r\n", meta ? 4 : 2);
      }
      return;
    }
    case Proto::sql:
      return;  // the SQL engine binds values to a prepared statement instead
    case Proto::resp: {
      char num[20];
      size_t nl = format_uint(num, k);
      size_t klen = spec.key_prefix.size() + nl;
      if (spec.op == Op::set) {
        char v[128];
        size_t vn = make_kv_value(k, variant, v);
        out.append("*3\r\n$3\r\nSET\r\n$", 14);
        out.append_uint(klen);
        out.append("\r\n", 2);
        out.append(spec.key_prefix);
        out.append(num, nl);
        out.append("\r\n$", 3);
        out.append_uint(vn);
        out.append("\r\n", 2);
        out.append(v, vn);
        out.append("\r\n", 2);
      } else {
        out.append("*2\r\n$3\r\nGET\r\n$", 14);
        out.append_uint(klen);
        out.append("\r\n", 2);
        out.append(spec.key_prefix);
        out.append(num, nl);
        out.append("\r\n", 2);
      }
      return;
    }
  }
}

std::string sql_quote_ident(std::string_view name) {
  std::string o = "`";
  for (char c : name) {
    if (c == '`') o += '`';
    o += c;
  }
  return o + "`";
}

namespace {

// "a,b,c" -> the quoted names, each followed by `suffix`, separated by ", ".
std::string sql_column_list(std::string_view columns, std::string_view suffix) {
  std::string o;
  size_t i = 0;
  for (;;) {
    size_t j = columns.find(',', i);
    std::string_view c = columns.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i);
    if (!o.empty()) o += ", ";
    o += sql_quote_ident(c);
    o += suffix;
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return o;
}

}  // namespace

std::string sql_statement(Op op, std::string_view db, std::string_view table, std::string_view key_column,
                          std::string_view columns) {
  std::string t = sql_quote_ident(db) + "." + sql_quote_ident(table);
  std::string k = sql_quote_ident(key_column);
  switch (op) {
    case Op::get:
      return "SELECT " + sql_column_list(columns, "") + " FROM " + t + " WHERE " + k + " = ?";
    case Op::update:
      return "UPDATE " + t + " SET " + sql_column_list(columns, " = ?") + " WHERE " + k + " = ?";
    case Op::insert: {
      std::string marks = "?";
      for (char c : columns)
        if (c == ',') marks += ", ?";
      return "INSERT INTO " + t + " (" + k + ", " + sql_column_list(columns, "") + ") VALUES (?, " + marks + ")";
    }
    case Op::set:
      break;
  }
  return std::string();
}

std::string hs_open_index_line(std::string_view db, std::string_view table, std::string_view index,
                               std::string_view columns) {
  Buffer b;
  b.append("P\t1\t", 4);
  hs_escape(b, db);
  b.push_back('\t');
  hs_escape(b, table);
  b.push_back('\t');
  hs_escape(b, index);
  b.push_back('\t');
  hs_escape(b, columns);
  b.push_back('\n');
  return std::string(b.view());
}

std::string hs_auth_line(std::string_view secret) {
  Buffer b;
  b.append("A\t1\t", 4);
  hs_escape(b, secret);
  b.push_back('\n');
  return std::string(b.view());
}

// ---- Verification ----------------------------------------------------------------------------------

std::string printable(std::string_view s, size_t max) {
  std::string o;
  size_t n = s.size() < max ? s.size() : max;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      case '\n': o += "\\n"; break;
      case '\\': o += "\\\\"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char h[5];
          std::snprintf(h, sizeof h, "\\x%02x", c);
          o += h;
        } else {
          o += char(c);
        }
    }
  }
  if (s.size() > max) o += "...";
  return o;
}

namespace {

Outcome why_out(Outcome o, char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

Outcome why_out(Outcome o, char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return o;
}

bool field_eq(const Field &f, const char *s, size_t n) {
  return !f.is_null() && f.len == n && std::memcmp(f.ptr, s, n) == 0;
}

std::string show(const Field &f) { return f.is_null() ? "NULL" : "\"" + printable(f.view()) + "\""; }

}  // namespace

Outcome check_hs(const Check_spec &spec, const Hs_reply &r, uint64_t k, char *why, size_t cap) {
  if (r.code != 0) {
    std::string msg = r.ntokens ? show(r.tokens[0]) : std::string("(none)");
    if (spec.proto == Proto::sql)
      return why_out(Outcome::error, why, cap, "key %llu: SQL error %s", (unsigned long long)k, msg.c_str());
    return why_out(Outcome::error, why, cap, "key %llu: HS error reply code %u, message %s",
                   (unsigned long long)k, r.code, msg.c_str());
  }
  switch (spec.op) {
    case Op::get: {
      if (r.ntokens == 0) {
        if (spec.expect == Expect::none) return Outcome::miss;
        return why_out(Outcome::mismatch, why, cap, "key %llu: no row", (unsigned long long)k);
      }
      if (r.n == 0 || r.ntokens % r.n != 0)
        return why_out(Outcome::mismatch, why, cap, "key %llu: %u values for %u columns",
                       (unsigned long long)k, r.ntokens, r.n);
      if (spec.expect == Expect::none) return Outcome::ok;
      if (spec.expect == Expect::hs_user) {
        if (r.n != 3 || r.ntokens != 3)
          return why_out(Outcome::mismatch, why, cap, "key %llu: %u columns, %u values (expected 3, 3)",
                         (unsigned long long)k, r.n, r.ntokens);
        Row row;
        make_row(k, 0, &row);
        const char *names[3] = {"user_name", "user_email", "created"};
        const char *want[3] = {row.name, row.email, row.created};
        size_t wlen[3] = {row.name_len, row.email_len, row.created_len};
        for (int i = 0; i < 3; ++i) {
          if (!field_eq(r.tokens[i], want[i], wlen[i]))
            return why_out(Outcome::mismatch, why, cap, "key %llu: %s is %s, expected \"%.*s\"",
                           (unsigned long long)k, names[i], show(r.tokens[i]).c_str(), int(wlen[i]),
                           want[i]);
        }
        return Outcome::ok;
      }
      return why_out(Outcome::mismatch, why, cap, "expect mode %s does not apply to %s",
                     expect_name(spec.expect), spec.proto == Proto::sql ? "SQL" : "HandlerSocket");
    }
    case Op::update: {
      if (r.ntokens < 1 || r.tokens[0].is_null())
        return why_out(Outcome::mismatch, why, cap, "key %llu: update reply without a count",
                       (unsigned long long)k);
      if (r.ntokens != 1)
        return why_out(Outcome::mismatch, why, cap, "key %llu: update reply with %u values, expected a count alone",
                       (unsigned long long)k, r.ntokens);
      const Field &c = r.tokens[0];
      if (c.len == 1 && c.ptr[0] == '1') return Outcome::ok;
      if (c.len == 1 && c.ptr[0] == '0' && spec.expect == Expect::none) return Outcome::miss;
      return why_out(Outcome::mismatch, why, cap, "key %llu: update modified %s rows, expected 1",
                     (unsigned long long)k, show(c).c_str());
    }
    case Op::insert:
      // "0\t1" or "0\t1\t<auto-increment id>"
      if (r.n != 1 || r.ntokens > 1)
        return why_out(Outcome::mismatch, why, cap, "key %llu: unexpected insert reply (n=%u, %u values)",
                       (unsigned long long)k, r.n, r.ntokens);
      return Outcome::ok;
    case Op::set:
      break;
  }
  return why_out(Outcome::mismatch, why, cap, "op %s does not apply to %s", op_name(spec.op),
                 spec.proto == Proto::sql ? "SQL" : "HandlerSocket");
}

Outcome check_kv(const Check_spec &spec, const Kv_reply &r, uint64_t k, char *why, size_t cap) {
  if (r.kind == Kv_reply::error || r.kind == Kv_reply::not_stored)
    return why_out(Outcome::error, why, cap, "key %llu: error reply \"%s\"", (unsigned long long)k,
                   printable(r.data.view()).c_str());
  if (spec.op == Op::set) {
    if (r.kind != Kv_reply::stored)
      return why_out(Outcome::mismatch, why, cap, "key %llu: set answered with a non-status reply",
                     (unsigned long long)k);
    if (spec.proto == Proto::resp && r.data.view() != "OK")
      return why_out(Outcome::mismatch, why, cap, "key %llu: set answered \"+%s\"", (unsigned long long)k,
                     printable(r.data.view()).c_str());
    return Outcome::ok;
  }
  // get
  if (r.kind == Kv_reply::miss) {
    if (spec.expect == Expect::none) return Outcome::miss;
    return why_out(Outcome::mismatch, why, cap, "key %llu: miss", (unsigned long long)k);
  }
  if (r.kind != Kv_reply::value)
    return why_out(Outcome::mismatch, why, cap, "key %llu: get answered with a non-value reply \"%s\"",
                   (unsigned long long)k, printable(r.data.view()).c_str());
  if (spec.proto == Proto::mc_text) {
    // The echoed key tells whether replies are matched to the right requests.
    char num[20];
    size_t nl = format_uint(num, k);
    const std::string &pre = spec.key_prefix;
    if (r.key.len != pre.size() + nl || std::memcmp(r.key.ptr, pre.data(), pre.size()) != 0 ||
        std::memcmp(r.key.ptr + pre.size(), num, nl) != 0)
      return why_out(Outcome::mismatch, why, cap, "key %llu: reply is for key \"%s\"", (unsigned long long)k,
                     printable(r.key.view()).c_str());
  }
  if (spec.expect == Expect::none) return Outcome::ok;
  if (spec.expect == Expect::kv_user) {
    char want[128];
    size_t wn = make_kv_value(k, 0, want);
    if (r.data.len == wn && std::memcmp(r.data.ptr, want, wn) == 0) return Outcome::ok;
    return why_out(Outcome::mismatch, why, cap, "key %llu: value \"%s\", expected \"%.*s\"",
                   (unsigned long long)k, printable(r.data.view()).c_str(), int(wn), want);
  }
  return why_out(Outcome::mismatch, why, cap, "expect mode %s does not apply to %s", expect_name(spec.expect),
                 proto_name(spec.proto));
}

}  // namespace loadgen
