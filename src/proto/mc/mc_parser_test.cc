/* Tests for the memcached request parser (mc_parser.cc). Expected error strings, noreply
   behaviour and consumed/swallowed byte counts were taken from a real memcached 1.6.18. */
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "proto/mc/mc_protocol.h"

/* Counts heap allocations while g_count_allocations is set, so tests can show that a declared
   size is refused without allocating for it. */
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<size_t> g_allocations{0};
std::atomic<size_t> g_allocated_bytes{0};
}  // namespace

void *operator new(size_t n) {
  if (g_count_allocations.load(std::memory_order_relaxed)) {
    ++g_allocations;
    g_allocated_bytes += n;
  }
  if (void *p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }

namespace tablesocket {
namespace mc {
namespace {

using namespace std::string_literals;

/* ---- helpers ---------------------------------------------------------------------------------- */

std::string quote(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      r += "\\x";
      r += hex[c >> 4];
      r += hex[c & 15];
    } else {
      r += static_cast<char>(c);
    }
  }
  return r + "\"";
}

const char *command_name(Mc_command c) {
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
    case Mc_command::metadump: return "metadump";
    case Mc_command::verbosity: return "verbosity";
    case Mc_command::quit: return "quit";
    case Mc_command::mg: return "mg";
    case Mc_command::ms: return "ms";
    case Mc_command::md: return "md";
    case Mc_command::ma: return "ma";
    case Mc_command::mn: return "mn";
    case Mc_command::me: return "me";
  }
  return "?";
}

const char *store_op_name(Mc_store_op op) {
  switch (op) {
    case Mc_store_op::set: return "set";
    case Mc_store_op::add: return "add";
    case Mc_store_op::replace: return "replace";
    case Mc_store_op::append: return "append";
    case Mc_store_op::prepend: return "prepend";
    case Mc_store_op::cas: return "cas";
  }
  return "?";
}

std::string describe_meta(const Mc_request &rq) {
  std::string r = " flags=[";
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) {
    if (i) r += ",";
    r += rq.meta_flags[i].flag;
    if (!rq.meta_flags[i].arg.empty()) r += quote(rq.meta_flags[i].arg);
  }
  r += "]";
  const Mc_meta &m = rq.meta;
  if (m.base64_key) r += " b";
  if (m.return_value) r += " v";
  if (m.no_update) r += " u";
  if (m.invalidate) r += " I";
  if (m.has_ttl) r += " ttl=" + std::to_string(m.ttl);
  if (m.vivify) r += " vivify=" + std::to_string(m.vivify_ttl);
  if (m.has_recache) r += " recache=" + std::to_string(m.recache_ttl);
  if (m.has_client_flags) r += " F=" + std::to_string(m.client_flags);
  if (m.has_compare_cas) r += " C=" + std::to_string(m.compare_cas);
  if (m.mode) r += std::string(" mode=") + m.mode;
  if (m.initial) r += " J=" + std::to_string(m.initial);
  if (m.delta != 1) r += " D=" + std::to_string(m.delta);
  return r;
}

/* A canonical one-line description of a parsed request, so tables can state expected fields. */
std::string describe(const Mc_request &rq) {
  std::string r = command_name(rq.command);
  switch (rq.command) {
    case Mc_command::gat:
    case Mc_command::gats:
      r += " exptime=" + std::to_string(rq.exptime);
      [[fallthrough]];
    case Mc_command::get:
    case Mc_command::gets: {
      r += " keys=[";
      for (size_t i = 0; i < rq.keys.size(); ++i) r += (i ? "," : "") + quote(rq.keys[i]);
      r += "]";
      break;
    }
    case Mc_command::set:
    case Mc_command::add:
    case Mc_command::replace:
    case Mc_command::append:
    case Mc_command::prepend:
    case Mc_command::cas:
      r += " key=" + quote(rq.key()) + " flags=" + std::to_string(rq.client_flags) +
           " exptime=" + std::to_string(rq.exptime) + " bytes=" + std::to_string(rq.bytes);
      if (rq.command == Mc_command::cas) r += " cas=" + std::to_string(rq.cas_unique);
      r += " data=" + quote(rq.data);
      break;
    case Mc_command::del: r += " key=" + quote(rq.key()); break;
    case Mc_command::incr:
    case Mc_command::decr: r += " key=" + quote(rq.key()) + " delta=" + std::to_string(rq.delta); break;
    case Mc_command::touch: r += " key=" + quote(rq.key()) + " exptime=" + std::to_string(rq.exptime); break;
    case Mc_command::flush_all:
      if (rq.has_delay) r += " delay=" + std::to_string(rq.delay);
      break;
    case Mc_command::verbosity: r += " level=" + std::to_string(rq.verbosity); break;
    case Mc_command::metadump: r += rq.dump_class_1 ? " class1" : " other-classes"; break;
    case Mc_command::stats: {
      r += " args=[";
      for (uint32_t i = 0; i < rq.nstats_args && i < kMaxStatsArgs; ++i)
        r += (i ? "," : "") + quote(rq.stats_args[i]);
      r += "] n=" + std::to_string(rq.nstats_args);
      break;
    }
    case Mc_command::version:
    case Mc_command::quit:
    case Mc_command::mn: break;
    case Mc_command::mg:
    case Mc_command::md:
      r += " key=" + quote(rq.key()) + describe_meta(rq);
      break;
    case Mc_command::ma:
      r += " key=" + quote(rq.key()) + (rq.incr ? " incr" : " decr") + " delta=" +
           std::to_string(rq.delta) + describe_meta(rq);
      break;
    case Mc_command::ms:
      r += " key=" + quote(rq.key()) + " op=" + store_op_name(rq.store_op) + " bytes=" +
           std::to_string(rq.bytes) + " data=" + quote(rq.data);
      if (rq.client_flags) r += " client_flags=" + std::to_string(rq.client_flags);
      if (rq.exptime) r += " exptime=" + std::to_string(rq.exptime);
      if (rq.store_op == Mc_store_op::cas) r += " cas=" + std::to_string(rq.cas_unique);
      r += describe_meta(rq);
      break;
    case Mc_command::me:
      r += " key=" + quote(rq.key());
      if (rq.meta.base64_key) r += " b";
      break;
  }
  if (rq.noreply) r += " noreply";
  return r;
}

const char *status_name(Mc_parse_status s) {
  switch (s) {
    case Mc_parse_status::complete: return "complete";
    case Mc_parse_status::need_more: return "need_more";
    case Mc_parse_status::error: return "error";
    case Mc_parse_status::fatal: return "fatal";
  }
  return "?";
}

Mc_parse_result parse(std::string &buf, Mc_request *rq, const Mc_limits &limits = Mc_limits()) {
  return parse_request(buf.data(), buf.size(), limits, rq);
}

/* Runs a whole byte stream through the parser like a connection and lists what happened:
   "ok <describe>", "err <text>", "silent <text>", "fatal <text>", "more <n bytes left>". */
std::vector<std::string> run_connection(const std::string &input, const Mc_limits &limits = Mc_limits()) {
  std::vector<std::string> events;
  std::string buf = input;
  size_t off = 0;
  uint64_t swallow = 0;
  Mc_request rq;
  while (true) {
    off += swallow_step(&swallow, buf.size() - off);
    if (swallow) {
      events.push_back("swallowing " + std::to_string(swallow));
      break;
    }
    const Mc_parse_result r = parse_request(buf.data() + off, buf.size() - off, limits, &rq);
    if (r.status == Mc_parse_status::need_more) {
      if (off < buf.size()) events.push_back("more " + std::to_string(buf.size() - off));
      break;
    }
    if (r.status == Mc_parse_status::fatal) {
      events.push_back(std::string(r.reply ? "fatal " : "fatal-silent ") + r.error);
      break;
    }
    if (r.status == Mc_parse_status::error) {
      events.push_back(std::string(r.reply ? "err " : "silent ") + r.error);
      swallow = r.swallow;
    } else {
      events.push_back("ok " + describe(rq));
    }
    off += r.consumed;
  }
  return events;
}

/* ---- valid requests: every prefix needs more, the whole request parses to the expected fields -- */

struct Valid_case {
  const char *name;
  std::string input;     // exactly one request, through its final LF
  std::string expected;  // describe() of the parsed request
};

void PrintTo(const Valid_case &c, std::ostream *os) { *os << c.name; }

