/* libFuzzer target for the HandlerSocket parser and encoder. Built by scripts/fuzz.sh.

   Input layout: byte 0 picks small limits, the rest is what a client sent on one connection.
   The target parses it as a connection would (consume each line, continue after errors, stop at
   need_more or fatal) and checks the parser's promises:
     - need_more leaves the buffer untouched and only happens while a line can still fit;
     - error/complete consume exactly one line through its LF;
     - every decoded value lies inside its line; counts never exceed the tokens on the line;
     - the strict prefix of a parsed line needs more (and is not modified);
     - a parsed request, written back out in canonical form, parses to the same fields.
   It also round-trips the input through escape_into/unescape_in_place and through an encoded row. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/fuzz_check.h"
#include "proto/hs/hs_protocol.h"

using namespace tablesocket;
using namespace tablesocket::hs;


namespace {

void put_value(std::string &s, const Value &v) {
  s += '\t';
  if (v.is_null()) {
    s += '\0';
    return;
  }
  Byte_buffer b;
  escape_into(b, v.ptr, v.len);
  s.append(b.data(), b.size());
}

void put_raw(std::string &s, std::string_view v) {
  s += '\t';
  s.append(v.data(), v.size());
}

const char *exec_op_token(Exec_op op) {
  switch (op) {
    case Exec_op::eq: return "=";
    case Exec_op::gt: return ">";
    case Exec_op::ge: return ">=";
    case Exec_op::lt: return "<";
    case Exec_op::le: return "<=";
    case Exec_op::insert: return "+";
    case Exec_op::last_prefix: return "L";
    case Exec_op::upsert: return "+=";
    case Exec_op::merge_desc: return "M-";
    case Exec_op::merge_asc: return "M+";
  }
  FUZZ_CHECK(false);
  return "";
}

const char *compare_op_token(Compare_op op) {
  switch (op) {
    case Compare_op::eq: return "=";
    case Compare_op::ne: return "!=";
    case Compare_op::lt: return "<";
    case Compare_op::le: return "<=";
    case Compare_op::gt: return ">";
    case Compare_op::ge: return ">=";
  }
  FUZZ_CHECK(false);
  return "";
}

char mod_op_char(Modify_op op) {
  switch (op) {
    case Modify_op::update: return 'U';
    case Modify_op::increment: return '+';
    case Modify_op::decrement: return '-';
    case Modify_op::remove: return 'D';
    case Modify_op::none: break;
  }
  FUZZ_CHECK(false);
  return 0;
}

/* The canonical request line for rq. Ends in CRLF so a raw last token ending in CR survives. */
std::string serialize(const Request &rq) {
  std::string s;
  switch (rq.command) {
    case Command::open_index:
      s = "P\t" + std::to_string(rq.open.index_id);
      put_raw(s, rq.open.db);
      put_raw(s, rq.open.table);
      put_raw(s, rq.open.index);
      put_raw(s, rq.open.columns);
      put_raw(s, rq.open.filter_columns);
      break;
    case Command::auth:
      s = "A";
      put_raw(s, rq.auth.type);
      for (uint32_t i = 0; i < rq.auth.nargs; ++i) put_value(s, rq.auth.args[i]);
      break;
    case Command::exec: {
      const Exec_request &e = rq.exec;
      s = std::to_string(e.index_id) + "\t" + exec_op_token(e.op) + "\t" + std::to_string(e.nkeys);
      for (uint32_t i = 0; i < e.nkeys; ++i) put_value(s, e.keys[i]);
      if (e.has_limit) s += "\t" + std::to_string(e.limit) + "\t" + std::to_string(e.offset);
      if (e.has_in && e.in_from_index) {
        s += "\t@\t" + std::to_string(e.in_column) + "\t^\t" + std::to_string(e.in_index_id) + "\t" +
             std::to_string(e.nin_keys);
        for (uint32_t i = 0; i < e.nin_keys; ++i) put_value(s, e.in_keys[i]);
        s += "\t" + std::to_string(e.in_limit);
      } else if (e.has_in) {
        s += "\t@\t" + std::to_string(e.in_column) + "\t" + std::to_string(e.nin_values);
        for (uint32_t i = 0; i < e.nin_values; ++i) put_value(s, e.in_values[i]);
      }
      for (uint32_t i = 0; i < e.nfilters; ++i) {
        const Filter &f = e.filters[i];
        s += f.type == Filter_type::skip ? "\tF\t" : "\tW\t";
        s += compare_op_token(f.op);
        s += "\t" + std::to_string(f.column);
        put_value(s, f.value);
      }
      if (e.mod != Modify_op::none) {
        s += '\t';
        s += mod_op_char(e.mod);
        if (e.mod_returns_rows) s += '?';
        for (uint32_t i = 0; i < e.nmod_values; ++i) put_value(s, e.mod_values[i]);
      }
      break;
    }
  }
  s += "\r\n";
  return s;
}

