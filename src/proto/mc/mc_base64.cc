/* base64 with the exact acceptance rules of memcached's base64.c (used for meta 'b' keys). */
#include "proto/mc/mc_protocol.h"

namespace tablesocket {
namespace mc {

namespace {

constexpr char kAlphabet[65] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* 0..63 for the alphabet, 0 for '=', 0x80 for everything else (memcached's dtable). */
struct Decode_table {
  unsigned char v[256];
  constexpr Decode_table() : v() {
    for (int i = 0; i < 256; ++i) v[i] = 0x80;
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<unsigned char>(i);
    v[static_cast<unsigned char>('=')] = 0;
  }
};
constexpr Decode_table kDecode;

}  // namespace

size_t base64_decode(const char *src, size_t len, char *out, size_t out_cap) {
  size_t count = 0;
  for (size_t i = 0; i < len; ++i)
    if (kDecode.v[static_cast<unsigned char>(src[i])] != 0x80) ++count;
  if (count == 0 || count % 4) return 0;
  if (count / 4 * 3 > out_cap) return 0;

  unsigned char block[4];
  size_t n = 0, pos = 0;
  int pad = 0;
  for (size_t i = 0; i < len; ++i) {
    const unsigned char c = static_cast<unsigned char>(src[i]);
    const unsigned char t = kDecode.v[c];
    if (t == 0x80) continue;
    if (c == '=') ++pad;
    block[n++] = t;
    if (n == 4) {
      out[pos++] = static_cast<char>((block[0] << 2) | (block[1] >> 4));
      out[pos++] = static_cast<char>((block[1] << 4) | (block[2] >> 2));
      out[pos++] = static_cast<char>((block[2] << 6) | block[3]);
      n = 0;
      if (pad) {
        if (pad > 2) return 0;  // invalid padding
        pos -= static_cast<size_t>(pad);
        break;
      }
    }
  }
  return pos;
}

size_t base64_encoded_length(size_t len) { return (len + 2) / 3 * 4; }

size_t base64_encode(const char *src, size_t len, char *out) {
  const unsigned char *in = reinterpret_cast<const unsigned char *>(src);
  const unsigned char *const end = in + len;
  char *pos = out;
  while (end - in >= 3) {
    *pos++ = kAlphabet[in[0] >> 2];
    *pos++ = kAlphabet[((in[0] & 0x03) << 4) | (in[1] >> 4)];
    *pos++ = kAlphabet[((in[1] & 0x0f) << 2) | (in[2] >> 6)];
    *pos++ = kAlphabet[in[2] & 0x3f];
    in += 3;
  }
  if (end - in) {
    *pos++ = kAlphabet[in[0] >> 2];
    if (end - in == 1) {
      *pos++ = kAlphabet[(in[0] & 0x03) << 4];
      *pos++ = '=';
    } else {
      *pos++ = kAlphabet[((in[0] & 0x03) << 4) | (in[1] >> 4)];
      *pos++ = kAlphabet[(in[1] & 0x0f) << 2];
    }
    *pos++ = '=';
  }
  return static_cast<size_t>(pos - out);
}

void append_base64(Byte_buffer &out, const char *src, size_t len) {
  const size_t n = base64_encoded_length(len);
  out.wrote(base64_encode(src, len, out.prepare(n)));
}

}  // namespace mc
}  // namespace tablesocket