const std::string k250(250, 'k');

const std::vector<Valid_case> &valid_cases() {
  static const std::vector<Valid_case> cases = {
      {"get_one_key", "get foo\r\n", R"(get keys=["foo"])"},
      {"get_several_keys", "get a bb ccc\r\n", R"(get keys=["a","bb","ccc"])"},
      {"gets_one_key", "gets foo\r\n", R"(gets keys=["foo"])"},
      {"get_with_a_bare_lf", "get foo\n", R"(get keys=["foo"])"},
      {"get_with_extra_spaces_everywhere", "  get   a  b  \r\n", R"(get keys=["a","b"])"},
      {"get_keeps_a_second_cr_in_the_key", "get a\r\r\n", R"(get keys=["a\x0d"])"},
      {"get_stops_at_a_nul_byte", "get a\0b c\r\n"s, R"(get keys=["a"])"},
      {"get_key_may_hold_tabs_and_control_bytes", "get a\tb\x01\r\n", R"(get keys=["a\x09b\x01"])"},
      {"get_with_a_250_byte_key", "get " + k250 + "\r\n", "get keys=[\"" + k250 + "\"]"},
      {"get_with_more_than_23_keys",
       "get 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25\r\n",
       R"(get keys=["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17","18","19","20","21","22","23","24","25"])"},
      {"get_noreply_is_just_a_key", "get noreply\r\n", R"(get keys=["noreply"])"},
      {"bget_is_an_old_alias_of_get", "bget k\r\n", R"(get keys=["k"])"},
      {"gat_with_keys", "gat 10 a b\r\n", R"(gat exptime=10 keys=["a","b"])"},
      {"gats_with_negative_exptime", "gats -1 a\r\n", R"(gats exptime=-1 keys=["a"])"},
      {"gat_without_keys_is_valid", "gat 0\r\n", R"(gat exptime=0 keys=[])"},
      {"set", "set k 5 100 2\r\nhi\r\n", R"(set key="k" flags=5 exptime=100 bytes=2 data="hi")"},
      {"set_noreply", "set k 0 0 2 noreply\r\nhi\r\n",
       R"(set key="k" flags=0 exptime=0 bytes=2 data="hi" noreply)"},
      {"set_with_a_sixth_token_that_is_not_noreply", "set k 0 0 1 norepl\r\nx\r\n",
       R"(set key="k" flags=0 exptime=0 bytes=1 data="x")"},
      {"set_empty_value", "set k 0 0 0\r\n\r\n", R"(set key="k" flags=0 exptime=0 bytes=0 data="")"},
      {"set_data_may_hold_crlf_and_nul", "set k 0 0 6\r\na\r\n\0b\n\r\n"s,
       R"(set key="k" flags=0 exptime=0 bytes=6 data="a\x0d\x0a\x00b\x0a")"},
      {"set_line_with_bare_lf", "set k 0 0 1\nx\r\n", R"(set key="k" flags=0 exptime=0 bytes=1 data="x")"},
      {"set_largest_numbers", "set k 4294967295 2147483647 1\r\nx\r\n",
       R"(set key="k" flags=4294967295 exptime=2147483647 bytes=1 data="x")"},
      {"set_smallest_exptime", "set k 0 -2147483648 1\r\nx\r\n",
       R"(set key="k" flags=0 exptime=-2147483648 bytes=1 data="x")"},
      {"set_with_a_250_byte_key", "set " + k250 + " 0 0 1\r\nx\r\n",
       "set key=\"" + k250 + "\" flags=0 exptime=0 bytes=1 data=\"x\""},
      {"set_with_leading_zeros", "set k 007 0010 01\r\nx\r\n",
       R"(set key="k" flags=7 exptime=10 bytes=1 data="x")"},
      {"add", "add k 1 2 3\r\nabc\r\n", R"(add key="k" flags=1 exptime=2 bytes=3 data="abc")"},
      {"replace", "replace k 1 2 3\r\nabc\r\n", R"(replace key="k" flags=1 exptime=2 bytes=3 data="abc")"},
      {"append", "append k 0 0 1\r\nz\r\n", R"(append key="k" flags=0 exptime=0 bytes=1 data="z")"},
      {"prepend_noreply", "prepend k 0 0 1 noreply\r\nz\r\n",
       R"(prepend key="k" flags=0 exptime=0 bytes=1 data="z" noreply)"},
      {"cas", "cas k 0 0 2 18446744073709551615\r\nhi\r\n",
       R"(cas key="k" flags=0 exptime=0 bytes=2 cas=18446744073709551615 data="hi")"},
      {"cas_noreply", "cas k 0 0 2 7 noreply\r\nhi\r\n",
       R"(cas key="k" flags=0 exptime=0 bytes=2 cas=7 data="hi" noreply)"},
      {"delete", "delete k\r\n", R"(delete key="k")"},
      {"delete_with_legacy_zero_time", "delete k 0\r\n", R"(delete key="k")"},
      {"delete_noreply", "delete k noreply\r\n", R"(delete key="k" noreply)"},
      {"delete_zero_noreply", "delete k 0 noreply\r\n", R"(delete key="k" noreply)"},
      {"incr", "incr k 5\r\n", R"(incr key="k" delta=5)"},
      {"incr_by_the_largest_delta", "incr k 18446744073709551615\r\n",
       R"(incr key="k" delta=18446744073709551615)"},
      {"decr_noreply", "decr k 1 noreply\r\n", R"(decr key="k" delta=1 noreply)"},
      {"touch", "touch k 10\r\n", R"(touch key="k" exptime=10)"},
      {"touch_ignores_a_third_token_that_is_not_noreply", "touch k 10 x\r\n", R"(touch key="k" exptime=10)"},
      {"touch_noreply", "touch k -1 noreply\r\n", R"(touch key="k" exptime=-1 noreply)"},
      {"flush_all", "flush_all\r\n", "flush_all"},
      {"flush_all_with_delay", "flush_all 10\r\n", "flush_all delay=10"},
      {"flush_all_negative_delay", "flush_all -1\r\n", "flush_all delay=-1"},
      {"flush_all_noreply", "flush_all noreply\r\n", "flush_all noreply"},
      {"flush_all_delay_noreply", "flush_all 10 noreply\r\n", "flush_all delay=10 noreply"},
      {"flush_all_ignores_a_second_argument", "flush_all 10 20\r\n", "flush_all delay=10"},
      {"version", "version\r\n", "version"},
      {"version_ignores_arguments", "version x y\r\n", "version"},
      {"quit", "quit\r\n", "quit"},
      {"stats", "stats\r\n", "stats args=[] n=0"},
      {"stats_with_arguments", "stats cachedump 1 2\r\n", R"(stats args=["cachedump","1","2"] n=3)"},
      {"stats_with_many_arguments", "stats a b c d e\r\n", R"(stats args=["a","b","c","d"] n=5)"},
      {"verbosity", "verbosity 1\r\n", "verbosity level=1"},
      {"verbosity_noreply", "verbosity 2 noreply\r\n", "verbosity level=2 noreply"},
      {"verbosity_ignores_a_second_argument", "verbosity 1 2\r\n", "verbosity level=1"},
      {"metadump_all", "lru_crawler metadump all\r\n", "metadump class1"},
      {"metadump_hash", "lru_crawler metadump hash\r\n", "metadump class1"},
      {"metadump_class_list_with_1", "lru_crawler metadump 2,1\r\n", "metadump class1"},
      {"metadump_class_with_zeros_and_plus", "lru_crawler metadump ,+001,\r\n", "metadump class1"},
      {"metadump_other_classes", "lru_crawler metadump 2,63\r\n", "metadump other-classes"},
      {"mn", "mn\r\n", "mn"},
      {"mn_ignores_arguments", "mn x y\r\n", "mn"},
      {"mg_without_flags", "mg foo\r\n", R"(mg key="foo" flags=[])"},
      {"mg_with_return_flags", "mg foo s v f t k c l h\r\n",
       R"(mg key="foo" flags=[s,v,f,t,k,c,l,h] v)"},
      {"mg_with_opaque_and_quiet", "mg foo v O123 q\r\n", R"(mg key="foo" flags=[v,O"123",q] v noreply)"},
      {"mg_with_a_32_byte_opaque", "mg foo O0123456789012345678901234567890\r\n",
       R"(mg key="foo" flags=[O"0123456789012345678901234567890"])"},
      {"mg_with_an_empty_opaque", "mg foo O\r\n", R"(mg key="foo" flags=[O])"},
      {"mg_with_numeric_flags", "mg foo N30 R10 T-1 u\r\n",
       R"(mg key="foo" flags=[N"30",R"10",T"-1",u] u ttl=-1 vivify=30 recache=10)"},
      {"mg_flag_tokens_only_look_at_the_first_byte", "mg foo vxyz kk\r\n",
       R"(mg key="foo" flags=[v"xyz",k"k"] v)"},
      {"mg_with_17_flags", "mg foo s v f t k c l h O1 q u N1 R1 T1 P L I\r\n",
       R"(mg key="foo" flags=[s,v,f,t,k,c,l,h,O"1",q,u,N"1",R"1",T"1",P,L,I] v u I ttl=1 vivify=1 recache=1 noreply)"},
      {"mg_base64_key", "mg Zm9v b v k\r\n", R"(mg key="foo" flags=[b,v,k] b v)"},
      {"mg_base64_binary_key", "mg AAEC/w== b\r\n", R"(mg key="\x00\x01\x02\xff" flags=[b] b)"},
      {"mg_base64_decoder_skips_foreign_bytes_like_memcached", "mg Y!Q== b\r\n",
       R"(mg key="a" flags=[b] b)"},
      {"mg_base64_decoder_stops_after_padding_like_memcached", "mg YQ==YWJj b\r\n",
       R"(mg key="a" flags=[b] b)"},
      {"mg_a_250_byte_key", "mg " + k250 + "\r\n", "mg key=\"" + k250 + "\" flags=[]"},
      {"ms", "ms foo 2\r\nhi\r\n", R"(ms key="foo" op=set bytes=2 data="hi" flags=[])"},
      {"ms_with_flags", "ms foo 2 T90 F1 c k O9 q\r\nhi\r\n",
       R"(ms key="foo" op=set bytes=2 data="hi" client_flags=1 exptime=90 flags=[T"90",F"1",c,k,O"9",q] ttl=90 F=1 noreply)"},
      {"ms_add_mode", "ms foo 2 ME\r\nhi\r\n", R"(ms key="foo" op=add bytes=2 data="hi" flags=[M"E"] mode=E)"},
      {"ms_append_mode", "ms foo 2 MA\r\nhi\r\n", R"(ms key="foo" op=append bytes=2 data="hi" flags=[M"A"] mode=A)"},
      {"ms_prepend_mode", "ms foo 2 MP\r\nhi\r\n", R"(ms key="foo" op=prepend bytes=2 data="hi" flags=[M"P"] mode=P)"},
      {"ms_replace_mode", "ms foo 2 MR\r\nhi\r\n", R"(ms key="foo" op=replace bytes=2 data="hi" flags=[M"R"] mode=R)"},
      {"ms_set_mode_with_cas_becomes_cas", "ms foo 2 MS C99\r\nhi\r\n",
       R"(ms key="foo" op=cas bytes=2 data="hi" cas=99 flags=[M"S",C"99"] C=99 mode=S)"},
      {"ms_replace_with_cas_becomes_cas", "ms foo 2 MR C1\r\nhi\r\n",
       R"(ms key="foo" op=cas bytes=2 data="hi" cas=1 flags=[M"R",C"1"] C=1 mode=R)"},
      {"ms_add_with_cas_stays_add", "ms foo 2 ME C1\r\nhi\r\n",
       R"(ms key="foo" op=add bytes=2 data="hi" flags=[M"E",C"1"] C=1 mode=E)"},
      {"ms_invalidate", "ms foo 2 C5 I\r\nhi\r\n",
       R"(ms key="foo" op=cas bytes=2 data="hi" cas=5 flags=[C"5",I] I C=5)"},
      {"ms_base64_key", "ms Zm9v 2 b\r\nhi\r\n", R"(ms key="foo" op=set bytes=2 data="hi" flags=[b] b)"},
      {"ms_empty_value", "ms foo 0\r\n\r\n", R"(ms key="foo" op=set bytes=0 data="" flags=[])"},
      {"ms_with_16_flags", "ms foo 1 s v f t k c l h O1 q u N1 R1 T1 P L\r\nx\r\n",
       R"(ms key="foo" op=set bytes=1 data="x" exptime=1 flags=[s,v,f,t,k,c,l,h,O"1",q,u,N"1",R"1",T"1",P,L] v u ttl=1 vivify=1 recache=1 noreply)"},
      {"md", "md foo\r\n", R"(md key="foo" flags=[])"},
      {"md_quiet_with_opaque_and_key", "md foo q O5 k\r\n", R"(md key="foo" flags=[q,O"5",k] noreply)"},
      {"md_invalidate_with_ttl", "md foo I T30 C7\r\n",
       R"(md key="foo" flags=[I,T"30",C"7"] I ttl=30 C=7)"},
      {"ma_default_is_incr_by_one", "ma foo\r\n", R"(ma key="foo" incr delta=1 flags=[])"},
      {"ma_decr_mode", "ma foo MD D5\r\n", R"(ma key="foo" decr delta=5 flags=[M"D",D"5"] mode=D D=5)"},
      {"ma_minus_mode", "ma foo M-\r\n", R"(ma key="foo" decr delta=1 flags=[M"-"] mode=-)"},
      {"ma_plus_mode", "ma foo M+\r\n", R"(ma key="foo" incr delta=1 flags=[M"+"] mode=+)"},
      {"ma_autovivify", "ma foo N0 J13 v t c\r\n",
       R"(ma key="foo" incr delta=1 flags=[N"0",J"13",v,t,c] v vivify=0 J=13)"},
      {"me", "me foo\r\n", R"(me key="foo")"},
      {"me_ignores_other_tokens", "me foo x\r\n", R"(me key="foo")"},
      {"me_base64", "me Zm9v b\r\n", R"(me key="foo" b)"},
  };
  return cases;
}

