#include "common/hourly_limits.h"

#include <gtest/gtest.h>

namespace tablesocket {
namespace {

constexpr int64_t kHour = Hourly_counts::kHourUs;

TEST(HourlyLimits, NoLimitNeverCountsOrRefuses) {
  Hourly_counts c;
  const char *res = nullptr;
  int64_t lim = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(c.charge_request("'a'@'%'", Hourly_limits{}, i % 2, i, &res, &lim));
    EXPECT_TRUE(c.charge_connection("'a'@'%'", Hourly_limits{}, i));
  }
  EXPECT_EQ(c.accounts(), 0u);  // nothing looked up: no lock, no entry
}

TEST(HourlyLimits, QuestionsCountReadsAndWrites) {
  Hourly_counts c;
  Hourly_limits l;
  l.questions = 3;
  const char *res = nullptr;
  int64_t lim = 0;
  EXPECT_TRUE(c.charge_request("u", l, false, 0, &res, &lim));
  EXPECT_TRUE(c.charge_request("u", l, true, 1, &res, &lim));
  EXPECT_TRUE(c.charge_request("u", l, false, 2, &res, &lim));
  EXPECT_FALSE(c.charge_request("u", l, false, 3, &res, &lim));
  EXPECT_STREQ(res, "max_queries_per_hour");
  EXPECT_EQ(lim, 3);
  EXPECT_FALSE(c.charge_request("u", l, true, 4, &res, &lim));
  // Another account has counts of its own.
  EXPECT_TRUE(c.charge_request("v", l, false, 5, &res, &lim));
}

TEST(HourlyLimits, UpdatesCountWritesOnly) {
  Hourly_counts c;
  Hourly_limits l;
  l.updates = 2;
  const char *res = nullptr;
  int64_t lim = 0;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(c.charge_request("u", l, false, i, &res, &lim));
  EXPECT_TRUE(c.charge_request("u", l, true, 10, &res, &lim));
  EXPECT_TRUE(c.charge_request("u", l, true, 11, &res, &lim));
  EXPECT_FALSE(c.charge_request("u", l, true, 12, &res, &lim));
  EXPECT_STREQ(res, "max_updates_per_hour");
  EXPECT_EQ(lim, 2);
  EXPECT_TRUE(c.charge_request("u", l, false, 13, &res, &lim));  // reads go on
}

TEST(HourlyLimits, ARefusedRequestIsNotCounted) {
  Hourly_counts c;
  Hourly_limits l;
  l.questions = 2;
  l.updates = 1;
  const char *res = nullptr;
  int64_t lim = 0;
  EXPECT_TRUE(c.charge_request("u", l, true, 0, &res, &lim));
  EXPECT_FALSE(c.charge_request("u", l, true, 1, &res, &lim));  // the update limit refuses it
  EXPECT_STREQ(res, "max_updates_per_hour");
  EXPECT_TRUE(c.charge_request("u", l, false, 2, &res, &lim));  // so one question is still left
  EXPECT_FALSE(c.charge_request("u", l, false, 3, &res, &lim));
}

TEST(HourlyLimits, CountsStartAgainAfterAnHour) {
  Hourly_counts c;
  Hourly_limits l;
  l.questions = 1;
  l.connections = 1;
  const char *res = nullptr;
  int64_t lim = 0;
  const int64_t t0 = 1000;
  EXPECT_TRUE(c.charge_request("u", l, false, t0, &res, &lim));
  EXPECT_TRUE(c.charge_connection("u", l, t0));
  EXPECT_FALSE(c.charge_request("u", l, false, t0 + kHour - 1, &res, &lim));
  EXPECT_FALSE(c.charge_connection("u", l, t0 + kHour - 1));
  EXPECT_TRUE(c.charge_request("u", l, false, t0 + kHour, &res, &lim));  // a new hour: all counts start again
  EXPECT_TRUE(c.charge_connection("u", l, t0 + kHour + 1));
  EXPECT_FALSE(c.charge_connection("u", l, t0 + kHour + 2));
}

TEST(HourlyLimits, ConnectionsPerHour) {
  Hourly_counts c;
  Hourly_limits l;
  l.connections = 2;
  EXPECT_TRUE(c.charge_connection("u", l, 0));
  EXPECT_TRUE(c.charge_connection("u", l, 1));
  EXPECT_FALSE(c.charge_connection("u", l, 2));
  EXPECT_TRUE(c.charge_connection("u", l, kHour));
}

TEST(HourlyLimits, ExpiredAccountsArePrunedWhenManyAreKept) {
  Hourly_counts c;
  Hourly_limits l;
  l.connections = 5;
  for (int i = 0; i < 5000; ++i) EXPECT_TRUE(c.charge_connection("a" + std::to_string(i), l, 0));
  EXPECT_GE(c.accounts(), 4096u);
  EXPECT_TRUE(c.charge_connection("late", l, kHour));  // the full map drops the hour-old entries
  EXPECT_LT(c.accounts(), 1000u);
}

}  // namespace
}  // namespace tablesocket
