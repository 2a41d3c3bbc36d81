#include "common/delta.h"

#include <gtest/gtest.h>

#include <string>

namespace tablesocket {
namespace {

struct Case {
  const char *in;
  Delta::Kind kind;
  bool negative;
  uint64_t magnitude;
  const char *text;
};

TEST(Delta, ReadsLikeSqlReadsANumericString) {
  const Case cases[] = {
      {"1", Delta::integer, false, 1, ""},
      {"+7", Delta::integer, false, 7, ""},
      {"-3", Delta::integer, true, 3, ""},
      {"0", Delta::integer, false, 0, ""},
      {" 12 ", Delta::integer, false, 12, ""},
      {"18446744073709551615", Delta::integer, false, UINT64_MAX, ""},
      {"-9223372036854775808", Delta::integer, true, 9223372036854775808ull, ""},
      {"18446744073709551616", Delta::number, false, 0, "18446744073709551616"},  // past 64 bits
      {"1.5", Delta::number, false, 0, "1.5"},
      {"-0.25", Delta::number, true, 0, "-0.25"},
      {"1e2", Delta::number, false, 0, "1e2"},
      {"2E-1", Delta::number, false, 0, "2E-1"},
      {".5", Delta::number, false, 0, ".5"},
      {"5.", Delta::number, false, 0, "5."},
      {"12abc", Delta::garbage, false, 0, "12"},
      {"1e", Delta::garbage, false, 0, "1"},
      {"abc", Delta::garbage, false, 0, ""},
      {"", Delta::garbage, false, 0, ""},
      {"-", Delta::garbage, true, 0, ""},
      {"1 2", Delta::garbage, false, 0, "1"},
      {"0x10", Delta::garbage, false, 0, "0"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.in);
    Delta d = parse_delta(c.in, std::char_traits<char>::length(c.in));
    EXPECT_EQ(d.kind, c.kind);
    EXPECT_EQ(d.negative, c.negative);
    if (c.kind == Delta::integer) EXPECT_EQ(d.magnitude, c.magnitude);
    else EXPECT_EQ(d.text, c.text);
  }
}

}  // namespace
}  // namespace tablesocket
