/* The binary protocol parser and encoder: table-driven cases from memcached 1.6.18's proto_bin.c
   (dispatch_bin_command's shape checks, the quiet opcodes, the error texts). */
#include "proto/mc/mc_binary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tablesocket {
namespace mc {
namespace {

/* A request: header fields, then extras, key, value. body = extras + key + value unless given. */
std::string request(uint8_t opcode, std::string_view extras, std::string_view key, std::string_view value,
                    uint64_t cas = 0, uint32_t opaque = 0x01020304, int64_t body = -1, uint8_t magic = 0x80) {
  std::string h(24, '\0');
  h[0] = char(magic);
  h[1] = char(opcode);
  h[2] = char(key.size() >> 8);
  h[3] = char(key.size());
  h[4] = char(extras.size());
  put_be32(&h[8], body >= 0 ? uint32_t(body) : uint32_t(extras.size() + key.size() + value.size()));
  put_be32(&h[12], opaque);
  put_be64(&h[16], cas);
  return h + std::string(extras) + std::string(key) + std::string(value);
}

std::string be32s(uint32_t v) {
  std::string s(4, '\0');
  put_be32(&s[0], v);
  return s;
}
std::string be64s(uint64_t v) {
  std::string s(8, '\0');
  put_be64(&s[0], v);
  return s;
}

Bin_parse_result parse(const std::string &buf, Bin_request *rq, uint32_t max_value = 1 << 20) {
  Mc_limits l;
  l.max_value_size = max_value;
  return parse_binary_request(buf.data(), buf.size(), l, rq);
}

TEST(McBinary, ParsesEachServedOpcodeWithItsExtras) {
  struct Case {
    const char *what;
    std::string bytes;
    Bin_op op;
    bool quiet;
  };
  const std::string set_ext = be32s(0xdeadbeef) + be32s(300);
  const std::string incr_ext = be64s(5) + be64s(100) + be32s(0xffffffff);
  const std::vector<Case> cases = {
      {"get", request(0x00, "", "k", ""), Bin_op::get, false},
      {"getq", request(0x09, "", "k", ""), Bin_op::get, true},
      {"getk", request(0x0c, "", "k", ""), Bin_op::getk, false},
      {"getkq", request(0x0d, "", "k", ""), Bin_op::getk, true},
      {"set", request(0x01, set_ext, "key", "value"), Bin_op::set, false},
      {"setq", request(0x11, set_ext, "key", "value"), Bin_op::set, true},
      {"add", request(0x02, set_ext, "key", ""), Bin_op::add, false},
      {"replaceq", request(0x13, set_ext, "key", "v"), Bin_op::replace, true},
      {"delete", request(0x04, "", "key", ""), Bin_op::del, false},
      {"deleteq", request(0x14, "", "key", ""), Bin_op::del, true},
      {"incr", request(0x05, incr_ext, "n", ""), Bin_op::incr, false},
      {"decrq", request(0x16, incr_ext, "n", ""), Bin_op::decr, true},
      {"quit", request(0x07, "", "", ""), Bin_op::quit, false},
      {"quitq", request(0x17, "", "", ""), Bin_op::quit, true},
      {"flush", request(0x08, "", "", ""), Bin_op::flush, false},
      {"flushq with a delay", request(0x18, be32s(10), "", ""), Bin_op::flush, true},
      {"noop", request(0x0a, "", "", ""), Bin_op::noop, false},
      {"version", request(0x0b, "", "", ""), Bin_op::version, false},
      {"append", request(0x0e, "", "key", "tail"), Bin_op::append, false},
      {"prependq", request(0x1a, "", "key", "head"), Bin_op::prepend, true},
      {"stat", request(0x10, "", "", ""), Bin_op::stat, false},
      {"stat settings", request(0x10, "", "settings", ""), Bin_op::stat, false},
      {"touch", request(0x1c, be32s(10), "key", ""), Bin_op::touch, false},
      {"gat", request(0x1d, be32s(10), "key", ""), Bin_op::gat, false},
      {"gatq", request(0x1e, be32s(10), "key", ""), Bin_op::gat, true},
      {"gatk", request(0x23, be32s(10), "key", ""), Bin_op::gatk, false},
      {"gatkq", request(0x24, be32s(10), "key", ""), Bin_op::gatk, true},
      {"sasl list", request(0x20, "", "", ""), Bin_op::sasl_list_mechs, false},
      {"sasl auth", request(0x21, "", "PLAIN", std::string("\0u\0p", 4)), Bin_op::sasl_auth, false},
  };
  for (const Case &c : cases) {
    Bin_request rq;
    Bin_parse_result r = parse(c.bytes, &rq);
    ASSERT_EQ(r.status, Mc_parse_status::complete) << c.what;
    EXPECT_EQ(r.consumed, c.bytes.size()) << c.what;
    EXPECT_EQ(rq.op, c.op) << c.what;
    EXPECT_EQ(rq.quiet, c.quiet) << c.what;
    EXPECT_EQ(rq.opcode, uint8_t(c.bytes[1])) << c.what;
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(rq.opaque), 4), std::string("\x01\x02\x03\x04", 4)) << c.what;
    /* Every strict prefix needs more. */
    for (size_t n = 0; n < c.bytes.size(); ++n) {
      Bin_request part;
      EXPECT_EQ(parse(c.bytes.substr(0, n), &part).status, Mc_parse_status::need_more) << c.what << " prefix " << n;
    }
  }
}

