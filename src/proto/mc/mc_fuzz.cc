/* libFuzzer target for the memcached parser and encoder. Built by scripts/fuzz.sh (target "mc").

   Input layout: byte 0 picks limits, the rest is what a client sent on one connection.
   The target parses it as a connection would (consume each request, continue after errors,
   discard swallowed bytes, stop at need_more or fatal) and checks the parser's promises:
     - the buffer is never modified, and nothing past len is read (ASan: the buffer is exact-size);
     - need_more stays need_more for shorter prefixes, and only happens while a request can still
       fit the limits;
     - complete/error consume whole lines (through an LF) plus, for storage, the data block;
       swallow only follows a storage line and equals its <bytes> + 2;
     - every view of a parsed request lies inside what it consumed; keys are 1..250 bytes
       without spaces; counts stay within their fixed arrays;
     - every strict prefix of a complete request needs more;
     - a parsed request, written back in canonical form, parses to the same fields;
     - encoder round trips: VALUE entries and meta return flags read back as what was encoded,
       base64 decodes what it encoded. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/fuzz_check.h"
#include "proto/mc/mc_protocol.h"

using namespace tablesocket;
using namespace tablesocket::mc;


namespace {

const char *command_token(Mc_command c) {
  switch (c) {
    case Mc_command::get: return "get";
    case Mc_command::gets: return "gets";
    case Mc_command::gat: return "gat";
    case Mc_command::gats: return "gats";
    case Mc_command::set: return "set";
    case Mc_command::add: return "add";
    case Mc_command::replace: return "replace";
    case Mc_command::append: return "append";
    case Mc_command::prepend: return "prepend";
    case Mc_command::cas: return "cas";
    case Mc_command::del: return "delete";
    case Mc_command::incr: return "incr";
    case Mc_command::decr: return "decr";
    case Mc_command::touch: return "touch";
    case Mc_command::flush_all: return "flush_all";
    case Mc_command::version: return "version";
    case Mc_command::stats: return "stats";
    case Mc_command::metadump: return "lru_crawler metadump";
    case Mc_command::verbosity: return "verbosity";
    case Mc_command::quit: return "quit";
    case Mc_command::mg: return "mg";
    case Mc_command::ms: return "ms";
    case Mc_command::md: return "md";
    case Mc_command::ma: return "ma";
    case Mc_command::mn: return "mn";
    case Mc_command::me: return "me";
  }
  FUZZ_CHECK(false);
  return "";
}

bool is_storage(Mc_command c) {
  return c == Mc_command::set || c == Mc_command::add || c == Mc_command::replace ||
         c == Mc_command::append || c == Mc_command::prepend || c == Mc_command::cas;
}

void put(std::string &s, std::string_view v) {
  s += ' ';
  s.append(v.data(), v.size());
}

void put_meta_flags(std::string &s, const Mc_request &rq) {
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    s += ' ';
    s += rq.meta_flags[i].flag;
    s.append(rq.meta_flags[i].arg.data(), rq.meta_flags[i].arg.size());
  }
}

/* The canonical request for rq; false when rq cannot be written back (stats beyond the
   arguments the request keeps). */
