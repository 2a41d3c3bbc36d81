/* Tests for the memcached reply encoder (mc_encoder.cc): exact reply bytes. The meta replies
   were checked against memcached 1.6.18 answering the same requests. */
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "proto/mc/mc_protocol.h"

namespace tablesocket {
namespace mc {
namespace {

using namespace std::string_literals;

/* The request as memcached would have parsed it (the encoder reads its flags). */
Mc_request request(const std::string &line) {
  static std::vector<std::string> keep;  // parsed views must outlive the request
  keep.push_back(line);
  Mc_request rq;
  std::string &buf = keep.back();
  const Mc_parse_result r = parse_request(buf.data(), buf.size(), Mc_limits(), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::complete) << line;
  return rq;
}

Mc_item_info item(uint64_t cas, uint32_t flags, uint32_t size, int64_t ttl = -1) {
  Mc_item_info i;
  i.cas = cas;
  i.client_flags = flags;
  i.size = size;
  i.ttl = ttl;
  return i;
}

struct Encoder_case {
  const char *name;
  std::function<void(Byte_buffer &)> encode;
  std::string expected;
};

void PrintTo(const Encoder_case &c, std::ostream *os) { *os << c.name; }

const std::vector<Encoder_case> &encoder_cases() {
  static const std::vector<Encoder_case> cases = {
      /* classic */
      {"stored", [](Byte_buffer &o) { encode_reply(o, Mc_reply::stored); }, "STORED\r\n"},
      {"not_stored", [](Byte_buffer &o) { encode_reply(o, Mc_reply::not_stored); }, "NOT_STORED\r\n"},
      {"exists", [](Byte_buffer &o) { encode_reply(o, Mc_reply::exists); }, "EXISTS\r\n"},
      {"not_found", [](Byte_buffer &o) { encode_reply(o, Mc_reply::not_found); }, "NOT_FOUND\r\n"},
      {"deleted", [](Byte_buffer &o) { encode_reply(o, Mc_reply::deleted); }, "DELETED\r\n"},
      {"touched", [](Byte_buffer &o) { encode_reply(o, Mc_reply::touched); }, "TOUCHED\r\n"},
      {"ok", [](Byte_buffer &o) { encode_reply(o, Mc_reply::ok); }, "OK\r\n"},
      {"end", [](Byte_buffer &o) { encode_reply(o, Mc_reply::end); }, "END\r\n"},
      {"error", [](Byte_buffer &o) { encode_reply(o, Mc_reply::error); }, "ERROR\r\n"},
      {"reset", [](Byte_buffer &o) { encode_reply(o, Mc_reply::reset); }, "RESET\r\n"},
      {"a_parse_error_line", [](Byte_buffer &o) { encode_line(o, "CLIENT_ERROR bad data chunk"); },
       "CLIENT_ERROR bad data chunk\r\n"},
      {"client_error", [](Byte_buffer &o) { encode_client_error(o, "bad command line format"); },
       "CLIENT_ERROR bad command line format\r\n"},
      {"server_error", [](Byte_buffer &o) { encode_server_error(o, "object too large for cache"); },
       "SERVER_ERROR object too large for cache\r\n"},
      {"incr_result", [](Byte_buffer &o) { encode_number(o, 15); }, "15\r\n"},
      {"incr_result_zero", [](Byte_buffer &o) { encode_number(o, 0); }, "0\r\n"},
      {"incr_result_largest", [](Byte_buffer &o) { encode_number(o, UINT64_MAX); },
       "18446744073709551615\r\n"},
      {"version", [](Byte_buffer &o) { encode_version(o, "1.6.18"); }, "VERSION 1.6.18\r\n"},
      {"stat_string", [](Byte_buffer &o) { encode_stat(o, "version", "1.6.18"); },
       "STAT version 1.6.18\r\n"},
      {"stat_number", [](Byte_buffer &o) { encode_stat(o, "curr_items", uint64_t(42)); },
       "STAT curr_items 42\r\n"},
      {"stats_listing",
       [](Byte_buffer &o) {
         encode_stat(o, "pid", uint64_t(21279));
         encode_stat(o, "version", "1.6.18");
         encode_reply(o, Mc_reply::end);
       },
       "STAT pid 21279\r\nSTAT version 1.6.18\r\nEND\r\n"},
      {"get_hit",
       [](Byte_buffer &o) {
         encode_value(o, "v", 5, "abc", false, 0);
         encode_reply(o, Mc_reply::end);
       },
       "VALUE v 5 3\r\nabc\r\nEND\r\n"},
      {"gets_hit",
       [](Byte_buffer &o) {
         encode_value(o, "v", 5, "abc", true, 83);
         encode_reply(o, Mc_reply::end);
       },
       "VALUE v 5 3 83\r\nabc\r\nEND\r\n"},
      {"get_two_hits",
       [](Byte_buffer &o) {
         encode_value(o, "v", 5, "abc", false, 0);
         encode_value(o, "w", 0, "", false, 0);
         encode_reply(o, Mc_reply::end);
       },
       "VALUE v 5 3\r\nabc\r\nVALUE w 0 0\r\n\r\nEND\r\n"},
      {"get_miss", [](Byte_buffer &o) { encode_reply(o, Mc_reply::end); }, "END\r\n"},
      {"value_with_largest_numbers",
       [](Byte_buffer &o) { encode_value(o, "k", UINT32_MAX, "x", true, UINT64_MAX); },
       "VALUE k 4294967295 1 18446744073709551615\r\nx\r\n"},
      {"value_data_is_binary",
       [](Byte_buffer &o) { encode_value(o, "k", 0, "\r\n\0"s, false, 0); }, "VALUE k 0 3\r\n\r\n\0\r\n"s},
      {"value_header_for_streaming",
       [](Byte_buffer &o) { encode_value_header(o, "key", 1, 1048576, true, 7); },
       "VALUE key 1 1048576 7\r\n"},

      /* meta, as memcached 1.6.18 answered */
      {"mn", [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::mn, request("mn\r\n"), nullptr); }, "MN\r\n"},
      {"ms_plain",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::hd, request("ms mk 2\r\nhi\r\n"), nullptr); },
       "HD\r\n"},
      {"ms_with_base64_key_cas_key_and_opaque",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(29, 0, 2);
         encode_meta(o, Mc_meta_code::hd, request("ms bWs= 2 b c k O1\r\nhi\r\n"), &i);
       },
       "HD c29 kbWs= b O1\r\n"},
      {"ms_only_echoes_o_k_and_c",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(51, 0, 2);
         encode_meta(o, Mc_meta_code::hd, request("ms q1 2 s t f v h l O7 k c\r\nhi\r\n"), &i);
       },
       "HD O7 kq1 c51\r\n"},
      {"ms_not_stored_prints_cas_zero",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::ns, request("ms q1 2 ME O1 k c\r\nhi\r\n"), nullptr); },
       "NS O1 kq1 c0\r\n"},
      {"ms_exists",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::ex, request("ms q1 2 C1 O1 k c\r\nhi\r\n"), nullptr); },
       "EX O1 kq1 c0\r\n"},
      {"mg_value",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(1, 0, 2);
         encode_meta_value(o, request("mg mk v\r\n"), &i, "hi");
       },
       "VA 2\r\nhi\r\n"},
      {"mg_hit_without_value",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(1, 0, 2);
         encode_meta(o, Mc_meta_code::hd, request("mg mk\r\n"), &i);
       },
       "HD\r\n"},
      {"mg_return_flags_in_request_order",
       [](Byte_buffer &o) {
         Mc_item_info i = item(29, 0, 2);
         i.key_binary = true;
         encode_meta_value(o, request("mg bWs= b v k f s t c O9\r\n"), &i, "hi");
       },
       "VA 2 kbWs= b f0 s2 t-1 c29 O9\r\nhi\r\n"},
      {"mg_binary_key_comes_from_the_item",
       [](Byte_buffer &o) {
         Mc_item_info i = item(1, 0, 2);
         i.key_binary = true;  // stored with b, fetched as plain "mk" text
         encode_meta_value(o, request("mg mk v k\r\n"), &i, "hi");
       },
       "VA 2 kbWs= b\r\nhi\r\n"},
      {"mg_ttl_flags_size",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(1, 7, 2, 100);
         encode_meta_value(o, request("mg q1 t f s v\r\n"), &i, "hi");
       },
       "VA 2 t100 f7 s2\r\nhi\r\n"},
      {"mg_hit_and_last_access",
       [](Byte_buffer &o) {
         Mc_item_info i = item(1, 0, 2);
         i.fetched = true;
         encode_meta(o, Mc_meta_code::hd, request("mg q1 h l\r\n"), &i);
       },
       "HD h1 l0\r\n"},
      {"mg_all_return_flags",
       [](Byte_buffer &o) {
         Mc_item_info i = item(29, 0, 2);
         i.key_binary = true;
         i.fetched = true;
         i.last_access = 3;
         encode_meta_value(o, request("mg mk s v f t k c l h O1 q u N1 R1 T1 P L\r\n"), &i, "hi");
       },
       "VA 2 s2 f0 t-1 kbWs= b c29 l3 h1 O1\r\nhi\r\n"},
      {"mg_recache_token_flags_come_last",
       [](Byte_buffer &o) {
         Mc_item_info i = item(1, 0, 0);
         i.won = true;
         i.stale = true;
         i.token_sent = true;
         encode_meta(o, Mc_meta_code::hd, request("mg k c R30 O5\r\n"), &i);
       },
       "HD c1 O5 Z X W\r\n"},
      {"mg_miss_echoes_opaque_and_key",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::en, request("mg missing O12 k\r\n"), nullptr); },
       "EN O12 kmissing\r\n"},
      {"mg_miss_ignores_item_flags",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::en, request("mg missing s v t c f\r\n"), nullptr); },
       "EN\r\n"},
      {"mg_miss_with_base64_key",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::en, request("mg YQ== b k v\r\n"), nullptr); },
       "EN kYQ== b\r\n"},
      {"mg_empty_opaque",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::en, request("mg mk O\r\n"), nullptr); }, "EN O\r\n"},
      {"md_deleted",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::hd, request("md mk O1 k\r\n"), nullptr); },
       "HD O1 kmk\r\n"},
      {"md_only_echoes_o_and_k",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(5, 1, 2);
         encode_meta(o, Mc_meta_code::hd, request("md q1 s t c v\r\n"), &i);
       },
       "HD\r\n"},
      {"md_not_found",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::nf, request("md nokey O5 k q\r\n"), nullptr); },
       "NF O5 knokey\r\n"},
      {"md_not_found_base64",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::nf, request("md YWJj b k\r\n"), nullptr); },
       "NF kYWJj b\r\n"},
      {"ma_value_with_flags",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(45, 0, 2);
         encode_meta_value(o, request("ma num v t c k O1 D5\r\n"), &i, "15");
       },
       "VA 2 t-1 c45 knum O1\r\n15\r\n"},
      {"ma_autovivified",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(54, 0, 1);
         encode_meta_value(o, request("ma q3 N0 J5 O1 k c t v\r\n"), &i, "5");
       },
       "VA 1 O1 kq3 c54 t-1\r\n5\r\n"},
      {"ma_exists_has_no_item_flags",
       [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::ex, request("ma q3 C1 O1 k c t\r\n"), nullptr); },
       "EX O1 kq3\r\n"},
      {"ma_not_found", [](Byte_buffer &o) { encode_meta(o, Mc_meta_code::nf, request("ma nokey\r\n"), nullptr); },
       "NF\r\n"},
      {"ma_hit_with_ttl",
       [](Byte_buffer &o) {
         const Mc_item_info i = item(9, 0, 1, 30);
         encode_meta(o, Mc_meta_code::hd, request("ma n t\r\n"), &i);
       },
       "HD t30\r\n"},
      {"meta_pieces_for_streaming",
       [](Byte_buffer &o) {
         encode_meta_value_header(o, 1048576);
         end_meta_line(o);
         encode_meta_code(o, Mc_meta_code::ns);
         end_meta_line(o);
       },
       "VA 1048576\r\nNS\r\n"},
      {"me_debug",
       [](Byte_buffer &o) {
         Mc_debug_info d;
         d.exp = -100;
         d.last_access = 0;
         d.cas = 81;
         d.slab_class = 1;
         d.total_size = 64;
         encode_meta_debug(o, "dbg", false, d);
       },
       "ME dbg exp=-100 la=0 cas=81 fetch=no cls=1 size=64\r\n"},
      {"me_debug_binary_key_has_no_b",
       [](Byte_buffer &o) {
         Mc_debug_info d;
         d.cas = 82;
         d.fetched = true;
         d.slab_class = 1;
         d.total_size = 64;
         encode_meta_debug(o, "abc", true, d);
       },
       "ME YWJj exp=-1 la=0 cas=82 fetch=yes cls=1 size=64\r\n"},
  };
  return cases;
}