class AValidMemcachedRequest : public ::testing::TestWithParam<Valid_case> {};

TEST_P(AValidMemcachedRequest, EveryStrictPrefixNeedsMoreAndLeavesTheBufferUnchanged) {
  const Valid_case &c = GetParam();
  for (size_t k = 0; k < c.input.size(); ++k) {
    /* The whole request is in memory, but only k bytes are offered: the rest must not be read. */
    std::string buf = c.input;
    Mc_request rq;
    const Mc_parse_result r = parse_request(buf.data(), k, Mc_limits(), &rq);
    ASSERT_STREQ(status_name(r.status), "need_more") << "prefix length " << k;
    ASSERT_EQ(r.consumed, 0u);
    ASSERT_EQ(buf, c.input) << "prefix length " << k << " modified the buffer";
  }
}

TEST_P(AValidMemcachedRequest, TheWholeRequestParsesToTheExpectedFields) {
  const Valid_case &c = GetParam();
  std::string buf = c.input;
  Mc_request rq;
  const Mc_parse_result r = parse(buf, &rq);
  ASSERT_STREQ(status_name(r.status), "complete") << (r.error ? r.error : "");
  EXPECT_EQ(r.consumed, c.input.size());
  EXPECT_EQ(r.swallow, 0u);
  EXPECT_EQ(describe(rq), c.expected);
  EXPECT_EQ(buf, c.input);
}

TEST_P(AValidMemcachedRequest, ParsesTheSameWhenFollowedByAnotherRequest) {
  const Valid_case &c = GetParam();
  std::string buf = c.input + "get next\r\n";
  Mc_request rq;
  Mc_parse_result r = parse(buf, &rq);
  ASSERT_STREQ(status_name(r.status), "complete");
  EXPECT_EQ(r.consumed, c.input.size());
  EXPECT_EQ(describe(rq), c.expected);
  r = parse_request(buf.data() + r.consumed, buf.size() - r.consumed, Mc_limits(), &rq);
  ASSERT_STREQ(status_name(r.status), "complete");
  EXPECT_EQ(describe(rq), R"(get keys=["next"])");
}