bool serialize(const Mc_request &rq, std::string *out) {
  std::string s = command_token(rq.command);
  switch (rq.command) {
    case Mc_command::gat:
    case Mc_command::gats:
      put(s, std::to_string(rq.exptime));
      [[fallthrough]];
    case Mc_command::get:
    case Mc_command::gets:
      for (std::string_view k : rq.keys) put(s, k);
      break;
    case Mc_command::set:
    case Mc_command::add:
    case Mc_command::replace:
    case Mc_command::append:
    case Mc_command::prepend:
    case Mc_command::cas:
      put(s, rq.raw_key);
      put(s, std::to_string(rq.client_flags));
      put(s, std::to_string(rq.exptime));
      put(s, std::to_string(rq.bytes));
      if (rq.command == Mc_command::cas) put(s, std::to_string(rq.cas_unique));
      if (rq.noreply) put(s, "noreply");
      s += "\r\n";
      s.append(rq.data.data(), rq.data.size());
      break;
    case Mc_command::del:
      put(s, rq.raw_key);
      if (rq.noreply) put(s, "noreply");
      break;
    case Mc_command::incr:
    case Mc_command::decr:
      put(s, rq.raw_key);
      put(s, std::to_string(rq.delta));
      if (rq.noreply) put(s, "noreply");
      break;
    case Mc_command::touch:
      put(s, rq.raw_key);
      put(s, std::to_string(rq.exptime));
      if (rq.noreply) put(s, "noreply");
      break;
    case Mc_command::flush_all:
      if (rq.has_delay) put(s, std::to_string(rq.delay));
      if (rq.noreply) put(s, "noreply");
      break;
    case Mc_command::verbosity:
      put(s, std::to_string(rq.verbosity));
      if (rq.noreply) put(s, "noreply");
      break;
    case Mc_command::metadump:
      put(s, rq.dump_class_1 ? "all" : "2");
      break;
    case Mc_command::stats:
      if (rq.nstats_args > kMaxStatsArgs) return false;
      for (uint32_t i = 0; i < rq.nstats_args; ++i) put(s, rq.stats_args[i]);
      break;
    case Mc_command::version:
    case Mc_command::quit:
    case Mc_command::mn:
      break;
    case Mc_command::mg:
    case Mc_command::md:
    case Mc_command::ma:
      put(s, rq.raw_key);
      put_meta_flags(s, rq);
      break;
    case Mc_command::ms:
      put(s, rq.raw_key);
      put(s, std::to_string(rq.bytes));
      put_meta_flags(s, rq);
      s += "\r\n";
      s.append(rq.data.data(), rq.data.size());
      break;
    case Mc_command::me:
      put(s, rq.raw_key);
      if (rq.meta.base64_key) put(s, "b");
      break;
  }
  s += "\r\n";
  *out = std::move(s);
  return true;
}

bool same_meta(const Mc_meta &a, const Mc_meta &b) {
  return a.base64_key == b.base64_key && a.return_value == b.return_value &&
         a.no_update == b.no_update && a.invalidate == b.invalidate && a.has_ttl == b.has_ttl &&
         a.ttl == b.ttl && a.vivify == b.vivify && a.vivify_ttl == b.vivify_ttl &&
         a.has_recache == b.has_recache && a.recache_ttl == b.recache_ttl &&
         a.has_client_flags == b.has_client_flags && a.client_flags == b.client_flags &&
         a.has_compare_cas == b.has_compare_cas && a.compare_cas == b.compare_cas &&
         a.mode == b.mode && a.initial == b.initial && a.delta == b.delta &&
         a.seen[0] == b.seen[0] && a.seen[1] == b.seen[1];
}

bool same_request(const Mc_request &a, const Mc_request &b) {
  if (a.command != b.command || a.noreply != b.noreply || a.key() != b.key() ||
      a.raw_key != b.raw_key || a.keys != b.keys || a.store_op != b.store_op ||
      a.client_flags != b.client_flags || a.exptime != b.exptime || a.bytes != b.bytes ||
      a.cas_unique != b.cas_unique || a.data != b.data || a.delta != b.delta || a.incr != b.incr ||
      a.has_delay != b.has_delay || a.delay != b.delay || a.verbosity != b.verbosity || a.dump_class_1 != b.dump_class_1 ||
      a.nstats_args != b.nstats_args || a.nmeta_flags != b.nmeta_flags || !same_meta(a.meta, b.meta))
    return false;
  for (uint32_t i = 0; i < a.nstats_args && i < kMaxStatsArgs; ++i)
    if (a.stats_args[i] != b.stats_args[i]) return false;
  for (uint32_t i = 0; i < a.nmeta_flags; ++i)
    if (a.meta_flags[i].flag != b.meta_flags[i].flag || a.meta_flags[i].arg != b.meta_flags[i].arg)
      return false;
  return true;
}

