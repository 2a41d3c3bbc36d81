#include "common/kv_cas.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

namespace tablesocket {
namespace {

TEST(KvCas, CounterStartsSmallAndOnlyGrows) {
  const uint64_t a = next_kv_cas();
  EXPECT_GT(a, uint64_t(1577836800) / 16);  // seeded from the clock (seconds since 2020), not 1
  EXPECT_LT(a, uint64_t(1) << 32);          // 32-bit clients (meta-memcache) can hold it
  EXPECT_EQ(a % 2, 0u);                     // even: never a content hash
  const uint64_t b = next_kv_cas();
  EXPECT_EQ(b, a + 2);
}

TEST(KvCas, AWriteOfARowWithAHigherCasGoesAboveItWithoutRaisingTheCounter) {
  const uint64_t fresh = next_kv_cas();
  const struct { uint64_t old, want; } cases[] = {
      {0, fresh},                      // no cas yet (SQL's 0): the counter's value
      {fresh - 1, fresh},              // below the counter: the counter's value
      {fresh, fresh + 2},              // equal: the next even value above the row's
      {fresh + 1, fresh + 2},          // odd (SQL's, or a content hash's range): the next even one
      {fresh + 1000, fresh + 1002},    // above (a value from before a restart)
      {fresh + 1001, fresh + 1002},
      {UINT64_MAX - 1, fresh},         // cannot grow: the counter's value (never 0)
      {UINT64_MAX, fresh},
  };
  for (const auto &c : cases) EXPECT_EQ(kv_cas_after(c.old, fresh), c.want) << c.old;
  EXPECT_EQ(next_kv_cas(), fresh + 2);  // one huge cas (SQL's) does not make every later one huge
}

TEST(KvCas, ContentCasIsAnOdd32BitHashOfValueAndFlags) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string v = "value" + std::to_string(i);
    const uint64_t c = content_cas(v, 0);
    EXPECT_EQ(c % 2, 1u);  // odd: no counter value (even) can equal it
    EXPECT_LE(c, 0xffffffffu);
    EXPECT_EQ(c, content_cas(v, 0));  // the same content, the same cas
    seen.insert(c);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(content_cas("x", 0), content_cas("x", 1));  // flags count
  EXPECT_NE(content_cas("", 0), 0u);
}

}  // namespace
}  // namespace tablesocket