TEST_P(AValidMemcachedRequest, ViewsPointIntoTheCallersBufferOrTheDecodedKey) {
  const Valid_case &c = GetParam();
  std::string buf = c.input;
  Mc_request rq;
  ASSERT_EQ(parse(buf, &rq).status, Mc_parse_status::complete);
  const char *lo = buf.data(), *hi = buf.data() + buf.size();
  auto inside = [&](std::string_view v) {
    if (v.empty()) return;
    EXPECT_GE(v.data(), lo);
    EXPECT_LE(v.data() + v.size(), hi);
  };
  for (std::string_view k : rq.keys) inside(k);
  inside(rq.raw_key);
  inside(rq.data);
  for (uint32_t i = 0; i < rq.nmeta_flags; ++i) inside(rq.meta_flags[i].arg);
  if (rq.meta.base64_key) {
    EXPECT_EQ(rq.key().data(), rq.key_buf);
    /* A copy of the request decodes to its own buffer. */
    const Mc_request copy = rq;
    EXPECT_EQ(copy.key(), rq.key());
    EXPECT_EQ(copy.key().data(), copy.key_buf);
  } else {
    inside(rq.key());
  }
}

INSTANTIATE_TEST_SUITE_P(McParser, AValidMemcachedRequest, ::testing::ValuesIn(valid_cases()),
                         [](const ::testing::TestParamInfo<Valid_case> &i) { return i.param.name; });

/* ---- malformed requests: memcached's exact error, consumed and swallowed bytes ---------------- */

struct Error_case {
  const char *name;
  std::string input;    // one request as a client sent it (the error must be decidable from it)
  const char *error;    // reply line without CRLF
  bool reply;           // memcached sends it (false: noreply silenced it)
  size_t consumed;      // kAll, kLine, or a count
  uint64_t swallow;
};

void PrintTo(const Error_case &c, std::ostream *os) { *os << c.name; }

constexpr size_t kAll = std::string::npos;      // the whole input
constexpr size_t kLine = std::string::npos - 1;  // through the first LF
const std::string k251(251, 'k');