TEST(McBinary, DecodesExtrasKeyValueAndCasBigEndian) {
  Bin_request rq;
  std::string b = request(0x01, be32s(0xdeadbeef) + be32s(300), "key", "value", 0x1122334455667788ull);
  ASSERT_EQ(parse(b + "trailing", &rq).status, Mc_parse_status::complete);
  EXPECT_EQ(rq.flags, 0xdeadbeefu);
  EXPECT_EQ(rq.exptime, 300u);
  EXPECT_EQ(rq.cas, 0x1122334455667788ull);
  EXPECT_EQ(rq.key, "key");
  EXPECT_EQ(rq.value, "value");
  b = request(0x05, be64s(0x0102030405060708ull) + be64s(42) + be32s(0xffffffff), "n", "");
  ASSERT_EQ(parse(b, &rq).status, Mc_parse_status::complete);
  EXPECT_EQ(rq.delta, 0x0102030405060708ull);
  EXPECT_EQ(rq.initial, 42u);
  EXPECT_FALSE(rq.creates());
  b = request(0x05, be64s(1) + be64s(0) + be32s(0), "n", "");
  ASSERT_EQ(parse(b, &rq).status, Mc_parse_status::complete);
  EXPECT_TRUE(rq.creates());
  ASSERT_EQ(parse(request(0x08, be32s(7), "", ""), &rq).status, Mc_parse_status::complete);
  EXPECT_TRUE(rq.has_exptime);
  EXPECT_EQ(rq.exptime, 7u);
  ASSERT_EQ(parse(request(0x08, "", "", ""), &rq).status, Mc_parse_status::complete);
  EXPECT_FALSE(rq.has_exptime);
  /* Keys are bytes: NUL, spaces, CR LF. */
  const std::string odd("a \r\n\0b", 6);
  ASSERT_EQ(parse(request(0x00, "", odd, ""), &rq).status, Mc_parse_status::complete);
  EXPECT_EQ(rq.key, odd);
}

