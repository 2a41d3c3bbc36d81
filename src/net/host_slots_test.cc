#include "net/host_slots.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tablesocket {
namespace {

TEST(HostSlots, ZeroLimitIsDisabled) {
  Host_slots s(0);
  EXPECT_FALSE(s.enabled());
}

TEST(HostSlots, EachHostGetsItsOwnLimit) {
  Host_slots s(2);
  ASSERT_TRUE(s.enabled());
  struct Step { const char *op, *host; bool ok; unsigned held; };
  const Step steps[] = {
      {"take", "10.0.0.1", true, 1},  {"take", "10.0.0.1", true, 2},  {"take", "10.0.0.1", false, 2},
      {"take", "10.0.0.2", true, 1},  {"take", "::1", true, 1},       {"give", "10.0.0.1", true, 1},
      {"take", "10.0.0.1", true, 2},  {"take", "10.0.0.1", false, 2}, {"give", "10.0.0.1", true, 1},
      {"give", "10.0.0.1", true, 0},  {"give", "10.0.0.1", true, 0},  // a stray give_back is harmless
      {"take", "10.0.0.1", true, 1},
  };
  for (const Step &st : steps) {
    SCOPED_TRACE(std::string(st.op) + " " + st.host);
    if (std::string(st.op) == "take")
      EXPECT_EQ(s.take(st.host), st.ok);
    else
      s.give_back(st.host);
    EXPECT_EQ(s.held(st.host), st.held);
  }
}

TEST(HostSlots, HostsWithNoSlotLeaveNoEntry) {
  Host_slots s(1);
  EXPECT_TRUE(s.take("a"));
  EXPECT_FALSE(s.take("a"));
  s.give_back("a");
  EXPECT_EQ(s.hosts(), 0u);  // a refused take and the last give_back leave nothing behind
}

TEST(HostSlots, ConcurrentTakesNeverExceedTheLimit) {
  Host_slots s(100);
  std::atomic<int> granted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (s.take("h")) granted.fetch_add(1);
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(granted.load(), 100);
  EXPECT_EQ(s.held("h"), 100u);
}

}  // namespace
}  // namespace tablesocket