const std::vector<Error_case> &error_cases() {
  static const char *bad_format = "CLIENT_ERROR bad command line format";
  static const std::vector<Error_case> cases = {
      /* unknown commands and token counts: "ERROR", never silenced */
      {"empty_line", "\r\n", "ERROR", true, kAll, 0},
      {"bare_lf", "\n", "ERROR", true, kAll, 0},
      {"only_spaces", "   \r\n", "ERROR", true, kAll, 0},
      {"one_letter_command", "x\r\n", "ERROR", true, kAll, 0},
      {"unknown_command", "foo bar\r\n", "ERROR", true, kAll, 0},
      {"commands_are_case_sensitive", "GET a\r\n", "ERROR", true, kAll, 0},
      {"tab_is_not_a_separator", "get\ta\r\n", "ERROR", true, kAll, 0},
      {"nul_cuts_the_command", "ve\0rsion\r\n"s, "ERROR", true, kAll, 0},
      {"get_without_key", "get\r\n", "ERROR", true, kAll, 0},
      {"get_with_only_a_space", "get \r\n", "ERROR", true, kAll, 0},
      {"gets_without_key", "gets\r\n", "ERROR", true, kAll, 0},
      {"gat_without_exptime", "gat\r\n", "ERROR", true, kAll, 0},
      {"unknown_g_command_is_not_checked_for_http", "gxx / HTTP/1.1\r\n", "ERROR", true, kAll, 0},
      {"set_with_too_few_tokens", "set k 0 0\r\n", "ERROR", true, kAll, 0},
      {"set_with_too_many_tokens", "set k 0 0 1 noreply extra\r\n", "ERROR", true, kAll, 0},
      {"set_with_more_than_23_tokens",
       "set k 0 0 1 a b c d e f g h i j k l m n o p q r s t u v w x y z\r\n", "ERROR", true, kAll, 0},
      {"cas_without_unique", "cas k 0 0 1\r\n", "ERROR", true, kAll, 0},
      {"incr_without_delta", "incr k\r\n", "ERROR", true, kAll, 0},
      {"incr_with_too_many_tokens", "incr k 1 2 3\r\n", "ERROR", true, kAll, 0},
      {"touch_without_exptime", "touch k\r\n", "ERROR", true, kAll, 0},
      {"delete_without_key", "delete\r\n", "ERROR", true, kAll, 0},
      {"delete_with_too_many_tokens", "delete a b c d\r\n", "ERROR", true, kAll, 0},
      {"flush_all_with_too_many_tokens", "flush_all 1 2 3\r\n", "ERROR", true, kAll, 0},
      {"verbosity_without_level", "verbosity\r\n", "ERROR", true, kAll, 0},
      {"metadump_without_classes", "lru_crawler metadump\r\n", "ERROR", true, kAll, 0},
      {"metadump_with_two_arguments", "lru_crawler metadump all x\r\n", "ERROR", true, kAll, 0},
      {"other_lru_crawler_commands_are_unknown", "lru_crawler crawl all\r\n", "ERROR", true, kAll, 0},
      {"lru_crawler_alone", "lru_crawler\r\n", "ERROR", true, kAll, 0},
      {"metadump_class_0", "lru_crawler metadump 0\r\n", "BADCLASS invalid class id", true, kAll, 0},
      {"metadump_class_64", "lru_crawler metadump 1,64\r\n", "BADCLASS invalid class id", true, kAll, 0},
      {"metadump_class_not_a_number", "lru_crawler metadump 1,x\r\n", "BADCLASS invalid class id", true, kAll, 0},
      {"metadump_uppercase_all", "lru_crawler metadump ALL\r\n", "BADCLASS invalid class id", true, kAll, 0},
      {"metadump_huge_class", "lru_crawler metadump 99999999999999999999\r\n", "BADCLASS invalid class id", true,
       kAll, 0},
      {"metadump_only_commas", "lru_crawler metadump ,,\r\n", "NOTSTARTED no items to crawl", true, kAll, 0},
      {"verbosity_with_too_many_tokens", "verbosity 1 2 3\r\n", "ERROR", true, kAll, 0},
      {"uppercase_http_start_is_an_unknown_command", "HTTP/1.0 foo\r\n", "ERROR", true, kAll, 0},
      {"unknown_meta_command", "mx k\r\n", "ERROR", true, kAll, 0},
      {"mg_without_key", "mg\r\n", "ERROR", true, kAll, 0},
      {"ms_without_key", "ms\r\n", "ERROR", true, kAll, 0},
      {"md_without_key", "md\r\n", "ERROR", true, kAll, 0},
      {"ma_without_key", "ma\r\n", "ERROR", true, kAll, 0},
      /* memcached's admin commands are not served here */
      {"shutdown_is_not_enabled", "shutdown\r\n", "ERROR: shutdown not enabled", true, kAll, 0},
      {"admin_commands_are_unknown", "slabs reassign 1 2\r\n", "ERROR", true, kAll, 0},

      /* keys */
      {"get_key_of_251_bytes", "get " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"get_any_key_too_long_fails_the_whole_get", "get a " + k251 + " b\r\n", bad_format, true, kAll, 0},
      {"gat_key_too_long", "gat 0 " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"set_key_too_long_does_not_swallow", "set " + k251 + " 0 0 1\r\nx\r\n", bad_format, true,
       kLine, 0},
      {"set_key_too_long_noreply_is_silent", "set " + k251 + " 0 0 1 noreply\r\nx\r\n", bad_format,
       false, kLine, 0},
      {"delete_key_too_long", "delete " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"delete_key_too_long_noreply", "delete " + k251 + " noreply\r\n", bad_format, false, kAll, 0},
      {"incr_key_too_long", "incr " + k251 + " 1\r\n", bad_format, true, kAll, 0},
      {"touch_key_too_long", "touch " + k251 + " 0\r\n", bad_format, true, kAll, 0},
      {"mg_key_too_long", "mg " + k251 + " v\r\n", bad_format, true, kAll, 0},
      {"mg_key_too_long_even_with_q", "mg " + k251 + " q\r\n", bad_format, true, kAll, 0},
      {"mg_base64_key_length_counts_the_encoded_text", "mg " + std::string(252, 'Y') + " b\r\n",
       bad_format, true, kAll, 0},
      {"md_key_too_long", "md " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"ma_key_too_long", "ma " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"ms_key_too_long_does_not_swallow", "ms " + k251 + " 2\r\nhi\r\n", bad_format, true,
       kLine, 0},
      {"me_key_too_long", "me " + k251 + "\r\n", bad_format, true, kAll, 0},
      {"me_without_key", "me\r\n", bad_format, true, kAll, 0},
      {"me_bad_base64", "me k b\r\n", bad_format, true, kAll, 0},

      /* classic numbers */
      {"set_flags_not_a_number", "set k abc 0 1\r\nx\r\n", bad_format, true, kLine, 0},
      {"set_negative_flags", "set k -1 0 1\r\nx\r\n", bad_format, true, kLine, 0},
      /* strict numbers: memcached's strtoul/strtol accept (and truncate) these three and store
         the item; refused here, with the data block skipped (one reply, as memcached's) */
      {"set_flags_over_32_bits", "set k 4294967296 0 1\r\nx\r\n", bad_format, true, kLine, 3},
      {"set_flags_with_a_plus_sign", "set k +5 0 1\r\nx\r\n", bad_format, true, kLine, 3},
      {"set_exptime_over_32_bits", "set k 0 2147483648 1\r\nx\r\n", bad_format, true, kLine, 3},
      {"set_negative_length", "set k 0 0 -1\r\nx\r\n", bad_format, true, kLine, 0},
      {"set_length_above_int_max_minus_2", "set k 0 0 2147483646\r\nx\r\n", bad_format, true, kLine, 0},
      {"set_bad_number_noreply_is_silent", "set k x 0 1 noreply\r\nx\r\n", bad_format, false, kLine, 0},
      {"cas_unique_not_a_number", "cas k 0 0 1 abc\r\nx\r\n", bad_format, true, kLine, 0},
      {"cas_negative_unique", "cas k 0 0 1 -1\r\nx\r\n", bad_format, true, kLine, 0},
      {"incr_negative_delta", "incr k -1\r\n", "CLIENT_ERROR invalid numeric delta argument", true, kAll, 0},
      {"incr_delta_over_64_bits", "incr k 18446744073709551616\r\n",
       "CLIENT_ERROR invalid numeric delta argument", true, kAll, 0},
      {"decr_bad_delta_noreply", "decr k x noreply\r\n", "CLIENT_ERROR invalid numeric delta argument",
       false, kAll, 0},
      {"touch_bad_exptime", "touch k abc\r\n", "CLIENT_ERROR invalid exptime argument", true, kAll, 0},
      {"touch_bad_exptime_noreply", "touch k abc noreply\r\n", "CLIENT_ERROR invalid exptime argument",
       false, kAll, 0},
      {"gat_bad_exptime", "gat abc k\r\n", "CLIENT_ERROR invalid exptime argument", true, kAll, 0},
      {"flush_all_bad_delay", "flush_all abc\r\n", "CLIENT_ERROR invalid exptime argument", true, kAll, 0},
      {"flush_all_bad_delay_noreply", "flush_all abc noreply\r\n",
       "CLIENT_ERROR invalid exptime argument", false, kAll, 0},
      {"flush_all_noreply_first_is_read_as_the_delay", "flush_all noreply 5\r\n",
       "CLIENT_ERROR invalid exptime argument", true, kAll, 0},
      {"flush_all_noreply_twice", "flush_all noreply noreply\r\n",
       "CLIENT_ERROR invalid exptime argument", false, kAll, 0},
      {"verbosity_not_a_number", "verbosity x\r\n", bad_format, true, kAll, 0},
      {"verbosity_noreply_alone_is_a_silent_error", "verbosity noreply\r\n", bad_format, false, kAll, 0},

      /* delete's legacy time */
      {"delete_nonzero_time", "delete k 1\r\n",
       "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]", true, kAll, 0},
      {"delete_two_zero_times", "delete k 0 0\r\n",
       "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]", true, kAll, 0},
      {"delete_nonzero_time_noreply", "delete k x noreply\r\n",
       "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]", false, kAll, 0},

      /* data blocks */
      {"set_data_block_without_crlf", "set k 0 0 1\r\nabc\r\n", "CLIENT_ERROR bad data chunk", true, 16, 0},
      {"set_data_block_with_bare_lf", "set k 0 0 1\r\nx\nz", "CLIENT_ERROR bad data chunk", true, kAll, 0},
      {"noreply_set_with_bad_chunk_is_silent", "set k 0 0 1 noreply\r\nabc\r\n",
       "CLIENT_ERROR bad data chunk", false, 24, 0},
      {"ms_with_bad_chunk_replies_even_with_q", "ms k 2 q\r\nhiXX\r\n", "CLIENT_ERROR bad data chunk",
       true, 14, 0},
      {"set_too_large_swallows_the_data", "set k 0 0 1048577\r\n", "SERVER_ERROR object too large for cache",
       true, kAll, 1048579},
      {"set_too_large_noreply_is_silent_and_swallows", "set k 0 0 2000000 noreply\r\n",
       "SERVER_ERROR object too large for cache", false, kAll, 2000002},
      {"set_largest_declared_length", "set k 0 0 2147483645\r\n", "SERVER_ERROR object too large for cache",
       true, kAll, 2147483647},
      {"ms_too_large_replies_even_with_q", "ms k 2000000 q\r\n", "SERVER_ERROR object too large for cache",
       true, kAll, 2000002},

      /* meta flags */
      {"mg_unknown_flag", "mg k z\r\n", "CLIENT_ERROR invalid flag", true, kAll, 0},
      {"mg_e_flag_is_not_in_1_6", "mg k E5\r\n", "CLIENT_ERROR invalid flag", true, kAll, 0},
      {"mg_duplicate_flag", "mg k v v\r\n", "CLIENT_ERROR duplicate flag", true, kAll, 0},
      {"mg_duplicate_flag_with_different_tokens", "mg k k kx\r\n", "CLIENT_ERROR duplicate flag", true, kAll, 0},
      {"mg_flag_byte_above_126_reads_as_duplicate", "mg k \x80\r\n", "CLIENT_ERROR duplicate flag", true, kAll, 0},
      {"mg_flag_byte_127_reads_as_duplicate", "mg k \x7f\r\n", "CLIENT_ERROR duplicate flag", true, kAll, 0},
      {"mg_18_flags", "mg k s v f t k c l h O1 q u N1 R1 T1 P L x y\r\n",
       "CLIENT_ERROR options flags are too long", true, kAll, 0},
      {"mg_ttl_not_a_number", "mg k Tabc\r\n", "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_ttl_without_number", "mg k T\r\n", "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_vivify_without_number", "mg k N\r\n", "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_recache_not_a_number", "mg k R-\r\n", "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_cas_not_a_number", "mg k Cx\r\n", "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_initial_not_a_number", "mg k Jx\r\n", "CLIENT_ERROR invalid numeric initial value", true, kAll, 0},
      {"mg_delta_not_a_number", "mg k Dx\r\n", "CLIENT_ERROR invalid numeric delta value", true, kAll, 0},
      {"mg_mode_of_two_bytes", "mg k Mxx\r\n", "CLIENT_ERROR incorrect length for M token", true, kAll, 0},
      {"mg_client_flags_not_a_number", "mg k Fx\r\n", bad_format, true, kAll, 0},
      {"mg_last_bad_token_message_wins", "mg k Tx Jx\r\n", "CLIENT_ERROR invalid numeric initial value",
       true, kAll, 0},
      {"mg_bad_client_flags_keep_the_earlier_message", "mg k Tx Fx\r\n",
       "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"mg_unknown_flag_wins_over_a_bad_token", "mg k Tx z\r\n", "CLIENT_ERROR invalid flag", true, kAll, 0},
      {"mg_duplicate_wins_over_a_bad_token", "mg k Tx Tx\r\n", "CLIENT_ERROR duplicate flag", true, kAll, 0},
      {"mg_opaque_of_33_bytes", "mg k O01234567890123456789012345678901\r\n",
       "CLIENT_ERROR opaque token too long", true, kAll, 0},
      {"mg_bad_base64_key", "mg !!!! b\r\n", "CLIENT_ERROR error decoding key", true, kAll, 0},
      {"mg_base64_key_without_padding", "mg YQ b\r\n", "CLIENT_ERROR error decoding key", true, kAll, 0},
      {"mg_base64_key_with_three_pads", "mg A=== b\r\n", "CLIENT_ERROR error decoding key", true, kAll, 0},
      {"mg_base64_key_of_only_padding", "mg ==== b\r\n", "CLIENT_ERROR error decoding key", true, kAll, 0},
      {"mg_bad_token_after_a_bad_key_wins", "mg YQ b Tx\r\n",
       "CLIENT_ERROR bad token in command line format", true, kAll, 0},
      {"md_unknown_flag", "md k z\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"md_duplicate_flag", "md k q q\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"md_bad_token", "md k Tabc\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"md_bad_base64_key", "md !!!! b\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"md_18_flags", "md k a b c d e f g h i j k l m n o p q r\r\n", "CLIENT_ERROR options flags too long",
       true, kAll, 0},
      {"md_opaque_too_long", "md k O012345678901234567890123456789012\r\n",
       "CLIENT_ERROR opaque token too long", true, kAll, 0},
      {"ma_bad_delta", "ma k Dabc\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"ma_bad_initial", "ma k Jabc\r\n", "CLIENT_ERROR invalid or duplicate flag", true, kAll, 0},
      {"ma_bad_mode", "ma k MX\r\n", "CLIENT_ERROR invalid mode for ma M token", true, kAll, 0},
      {"ma_modes_are_case_sensitive", "ma k Mi\r\n", "CLIENT_ERROR invalid mode for ma M token", true, kAll, 0},
      {"ma_mode_wins_over_opaque", "ma k MX O012345678901234567890123456789012\r\n",
       "CLIENT_ERROR invalid mode for ma M token", true, kAll, 0},
      {"ma_opaque_too_long", "ma k O012345678901234567890123456789012\r\n",
       "CLIENT_ERROR opaque token too long", true, kAll, 0},
      {"ms_without_length", "ms k\r\n", bad_format, true, kAll, 0},
      {"ms_length_not_a_number_does_not_swallow", "ms k abc\r\nhi\r\n", bad_format, true, kLine, 0},
      {"ms_negative_length", "ms k -1\r\nhi\r\n", bad_format, true, kLine, 0},
      {"ms_old_s_flag_length", "ms k S2\r\nhi\r\n", bad_format, true, kLine, 0},
      {"ms_17_flags_do_not_swallow", "ms k 2 s v f t k c l h O1 q u N1 R1 T1 P L x\r\nhi\r\n",
       "CLIENT_ERROR options flags too long", true, kLine, 0},
      {"ms_unknown_flag_swallows", "ms k 2 z\r\nhi\r\n", "CLIENT_ERROR invalid flag", true, kLine, 4},
      {"ms_duplicate_flag_swallows", "ms k 2 v v\r\nhi\r\n", "CLIENT_ERROR duplicate flag", true, kLine, 4},
      {"ms_bad_client_flags", "ms k 2 Fabc\r\nhi\r\n", bad_format, true, kLine, 4},
      {"ms_cas_without_number", "ms k 2 C\r\nhi\r\n", "CLIENT_ERROR bad token in command line format",
       true, kLine, 4},
      {"ms_bad_mode", "ms k 2 MX\r\nhi\r\n", "CLIENT_ERROR invalid mode for ms M token", true, kLine, 4},
      {"ms_modes_are_case_sensitive", "ms k 2 Ms\r\nhi\r\n", "CLIENT_ERROR invalid mode for ms M token",
       true, kLine, 4},
      {"ms_mode_of_two_bytes", "ms k 2 Mxy\r\nhi\r\n", "CLIENT_ERROR incorrect length for M token", true, kLine, 4},
      {"ms_opaque_too_long", "ms k 2 O012345678901234567890123456789012\r\nhi\r\n",
       "CLIENT_ERROR opaque token too long", true, kLine, 4},
      {"ms_mode_wins_over_opaque", "ms k 2 O012345678901234567890123456789012 MX\r\nhi\r\n",
       "CLIENT_ERROR invalid mode for ms M token", true, kLine, 4},
      {"ms_bad_base64_key", "ms k 2 b\r\nhi\r\n", "CLIENT_ERROR error decoding key", true, kLine, 4},
  };
  return cases;
}

class AMalformedMemcachedRequest : public ::testing::TestWithParam<Error_case> {};

size_t expected_consumed(const Error_case &c) {
  return c.consumed == kAll    ? c.input.size()
         : c.consumed == kLine ? c.input.find('\n') + 1
                               : c.consumed;
}

TEST_P(AMalformedMemcachedRequest, GetsMemcachedsErrorAndConsumesWhatMemcachedConsumes) {
  const Error_case &c = GetParam();
  std::string buf = c.input;
  Mc_request rq;
  const Mc_parse_result r = parse(buf, &rq);
  ASSERT_STREQ(status_name(r.status), "error");
  EXPECT_STREQ(r.error, c.error);
  EXPECT_EQ(r.reply, c.reply);
  EXPECT_EQ(r.consumed, expected_consumed(c));
  EXPECT_EQ(r.swallow, c.swallow);
  EXPECT_EQ(buf, c.input);
}

TEST_P(AMalformedMemcachedRequest, LeavesTheConnectionInStepWithTheNextRequest) {
  const Error_case &c = GetParam();
  if (c.swallow > 4096) return;  // covered by the too-large tests below
  /* The rest of a swallowed data block if the input does not hold it, then an mn that must come
     through as a request of its own (after whatever memcached would read as commands). */
  const size_t have = c.input.size() - expected_consumed(c);
  std::string data;
  if (c.swallow > have) data.assign(c.swallow - have, 'd');
  const std::vector<std::string> events = run_connection(c.input + data + "mn\r\n");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), std::string(c.reply ? "err " : "silent ") + c.error);
  EXPECT_EQ(events.back(), "ok mn");
}

