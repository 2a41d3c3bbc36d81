#include "common/fingerprint_set.h"

#include <gtest/gtest.h>

#include <string>

namespace tablesocket {
namespace {

TEST(FingerprintSet, HoldsWhatWasInsertedAndNothingElse) {
  Fingerprint_set s;
  EXPECT_FALSE(s.contains("", 0));
  EXPECT_FALSE(s.contains("a", 1));
  s.insert("abc", 3);
  s.insert("abc", 3);  // once
  s.insert("", 0);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.contains("abc", 3));
  EXPECT_TRUE(s.contains("", 0));
  EXPECT_FALSE(s.contains("ab", 2));
  EXPECT_FALSE(s.contains("abc\0", 4));  // the length counts: a prefix or a zero byte more differ
  EXPECT_FALSE(s.contains("abd", 3));
}

TEST(FingerprintSet, GrowsAndClearsWithoutLosingOrKeepingRows) {
  Fingerprint_set s;
  const int n = 5000;  // more than a batch keeps (4096): several doublings
  for (int i = 0; i < n; ++i) {
    const uint32_t ref = uint32_t(i) * 2654435761u;  // row positions as InnoDB gives them: bytes
    s.insert(&ref, sizeof ref);
  }
  EXPECT_EQ(s.size(), size_t(n));
  int found = 0, false_yes = 0;
  for (int i = 0; i < 2 * n; ++i) {
    const uint32_t ref = uint32_t(i) * 2654435761u;
    const bool in = s.contains(&ref, sizeof ref);
    if (i < n) found += in;
    else false_yes += in;
  }
  EXPECT_EQ(found, n);
  EXPECT_EQ(false_yes, 0);
  s.clear();  // big array, few rows next time: handed back
  EXPECT_EQ(s.size(), 0u);
  for (int i = 0; i < n; ++i) {
    const uint32_t ref = uint32_t(i) * 2654435761u;
    ASSERT_FALSE(s.contains(&ref, sizeof ref)) << i;
  }
  s.insert("x", 1);
  EXPECT_TRUE(s.contains("x", 1));
  s.clear();
  EXPECT_FALSE(s.contains("x", 1));
}

TEST(FingerprintSet, FingerprintIsNeverTheEmptyMarkAndDependsOnEveryByte) {
  std::string a(3072, 'k');  // the longest InnoDB primary key
  const uint64_t fa = Fingerprint_set::fingerprint(a.data(), a.size());
  EXPECT_NE(fa, 0u);
  for (size_t pos : {size_t(0), size_t(1000), a.size() - 1}) {
    std::string b = a;
    b[pos] ^= 1;
    EXPECT_NE(Fingerprint_set::fingerprint(b.data(), b.size()), fa) << pos;
  }
}

}  // namespace
}  // namespace tablesocket
