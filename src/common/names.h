/* Identifier comparison as MariaDB does it for column and index names: ASCII letters compared
   without case, every other byte as it is. Shared by the store (names a client asks for against a
   table's) and the memcached containers (one column named for two purposes). */
#ifndef TABLESOCKET_COMMON_NAMES_H
#define TABLESOCKET_COMMON_NAMES_H

#include <cstddef>
#include <string_view>

namespace tablesocket {
inline bool names_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return false;
  }
  return true;
}
}  // namespace tablesocket
#endif