INSTANTIATE_TEST_SUITE_P(McParser, AMalformedMemcachedRequest, ::testing::ValuesIn(error_cases()),
                         [](const ::testing::TestParamInfo<Error_case> &i) { return i.param.name; });

/* ---- fatal: memcached closes the connection ---------------------------------------------------- */

TEST(McParser, ALineOf2048BytesWithoutLfStillNeedsMore) {
  std::string buf(2048, 'x');
  Mc_request rq;
  EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::need_more);
}

TEST(McParser, The2049thByteWithoutLfClosesSilently) {
  std::string buf(2049, 'x');
  Mc_request rq;
  const Mc_parse_result r = parse(buf, &rq);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
  EXPECT_STREQ(r.error, "CLIENT_ERROR line too long");
  EXPECT_FALSE(r.reply);
}

TEST(McParser, TheCrBeforeTheLfCountsTowardsTheLineLimit) {
  std::string ok = std::string(2047, 'x') + "\r\n";  // 2048 bytes before the LF
  std::string bad = std::string(2048, 'x') + "\r\n";
  Mc_request rq;
  EXPECT_EQ(parse(ok, &rq).status, Mc_parse_status::error);  // "ERROR": an unknown command
  EXPECT_EQ(parse(bad, &rq).status, Mc_parse_status::fatal);
}

TEST(McParser, ALongLineIsFatalEvenWhenItsLfIsPresent) {
  std::string buf = "set " + std::string(3000, 'a') + " 0 0 1\r\nx\r\n";
  Mc_request rq;
  EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::fatal);
}

TEST(McParser, MultigetLinesMayExceedTheLineLimit) {
  std::string keys;
  for (int i = 0; i < 1000; ++i) keys += " key" + std::to_string(i);
  for (const std::string &prefix :
       std::vector<std::string>{"get", "gets", std::string(100, ' ') + "get", "gat 0", "gats 100"}) {
    std::string buf = prefix + keys + "\r\n";
    ASSERT_GT(buf.size(), 2048u);
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::complete) << prefix;
    EXPECT_EQ(rq.keys.size(), 1000u);
    EXPECT_EQ(rq.keys.back(), "key999");
    /* and every prefix of it waits for more */
    for (size_t k : {size_t(2049), size_t(3000), buf.size() - 1}) {
      EXPECT_EQ(parse_request(buf.data(), k, Mc_limits(), &rq).status, Mc_parse_status::need_more);
    }
  }
}

TEST(McParser, OnlyMultiKeyGetAndTouchLinesMayBeLong) {
  std::string keys;
  for (int i = 0; i < 1000; ++i) keys += " key" + std::to_string(i);
  for (const std::string &prefix : std::vector<std::string>{"touch 0", "mg", "gatx 0", "get\t", "getx", "ga 0",
                                                             std::string(101, ' ') + "get"}) {
    std::string buf = prefix + keys;  // no LF yet
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    EXPECT_EQ(r.status, Mc_parse_status::fatal) << prefix;
    EXPECT_FALSE(r.reply);
  }
}