bool same_value(const Value &a, const Value &b) {
  if (a.is_null() || b.is_null()) return a.is_null() == b.is_null();
  return a.view() == b.view();
}

bool same_values(const Value *a, uint32_t na, const Value *b, uint32_t nb) {
  if (na != nb) return false;
  for (uint32_t i = 0; i < na; ++i)
    if (!same_value(a[i], b[i])) return false;
  return true;
}

bool same_request(const Request &a, const Request &b) {
  if (a.command != b.command) return false;
  switch (a.command) {
    case Command::open_index:
      return a.open.index_id == b.open.index_id && a.open.db == b.open.db &&
             a.open.table == b.open.table && a.open.index == b.open.index &&
             a.open.columns == b.open.columns && a.open.filter_columns == b.open.filter_columns;
    case Command::auth:
      return a.auth.type == b.auth.type &&
             same_values(a.auth.args, a.auth.nargs, b.auth.args, b.auth.nargs);
    case Command::exec: {
      const Exec_request &x = a.exec, &y = b.exec;
      if (x.index_id != y.index_id || x.op != y.op || x.has_limit != y.has_limit ||
          x.limit != y.limit || x.offset != y.offset || x.has_in != y.has_in ||
          x.nfilters != y.nfilters || x.mod != y.mod || x.mod_returns_rows != y.mod_returns_rows)
        return false;
      if (!same_values(x.keys, x.nkeys, y.keys, y.nkeys)) return false;
      if (x.has_in && (x.in_column != y.in_column || x.in_from_index != y.in_from_index ||
                       !same_values(x.in_values, x.nin_values, y.in_values, y.nin_values)))
        return false;
      if (x.in_from_index && (x.in_index_id != y.in_index_id || x.in_limit != y.in_limit ||
                              !same_values(x.in_keys, x.nin_keys, y.in_keys, y.nin_keys)))
        return false;
      for (uint32_t i = 0; i < x.nfilters; ++i) {
        const Filter &f = x.filters[i], &g = y.filters[i];
        if (f.type != g.type || f.op != g.op || f.column != g.column || !same_value(f.value, g.value))
          return false;
      }
      return same_values(x.mod_values, x.nmod_values, y.mod_values, y.nmod_values);
    }
  }
  return false;
}

/* Every value lies inside [lo, hi); reading each byte lets ASan catch stray pointers. */
volatile unsigned char g_sink;
void check_values(const Value *v, uint32_t n, const char *lo, const char *hi) {
  FUZZ_CHECK(n == 0 || v != nullptr);
  for (uint32_t i = 0; i < n; ++i) {
    if (v[i].is_null()) {
      FUZZ_CHECK(v[i].len == 0);
      continue;
    }
    FUZZ_CHECK(v[i].ptr >= lo && v[i].ptr + v[i].len <= hi);
    for (size_t j = 0; j < v[i].len; ++j) g_sink = static_cast<unsigned char>(v[i].ptr[j]);
  }
}

