#include "common/account_record.h"

#include <gtest/gtest.h>

namespace tablesocket {
namespace {

TEST(AccountRecord, NativePasswordAccount) {
  Account_record r;
  std::string err;
  ASSERT_TRUE(parse_account_record(
      R"({"access":0,"version_id":101118,"plugin":"mysql_native_password",)"
      R"("authentication_string":"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7",)"
      R"("password_last_changed":1732000000,"password_lifetime":-1,"default_role":"reader"})",
      &r, &err)) << err;
  ASSERT_EQ(r.methods.size(), 1u);
  EXPECT_EQ(r.methods[0].plugin, "mysql_native_password");
  EXPECT_EQ(r.methods[0].auth_string, "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
  EXPECT_EQ(r.password_last_changed, 1732000000);
  EXPECT_EQ(r.password_lifetime, -1);
  EXPECT_EQ(r.default_role, "reader");
  EXPECT_FALSE(r.account_locked);
  EXPECT_EQ(r.ssl_type, 0);
}

TEST(AccountRecord, LockedSslAndLimits) {
  Account_record r;
  std::string err;
  ASSERT_TRUE(parse_account_record(
      R"({"plugin":"mysql_native_password","authentication_string":"","account_locked":true,)"
      R"("ssl_type":3,"ssl_cipher":"","x509_issuer":"/CN=ca","x509_subject":"/O=x\/y/CN=al\"ice",)"
      R"("max_user_connections":5,"max_questions":7,"max_updates":3,"max_connections":2,)"
      R"("password_last_changed":0})",
      &r, &err)) << err;
  EXPECT_TRUE(r.account_locked);
  EXPECT_EQ(r.ssl_type, 3);
  EXPECT_EQ(r.x509_issuer, "/CN=ca");
  EXPECT_EQ(r.x509_subject, "/O=x/y/CN=al\"ice");
  EXPECT_EQ(r.max_user_connections, 5);
  EXPECT_EQ(r.max_questions, 7);
  EXPECT_EQ(r.max_updates, 3);
  EXPECT_EQ(r.max_connections, 2);
  EXPECT_EQ(r.password_last_changed, 0);
  EXPECT_EQ(r.methods[0].auth_string, "");
}

TEST(AccountRecord, AuthOrListUsesTopLevelForEmptyObject) {
  Account_record r;
  std::string err;
  ASSERT_TRUE(parse_account_record(
      R"({"access":1,"plugin":"mysql_native_password","authentication_string":"*AA",)"
      R"("auth_or":[{"plugin":"ed25519","authentication_string":"xyz"},{}],"nested":{"a":[1,2,{"b":null}]}})",
      &r, &err)) << err;
  ASSERT_EQ(r.methods.size(), 2u);
  EXPECT_EQ(r.methods[0].plugin, "ed25519");
  EXPECT_EQ(r.methods[1].plugin, "mysql_native_password");
  EXPECT_EQ(r.methods[1].auth_string, "*AA");
}

TEST(AccountRecord, UnicodeEscapes) {
  Account_record r;
  std::string err;
  ASSERT_TRUE(parse_account_record(R"({"default_role":"r\u00e9\ud83d\ude00"})", &r, &err)) << err;
  EXPECT_EQ(r.default_role, "r\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(r.methods.empty());
}

TEST(AccountRecord, RejectsMalformed) {
  const char *bad[] = {"", "[]", "{", "{\"plugin\":}", "{\"plugin\":\"x\"", "{\"a\":1}x", "{\"a\":\"\\q\"}",
                       "{\"auth_or\":[{\"plugin\":1}]}", "{\"a\":\"\\u12\"}", "{\"a\":tru}"};
  for (const char *b : bad) {
    Account_record r;
    std::string err;
    EXPECT_FALSE(parse_account_record(b, &r, &err)) << b;
    EXPECT_FALSE(err.empty()) << b;
  }
  /* Deep nesting is refused, not recursed into without bound. */
  std::string deep = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  Account_record r;
  std::string err;
  EXPECT_FALSE(parse_account_record(deep, &r, &err));
}

TEST(AccountRecord, NativeHashStage2) {
  unsigned char h[20];
  ASSERT_TRUE(native_hash_stage2("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7", h));
  EXPECT_EQ(h[0], 0x14);
  EXPECT_EQ(h[19], 0xE7);
  ASSERT_TRUE(native_hash_stage2("*14e65567abdb5135d0cfd9a70b3032c179a49ee7", h));
  EXPECT_FALSE(native_hash_stage2("", h));
  EXPECT_FALSE(native_hash_stage2("14E65567ABDB5135D0CFD9A70B3032C179A49EE7", h));
  EXPECT_FALSE(native_hash_stage2("*14E65567ABDB5135D0CFD9A70B3032C179A49EEZ", h));
}

TEST(AccountRecord, HexDecode) {
  unsigned char b[3];
  ASSERT_TRUE(hex_decode("00aBff", b, 3));
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0xAB);
  EXPECT_EQ(b[2], 0xFF);
  EXPECT_FALSE(hex_decode("00aBf", b, 3));
  EXPECT_FALSE(hex_decode("00aBfff", b, 3));
  EXPECT_FALSE(hex_decode("00aBfg", b, 3));
  EXPECT_TRUE(hex_decode("", b, 0));
}

TEST(AccountRecord, EqualConstantTime) {
  EXPECT_TRUE(equal_constant_time("", ""));
  EXPECT_TRUE(equal_constant_time("secret", "secret"));
  EXPECT_FALSE(equal_constant_time("secret", "secreT"));
  EXPECT_FALSE(equal_constant_time("secret", "secret2"));
  EXPECT_FALSE(equal_constant_time("", "x"));
  EXPECT_FALSE(equal_constant_time(std::string_view("a\0", 2), "a"));
}

TEST(AccountRecord, SplitAccountName) {
  struct Case { const char *text; bool ok; const char *user, *host; } cases[] = {
      {"app@localhost", true, "app", "localhost"},
      {"'app'@'10.0.%'", true, "app", "10.0.%"},
      {"`a@b`@`%`", true, "a@b", "%"},
      {"\"it''s\"@h", true, "it''s", "h"},
      {"'it''s'@h", true, "it's", "h"},
      {"app", true, "app", "%"},
      {"  app@%  ", true, "app", "%"},
      {"@host", false, "", ""},
      {"app@", false, "", ""},
      {"", false, "", ""},
      {"'app@h", false, "", ""},
      {"a b@h", false, "", ""},
  };
  for (const auto &c : cases) {
    std::string u, h;
    EXPECT_EQ(split_account_name(c.text, &u, &h), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(u, c.user) << c.text;
      EXPECT_EQ(h, c.host) << c.text;
    }
  }
}

}  // namespace
}  // namespace tablesocket