TEST(McParser, AMultigetLineBeyondItsOwnLimitIsFatalWithAReply) {
  /* memcached has no such limit: the client is told why its connection closes. */
  Mc_limits limits;
  limits.max_multiget_line = 4096;
  std::string buf = "get " + std::string(4093, 'k');  // 4097 bytes, no LF
  Mc_request rq;
  const Mc_parse_result r = parse(buf, &rq, limits);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
  EXPECT_TRUE(r.reply);
  EXPECT_STREQ(r.error, "SERVER_ERROR get line too long (tablesocket_max_request_size)");
  buf.pop_back();
  EXPECT_EQ(parse(buf, &rq, limits).status, Mc_parse_status::need_more);
}

TEST(McParser, AnHttpRequestLineClosesSilently) {
  for (std::string buf : {"GET / HTTP/1.1\r\n"s, "POST /x HTTP/1.0\r\n"s, "foo HTTP/2\r\n"s}) {
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    EXPECT_EQ(r.status, Mc_parse_status::fatal) << buf;
    EXPECT_FALSE(r.reply);
  }
}

/* ---- limits ------------------------------------------------------------------------------------ */

TEST(McParser, KeysOf250BytesAreAcceptedAnd251AreNot) {
  for (const char *cmd : {"get", "gets", "delete", "mg", "md", "ma", "me"}) {
    std::string ok = std::string(cmd) + " " + std::string(250, 'k') + "\r\n";
    std::string bad = std::string(cmd) + " " + std::string(251, 'k') + "\r\n";
    Mc_request rq;
    EXPECT_EQ(parse(ok, &rq).status, Mc_parse_status::complete) << cmd;
    const Mc_parse_result r = parse(bad, &rq);
    EXPECT_EQ(r.status, Mc_parse_status::error) << cmd;
    EXPECT_STREQ(r.error, "CLIENT_ERROR bad command line format") << cmd;
  }
}

TEST(McParser, StrictKeysRejectControlBytesWhenAskedTo) {
  Mc_limits strict;
  strict.strict_keys = true;
  for (std::string buf : {"get a\tb\r\n"s, "get a\x01\r\n"s, "set a\x7f 0 0 1\r\nx\r\n"s, "mg a\x1f\r\n"s}) {
    Mc_request rq;
    EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::complete) << quote(buf);
    const Mc_parse_result r = parse(buf, &rq, strict);
    EXPECT_EQ(r.status, Mc_parse_status::error) << quote(buf);
    EXPECT_STREQ(r.error, "CLIENT_ERROR bad command line format");
  }
  std::string binary = "mg AAEC b\r\n";  // a base64 key decodes to control bytes: fine
  Mc_request rq;
  EXPECT_EQ(parse(binary, &rq, strict).status, Mc_parse_status::complete);
}

TEST(McParser, TooManyKeysInOneGetIsAnErrorThatKeepsTheConnection) {
  Mc_limits limits;
  limits.max_keys = 3;
  EXPECT_EQ(run_connection("get a b c\r\nget a b c d\r\nmn\r\n", limits),
            (std::vector<std::string>{R"(ok get keys=["a","b","c"])",
                                      "err SERVER_ERROR out of memory writing get response (more keys than tablesocket_max_tokens)", "ok mn"}));
}

TEST(McParser, HugeDeclaredSizesAreRefusedAtOnceWithoutAllocating) {
  for (std::string line : {"set k 0 0 2147483645\r\n"s, "cas k 0 0 2000000000 1 noreply\r\n"s,
                           "ms k 2147483645\r\n"s, "ms k 1048577 T0 q\r\n"s}) {
    Mc_request rq;
    parse(line, &rq);  // warm up: the request's own storage
    g_allocations = 0;
    g_count_allocations = true;
    const Mc_parse_result r = parse(line, &rq);
    g_count_allocations = false;
    EXPECT_EQ(g_allocations.load(), 0u) << line;
    EXPECT_EQ(r.status, Mc_parse_status::error) << line;
    EXPECT_STREQ(r.error, "SERVER_ERROR object too large for cache");
    EXPECT_EQ(r.consumed, line.size());
    EXPECT_EQ(r.swallow, uint64_t(rq.bytes) + 2);
  }
}

TEST(McParser, TheValueLimitIsTheLastAcceptedSize) {
  Mc_limits limits;
  limits.max_value_size = 4;
  std::string ok = "set k 0 0 4\r\nabcd\r\n";
  std::string big = "set k 0 0 5\r\nabcde\r\n";
  Mc_request rq;
  EXPECT_EQ(parse(ok, &rq, limits).status, Mc_parse_status::complete);
  const Mc_parse_result r = parse(big, &rq, limits);
  EXPECT_EQ(r.status, Mc_parse_status::error);
  EXPECT_EQ(r.swallow, 7u);
}

TEST(McParser, ParsingTheSameManyKeyGetAgainDoesNotAllocate) {
  std::string buf = "get";
  for (int i = 0; i < 500; ++i) buf += " k" + std::to_string(i);
  buf += "\r\n";
  Mc_request rq;
  ASSERT_EQ(parse(buf, &rq).status, Mc_parse_status::complete);
  g_allocations = 0;
  g_count_allocations = true;
  const Mc_parse_result r = parse(buf, &rq);
  g_count_allocations = false;
  EXPECT_EQ(r.status, Mc_parse_status::complete);
  EXPECT_EQ(g_allocations.load(), 0u);
}

/* ---- a connection: pipelining, noreply, swallowing ---------------------------------------------- */

TEST(McParser, PipelinedRequestsParseOneAfterAnother) {
  EXPECT_EQ(run_connection("set a 0 0 1\r\n1\r\nget a b\r\nincr a 5\r\ndelete a noreply\r\n"
                           "mg a v k O1\r\nms b 3 T60\r\nabc\r\nmn\r\nquit\r\n"),
            (std::vector<std::string>{
                R"(ok set key="a" flags=0 exptime=0 bytes=1 data="1")",
                R"(ok get keys=["a","b"])",
                R"(ok incr key="a" delta=5)",
                R"(ok delete key="a" noreply)",
                R"(ok mg key="a" flags=[v,k,O"1"] v)",
                R"(ok ms key="b" op=set bytes=3 data="abc" exptime=60 flags=[T"60"] ttl=60)",
                "ok mn",
                "ok quit",
            }));
}

TEST(McParser, ABadDataChunkLeavesItsTailToBeReadAsACommand) {
  /* memcached reads <bytes>+2 bytes, finds no CRLF at their end, and then reads "\r\n" as an
     (empty) command line: CLIENT_ERROR bad data chunk, then ERROR. */
  EXPECT_EQ(run_connection("set k 0 0 1\r\nabc\r\nmn\r\n"),
            (std::vector<std::string>{"err CLIENT_ERROR bad data chunk", "err ERROR", "ok mn"}));
}

TEST(McParser, ANoreplySetWithABadChunkIsSilentButItsTailStillGetsError) {
  EXPECT_EQ(run_connection("set k 0 0 1 noreply\r\nabc\r\nget k\r\n"),
            (std::vector<std::string>{"silent CLIENT_ERROR bad data chunk", "err ERROR",
                                      R"(ok get keys=["k"])"}));
}

TEST(McParser, ASetWithABadLineHasItsDataReadAsACommand) {
  EXPECT_EQ(run_connection("set k x 0 5\r\nhello\r\nmn\r\n"),
            (std::vector<std::string>{"err CLIENT_ERROR bad command line format", "err ERROR", "ok mn"}));
}

TEST(McParser, ATooLargeValueIsSwallowedBlindly) {
  Mc_limits limits;
  limits.max_value_size = 4;
  /* 5 + 2 bytes are dropped whatever they are, so "XXmn" loses its "XX" and mn follows. */
  EXPECT_EQ(run_connection("set k 0 0 5\r\nabcdeXXmn\r\n", limits),
            (std::vector<std::string>{"err SERVER_ERROR object too large for cache", "ok mn"}));
  EXPECT_EQ(run_connection("set k 0 0 5\r\nabc", limits),
            (std::vector<std::string>{"err SERVER_ERROR object too large for cache", "swallowing 4"}));
}

