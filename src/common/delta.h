/* The operand of a HandlerSocket increment/decrement (`+` / `-`), read as SQL reads the string in
   `col = col + '<delta>'`: an integer literal, another number (fraction, exponent), or garbage
   (SQL: "Truncated incorrect DOUBLE value", an error in strict mode; otherwise the number its
   leading part spells, 0 if none). Pure: no server headers. */
#ifndef TABLESOCKET_COMMON_DELTA_H
#define TABLESOCKET_COMMON_DELTA_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace tablesocket {

struct Delta {
  enum Kind : uint8_t { integer, number, garbage } kind = garbage;
  bool negative = false;
  uint64_t magnitude = 0;  // kind == integer: |value| (up to 2^64 - 1)
  std::string text;        // kind == number: the literal; garbage: its numeric leading part ("" = 0)
};

inline Delta parse_delta(const char *p, size_t n) {
  Delta d;
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\t')) ++i;  // SQL skips leading spaces
  const size_t start = i;
  if (i < n && (p[i] == '+' || p[i] == '-')) d.negative = p[i++] == '-';
  const size_t digits_at = i;
  bool overflow = false;
  uint64_t m = 0;
  while (i < n && p[i] >= '0' && p[i] <= '9') {
    const uint64_t digit = uint64_t(p[i] - '0');
    if (m > (UINT64_MAX - digit) / 10) overflow = true;
    else m = m * 10 + digit;
    ++i;
  }
  const size_t int_digits = i - digits_at;
  size_t frac_digits = 0;
  if (i < n && p[i] == '.') {
    ++i;
    const size_t f = i;
    while (i < n && p[i] >= '0' && p[i] <= '9') ++i;
    frac_digits = i - f;
  }
  if (int_digits + frac_digits > 0 && i < n && (p[i] == 'e' || p[i] == 'E')) {
    size_t j = i + 1;
    if (j < n && (p[j] == '+' || p[j] == '-')) ++j;
    const size_t e = j;
    while (j < n && p[j] >= '0' && p[j] <= '9') ++j;
    if (j > e) i = j;  // an exponent only with digits
  }
  const size_t numeric_end = int_digits + frac_digits > 0 ? i : start;
  size_t k = i;
  while (k < n && (p[k] == ' ' || p[k] == '\t')) ++k;  // and trailing ones
  if (int_digits + frac_digits == 0 || k != n) {
    d.kind = Delta::garbage;
    d.text.assign(p + start, numeric_end - start);
    return d;
  }
  if (!overflow && frac_digits == 0 && i == digits_at + int_digits) {
    d.kind = Delta::integer;
    d.magnitude = m;
    return d;
  }
  d.kind = Delta::number;
  d.text.assign(p + start, i - start);
  return d;
}

}  // namespace tablesocket

#endif