TEST(McBinary, ShapeErrorsCloseWithInvalidArguments) {
  struct Case {
    const char *what;
    std::string bytes;
  };
  const std::string set_ext = be32s(0) + be32s(0);
  const std::vector<Case> cases = {
      {"get with extras", request(0x00, "abcd", "k", "")},
      {"get without a key", request(0x00, "", "", "")},
      {"get with a value", request(0x00, "", "k", "v")},
      {"set without extras", request(0x01, "", "k", "v")},
      {"set with 4 bytes of extras", request(0x01, "abcd", "k", "v")},
      {"set without a key", request(0x01, set_ext, "", "v")},
      {"delete with extras", request(0x04, "abcd", "k", "")},
      {"incr with 8 bytes of extras", request(0x05, be64s(1), "k", "")},
      {"incr with a value", request(0x05, be64s(1) + be64s(1) + be32s(0), "k", "v")},
      {"version with a body", request(0x0b, "", "", "x")},
      {"noop with a key", request(0x0a, "", "k", "")},
      {"quit with extras", request(0x07, "ab", "", "")},
      {"flush with 8 bytes of extras", request(0x08, be64s(0), "", "")},
      {"flush with a key", request(0x08, "", "k", "")},
      {"append with extras", request(0x0e, "abcd", "k", "v")},
      {"touch without extras", request(0x1c, "", "k", "")},
      {"gat with a value", request(0x1d, be32s(1), "k", "v")},
      {"stat with a value", request(0x10, "", "k", "v")},
      {"sasl auth without a mechanism", request(0x21, "", "", "x")},
      {"a 251-byte key", request(0x00, "", std::string(251, 'k'), "")},
  };
  for (const Case &c : cases) {
    Bin_request rq;
    Bin_parse_result r = parse(c.bytes, &rq);
    EXPECT_EQ(r.status, Mc_parse_status::fatal) << c.what;
    EXPECT_EQ(r.error, Bin_status::einval) << c.what;
    EXPECT_TRUE(r.reply) << c.what;
    EXPECT_EQ(rq.opcode, uint8_t(c.bytes[1])) << c.what;
  }
  /* A 250-byte key is fine. */
  Bin_request rq;
  EXPECT_EQ(parse(request(0x00, "", std::string(250, 'k'), ""), &rq).status, Mc_parse_status::complete);
}