volatile unsigned char g_sink;

void check_view(std::string_view v, const char *lo, const char *hi) {
  if (v.empty()) return;
  FUZZ_CHECK(v.data() >= lo && v.data() + v.size() <= hi);
  for (char c : v) g_sink = static_cast<unsigned char>(c);
}

void check_key(std::string_view k) {
  FUZZ_CHECK(!k.empty() && k.size() <= kMaxKeyLength);
  FUZZ_CHECK(k.find(' ') == std::string_view::npos);
  FUZZ_CHECK(k.find('\n') == std::string_view::npos);
  FUZZ_CHECK(k.find('\0') == std::string_view::npos);
}

bool has_key(Mc_command c) {
  switch (c) {
    case Mc_command::get: case Mc_command::gets: case Mc_command::gat: case Mc_command::gats:
    case Mc_command::flush_all: case Mc_command::version: case Mc_command::stats: case Mc_command::metadump:
    case Mc_command::verbosity: case Mc_command::quit: case Mc_command::mn:
      return false;
    default:
      return true;
  }
}

void check_request(const Mc_request &rq, const char *lo, const char *hi, const Mc_limits &limits) {
  for (std::string_view k : rq.keys) {
    check_view(k, lo, hi);
    check_key(k);
  }
  FUZZ_CHECK(rq.keys.size() <= limits.max_keys);
  if (rq.command == Mc_command::get || rq.command == Mc_command::gets) FUZZ_CHECK(!rq.keys.empty());
  if (has_key(rq.command)) {
    check_view(rq.raw_key, lo, hi);
    check_key(rq.raw_key);
    if (rq.meta.base64_key) {
      FUZZ_CHECK(rq.key_len >= 1 && rq.key_len <= rq.raw_key.size());
      FUZZ_CHECK(rq.key().data() == rq.key_buf);
    } else {
      FUZZ_CHECK(rq.key() == rq.raw_key);
    }
  } else {
    FUZZ_CHECK(rq.raw_key.empty() && rq.keys.size() <= limits.max_keys);
  }
  if (is_storage(rq.command) || rq.command == Mc_command::ms) {
    FUZZ_CHECK(rq.bytes <= limits.max_value_size && rq.data.size() == rq.bytes);
    check_view(rq.data, lo, hi);
    /* the data block is followed by its CRLF, inside what was consumed */
    FUZZ_CHECK(rq.data.data() + rq.bytes + 2 == hi);
    FUZZ_CHECK(hi[-2] == '\r' && hi[-1] == '\n');
  } else {
    FUZZ_CHECK(rq.data.empty());
  }
  FUZZ_CHECK(rq.nmeta_flags <= kMaxMetaFlags);
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    const Mc_meta_flag &f = rq.meta_flags[i];
    FUZZ_CHECK(rq.meta.has(f.flag));
    check_view(f.arg, lo, hi);
    if (f.flag == 'O') FUZZ_CHECK(f.arg.size() + 1 <= kMaxOpaqueLength);
    for (uint32_t j = 0; j < i; ++j) FUZZ_CHECK(rq.meta_flags[j].flag != f.flag);
  }
  if (rq.nstats_args) check_view(rq.stats_args[0], lo, hi);
}

/* Parses a fresh exact-size copy (ASan sees any over-read) and returns the status. */
Mc_parse_status parse_copy(const char *p, size_t n, const Mc_limits &limits, Mc_request *rq) {
  std::vector<char> copy(p, p + n);
  copy.shrink_to_fit();
  const Mc_parse_status s = parse_request(copy.data(), copy.size(), limits, rq).status;
  FUZZ_CHECK(n == 0 || std::memcmp(copy.data(), p, n) == 0);
  return s;
}

/* ---- encoder round trips ---- */

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

bool read_uint(std::string_view &s, uint64_t *v) {
  size_t i = 0;
  uint64_t r = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') r = r * 10 + static_cast<uint64_t>(s[i++] - '0');
  if (i == 0) return false;
  s.remove_prefix(i);
  *v = r;
  return true;
}

