#include "common/live.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

#include "common/config.h"

namespace tablesocket {
namespace {

TEST(Live, ReadsAndWritesAsThePlainFieldDid) {
  Live<unsigned> v = 7;
  EXPECT_EQ(v.get(), 7u);
  v = 9u;
  unsigned plain = v;  // implicit read
  EXPECT_EQ(plain, 9u);
  EXPECT_TRUE(v < 10u);
  EXPECT_EQ(std::to_string(v.get()), "9");
  Live<uint64_t> big = uint64_t(1) << 40;
  EXPECT_EQ(uint64_t(big) >> 40, 1u);
}

TEST(Live, CopiesAreIndependent) {
  Live<size_t> a = 5;
  Live<size_t> b = a;
  a = size_t(6);
  EXPECT_EQ(b.get(), 5u);
  b = a;
  EXPECT_EQ(b.get(), 6u);
}

TEST(Live, ConfigCopiesKeepTheirValues) {
  Config c;
  c.max_connections = 42u;
  c.output_high_water = size_t(4096);
  Config d = c;  // the plugin builds a Config and the server keeps a copy
  c.max_connections = 1u;
  EXPECT_EQ(d.max_connections.get(), 42u);
  EXPECT_EQ(d.output_high_water.get(), 4096u);
}

TEST(Live, AWriterAndReadersSeeOnlyWrittenValues) {
  Live<unsigned> v = 1;
  std::thread writer([&] {
    for (unsigned i = 0; i < 100000; ++i) v = (i % 2) ? 1000u : 1u;
  });
  for (int i = 0; i < 100000; ++i) {
    unsigned seen = v;
    ASSERT_TRUE(seen == 1u || seen == 1000u) << seen;
  }
  writer.join();
}

}  // namespace
}  // namespace tablesocket