TEST(McBinary, KeyAndExtrasLongerThanTheBodyIsAnUnknownCommandAndCloses) {
  Bin_request rq;
  Bin_parse_result r = parse(request(0x00, "", "key", "", 0, 0, 2), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
  EXPECT_EQ(r.error, Bin_status::unknown_command);
  /* Decided from the header alone: no waiting for a body that may never come. */
  r = parse(request(0x00, "", "key", "", 0, 0, 2).substr(0, 24), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
}

TEST(McBinary, ABadMagicClosesSilently) {
  Bin_request rq;
  Bin_parse_result r = parse(request(0x00, "", "k", "", 0, 0, -1, 0x81), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
  EXPECT_FALSE(r.reply);
  r = parse("get foo\r\n" + std::string(20, ' '), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::fatal);
  EXPECT_FALSE(r.reply);
}

TEST(McBinary, AnUnknownOpcodeIsAnsweredAndItsBodySwallowed) {
  for (uint8_t op : {uint8_t(0x1b), uint8_t(0x25), uint8_t(0x30), uint8_t(0x3d), uint8_t(0xff)}) {
    Bin_request rq;
    const std::string b = request(op, "ex", "key", "value");
    Bin_parse_result r = parse(b.substr(0, 24), &rq);  // the header is enough
    ASSERT_EQ(r.status, Mc_parse_status::error) << int(op);
    EXPECT_EQ(r.error, Bin_status::unknown_command);
    EXPECT_EQ(r.consumed, 24u);
    EXPECT_EQ(r.swallow, 10u);  // extras + key + value: exactly the body
    EXPECT_EQ(rq.opcode, op);
  }
}

TEST(McBinary, AValueOverTheLimitIsTooLargeAndSwallowedUnread) {
  Bin_request rq;
  const std::string ext = be32s(0) + be32s(0);
  const std::string b = request(0x01, ext, "big", std::string(101, 'v'));
  /* Decided once the extras and key are in: the value is never buffered. */
  EXPECT_EQ(parse(b.substr(0, 24 + 8 + 2), &rq, 100).status, Mc_parse_status::need_more);
  Bin_parse_result r = parse(b.substr(0, 24 + 8 + 3), &rq, 100);
  ASSERT_EQ(r.status, Mc_parse_status::error);
  EXPECT_EQ(r.error, Bin_status::e2big);
  EXPECT_EQ(r.consumed, 24u + 8 + 3);
  EXPECT_EQ(r.swallow, 101u);
  EXPECT_EQ(rq.key, "big");
  EXPECT_EQ(rq.op, Bin_op::set);
  /* At the limit it is read. */
  EXPECT_EQ(parse(request(0x01, ext, "big", std::string(100, 'v')), &rq, 100).status, Mc_parse_status::complete);
  /* Append too; a SASL body is capped at its own small limit. */
  r = parse(request(0x0e, "", "k", std::string(101, 'v')), &rq, 100);
  EXPECT_EQ(r.error, Bin_status::e2big);
  r = parse(request(0x21, "", "PLAIN", std::string(kMaxSaslBody + 1, 'x')), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::error);
  EXPECT_EQ(r.error, Bin_status::einval);
  EXPECT_EQ(r.swallow, kMaxSaslBody + 1);
  /* A body length near 4 GiB is refused from the header, extras and key. */
  r = parse(request(0x01, ext, "k", "", 0, 0, 0xffffffff).substr(0, 24 + 9), &rq);
  EXPECT_EQ(r.status, Mc_parse_status::error);
  EXPECT_EQ(r.swallow, 0xffffffffull - 9);
}

TEST(McBinary, EncodesResponsesAsMemcachedDoes) {
  Bin_request rq;
  ASSERT_EQ(parse(request(0x0c, "", "foo", "", 0, 0xdeadbeef), &rq).status, Mc_parse_status::complete);
  Byte_buffer out;
  encode_bin_response(out, rq, Bin_status::ok, 0x0102030405060708ull, be32s(7), "foo", "bar");
  const unsigned char want[] = {0x81, 0x0c, 0, 3, 4, 0, 0, 0, 0, 0, 0, 10, 0xde, 0xad, 0xbe, 0xef,
                                1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 7, 'f', 'o', 'o', 'b', 'a', 'r'};
  EXPECT_EQ(std::string(out.data(), out.size()), std::string(reinterpret_cast<const char *>(want), sizeof want));
  Byte_buffer err;
  encode_bin_error(err, rq, Bin_status::key_enoent);
  ASSERT_EQ(err.size(), 24u + 9);
  EXPECT_EQ(std::string(err.data() + 24, 9), "Not found");
  EXPECT_EQ(err.data()[7], 0x01);
  EXPECT_EQ(std::string(err.data() + 16, 8), std::string(8, '\0'));  // errors carry no cas
  Byte_buffer msg;
  encode_bin_error(msg, rq, Bin_status::internal_error, "lock wait timeout");
  EXPECT_EQ(std::string(msg.data() + 24, msg.size() - 24), "lock wait timeout");
  EXPECT_EQ(static_cast<unsigned char>(msg.data()[7]), 0x84);
}

TEST(McBinary, StatusTextsAreMemcachedsTexts) {
  EXPECT_STREQ(bin_status_text(Bin_status::key_enoent), "Not found");
  EXPECT_STREQ(bin_status_text(Bin_status::key_eexists), "Data exists for key.");
  EXPECT_STREQ(bin_status_text(Bin_status::e2big), "Too large.");
  EXPECT_STREQ(bin_status_text(Bin_status::einval), "Invalid arguments");
  EXPECT_STREQ(bin_status_text(Bin_status::not_stored), "Not stored.");
  EXPECT_STREQ(bin_status_text(Bin_status::delta_badval), "Non-numeric server-side value for incr or decr");
  EXPECT_STREQ(bin_status_text(Bin_status::auth_error), "Auth failure.");
  EXPECT_STREQ(bin_status_text(Bin_status::unknown_command), "Unknown command");
}

}  // namespace
}  // namespace mc
}  // namespace tablesocket