bool eat(std::string_view &s, std::string_view what) {
  if (s.substr(0, what.size()) != what) return false;
  s.remove_prefix(what.size());
  return true;
}

void round_trip_value(const Mc_request &rq) {
  Byte_buffer out;
  const bool with_cas = rq.cas_unique & 1;
  encode_value(out, rq.key(), rq.client_flags, rq.data, with_cas, rq.cas_unique);
  std::string_view s = out.view();
  uint64_t flags, bytes, cas;
  FUZZ_CHECK(eat(s, "VALUE "));
  FUZZ_CHECK(eat(s, rq.key()));
  FUZZ_CHECK(eat(s, " ") && read_uint(s, &flags) && flags == rq.client_flags);
  FUZZ_CHECK(eat(s, " ") && read_uint(s, &bytes) && bytes == rq.data.size());
  if (with_cas) FUZZ_CHECK(eat(s, " ") && read_uint(s, &cas) && cas == rq.cas_unique);
  FUZZ_CHECK(eat(s, "\r\n") && eat(s, rq.data) && eat(s, "\r\n") && s.empty());
}

/* Encodes a meta reply for rq with a made-up item, then reads every return flag back. */
void round_trip_meta(const Mc_request &rq, uint64_t seed) {
  Mc_item_info item;
  item.cas = mix(seed);
  item.client_flags = static_cast<uint32_t>(mix(seed + 1));
  item.size = static_cast<uint32_t>(mix(seed + 2) & 0xffff);
  item.ttl = (seed & 1) ? -1 : static_cast<int64_t>(mix(seed + 3) & 0xffffff);
  item.last_access = static_cast<uint32_t>(mix(seed + 4) & 0xffff);
  item.fetched = seed & 2;
  item.key_binary = rq.command == Mc_command::mg ? bool(seed & 4) : rq.meta.base64_key;
  item.won = seed & 8;
  item.stale = seed & 16;
  item.token_sent = seed & 32;
  const bool hit = rq.command == Mc_command::ms || !(seed & 64);
  Byte_buffer out;
  encode_meta(out, Mc_meta_code::hd, rq, hit ? &item : nullptr);
  std::string_view s = out.view();
  FUZZ_CHECK(eat(s, "HD"));
  const std::string_view key = rq.key();
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    const Mc_meta_flag &f = rq.meta_flags[i];
    uint64_t v;
    const bool echoes = f.flag == 'O' || f.flag == 'k' ||
                        (hit && rq.command == Mc_command::mg && std::strchr("stcflh", f.flag)) ||
                        (rq.command == Mc_command::ms && f.flag == 'c') ||
                        (hit && rq.command == Mc_command::ma && (f.flag == 'c' || f.flag == 't'));
    if (!echoes) continue;
    FUZZ_CHECK(eat(s, " ") && !s.empty() && s[0] == f.flag);
    s.remove_prefix(1);
    switch (f.flag) {
      case 'O': FUZZ_CHECK(eat(s, f.arg)); break;
      case 'k': {
        const bool binary = (hit && rq.command == Mc_command::mg) ? item.key_binary : rq.meta.base64_key;
        if (!binary) {
          FUZZ_CHECK(eat(s, key));
        } else {
          const size_t n = base64_encoded_length(key.size());
          char dec[kMaxKeyLength];
          FUZZ_CHECK(s.size() >= n && base64_decode(s.data(), n, dec, sizeof dec) == key.size());
          FUZZ_CHECK(std::memcmp(dec, key.data(), key.size()) == 0);
          s.remove_prefix(n);
          FUZZ_CHECK(eat(s, " b"));
        }
        break;
      }
      case 's': FUZZ_CHECK(read_uint(s, &v) && v == item.size); break;
      case 'c': FUZZ_CHECK(read_uint(s, &v) && v == (hit ? item.cas : 0)); break;
      case 'f': FUZZ_CHECK(read_uint(s, &v) && v == item.client_flags); break;
      case 'l': FUZZ_CHECK(read_uint(s, &v) && v == item.last_access); break;
      case 'h': FUZZ_CHECK(eat(s, item.fetched ? "1" : "0")); break;
      case 't':
        if (item.ttl < 0)
          FUZZ_CHECK(eat(s, "-1"));
        else
          FUZZ_CHECK(read_uint(s, &v) && v == static_cast<uint64_t>(item.ttl));
        break;
    }
  }
  if (hit && rq.command == Mc_command::mg) {
    if (item.token_sent) FUZZ_CHECK(eat(s, " Z"));
    if (item.stale) FUZZ_CHECK(eat(s, " X"));
    if (item.won) FUZZ_CHECK(eat(s, " W"));
  }
  FUZZ_CHECK(s == "\r\n");
}