void check_view(std::string_view s, const char *lo, const char *hi) {
  if (s.empty()) return;
  FUZZ_CHECK(s.data() >= lo && s.data() + s.size() <= hi);
  FUZZ_CHECK(s.find('\t') == std::string_view::npos);
}

void check_request(const Request &rq, const char *lo, const char *hi, const Limits &limits) {
  switch (rq.command) {
    case Command::open_index:
      check_view(rq.open.db, lo, hi);
      check_view(rq.open.table, lo, hi);
      check_view(rq.open.index, lo, hi);
      check_view(rq.open.columns, lo, hi);
      check_view(rq.open.filter_columns, lo, hi);
      break;
    case Command::auth:
      check_view(rq.auth.type, lo, hi);
      FUZZ_CHECK(rq.auth.nargs < limits.max_tokens);
      check_values(rq.auth.args, rq.auth.nargs, lo, hi);
      break;
    case Command::exec: {
      const Exec_request &e = rq.exec;
      FUZZ_CHECK(e.nkeys >= 1);
      FUZZ_CHECK(!e.has_in || e.in_from_index || e.nin_values >= 1);
      FUZZ_CHECK(e.has_in || e.nin_values == 0);
      FUZZ_CHECK(!e.in_from_index || (e.has_in && e.nin_values == 0 && e.nin_keys >= 1 && e.in_limit >= 1));
      FUZZ_CHECK(e.has_limit || (e.limit == 1 && e.offset == 0));
      FUZZ_CHECK(e.mod != Modify_op::none || (e.nmod_values == 0 && !e.mod_returns_rows));
      const uint64_t tokens = 3ull + e.nkeys + (e.has_in ? 3ull + e.nin_values : 0) +
                              (e.in_from_index ? 3ull + e.nin_keys : 0) +
                              4ull * e.nfilters + (e.mod != Modify_op::none ? 1ull + e.nmod_values : 0);
      FUZZ_CHECK(tokens <= limits.max_tokens);
      check_values(e.keys, e.nkeys, lo, hi);
      check_values(e.in_values, e.nin_values, lo, hi);
      check_values(e.in_keys, e.nin_keys, lo, hi);
      check_values(e.mod_values, e.nmod_values, lo, hi);
      for (uint32_t i = 0; i < e.nfilters; ++i) check_values(&e.filters[i].value, 1, lo, hi);
      break;
    }
  }
}

/* Parses a fresh exact-size copy of line (ASan sees any over-read) and returns the status. */
Parse_status parse_copy(const char *line, size_t n, const Limits &limits, Request *rq,
                        std::vector<char> &copy, Parse_scratch &scratch) {
  copy.assign(line, line + n);
  copy.shrink_to_fit();
  return parse_request(copy.data(), copy.size(), limits, scratch, rq).status;
}

void fuzz_connection(const char *data, size_t size, const Limits &limits) {
  const std::vector<char> orig(data, data + size);
  std::vector<char> buf(orig);
  Parse_scratch scratch, scratch2;
  std::vector<char> copy;
  size_t off = 0;
  while (true) {
    char *const p = buf.data() + off;
    const size_t left = size - off;
    Request rq;
    const Parse_result r = parse_request(p, left, limits, scratch, &rq);
    if (r.status == Parse_status::need_more) {
      FUZZ_CHECK(left == 0 || std::memchr(orig.data() + off, '\n', left) == nullptr);
      FUZZ_CHECK(left == 0 || std::memcmp(p, orig.data() + off, left) == 0);
      FUZZ_CHECK(left <= limits.max_line + 1);
      return;
    }
    FUZZ_CHECK(r.error_message != nullptr || r.status == Parse_status::complete);
    if (r.status == Parse_status::fatal) return;
    /* complete or error: exactly one line, through its LF */
    FUZZ_CHECK(r.consumed >= 1 && r.consumed <= left);
    FUZZ_CHECK(orig[off + r.consumed - 1] == '\n');
    FUZZ_CHECK(std::memchr(orig.data() + off, '\n', r.consumed - 1) == nullptr);
    FUZZ_CHECK(r.consumed - 1 <= limits.max_line + 1);
    if (r.status == Parse_status::error) {
      FUZZ_CHECK(r.error_code == 2);
      FUZZ_CHECK(r.error_message[0] != '\0');
    } else {
      check_request(rq, p, p + r.consumed, limits);

      /* The line without its LF is incomplete, and parsing it must not modify it. */
      Request tmp;
      FUZZ_CHECK(parse_copy(orig.data() + off, r.consumed - 1, limits, &tmp, copy, scratch2) ==
                 Parse_status::need_more);
      FUZZ_CHECK(std::memcmp(copy.data(), orig.data() + off, r.consumed - 1) == 0);

      /* Canonical form round trip. */
      const std::string canon = serialize(rq);
      Limits big;
      big.max_line = canon.size();
      big.max_tokens = 2 * limits.max_tokens + 8;
      Request again;
      FUZZ_CHECK(parse_copy(canon.data(), canon.size(), big, &again, copy, scratch2) ==
                 Parse_status::complete);
      FUZZ_CHECK(same_request(rq, again));
    }
    off += r.consumed;
  }
}