class AMemcachedReply : public ::testing::TestWithParam<Encoder_case> {};

TEST_P(AMemcachedReply, IsExactlyTheBytesMemcachedSends) {
  const Encoder_case &c = GetParam();
  Byte_buffer out;
  c.encode(out);
  EXPECT_EQ(std::string(out.view()), c.expected);
}

TEST_P(AMemcachedReply, IsAppendedAfterWhatIsAlreadyBuffered) {
  const Encoder_case &c = GetParam();
  Byte_buffer out;
  out.append("prefix");
  c.encode(out);
  EXPECT_EQ(std::string(out.view()), "prefix" + c.expected);
}

INSTANTIATE_TEST_SUITE_P(McEncoder, AMemcachedReply, ::testing::ValuesIn(encoder_cases()),
                         [](const ::testing::TestParamInfo<Encoder_case> &i) { return i.param.name; });

TEST(McEncoder, AParseErrorEncodesAsItsReplyLine) {
  std::string buf = "set k 0 0 1\r\nabc\r\n";
  Mc_request rq;
  const Mc_parse_result r = parse_request(buf.data(), buf.size(), Mc_limits(), &rq);
  ASSERT_EQ(r.status, Mc_parse_status::error);
  Byte_buffer out;
  encode_line(out, r.error);
  EXPECT_EQ(std::string(out.view()), "CLIENT_ERROR bad data chunk\r\n");
}