void fuzz_connection(const char *data, size_t size, const Mc_limits &limits) {
  const std::vector<char> orig(data, data + size);
  std::vector<char> buf(orig);
  buf.shrink_to_fit();
  const size_t line_limit =
      limits.max_multiget_line > limits.max_line ? limits.max_multiget_line : limits.max_line;
  Mc_request rq, again;
  size_t off = 0;
  uint64_t swallow = 0;
  while (true) {
    off += swallow_step(&swallow, size - off);
    if (swallow) return;  // the rest of the stream is being discarded
    char *const p = buf.data() + off;
    const size_t left = size - off;
    const Mc_parse_result r = parse_request(p, left, limits, &rq);
    FUZZ_CHECK(left == 0 || std::memcmp(p, orig.data() + off, left) == 0);
    if (r.status == Mc_parse_status::need_more) {
      FUZZ_CHECK(r.consumed == 0 && r.swallow == 0);
      /* No more than a line and a data block can be pending. */
      FUZZ_CHECK(left <= line_limit + 2 + limits.max_value_size + 2);
      const void *nl = left ? std::memchr(p, '\n', left) : nullptr;
      if (!nl) FUZZ_CHECK(left <= line_limit);
      /* Shorter prefixes need more too. */
      if (left) {
        FUZZ_CHECK(parse_copy(p, left - 1, limits, &again) == Mc_parse_status::need_more);
        FUZZ_CHECK(parse_copy(p, left / 2, limits, &again) == Mc_parse_status::need_more);
      }
      return;
    }
    FUZZ_CHECK(r.error != nullptr || r.status == Mc_parse_status::complete);
    if (r.status == Mc_parse_status::fatal) {
      /* Closed silently, as memcached closes; but for a get line past its own limit (memcached
         has none), which is told why first. */
      FUZZ_CHECK(!r.reply || (std::strcmp(r.error, "SERVER_ERROR get line too long (tablesocket_max_request_size)") == 0 &&
                              left > line_limit));
      return;
    }
    FUZZ_CHECK(r.consumed >= 1 && r.consumed <= left);
    const char *nl = static_cast<const char *>(std::memchr(p, '\n', left));
    FUZZ_CHECK(nl != nullptr);
    const size_t line = static_cast<size_t>(nl - p) + 1;
    FUZZ_CHECK(line - 1 <= line_limit);
    FUZZ_CHECK(r.consumed >= line);
    if (r.status == Mc_parse_status::error) {
      FUZZ_CHECK(r.error[0] != '\0');
      FUZZ_CHECK(std::strncmp(r.error, "ERROR", 5) == 0 || std::strncmp(r.error, "CLIENT_ERROR ", 13) == 0 ||
                 std::strncmp(r.error, "SERVER_ERROR ", 13) == 0 ||
                 /* lru_crawler metadump's own answers */
                 std::strcmp(r.error, "BADCLASS invalid class id") == 0 ||
                 std::strcmp(r.error, "NOTSTARTED no items to crawl") == 0);
      if (r.swallow) {
        FUZZ_CHECK(r.consumed == line);
        FUZZ_CHECK(r.swallow >= 2 && r.swallow <= uint64_t(kMaxDataLength) + 2);
      }
      if (r.consumed > line) FUZZ_CHECK(std::strcmp(r.error, "CLIENT_ERROR bad data chunk") == 0);
      swallow = r.swallow;
    } else {
      FUZZ_CHECK(r.swallow == 0 && r.error == nullptr);
      const bool has_data = is_storage(rq.command) || rq.command == Mc_command::ms;
      FUZZ_CHECK(has_data ? r.consumed == line + rq.bytes + 2 : r.consumed == line);
      check_request(rq, p, p + r.consumed, limits);

      /* Every strict prefix needs more: check the ones at the edges. */
      FUZZ_CHECK(parse_copy(p, r.consumed - 1, limits, &again) == Mc_parse_status::need_more);
      FUZZ_CHECK(parse_copy(p, line - 1, limits, &again) == Mc_parse_status::need_more);
      if (has_data) FUZZ_CHECK(parse_copy(p, line, limits, &again) == Mc_parse_status::need_more);

      /* Canonical form round trip. The canonical line is never longer than the original,
         except for the CR it always has. */
      std::string canon;
      if (serialize(rq, &canon)) {
        std::vector<char> cb(canon.begin(), canon.end());
        Mc_limits wider = limits;
        ++wider.max_line;
        ++wider.max_multiget_line;
        const Mc_parse_result r2 = parse_request(cb.data(), cb.size(), wider, &again);
        FUZZ_CHECK(r2.status == Mc_parse_status::complete && r2.consumed == cb.size());
        FUZZ_CHECK(same_request(rq, again));
      }

      if (has_data) round_trip_value(rq);
      if (rq.command == Mc_command::mg || rq.command == Mc_command::ms ||
          rq.command == Mc_command::md || rq.command == Mc_command::ma)
        round_trip_meta(rq, off * 131 + r.consumed);
    }
    off += r.consumed;
  }
}