void fuzz_escape(const char *data, size_t size) {
  Byte_buffer out;
  out.append("x", 1);
  escape_into(out, data, size);
  const char *e = out.data() + 1;
  const size_t n = out.size() - 1;
  size_t specials = 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(e[i]);
    if (c == 0x01) {
      FUZZ_CHECK(i + 1 < n);
      const unsigned char d = static_cast<unsigned char>(e[i + 1]);
      FUZZ_CHECK(d >= 0x40 && d <= 0x4f);
      ++i;
      ++specials;
    } else {
      FUZZ_CHECK(c >= 0x10);
    }
  }
  FUZZ_CHECK(n == size + specials);
  std::vector<char> back(e, e + n);
  const size_t m = unescape_in_place(back.data(), back.size());
  FUZZ_CHECK(m == size && (size == 0 || std::memcmp(back.data(), data, size) == 0));

  /* The same bytes as one row of values split at 0xfe, encoded, then parsed as an insert. */
  std::vector<Value> parts;
  size_t start = 0;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || static_cast<unsigned char>(data[i]) == 0xfe) {
      Value v;
      v.ptr = (i - start == 1 && data[start] == '\0') ? nullptr : data + start;  // a NULL now and then
      v.len = v.ptr ? i - start : 0;
      parts.push_back(v);
      start = i + 1;
    }
  }
  Byte_buffer line;
  line.append("5\t+\t" + std::to_string(parts.size()));
  const size_t mark = begin_rows(line, parts.size());
  append_value(line, "junk", 4);
  cancel_rows(line, mark);
  for (const Value &v : parts) append_value(line, v.ptr, v.len);
  end_rows(line);
  std::vector<char> lb(line.data(), line.data() + line.size());
  Limits big;
  big.max_line = lb.size();
  big.max_tokens = static_cast<uint32_t>(parts.size() + 3);
  Parse_scratch scratch;
  Request rq;
  const Parse_result r = parse_request(lb.data(), lb.size(), big, scratch, &rq);
  FUZZ_CHECK(r.status == Parse_status::complete && r.consumed == lb.size());
  FUZZ_CHECK(rq.command == Command::exec && rq.exec.op == Exec_op::insert);
  FUZZ_CHECK(same_values(rq.exec.keys, rq.exec.nkeys, parts.data(), static_cast<uint32_t>(parts.size())));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* Byte 0: low nibble picks max_line, high nibble max_tokens; 0 means the default. */
  const unsigned sel = data[0];
  Limits limits;
  if (sel & 0x0f) limits.max_line = (sel & 0x0f) * 12 - 4;  // 8 .. 176 bytes
  if (sel >> 4) limits.max_tokens = (sel >> 4) * 3 - 2;     // 1 .. 43 tokens
  const char *p = reinterpret_cast<const char *>(data + 1);
  fuzz_connection(p, size - 1, limits);
  fuzz_escape(p, size - 1);
  return 0;
}