TEST(McEncoder, AStoredValueComesBackAsTheSameBytes) {
  /* set, then the VALUE entry made from the parsed request, carries the same key/flags/data. */
  std::string buf = "set some:key 4294967295 0 6\r\na\r\nb\0c\r\n"s;
  Mc_request rq;
  ASSERT_EQ(parse_request(buf.data(), buf.size(), Mc_limits(), &rq).status, Mc_parse_status::complete);
  Byte_buffer out;
  encode_value(out, rq.key(), rq.client_flags, rq.data, true, 12);
  EXPECT_EQ(std::string(out.view()), "VALUE some:key 4294967295 6 12\r\na\r\nb\0c\r\n"s);
}

TEST(McEncoder, TheFirstByteTellsABinaryConnection) {
  const unsigned char rq[] = {0x80, 0x00, 0x00, 0x03};
  const char *hdr = reinterpret_cast<const char *>(rq);
  EXPECT_TRUE(starts_binary_request(hdr, sizeof rq));
  EXPECT_TRUE(starts_binary_request(hdr, 1));
  EXPECT_FALSE(starts_binary_request("get foo\r\n", 9));
  EXPECT_FALSE(starts_binary_request(hdr, 0));
}

}  // namespace
}  // namespace mc
}  // namespace tablesocket
