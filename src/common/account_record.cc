#include "common/account_record.h"

#include <cctype>
#include <cstdlib>

namespace tablesocket {
namespace {

/* A small reader for the JSON MariaDB writes into global_priv: objects, arrays, strings with the
   standard escapes, numbers, true/false/null. Depth is bounded; anything else is an error. */
class Json_reader {
 public:
  explicit Json_reader(std::string_view s) : s_(s) {}

  void ws() { while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_; }
  bool eat(char c) { ws(); if (i_ < s_.size() && s_[i_] == c) { ++i_; return true; } return false; }
  bool peek(char c) { ws(); return i_ < s_.size() && s_[i_] == c; }
  bool at_end() { ws(); return i_ == s_.size(); }

  bool string(std::string *out) {
    if (!eat('"')) return false;
    out->clear();
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') { out->push_back(c); continue; }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          unsigned cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            unsigned lo;
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
            i_ += 2;
            if (!hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(cp, out);
          break;
        }
        default: return false;
      }
    }
    return false;
  }

  bool number(int64_t *out) {
    ws();
    size_t start = i_;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) ++i_;
    while (i_ < s_.size() && (isdigit((unsigned char)s_[i_]) || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                              s_[i_] == '-' || s_[i_] == '+'))
      ++i_;
    if (i_ == start) return false;
    std::string t(s_.substr(start, i_ - start));
    char *end = nullptr;
    double d = strtod(t.c_str(), &end);
    if (!end || *end) return false;
    if (d > 9.2e18) d = 9.2e18;
    if (d < -9.2e18) d = -9.2e18;
    *out = int64_t(d);
    return true;
  }

  bool literal(bool *value) {
    ws();
    if (s_.substr(i_, 4) == "true") { i_ += 4; *value = true; return true; }
    if (s_.substr(i_, 5) == "false") { i_ += 5; *value = false; return true; }
    if (s_.substr(i_, 4) == "null") { i_ += 4; *value = false; return true; }
    return false;
  }

  /* Skips any value. */
  bool skip(int depth = 0) {
    if (depth > 32) return false;
    ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    std::string tmp;
    if (c == '"') return string(&tmp);
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++i_;
      if (eat(close)) return true;
      for (;;) {
        if (c == '{') { if (!string(&tmp) || !eat(':')) return false; }
        if (!skip(depth + 1)) return false;
        if (eat(close)) return true;
        if (!eat(',')) return false;
      }
    }
    bool b;
    if (c == 't' || c == 'f' || c == 'n') return literal(&b);
    int64_t n;
    return number(&n);
  }

 private:
  bool hex4(unsigned *out) {
    if (i_ + 4 > s_.size()) return false;
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= unsigned(h - '0');
      else if (h >= 'a' && h <= 'f') v |= unsigned(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= unsigned(h - 'A' + 10);
      else return false;
    }
    *out = v;
    return true;
  }
  static void utf8(unsigned cp, std::string *out) {
    if (cp < 0x80) out->push_back(char(cp));
    else if (cp < 0x800) { out->push_back(char(0xC0 | (cp >> 6))); out->push_back(char(0x80 | (cp & 0x3F))); }
    else if (cp < 0x10000) {
      out->push_back(char(0xE0 | (cp >> 12)));
      out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(char(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(char(0xF0 | (cp >> 18)));
      out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(char(0x80 | (cp & 0x3F)));
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

/* One {"plugin": ..., "authentication_string": ...} object of auth_or (or the top level). */
bool read_method_object(Json_reader &r, Auth_method *m) {
  if (!r.eat('{')) return false;
  if (r.eat('}')) return true;
  std::string key;
  for (;;) {
    if (!r.string(&key) || !r.eat(':')) return false;
    if (key == "plugin") { if (!r.string(&m->plugin)) return false; }
    else if (key == "authentication_string") { if (!r.string(&m->auth_string)) return false; }
    else if (!r.skip()) return false;
    if (r.eat('}')) return true;
    if (!r.eat(',')) return false;
  }
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One part of an account name, optionally quoted with ' " or `; doubled quotes stand for one. */
bool account_part(std::string_view t, std::string *out) {
  out->clear();
  if (t.size() >= 2 && (t[0] == '\'' || t[0] == '"' || t[0] == '`') && t.back() == t[0]) {
    char q = t[0];
    for (size_t i = 1; i + 1 < t.size(); ++i) {
      if (t[i] == q) {
        if (i + 2 < t.size() && t[i + 1] == q) { out->push_back(q); ++i; continue; }
        return false;
      }
      out->push_back(t[i]);
    }
    return true;
  }
  for (char c : t)
    if (c == '\'' || c == '"' || c == '`' || c == '@' || isspace((unsigned char)c)) return false;
  out->assign(t);
  return true;
}

}  // namespace

bool parse_account_record(std::string_view json, Account_record *out, std::string *error) {
  *out = Account_record();
  Json_reader r(json);
  Auth_method top;
  bool has_top_plugin = false;
  std::vector<Auth_method> auth_or;
  bool has_auth_or = false;
  auto fail = [&](const char *what) { *error = what; return false; };
  if (!r.eat('{')) return fail("Priv is not a JSON object");
  if (!r.eat('}')) {
    std::string key, sval;
    for (;;) {
      if (!r.string(&key) || !r.eat(':')) return fail("malformed JSON key");
      bool ok = true;
      int64_t n = 0;
      bool b = false;
      if (key == "plugin") { ok = r.string(&top.plugin); has_top_plugin = true; }
      else if (key == "authentication_string") ok = r.string(&top.auth_string);
      else if (key == "account_locked") ok = r.literal(&b), out->account_locked = b;
      else if (key == "password_last_changed") ok = r.number(&n), out->password_last_changed = n;
      else if (key == "password_lifetime") ok = r.number(&n), out->password_lifetime = n;
      else if (key == "ssl_type") ok = r.number(&n), out->ssl_type = int(n);
      else if (key == "ssl_cipher") ok = r.string(&out->ssl_cipher);
      else if (key == "x509_issuer") ok = r.string(&out->x509_issuer);
      else if (key == "x509_subject") ok = r.string(&out->x509_subject);
      else if (key == "max_user_connections") ok = r.number(&n), out->max_user_connections = n;
      else if (key == "max_questions") ok = r.number(&n), out->max_questions = n;
      else if (key == "max_updates") ok = r.number(&n), out->max_updates = n;
      else if (key == "max_connections") ok = r.number(&n), out->max_connections = n;
      else if (key == "default_role") ok = r.string(&out->default_role);
      else if (key == "auth_or") {
        has_auth_or = true;
        if (!r.eat('[')) return fail("auth_or is not an array");
        if (!r.eat(']')) {
          for (;;) {
            Auth_method m;
            if (!read_method_object(r, &m)) return fail("malformed auth_or entry");
            auth_or.push_back(std::move(m));
            if (r.eat(']')) break;
            if (!r.eat(',')) return fail("malformed auth_or");
          }
        }
      } else ok = r.skip();
      if (!ok) return fail("malformed JSON value");
      if (r.eat('}')) break;
      if (!r.eat(',')) return fail("malformed JSON object");
    }
  }
  if (!r.at_end()) return fail("trailing bytes after the JSON object");
  if (has_auth_or) {
    /* In auth_or, an empty object {} stands for the top-level plugin/authentication_string. */
    for (auto &m : auth_or) out->methods.push_back(m.plugin.empty() ? top : m);
  } else if (has_top_plugin) {
    out->methods.push_back(top);
  }
  return true;
}

bool hex_decode(std::string_view hex, unsigned char *out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return true;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? (unsigned char)a[i] : 0, y = i < b.size() ? (unsigned char)b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

bool native_hash_stage2(std::string_view s, unsigned char out[20]) {
  return s.size() == 41 && s[0] == '*' && hex_decode(s.substr(1), out, 20);
}

bool split_account_name(std::string_view text, std::string *user, std::string *host) {
  while (!text.empty() && isspace((unsigned char)text.front())) text.remove_prefix(1);
  while (!text.empty() && isspace((unsigned char)text.back())) text.remove_suffix(1);
  if (text.empty()) return false;
  /* The '@' that separates the parts: the last one outside quotes. */
  size_t at = std::string_view::npos;
  char q = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (q) { if (c == q) q = 0; continue; }
    if (c == '\'' || c == '"' || c == '`') q = c;
    else if (c == '@') at = i;
  }
  if (q) return false;
  if (at == std::string_view::npos) {
    if (!account_part(text, user)) return false;
    *host = "%";
    return !user->empty();
  }
  if (!account_part(text.substr(0, at), user) || !account_part(text.substr(at + 1), host)) return false;
  return !user->empty() && !host->empty();
}

}  // namespace tablesocket
