/* Tests for the HandlerSocket response encoder (hs_encoder.cc): exact reply bytes. */
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "proto/hs/hs_protocol.h"

namespace tablesocket {
namespace hs {
namespace {

using namespace std::string_literals;

struct Encoder_case {
  const char *name;
  std::function<void(Byte_buffer &)> encode;
  std::string expected;
};

void PrintTo(const Encoder_case &c, std::ostream *os) { *os << c.name; }

void row(Byte_buffer &out, std::initializer_list<const char *> cols) {
  begin_rows(out, cols.size());
  for (const char *c : cols) append_value(out, c, c ? std::char_traits<char>::length(c) : 0);
  end_rows(out);
}

const std::vector<Encoder_case> &encoder_cases() {
  static const std::vector<Encoder_case> cases = {
      {"success_status_without_message", [](Byte_buffer &o) { encode_status(o, 0, ""); }, "0\t1\n"},
      {"client_error_with_message", [](Byte_buffer &o) { encode_status(o, 2, "cmd"); },
       "2\t1\tcmd\n"},
      {"unauth_error", [](Byte_buffer &o) { encode_status(o, 3, "unauth"); }, "3\t1\tunauth\n"},
      {"largest_status_code", [](Byte_buffer &o) { encode_status(o, 4294967295u, "x"); },
       "4294967295\t1\tx\n"},
      {"status_message_is_written_verbatim",
       [](Byte_buffer &o) { encode_status(o, 1, "a b\tc"); }, "1\t1\ta b\tc\n"},
      {"number_zero", [](Byte_buffer &o) { encode_number(o, 0, 0); }, "0\t1\t0\n"},
      {"affected_row_count", [](Byte_buffer &o) { encode_number(o, 0, 42); }, "0\t1\t42\n"},
      {"largest_number", [](Byte_buffer &o) { encode_number(o, 0, UINT64_MAX); },
       "0\t1\t18446744073709551615\n"},
      {"number_with_error_code", [](Byte_buffer &o) { encode_number(o, 1, 7); }, "1\t1\t7\n"},
      {"empty_result_set", [](Byte_buffer &o) { row(o, {}); }, "0\t0\n"},
      {"empty_result_with_columns",
       [](Byte_buffer &o) {
         begin_rows(o, 3);
         end_rows(o);
       },
       "0\t3\n"},
      {"one_row", [](Byte_buffer &o) { row(o, {"1", "alice"}); }, "0\t2\t1\talice\n"},
      {"null_and_empty_values", [](Byte_buffer &o) { row(o, {nullptr, "", "x"}); },
       "0\t3\t\0\t\tx\n"s},
      {"two_rows_are_one_line",
       [](Byte_buffer &o) {
         begin_rows(o, 2);
         for (const char *v : {"a", "b", "c", "d"}) append_value(o, v, 1);
         end_rows(o);
       },
       "0\t2\ta\tb\tc\td\n"},
      {"control_bytes_are_escaped",
       [](Byte_buffer &o) {
         begin_rows(o, 1);
         const std::string v = "\x00\t\n\x01\x0f\x10z"s;
         append_value(o, v.data(), v.size());
         end_rows(o);
       },
       "0\t1\t\x01\x40\x01\x49\x01\x4a\x01\x41\x01\x4f\x10z\n"s},
      {"high_bytes_are_not_escaped",
       [](Byte_buffer &o) {
         begin_rows(o, 1);
         const std::string v = "\x7f\x80\xff\xc3\xa9"s;
         append_value(o, v.data(), v.size());
         end_rows(o);
       },
       "0\t1\t\x7f\x80\xff\xc3\xa9\n"s},
      {"cancelled_rows_leave_earlier_output",
       [](Byte_buffer &o) {
         encode_status(o, 0, "");
         const size_t mark = begin_rows(o, 2);
         append_value(o, "partial", 7);
         append_value(o, nullptr, 0);
         cancel_rows(o, mark);
         encode_status(o, 1, "read");
       },
       "0\t1\n1\t1\tread\n"},
      {"cancel_right_after_begin",
       [](Byte_buffer &o) {
         const size_t mark = begin_rows(o, 5);
         cancel_rows(o, mark);
       },
       ""},
      {"replies_append_after_existing_bytes",
       [](Byte_buffer &o) {
         o.append("prev\n", 5);
         encode_number(o, 0, 1);
         row(o, {"v"});
       },
       "prev\n0\t1\t1\n0\t1\tv\n"},
      {"begin_rows_returns_the_offset_before_the_reply",
       [](Byte_buffer &o) {
         o.append("abc", 3);
         const size_t mark = begin_rows(o, 1);
         o.append(std::to_string(mark));
       },
       "abc0\t13"},
      {"escape_into_appends_without_a_tab",
       [](Byte_buffer &o) {
         escape_into(o, "a\x02" "b", 3);
         escape_into(o, "", 0);
         escape_into(o, nullptr, 0);
       },
       "a\x01\x42" "b"},
  };
  return cases;
}

class TheEncoder : public ::testing::TestWithParam<Encoder_case> {};

TEST_P(TheEncoder, WritesExactlyHandlerSocketsBytes) {
  const Encoder_case &c = GetParam();
  Byte_buffer out;
  c.encode(out);
  EXPECT_EQ(std::string(out.view()), c.expected);
}

INSTANTIATE_TEST_SUITE_P(HsEncoder, TheEncoder, ::testing::ValuesIn(encoder_cases()),
                         [](const ::testing::TestParamInfo<Encoder_case> &i) {
                           return std::string(i.param.name);
                         });

TEST(HsEncoder, ALargeValueWithoutControlBytesIsCopiedUnchanged) {
  std::string v(1 << 20, 'q');
  for (size_t i = 0; i < v.size(); i += 4096) v[i] = static_cast<char>(0x10 + i % 200);
  Byte_buffer out;
  append_value(out, v.data(), v.size());
  ASSERT_EQ(out.size(), v.size() + 1);
  EXPECT_EQ(out.view().substr(1), v);
}

TEST(HsEncoder, ALargeBinaryValueGrowsTheBufferOnlyForItsEscapes) {
  std::string v(100000, 'x');
  for (size_t i = 0; i < v.size(); i += 10) v[i] = static_cast<char>(i % 16);
  Byte_buffer out;
  escape_into(out, v.data(), v.size());
  EXPECT_EQ(out.size(), v.size() + v.size() / 10);
  std::string back(out.view());
  back.resize(unescape_in_place(back.data(), back.size()));
  EXPECT_EQ(back, v);
}

TEST(HsEncoder, AValueOfOnlyControlBytesDoublesInSize) {
  for (size_t n : {1u, 15u, 16u, 17u, 4079u, 4080u, 4081u, 10000u}) {
    SCOPED_TRACE(n);
    std::string v(n, '\0');
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i % 16);
    Byte_buffer out;
    escape_into(out, v.data(), v.size());
    ASSERT_EQ(out.size(), 2 * n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out.data()[2 * i], '\x01');
      ASSERT_EQ(out.data()[2 * i + 1], static_cast<char>(0x40 + i % 16));
    }
  }
}

TEST(HsEncoder, EncodedRowsParseBackAsTheSameValues) {
  /* Rows the encoder writes are valid request tokens: prefix them with an insert and parse them. */
  const std::vector<std::string> values = {"", "plain", "\0"s, "\t\n\r"s, "\x01\x01"s, "\xff\x0f"s};
  Byte_buffer line;
  line.append("1\t+\t" + std::to_string(values.size() + 1));
  for (const std::string &v : values) append_value(line, v.data(), v.size());
  append_value(line, nullptr, 0);
  end_rows(line);
  Parse_scratch scratch;
  Request rq;
  ASSERT_EQ(parse_request(line.data(), line.size(), Limits(), scratch, &rq).status,
            Parse_status::complete);
  ASSERT_EQ(rq.exec.nkeys, values.size() + 1);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_FALSE(rq.exec.keys[i].is_null());
    EXPECT_EQ(rq.exec.keys[i].view(), values[i]) << i;
  }
  EXPECT_TRUE(rq.exec.keys[values.size()].is_null());
}

}  // namespace
}  // namespace hs
}  // namespace tablesocket
