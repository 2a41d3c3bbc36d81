/* libFuzzer target for the memcached binary protocol parser and encoder. Built by scripts/fuzz.sh
   (target "mc_binary").

   Input layout: byte 0 picks the value limit, the rest is what a client sent on one binary
   connection. The target consumes requests as a connection does (continue after errors, discard
   swallowed bytes, stop at need_more or fatal) and checks the parser's promises:
     - nothing past len is read (ASan: the buffer is exact-size) and the buffer is not modified;
     - complete consumes exactly the header and its body; key <= 250 bytes; a value only for the
       opcodes that carry one, within the limit; every strict prefix needs more;
     - a parsed request written back from its fields is the bytes consumed (but for the data type
       and vbucket, which the parser ignores);
     - error consumes at most what is buffered and swallows the rest of the body;
     - a response encoded for the request has the request's opcode and opaque and its lengths. */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/fuzz_check.h"
#include "proto/mc/mc_binary.h"

using namespace tablesocket;
using namespace tablesocket::mc;


namespace {

std::string extras_of(const Bin_request &rq) {
  std::string e;
  char b[8];
  switch (rq.op) {
    case Bin_op::set:
    case Bin_op::add:
    case Bin_op::replace:
      put_be32(b, rq.flags);
      e.append(b, 4);
      put_be32(b, rq.exptime);
      e.append(b, 4);
      break;
    case Bin_op::incr:
    case Bin_op::decr:
      put_be64(b, rq.delta);
      e.append(b, 8);
      put_be64(b, rq.initial);
      e.append(b, 8);
      put_be32(b, rq.exptime);
      e.append(b, 4);
      break;
    case Bin_op::touch:
    case Bin_op::gat:
    case Bin_op::gatk:
      put_be32(b, rq.exptime);
      e.append(b, 4);
      break;
    case Bin_op::flush:
      if (rq.has_exptime) {
        put_be32(b, rq.exptime);
        e.append(b, 4);
      }
      break;
    default: break;
  }
  return e;
}

void check_complete(const char *p, size_t len, const Bin_request &rq, const Bin_parse_result &r,
                    const Mc_limits &limits) {
  FUZZ_CHECK(r.consumed >= kBinaryHeaderLength && r.consumed <= len);
  FUZZ_CHECK(rq.key.size() <= kMaxKeyLength);
  FUZZ_CHECK(rq.key.empty() || (rq.key.data() >= p && rq.key.data() + rq.key.size() <= p + r.consumed));
  FUZZ_CHECK(rq.value.empty() || (rq.value.data() >= p && rq.value.data() + rq.value.size() <= p + r.consumed));
  FUZZ_CHECK(rq.value.size() <= limits.max_value_size || rq.op == Bin_op::sasl_auth || rq.op == Bin_op::sasl_step);
  const bool carries_value = rq.op == Bin_op::set || rq.op == Bin_op::add || rq.op == Bin_op::replace ||
                             rq.op == Bin_op::append || rq.op == Bin_op::prepend || rq.op == Bin_op::sasl_auth ||
                             rq.op == Bin_op::sasl_step;
  FUZZ_CHECK(carries_value || rq.value.empty());
  /* Written back from the fields: the same bytes (data type and vbucket aside). */
  std::string back(kBinaryHeaderLength, '\0');
  const std::string ext = extras_of(rq);
  back[0] = char(kBinaryRequestMagic);
  back[1] = char(rq.opcode);
  back[2] = char(rq.key.size() >> 8);
  back[3] = char(rq.key.size());
  back[4] = char(ext.size());
  put_be32(&back[8], uint32_t(ext.size() + rq.key.size() + rq.value.size()));
  std::memcpy(&back[12], rq.opaque, 4);
  put_be64(&back[16], rq.cas);
  back += ext;
  back.append(rq.key.data(), rq.key.size());
  back.append(rq.value.data(), rq.value.size());
  std::string sent(p, r.consumed);
  sent[5] = sent[6] = sent[7] = '\0';
  FUZZ_CHECK(back == sent);
  /* Every strict prefix needs more (a few, to keep the target fast). */
  for (size_t n : {size_t(0), size_t(1), kBinaryHeaderLength - 1, kBinaryHeaderLength, r.consumed / 2, r.consumed - 1}) {
    if (n >= r.consumed) continue;
    std::vector<char> part(p, p + n);
    Bin_request x;
    FUZZ_CHECK(parse_binary_request(part.data(), n, limits, &x).status == Mc_parse_status::need_more);
  }
  /* A response for it echoes opcode and opaque; its lengths add up. */
  Byte_buffer out;
  encode_bin_response(out, rq, Bin_status::ok, rq.cas, ext, rq.key, rq.value);
  FUZZ_CHECK(out.size() == r.consumed);
  FUZZ_CHECK(static_cast<unsigned char>(out.data()[0]) == kBinaryResponseMagic && out.data()[1] == p[1]);
  FUZZ_CHECK(std::memcmp(out.data() + 12, p + 12, 4) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const uint32_t values[4] = {1u << 20, 0, 5, 100};
  Mc_limits limits;
  limits.max_value_size = values[data[0] & 3];
  std::vector<char> buf(data + 1, data + size);
  const std::vector<char> orig = buf;
  size_t off = 0;
  uint64_t swallow = 0;
  Bin_request rq;
  for (int guard = 0; guard < 10000 && off < buf.size(); ++guard) {
    if (swallow) {
      off += swallow_step(&swallow, buf.size() - off);
      continue;
    }
    const size_t len = buf.size() - off;
    std::vector<char> exact(buf.begin() + long(off), buf.end());  // exact size: ASan sees over-reads
    Bin_parse_result r = parse_binary_request(exact.data(), len, limits, &rq);
    FUZZ_CHECK(std::memcmp(exact.data(), buf.data() + off, len) == 0);
    if (r.status == Mc_parse_status::need_more || r.status == Mc_parse_status::fatal) break;
    if (r.status == Mc_parse_status::error) {
      FUZZ_CHECK(r.consumed >= kBinaryHeaderLength && r.consumed <= len);
      FUZZ_CHECK(r.error != Bin_status::ok);
      Byte_buffer out;
      encode_bin_error(out, rq, r.error);
      FUZZ_CHECK(out.size() > kBinaryHeaderLength && out.data()[1] == exact[1]);
      off += r.consumed;
      swallow = r.swallow;
      continue;
    }
    check_complete(exact.data(), len, rq, r, limits);
    off += r.consumed;
  }
  FUZZ_CHECK(buf == orig);
  return 0;
}
