/* HandlerSocket response encoder: appends HandlerSocket's exact reply bytes to a Byte_buffer. */
#include "proto/hs/hs_protocol.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tablesocket {
namespace hs {

namespace {

constexpr unsigned char kNoEscapeMin = 0x10;
constexpr char kEscapePrefix = 0x01;
constexpr unsigned char kEscapeShift = 0x40;

inline bool needs_escape(char c) { return static_cast<unsigned char>(c) < kNoEscapeMin; }

#if defined(__SSE2__)
/* Bit i set when p[i] < 0x10. */
inline unsigned special_mask16(const char *p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
  /* saturating v - 0x0f is zero exactly for bytes <= 0x0f */
  const __m128i sat = _mm_subs_epu8(v, _mm_set1_epi8(0x0f));
  return static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(sat, _mm_setzero_si128())));
}
#endif

/* Index of the first byte < 0x10 in p[0, n), or n. */
inline size_t find_special(const char *p, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    const unsigned m = special_mask16(p + i);
    if (m) return i + static_cast<size_t>(__builtin_ctz(m));
  }
#endif
  for (; i < n; ++i)
    if (needs_escape(p[i])) return i;
  return n;
}

/* Number of bytes < 0x10 in p[0, n). */
inline size_t count_special(const char *p, size_t n) {
  size_t i = 0, c = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const __m128i f = _mm_set1_epi8(0x0f);
  while (i + 16 <= n) {
    /* Per-lane counters (cmpeq gives -1 per hit), folded with SAD before they can overflow. */
    __m128i acc = zero;
    for (int k = 0; k < 255 && i + 16 <= n; ++k, i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i));
      acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_subs_epu8(v, f), zero));
    }
    const __m128i sums = _mm_sad_epu8(acc, zero);
    c += static_cast<size_t>(_mm_cvtsi128_si32(sums)) +
         static_cast<size_t>(_mm_cvtsi128_si32(_mm_srli_si128(sums, 8)));
  }
#endif
  for (; i < n; ++i) c += needs_escape(p[i]);
  return c;
}

/* Decimal digits of v written backwards ending at end; returns the start. */
inline char *format_uint(char *end, uint64_t v) {
  do {
    *--end = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  return end;
}

/* Appends [lead] + escaped p[0, n); lead is 0 or 1 bytes (the TAB before a value). */
inline void escape_with_lead(Byte_buffer &out, const char *lead, size_t nlead, const char *p,
                             size_t n) {
  const size_t first = find_special(p, n);
  /* Exact size, so a large binary value never over-reserves. */
  const size_t nspecial = first == n ? 0 : 1 + count_special(p + first + 1, n - first - 1);
  const size_t total = nlead + n + nspecial;
  char *const w0 = out.prepare(total);
  char *w = w0;
  if (nlead) {
    std::memcpy(w, lead, nlead);
    w += nlead;
  }
  size_t i = 0;
  size_t s = first;
  for (;;) {
    if (s > i) {  // the run before the next special byte, in one copy
      std::memcpy(w, p + i, s - i);
      w += s - i;
    }
    if (s == n) break;
    w[0] = kEscapePrefix;
    w[1] = static_cast<char>(static_cast<unsigned char>(p[s]) + kEscapeShift);
    w += 2;
    i = s + 1;
    s = i + find_special(p + i, n - i);
  }
  out.wrote(total);
}

}  // namespace

void escape_into(Byte_buffer &out, const char *p, size_t n) { escape_with_lead(out, nullptr, 0, p, n); }

void encode_status(Byte_buffer &out, uint32_t code, std::string_view msg) {
  char tmp[16];
  char *const end = tmp + sizeof tmp;
  char *const b = format_uint(end, code);
  const size_t nlen = static_cast<size_t>(end - b);
  const size_t total = nlen + (msg.empty() ? 3 : 4 + msg.size());
  char *w = out.prepare(total);
  std::memcpy(w, b, nlen);
  w += nlen;
  if (msg.empty()) {
    std::memcpy(w, "\t1\n", 3);
  } else {
    std::memcpy(w, "\t1\t", 3);
    std::memcpy(w + 3, msg.data(), msg.size());
    w[3 + msg.size()] = '\n';
  }
  out.wrote(total);
}

void encode_number(Byte_buffer &out, uint32_t code, uint64_t value) {
  /* "<code>\t1\t<value>\n": at most 10 + 3 + 20 + 1 bytes. */
  char tmp[40];
  char *const end = tmp + sizeof tmp;
  char *b = end;
  *--b = '\n';
  b = format_uint(b, value);
  *--b = '\t';
  *--b = '1';
  *--b = '\t';
  b = format_uint(b, code);
  out.append(b, static_cast<size_t>(end - b));
}

size_t begin_rows(Byte_buffer &out, size_t ncols) {
  const size_t mark = out.size();
  char tmp[24];
  char *const end = tmp + sizeof tmp;
  char *b = format_uint(end, ncols);
  *--b = '\t';
  *--b = '0';
  out.append(b, static_cast<size_t>(end - b));
  return mark;
}

void append_value(Byte_buffer &out, const char *ptr, size_t len) {
  if (!ptr) {
    out.append("\t\0", 2);
    return;
  }
  escape_with_lead(out, "\t", 1, ptr, len);
}

void end_rows(Byte_buffer &out) { out.push_back('\n'); }

void cancel_rows(Byte_buffer &out, size_t mark) {
  if (mark < out.size()) out.resize(mark);
}

}  // namespace hs
}  // namespace tablesocket