void fuzz_base64(const char *data, size_t size) {
  Byte_buffer enc;
  append_base64(enc, data, size);
  FUZZ_CHECK(enc.size() == base64_encoded_length(size));
  std::vector<char> dec(size + 3);
  const size_t n = base64_decode(enc.data(), enc.size(), dec.data(), dec.size());
  FUZZ_CHECK(n == size && (size == 0 || std::memcmp(dec.data(), data, size) == 0));

  /* Whatever decodes, re-encodes to something that decodes to the same bytes. */
  std::vector<char> d1(size / 4 * 3 + 3);
  const size_t m = base64_decode(data, size, d1.data(), d1.size());
  FUZZ_CHECK(m <= size / 4 * 3 + 3);
  if (m) {
    Byte_buffer e2;
    append_base64(e2, d1.data(), m);
    std::vector<char> d2(m + 3);
    FUZZ_CHECK(base64_decode(e2.data(), e2.size(), d2.data(), d2.size()) == m);
    FUZZ_CHECK(std::memcmp(d1.data(), d2.data(), m) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* Byte 0: bits 0-2 max_line, bits 3-4 max_value_size, bit 5 strict_keys, bits 6-7 max_keys. */
  static const size_t lines[8] = {2048, 16, 40, 64, 100, 120, 300, 1000};
  static const uint32_t values[4] = {1u << 20, 0, 5, 100};
  static const uint32_t keys[4] = {10000, 1, 3, 50};
  const unsigned sel = data[0];
  Mc_limits limits;
  limits.max_line = lines[sel & 7];
  if (limits.max_line != 2048) limits.max_multiget_line = limits.max_line * 3;
  limits.max_value_size = values[(sel >> 3) & 3];
  limits.strict_keys = (sel >> 5) & 1;
  limits.max_keys = keys[sel >> 6];
  const char *p = reinterpret_cast<const char *>(data + 1);
  fuzz_connection(p, size - 1, limits);
  fuzz_base64(p, size - 1);
  return 0;
}
