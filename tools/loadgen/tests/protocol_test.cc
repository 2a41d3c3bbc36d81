// Reply parsers, request encoders and answer checks of ts-loadgen.
// Every well-formed reply is also fed split at every byte, byte by byte, and followed by more
// replies in the same buffer, the way the event loop sees them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "protocol.h"

using namespace loadgen;
using namespace std::string_literals;

namespace {

// ---- Generic driver ----------------------------------------------------------------------------

// A parsed reply reduced to comparable strings.
struct Summary {
  std::string text;  // e.g. "hs code=0 n=3 [a][b][NULL]" or "value key=[k] data=[v]"
  bool operator==(const Summary &o) const { return text == o.text; }
};

std::string field(const Field &f) { return f.is_null() ? "NULL" : "[" + std::string(f.view()) + "]"; }

std::string summarize_hs(const Hs_reply &r) {
  std::string s = "code=" + std::to_string(r.code) + " n=" + std::to_string(r.n);
  for (uint32_t i = 0; i < r.ntokens && i < Hs_reply::kMaxTokens; ++i) s += " " + field(r.tokens[i]);
  if (r.ntokens > Hs_reply::kMaxTokens) s += " +" + std::to_string(r.ntokens - Hs_reply::kMaxTokens);
  return s;
}

const char *kind_name(Kv_reply::Kind k) {
  switch (k) {
    case Kv_reply::value: return "value";
    case Kv_reply::miss: return "miss";
    case Kv_reply::stored: return "stored";
    case Kv_reply::not_stored: return "not_stored";
    case Kv_reply::error: return "error";
    case Kv_reply::integer: return "integer";
  }
  return "?";
}

std::string summarize_kv(const Kv_reply &r) {
  std::string s = kind_name(r.kind);
  if (r.kind == Kv_reply::value && r.key.ptr) s += " key=" + field(r.key);
  if (r.kind == Kv_reply::integer) s += " int=" + std::to_string(r.integer_value);
  else if (r.kind != Kv_reply::miss) s += " data=" + field(r.data);
  return s;
}

// Parses buf (copied: the HS parser writes into it) with proto's parser.
Parse_result parse_any(Proto p, std::string &buf, std::string *summary) {
  if (p == Proto::hs) {
    Hs_reply r;
    Parse_result pr = parse_hs_reply(buf.data(), buf.size(), &r);
    if (pr.status == Parse_status::complete) *summary = summarize_hs(r);
    return pr;
  }
  Kv_reply r;
  Parse_result pr;
  if (p == Proto::mc_text) pr = parse_mc_text_reply(buf.data(), buf.size(), &r);
  else if (p == Proto::mc_meta) pr = parse_mc_meta_reply(buf.data(), buf.size(), &r);
  else pr = parse_resp_reply(buf.data(), buf.size(), &r);
  if (pr.status == Parse_status::complete) *summary = summarize_kv(r);
  return pr;
}

struct Good_case {
  const char *name;
  Proto proto;
  std::string wire;
  std::string want;
};

const std::vector<Good_case> &good_cases() {
  static const std::vector<Good_case> cases = {
      // HandlerSocket
      {"hs open ok", Proto::hs, "0\t1\n", "code=0 n=1"},
      {"hs row", Proto::hs, "0\t3\tuser7\tuser7@example.com\t2010-01-01 00:00:00\n",
       "code=0 n=3 [user7] [user7@example.com] [2010-01-01 00:00:00]"},
      {"hs no row", Proto::hs, "0\t3\n", "code=0 n=3"},
      {"hs empty and null values", Proto::hs, "0\t3\t\t\0\t\n"s, "code=0 n=3 [] NULL []"},
      {"hs escaped bytes", Proto::hs, "0\t2\ta\x01\x49" "b\t\x01\x40\x01\x4a\n"s, "code=0 n=2 [a\tb] [\0\n]"s},
      {"hs trailing lone 0x01 kept", Proto::hs, "0\t1\tx\x01\n", "code=0 n=1 [x\x01]"},
      {"hs update count", Proto::hs, "0\t1\t1\n", "code=0 n=1 [1]"},
      {"hs insert with id", Proto::hs, "0\t1\t42\n", "code=0 n=1 [42]"},
      {"hs error", Proto::hs, "2\t1\top\n", "code=2 n=1 [op]"},
      {"hs error dup key", Proto::hs, "1\t1\t121\n", "code=1 n=1 [121]"},
      {"hs CRLF tolerated", Proto::hs, "0\t1\t1\r\n", "code=0 n=1 [1]"},
      {"hs two rows", Proto::hs, "0\t1\ta\tb\n", "code=0 n=1 [a] [b]"},
      // memcached text
      {"mc value", Proto::mc_text, "VALUE user:5 0 5\r\nhello\r\nEND\r\n", "value key=[user:5] data=[hello]"},
      {"mc value with cas", Proto::mc_text, "VALUE k 7 3 99\r\nabc\r\nEND\r\n", "value key=[k] data=[abc]"},
      {"mc value containing CRLF and END", Proto::mc_text, "VALUE k 0 8\r\nEND\r\n\r\nx\r\nEND\r\n",
       "value key=[k] data=[END\r\n\r\nx]"},
      {"mc empty value", Proto::mc_text, "VALUE k 0 0\r\n\r\nEND\r\n", "value key=[k] data=[]"},
      {"mc miss", Proto::mc_text, "END\r\n", "miss"},
      {"mc stored", Proto::mc_text, "STORED\r\n", "stored data=[STORED]"},
      {"mc not stored", Proto::mc_text, "NOT_STORED\r\n", "not_stored data=[NOT_STORED]"},
      {"mc exists", Proto::mc_text, "EXISTS\r\n", "not_stored data=[EXISTS]"},
      {"mc error", Proto::mc_text, "ERROR\r\n", "error data=[ERROR]"},
      {"mc client error", Proto::mc_text, "CLIENT_ERROR bad data chunk\r\n", "error data=[CLIENT_ERROR bad data chunk]"},
      {"mc server error", Proto::mc_text, "SERVER_ERROR out of memory\r\n", "error data=[SERVER_ERROR out of memory]"},
      // memcached meta
      {"meta value", Proto::mc_meta, "VA 5\r\nhello\r\n", "value data=[hello]"},
      {"meta value trailing space", Proto::mc_meta, "VA 5 \r\nhello\r\n", "value data=[hello]"},
      {"meta value with flags", Proto::mc_meta, "VA 2 f30 c123 kfoo\r\nhi\r\n", "value data=[hi]"},
      {"meta value containing CRLF", Proto::mc_meta, "VA 4\r\n\r\n\r\n\r\n", "value data=[\r\n\r\n]"},
      {"meta miss", Proto::mc_meta, "EN\r\n", "miss"},
      {"meta hd", Proto::mc_meta, "HD\r\n", "stored data=[HD]"},
      {"meta hd flags", Proto::mc_meta, "HD c5\r\n", "stored data=[HD c5]"},
      {"meta ns", Proto::mc_meta, "NS\r\n", "not_stored data=[NS]"},
      {"meta nf", Proto::mc_meta, "NF\r\n", "not_stored data=[NF]"},
      {"meta client error", Proto::mc_meta, "CLIENT_ERROR bad command line format\r\n",
       "error data=[CLIENT_ERROR bad command line format]"},
      // RESP
      {"resp bulk", Proto::resp, "$5\r\nhello\r\n", "value data=[hello]"},
      {"resp empty bulk", Proto::resp, "$0\r\n\r\n", "value data=[]"},
      {"resp bulk with CRLF", Proto::resp, "$4\r\n\r\n\r\n\r\n", "value data=[\r\n\r\n]"},
      {"resp null bulk", Proto::resp, "$-1\r\n", "miss"},
      {"resp3 null", Proto::resp, "_\r\n", "miss"},
      {"resp ok", Proto::resp, "+OK\r\n", "stored data=[OK]"},
      {"resp error", Proto::resp, "-ERR wrong number of arguments\r\n", "error data=[ERR wrong number of arguments]"},
      {"resp integer", Proto::resp, ":42\r\n", "integer int=42"},
      {"resp negative integer", Proto::resp, ":-7\r\n", "integer int=-7"},
  };
  return cases;
}

void PrintTo(const Good_case &c, std::ostream *os) { *os << c.name << ": \"" << printable(c.wire) << "\""; }

class GoodReplies : public ::testing::TestWithParam<Good_case> {};

TEST_P(GoodReplies, WholeReply) {
  const Good_case &c = GetParam();
  std::string buf = c.wire, got;
  Parse_result pr = parse_any(c.proto, buf, &got);
  ASSERT_EQ(pr.status, Parse_status::complete) << (pr.error ? pr.error : "");
  EXPECT_EQ(pr.consumed, c.wire.size());
  EXPECT_EQ(got, c.want);
}

TEST_P(GoodReplies, EveryPrefixNeedsMore) {
  const Good_case &c = GetParam();
  for (size_t i = 0; i < c.wire.size(); ++i) {
    std::string buf = c.wire.substr(0, i), got;
    std::string before = buf;
    Parse_result pr = parse_any(c.proto, buf, &got);
    ASSERT_EQ(pr.status, Parse_status::need_more) << "prefix of " << i << " bytes";
    EXPECT_EQ(buf, before) << "a need_more parse must not modify the buffer";
  }
}

// The event loop's way: bytes arrive in two reads split at every position, the buffer keeps what
// was not consumed, and the parse is retried after each read.
TEST_P(GoodReplies, SplitAtEveryByteThenComplete) {
  const Good_case &c = GetParam();
  for (size_t i = 0; i <= c.wire.size(); ++i) {
    std::string buf = c.wire.substr(0, i), got;
    Parse_result pr = parse_any(c.proto, buf, &got);
    if (i < c.wire.size()) {
      ASSERT_EQ(pr.status, Parse_status::need_more);
    }
    buf = c.wire;  // the second read appended the rest (the first parse did not modify the bytes)
    pr = parse_any(c.proto, buf, &got);
    ASSERT_EQ(pr.status, Parse_status::complete) << "split at " << i;
    EXPECT_EQ(pr.consumed, c.wire.size());
    EXPECT_EQ(got, c.want);
  }
}

// Three replies back to back arrive one byte per read; each is returned in order, exactly once.
TEST_P(GoodReplies, PipelinedByteByByte) {
  const Good_case &c = GetParam();
  const std::string stream = c.wire + c.wire + c.wire;
  std::string buf;
  int complete = 0;
  for (size_t i = 0; i < stream.size(); ++i) {
    buf.push_back(stream[i]);
    for (;;) {
      std::string got;
      Parse_result pr = parse_any(c.proto, buf, &got);
      ASSERT_NE(pr.status, Parse_status::protocol_error) << "at byte " << i << ": " << pr.error;
      if (pr.status == Parse_status::need_more) break;
      EXPECT_EQ(got, c.want);
      EXPECT_EQ(pr.consumed, c.wire.size());
      buf.erase(0, pr.consumed);
      ++complete;
    }
  }
  EXPECT_EQ(complete, 3);
  EXPECT_TRUE(buf.empty());
}

// Many replies in one read: each parse consumes exactly one.
TEST_P(GoodReplies, ManyInOneRead) {
  const Good_case &c = GetParam();
  std::string buf;
  for (int i = 0; i < 50; ++i) buf += c.wire;
  int complete = 0;
  while (!buf.empty()) {
    std::string got;
    Parse_result pr = parse_any(c.proto, buf, &got);
    ASSERT_EQ(pr.status, Parse_status::complete);
    ASSERT_EQ(pr.consumed, c.wire.size());
    EXPECT_EQ(got, c.want);
    buf.erase(0, pr.consumed);
    ++complete;
  }
  EXPECT_EQ(complete, 50);
}

std::string case_name(const ::testing::TestParamInfo<Good_case> &info) {
  std::string s = info.param.name;
  for (char &ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Parsers, GoodReplies, ::testing::ValuesIn(good_cases()), case_name);

// ---- Malformed replies -------------------------------------------------------------------------

struct Bad_case {
  const char *name;
  Proto proto;
  std::string wire;  // a protocol error must be reported once all these bytes are there
};

void PrintTo(const Bad_case &c, std::ostream *os) { *os << c.name << ": \"" << printable(c.wire) << "\""; }

class BadReplies : public ::testing::TestWithParam<Bad_case> {};

TEST_P(BadReplies, ProtocolError) {
  const Bad_case &c = GetParam();
  std::string buf = c.wire, got;
  Parse_result pr = parse_any(c.proto, buf, &got);
  EXPECT_EQ(pr.status, Parse_status::protocol_error) << "got " << got;
  EXPECT_NE(pr.error, nullptr);
  // No prefix is taken for a complete reply either.
  for (size_t i = 0; i < c.wire.size(); ++i) {
    std::string b = c.wire.substr(0, i);
    EXPECT_NE(parse_any(c.proto, b, &got).status, Parse_status::complete) << "prefix " << i;
  }
}

const std::vector<Bad_case> &bad_cases() {
  static const std::vector<Bad_case> cases = {
      {"hs no tab", Proto::hs, "0\n"},
      {"hs letters", Proto::hs, "x\t1\n"},
      {"hs bad count", Proto::hs, "0\tx\n"},
      {"hs empty line", Proto::hs, "\n"},
      {"mc unknown line", Proto::mc_text, "HTTP/1.1 400 Bad Request\r\n"},
      {"mc LF only", Proto::mc_text, "END\n"},
      {"mc value no END", Proto::mc_text, "VALUE k 0 1\r\na\r\nVALUE k 0 1\r\n"},
      {"mc value data overruns", Proto::mc_text, "VALUE k 0 1\r\nab\r\nEND\r\n"},
      {"mc value bad length", Proto::mc_text, "VALUE k 0 x\r\n"},
      {"mc value no key", Proto::mc_text, "VALUE  0 1\r\n"},
      {"mc endx", Proto::mc_text, "ENDX\r\n"},
      {"mc line too long", Proto::mc_text, std::string(kMaxLine + 10, 'a')},
      {"meta VA no size", Proto::mc_meta, "VA\r\n"},
      {"meta VA bad size", Proto::mc_meta, "VA x\r\n"},
      {"meta VA data overruns", Proto::mc_meta, "VA 1\r\nab\r\n"},
      {"meta unknown code", Proto::mc_meta, "XX\r\n"},
      {"meta text END", Proto::mc_meta, "END\r\n"},
      {"meta ENX", Proto::mc_meta, "ENX\r\n"},
      {"resp array", Proto::resp, "*1\r\n$1\r\na\r\n"},
      {"resp bad length", Proto::resp, "$x\r\n"},
      {"resp negative length", Proto::resp, "$-2\r\n"},
      {"resp bulk overruns", Proto::resp, "$1\r\nab\r\n"},
      {"resp bad int", Proto::resp, ":1a\r\n"},
      {"resp LF only", Proto::resp, "+OK\n"},
  };
  return cases;
}

std::string bad_name(const ::testing::TestParamInfo<Bad_case> &info) {
  std::string s = info.param.name;
  for (char &ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Parsers, BadReplies, ::testing::ValuesIn(bad_cases()), bad_name);

TEST(HsParser, ManyTokensCountedBeyondStorage) {
  std::string line = "0\t40";
  for (int i = 0; i < 40; ++i) line += "\tv" + std::to_string(i);
  line += "\n";
  Hs_reply r;
  Parse_result pr = parse_hs_reply(line.data(), line.size(), &r);
  ASSERT_EQ(pr.status, Parse_status::complete);
  EXPECT_EQ(r.ntokens, 40u);
  EXPECT_EQ(r.tokens[31].view(), "v31");
}

// ---- Requests ------------------------------------------------------------------------------------

std::string encode(Proto p, Op o, const std::string &prefix, uint64_t k, uint64_t variant = 0) {
  Request_spec s;
  s.proto = p;
  s.op = o;
  s.key_prefix = prefix;
  Buffer b;
  encode_request(s, k, variant, b);
  return std::string(b.view());
}

TEST(Encode, Requests) {
  EXPECT_EQ(encode(Proto::hs, Op::get, "", 123), "1\t=\t1\t123\n");
  EXPECT_EQ(encode(Proto::hs, Op::update, "", 7),
            "1\t=\t1\t7\t1\t0\tU\tuser7\tuser7@example.com\t2010-01-01 00:00:00\n");
  EXPECT_EQ(encode(Proto::hs, Op::insert, "", 7), "1\t+\t4\t7\tuser7\tuser7@example.com\t2010-01-01 00:00:00\n");
  EXPECT_EQ(encode(Proto::hs, Op::get, "a\tb", 1), "1\t=\t1\ta\x01\x49" "b1\n");
  EXPECT_EQ(encode(Proto::mc_text, Op::get, "user:", 123), "get user:123\r\n");
  EXPECT_EQ(encode(Proto::mc_text, Op::set, "user:", 5),
            "set user:5 0 0 43\r\nuser5|user5@example.com|2010-01-01 00:00:00\r\n");
  EXPECT_EQ(encode(Proto::mc_meta, Op::get, "user:", 123), "mg user:123 v\r\n");
  EXPECT_EQ(encode(Proto::mc_meta, Op::set, "", 5), "ms 5 43\r\nuser5|user5@example.com|2010-01-01 00:00:00\r\n");
  EXPECT_EQ(encode(Proto::resp, Op::get, "user:", 123), "*2\r\n$3\r\nGET\r\n$8\r\nuser:123\r\n");
  EXPECT_EQ(encode(Proto::resp, Op::set, "", 5),
            "*3\r\n$3\r\nSET\r\n$1\r\n5\r\n$43\r\nuser5|user5@example.com|2010-01-01 00:00:00\r\n");
  EXPECT_EQ(encode(Proto::hs, Op::update, "", 7, 3661),
            "1\t=\t1\t7\t1\t0\tU\tuser7\tuser7@example.com\t2010-01-01 01:01:01\n");
}

TEST(Encode, AppendsWithoutClobbering) {
  Request_spec s;
  s.proto = Proto::hs;
  Buffer b;
  for (uint64_t k = 1; k <= 1000; ++k) encode_request(s, k, 0, b);
  std::string all(b.view()), want;
  for (uint64_t k = 1; k <= 1000; ++k) want += "1\t=\t1\t" + std::to_string(k) + "\n";
  EXPECT_EQ(all, want);
}

TEST(Encode, SetupLines) {
  EXPECT_EQ(hs_open_index_line("test", "user", "PRIMARY", "user_name,user_email,created"),
            "P\t1\ttest\tuser\tPRIMARY\tuser_name,user_email,created\n");
  EXPECT_EQ(hs_auth_line("s3"), "A\t1\ts3\n");
}

TEST(Model, Values) {
  char v[128];
  size_t n = make_kv_value(123, 0, v);
  EXPECT_EQ(std::string(v, n), "user123|user123@example.com|2010-01-01 00:00:00");
  n = make_kv_value(18446744073709551615ull, 86399, v);
  EXPECT_EQ(std::string(v, n),
            "user18446744073709551615|user18446744073709551615@example.com|2010-01-01 23:59:59");
}

// ---- Checks ----------------------------------------------------------------------------------------

Outcome hs_check(Op op, Expect e, std::string wire, uint64_t k, std::string *why = nullptr) {
  Hs_reply r;
  EXPECT_EQ(parse_hs_reply(wire.data(), wire.size(), &r).status, Parse_status::complete);
  Check_spec s;
  s.proto = Proto::hs;
  s.op = op;
  s.expect = e;
  char w[512] = "";
  Outcome o = check_hs(s, r, k, w, sizeof w);
  if (why) *why = w;
  return o;
}

TEST(Check, HsGet) {
  const std::string row7 = "0\t3\tuser7\tuser7@example.com\t2010-01-01 00:00:00\n";
  EXPECT_EQ(hs_check(Op::get, Expect::hs_user, row7, 7), Outcome::ok);
  std::string why;
  EXPECT_EQ(hs_check(Op::get, Expect::hs_user, row7, 8, &why), Outcome::mismatch);
  EXPECT_NE(why.find("user_name"), std::string::npos) << why;
  EXPECT_EQ(hs_check(Op::get, Expect::none, row7, 8), Outcome::ok);
  EXPECT_EQ(hs_check(Op::get, Expect::hs_user, "0\t3\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::get, Expect::none, "0\t3\n", 7), Outcome::miss);
  EXPECT_EQ(hs_check(Op::get, Expect::hs_user, "0\t3\tuser7\t\0\t2010-01-01 00:00:00\n"s, 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::get, Expect::hs_user, "0\t2\tuser7\tuser7@example.com\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::get, Expect::none, "0\t3\ta\tb\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::get, Expect::none, "2\t1\top\n", 7, &why), Outcome::error);
  EXPECT_NE(why.find("op"), std::string::npos) << why;
}

TEST(Check, HsWrites) {
  EXPECT_EQ(hs_check(Op::update, Expect::hs_user, "0\t1\t1\n", 7), Outcome::ok);
  EXPECT_EQ(hs_check(Op::update, Expect::hs_user, "0\t1\t0\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::update, Expect::none, "0\t1\t0\n", 7), Outcome::miss);
  EXPECT_EQ(hs_check(Op::update, Expect::none, "0\t1\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::update, Expect::hs_user, "0\t1\t1\textra\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::update, Expect::none, "0\t2\t1\t1\n", 7), Outcome::mismatch);
  EXPECT_EQ(hs_check(Op::insert, Expect::hs_user, "0\t1\n", 7), Outcome::ok);
  EXPECT_EQ(hs_check(Op::insert, Expect::hs_user, "0\t1\t7\n", 7), Outcome::ok);
  EXPECT_EQ(hs_check(Op::insert, Expect::hs_user, "1\t1\t121\n", 7), Outcome::error);
}

TEST(Encode, SqlStatements) {
  const char *cols = "user_name,user_email,created";
  EXPECT_EQ(sql_statement(Op::get, "test", "user", "user_id", cols),
            "SELECT `user_name`, `user_email`, `created` FROM `test`.`user` WHERE `user_id` = ?");
  EXPECT_EQ(sql_statement(Op::update, "test", "user", "user_id", cols),
            "UPDATE `test`.`user` SET `user_name` = ?, `user_email` = ?, `created` = ? WHERE `user_id` = ?");
  EXPECT_EQ(sql_statement(Op::insert, "test", "user", "user_id", cols),
            "INSERT INTO `test`.`user` (`user_id`, `user_name`, `user_email`, `created`) VALUES (?, ?, ?, ?)");
  EXPECT_EQ(sql_statement(Op::get, "d", "t", "k", "v"), "SELECT `v` FROM `d`.`t` WHERE `k` = ?");
  EXPECT_EQ(sql_quote_ident("a`b"), "`a``b`");
  EXPECT_EQ(sql_statement(Op::set, "d", "t", "k", "v"), "");
}

// The SQL engine presents its answers as HandlerSocket replies (see sql.cc).
TEST(Check, SqlAnswers) {
  Check_spec s;
  s.proto = Proto::sql;
  s.op = Op::get;
  s.expect = Expect::hs_user;
  char w[512] = "";
  Hs_reply r;
  r.code = 0;
  r.n = 3;
  r.ntokens = 3;
  const std::string name = "user9", email = "user9@example.com", created = "2010-01-01 00:00:00";
  r.tokens[0] = Field{name.data(), name.size()};
  r.tokens[1] = Field{email.data(), email.size()};
  r.tokens[2] = Field{created.data(), created.size()};
  EXPECT_EQ(check_hs(s, r, 9, w, sizeof w), Outcome::ok);
  EXPECT_EQ(check_hs(s, r, 10, w, sizeof w), Outcome::mismatch);
  r.ntokens = 0;  // no row
  EXPECT_EQ(check_hs(s, r, 9, w, sizeof w), Outcome::mismatch);
  const std::string msg = "1062 Duplicate entry '9' for key 'PRIMARY'";
  r.code = 1;
  r.n = 1;
  r.ntokens = 1;
  r.tokens[0] = Field{msg.data(), msg.size()};
  s.op = Op::insert;
  EXPECT_EQ(check_hs(s, r, 9, w, sizeof w), Outcome::error);
  EXPECT_NE(std::string(w).find("SQL error"), std::string::npos) << w;
  EXPECT_NE(std::string(w).find("Duplicate"), std::string::npos) << w;
}

Outcome kv_check(Proto p, Op op, Expect e, const std::string &wire, uint64_t k, const std::string &prefix = "") {
  Kv_reply r;
  Parse_result pr = p == Proto::mc_text   ? parse_mc_text_reply(wire.data(), wire.size(), &r)
                    : p == Proto::mc_meta ? parse_mc_meta_reply(wire.data(), wire.size(), &r)
                                          : parse_resp_reply(wire.data(), wire.size(), &r);
  EXPECT_EQ(pr.status, Parse_status::complete);
  Check_spec s;
  s.proto = p;
  s.op = op;
  s.expect = e;
  s.key_prefix = prefix;
  char w[512];
  return check_kv(s, r, k, w, sizeof w);
}

TEST(Check, Kv) {
  const std::string v5 = "user5|user5@example.com|2010-01-01 00:00:00";
  const std::string len = std::to_string(v5.size());
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::kv_user, "VALUE u:5 0 " + len + "\r\n" + v5 + "\r\nEND\r\n", 5, "u:"),
            Outcome::ok);
  // The echoed key must be the requested one, with any --expect.
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::none, "VALUE u:6 0 " + len + "\r\n" + v5 + "\r\nEND\r\n", 5, "u:"),
            Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::none, "VALUE u:55 0 1\r\nx\r\nEND\r\n", 5, "u:"), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::kv_user, "END\r\n", 5), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::none, "END\r\n", 5), Outcome::miss);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::get, Expect::none, "SERVER_ERROR x\r\n", 5), Outcome::error);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::set, Expect::kv_user, "STORED\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::mc_text, Op::set, Expect::kv_user, "NOT_STORED\r\n", 5), Outcome::error);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::get, Expect::kv_user, "VA " + len + "\r\n" + v5 + "\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::get, Expect::kv_user, "VA " + len + "\r\n" + v5 + "\r\n", 6), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::get, Expect::kv_user, "EN\r\n", 5), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::get, Expect::none, "HD\r\n", 5), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::set, Expect::kv_user, "HD\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::mc_meta, Op::set, Expect::kv_user, "NS\r\n", 5), Outcome::error);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::kv_user, "$" + len + "\r\n" + v5 + "\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::kv_user, "$3\r\nabc\r\n", 5), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::none, "$3\r\nabc\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::none, "$-1\r\n", 5), Outcome::miss);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::none, "-WRONGTYPE x\r\n", 5), Outcome::error);
  EXPECT_EQ(kv_check(Proto::resp, Op::get, Expect::none, ":1\r\n", 5), Outcome::mismatch);
  EXPECT_EQ(kv_check(Proto::resp, Op::set, Expect::none, "+OK\r\n", 5), Outcome::ok);
  EXPECT_EQ(kv_check(Proto::resp, Op::set, Expect::none, "+QUEUED\r\n", 5), Outcome::mismatch);
}

TEST(Printable, Escapes) {
  EXPECT_EQ(printable("a\tb\r\n\x01\\"), "a\\tb\\r\\n\\x01\\\\");
  EXPECT_EQ(printable(std::string(10, 'x'), 4), "xxxx...");
}

}  // namespace
