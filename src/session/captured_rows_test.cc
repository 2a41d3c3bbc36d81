#include "session/captured_rows.h"

#include <gtest/gtest.h>

#include <sched.h>

#include "common/config.h"

namespace tablesocket {
namespace {

TEST(CapturedRows, CellsComeBackInRowMajorOrderWithNullsFlagged) {
  Captured_rows rows;
  rows.begin(3);
  rows.value("1", 1);
  rows.value("alice", 5);
  rows.null();
  rows.value("2", 1);
  rows.value("", 0);
  rows.value("x\0y", 3);  // values are bytes, not C strings
  ASSERT_EQ(rows.ncols(), 3u);
  ASSERT_EQ(rows.nrows(), 2u);
  ASSERT_EQ(rows.ncells(), 6u);
  EXPECT_EQ(rows.cell(0, 1), "alice");
  EXPECT_TRUE(rows.is_null(0, 2));
  EXPECT_EQ(rows.cell(0, 2), "");
  EXPECT_FALSE(rows.is_null(1, 1));  // an empty string is not NULL
  EXPECT_EQ(rows.cell(1, 1), "");
  EXPECT_EQ(rows.cell(1, 2), std::string_view("x\0y", 3));
  EXPECT_EQ(rows.cell(3), "2");
}

TEST(CapturedRows, CellsStayValidAsTheBufferGrowsAndClearForgetsRows) {
  Captured_rows rows;
  rows.begin(1);
  std::string big(10000, 'v');
  for (int i = 0; i < 100; ++i) rows.value(big.data(), big.size());  // forces reallocations
  rows.value("last", 4);
  EXPECT_EQ(rows.nrows(), 101u);
  EXPECT_EQ(rows.cell(0, 0), big);
  EXPECT_EQ(rows.cell(100, 0), "last");
  rows.clear();
  EXPECT_EQ(rows.nrows(), 0u);
  rows.begin(2);
  rows.value("a", 1);
  rows.value("b", 1);
  EXPECT_EQ(rows.nrows(), 1u);
  EXPECT_EQ(rows.cell(0, 1), "b");
}

TEST(CapturedRows, OverflowsPastMaxRowsAndCancelDropsEverything) {
  Captured_rows rows(1);
  rows.begin(2);
  rows.value("a", 1);
  rows.value("b", 1);
  EXPECT_FALSE(rows.would_overflow());
  rows.value("c", 1);
  rows.null();
  EXPECT_TRUE(rows.would_overflow());
  rows.cancel();
  EXPECT_EQ(rows.nrows(), 0u);
  EXPECT_FALSE(rows.would_overflow());
}

TEST(CapturedRows, ZeroColumnsCountAsOne) {
  Captured_rows rows;
  rows.begin(0);
  rows.value("k", 1);
  EXPECT_EQ(rows.ncols(), 1u);
  EXPECT_EQ(rows.nrows(), 1u);
}

TEST(CapturedRows, TrimGivesBackWhatALargeValueTookAndKeepsSmallBuffers) {
  Captured_rows rows;
  rows.begin(1);
  rows.value("small", 5);
  rows.trim(64 << 10);
  EXPECT_EQ(rows.nrows(), 0u);
  const size_t small = rows.capacity_bytes();
  EXPECT_GT(small, 0u);  // kept: reused by the next request without allocating
  const std::string big(1 << 20, 'x');
  rows.value(big.data(), big.size());
  EXPECT_GE(rows.capacity_bytes(), big.size());
  rows.trim(64 << 10);
  EXPECT_EQ(rows.nrows(), 0u);
  EXPECT_LT(rows.capacity_bytes(), size_t(64 << 10));
  rows.value("again", 5);
  EXPECT_EQ(rows.cell(0), "again");
}

TEST(DefaultWorkerThreads, IsTheNumberOfCpusInTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int n = CPU_COUNT(&set);
  EXPECT_EQ(default_worker_threads(), unsigned(n > 64 ? 64 : n));
  EXPECT_GE(default_worker_threads(), 1u);
}

}  // namespace
}  // namespace tablesocket