TEST(McParser, FlagsAndExptimesPast32BitsAreRefusedWithTheirDataSkipped) {
  /* memcached cuts such numbers down and stores the item: one reply, and its data is no command.
     Refused here, with the data skipped all the same (a pipelining client stays in step). */
  for (const char *line : {"set k 4294967296 0 5", "set k 18446744073709551616 0 5", "add k 0 2147483648 5",
                           "set k 0 -2147483649 5", "cas k 4294967296 0 5 1", "set k 0 0 5 noreply"}) {
    const std::string in = std::string(line) + "\r\nhello\r\nmn\r\n";
    const bool silent = std::string(line).find("noreply") != std::string::npos;
    if (silent) {
      EXPECT_EQ(run_connection(in)[0].substr(0, 6), "ok set") << line;  // a good line, for contrast
      continue;
    }
    EXPECT_EQ(run_connection(in), (std::vector<std::string>{"err CLIENT_ERROR bad command line format", "ok mn"}))
        << line;
  }
  EXPECT_EQ(run_connection("set k 4294967296 0 5 noreply\r\nhello\r\nmn\r\n"),
            (std::vector<std::string>{"silent CLIENT_ERROR bad command line format", "ok mn"}));
  /* Not numbers at all: the data block is read as a command line, as memcached does. */
  EXPECT_EQ(run_connection("set k -1 0 5\r\nhello\r\nmn\r\n"),
            (std::vector<std::string>{"err CLIENT_ERROR bad command line format", "err ERROR", "ok mn"}));
  EXPECT_EQ(run_connection("set k 1 0x 5\r\nhello\r\nmn\r\n"),
            (std::vector<std::string>{"err CLIENT_ERROR bad command line format", "err ERROR", "ok mn"}));
}

TEST(McParser, CacheMemlimitIsAnsweredAsMemcachedRefusesIt) {
  const std::string innodb =
      "MEMLIMIT_ADJUST_FAILED items are rows of InnoDB tables: their memory is innodb_buffer_pool_size";
  EXPECT_EQ(run_connection("cache_memlimit 100\r\nmn\r\n"), (std::vector<std::string>{"err " + innodb, "ok mn"}));
  EXPECT_EQ(run_connection("cache_memlimit 100 noreply\r\nmn\r\n"),
            (std::vector<std::string>{"silent " + innodb, "ok mn"}));
  EXPECT_EQ(run_connection("cache_memlimit 7\r\ncache_memlimit 1000000001\r\ncache_memlimit x\r\n"
                           "cache_memlimit x noreply\r\ncache_memlimit\r\ncache_memlimit 1 2 3\r\nmn\r\n"),
            (std::vector<std::string>{"err MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
                                      "err MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes", "err ERROR",
                                      "silent ERROR", "err ERROR", "err ERROR", "ok mn"}));
}

TEST(McParser, AnMsWithBadFlagsSwallowsItsData) {
  EXPECT_EQ(run_connection("ms k 2 z\r\nhi\r\nmn\r\n"),
            (std::vector<std::string>{"err CLIENT_ERROR invalid flag", "ok mn"}));
}

TEST(McParser, WaitsForTheWholeDataBlockBeforeJudgingIt) {
  std::string buf = "set k 0 0 3\r\nab";
  Mc_request rq;
  EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::need_more);
  buf += "c\r";
  EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::need_more);
  buf += "X";
  EXPECT_EQ(parse(buf, &rq).status, Mc_parse_status::error);
}

/* ---- noreply capture --------------------------------------------------------------------------- */

struct Noreply_case {
  std::string input;
  bool noreply;
};

TEST(McParser, NoreplyIsCapturedOnlyAsTheLastTokenOfTheCommandsThatTakeIt) {
  const std::vector<Noreply_case> cases = {
      {"set k 0 0 1 noreply\r\nx\r\n", true},  {"set k 0 0 1\r\nx\r\n", false},
      {"set k 0 0 1 NOREPLY\r\nx\r\n", false}, {"cas k 0 0 1 1 noreply\r\nx\r\n", true},
      {"add k 0 0 1 noreply\r\nx\r\n", true},  {"delete k noreply\r\n", true},
      {"delete k 0 noreply\r\n", true},        {"delete k\r\n", false},
      {"incr k 1 noreply\r\n", true},          {"decr k 1 noreply\r\n", true},
      {"touch k 1 noreply\r\n", true},         {"flush_all noreply\r\n", true},
      {"flush_all 0 noreply\r\n", true},       {"verbosity 1 noreply\r\n", true},
      {"get noreply\r\n", false},              {"gat 0 k noreply\r\n", false},
      {"mg k q\r\n", true},                    {"mg k v\r\n", false},
      {"ms k 1 q\r\nx\r\n", true},             {"md k q\r\n", true},
      {"ma k q\r\n", true},                    {"version noreply\r\n", false},
  };
  for (const Noreply_case &c : cases) {
    std::string buf = c.input;
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::complete) << quote(c.input);
    EXPECT_EQ(rq.noreply, c.noreply) << quote(c.input);
  }
}

TEST(McParser, TokenCountErrorsReplyEvenWithNoreply) {
  /* memcached checks the token count before it looks for noreply. */
  for (std::string buf : {"set k 0 noreply\r\n"s, "incr noreply\r\n"s, "touch k 1 2 noreply\r\n"s,
                          "delete k 0 0 noreply\r\n"s}) {
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::error) << buf;
    EXPECT_STREQ(r.error, "ERROR");
    EXPECT_TRUE(r.reply) << buf;
  }
}

TEST(McParser, NoreplyInPlaceOfTheLastArgumentSilencesTheResultingError) {
  /* With the right token count, a final "noreply" is taken as the flag even when it stood
     where a number belongs: memcached then drops the line without a word. */
  for (std::string buf : {"set k 0 0 noreply\r\n"s, "incr k noreply\r\n"s, "touch k noreply\r\n"s,
                          "verbosity noreply\r\n"s}) {
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::error) << buf;
    EXPECT_FALSE(r.reply) << buf;
    EXPECT_EQ(r.swallow, 0u);
  }
}

TEST(McParser, MetaErrorsReplyEvenWithQ) {
  for (std::string buf : {"mg k q z\r\n"s, "md k q Tx\r\n"s, "ma k q MX\r\n"s, "ms k 2 q z\r\nhi\r\n"s,
                          "mg k q O012345678901234567890123456789012\r\n"s}) {
    Mc_request rq;
    const Mc_parse_result r = parse(buf, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::error) << buf;
    EXPECT_TRUE(r.reply) << buf;
  }
}

/* ---- base64 ------------------------------------------------------------------------------------ */

struct B64_case {
  std::string in;
  std::string out;  // empty: decoding fails
};

TEST(McBase64, DecodesWithMemcachedsRules) {
  const std::vector<B64_case> cases = {
      {"Zm9v", "foo"},     {"Zm8=", "fo"},          {"Zg==", "f"},           {"AAEC/w==", "\x00\x01\x02\xff"s},
      {"Z!m9v", "foo"},    {"Zg==Zm9v", "f"},       {"Zm9vYmFy", "foobar"},  {"Zg", ""},
      {"Z===", ""},        {"====", ""},            {"", ""},                {"!!!!", ""},
      {"Zm9", ""},         {"Z g==", "f"},          {"+/+/", "\xfb\xff\xbf"s},
  };
  for (const B64_case &c : cases) {
    char out[64];
    const size_t n = base64_decode(c.in.data(), c.in.size(), out, sizeof out);
    EXPECT_EQ(std::string(out, n), c.out) << quote(c.in);
  }
}

TEST(McBase64, EncodesWithPadding) {
  const std::vector<B64_case> cases = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"\x00\x01\x02\xff"s, "AAEC/w=="},
  };
  for (const B64_case &c : cases) {
    Byte_buffer b;
    append_base64(b, c.in.data(), c.in.size());
    EXPECT_EQ(std::string(b.view()), c.out);
    EXPECT_EQ(base64_encoded_length(c.in.size()), c.out.size());
  }
}

TEST(McBase64, EveryByteStringSurvivesARoundTrip) {
  std::string s;
  for (int i = 0; i < 300; ++i) {
    s += static_cast<char>((i * 37 + 11) & 0xff);
    Byte_buffer b;
    append_base64(b, s.data(), s.size());
    std::vector<char> out(s.size() + 3);
    const size_t n = base64_decode(b.data(), b.size(), out.data(), out.size());
    ASSERT_EQ(std::string(out.data(), n), s) << i;
  }
}

}  // namespace
}  // namespace mc
}  // namespace tablesocket
