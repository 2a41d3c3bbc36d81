/* Protocol-neutral request vocabulary shared by the protocol layers and the store layer. */
#ifndef TABLESOCKET_COMMON_QUERY_H
#define TABLESOCKET_COMMON_QUERY_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tablesocket {

/* A value sent by a client. ptr == nullptr means SQL NULL; an empty string has a non-null ptr and
   len 0. Does not own its bytes: they live in the connection's input buffer. */
struct Datum {
  const char *ptr = nullptr;
  size_t len = 0;
  bool is_null() const { return ptr == nullptr; }
  std::string_view view() const { return ptr ? std::string_view(ptr, len) : std::string_view(); }
};

enum class Compare_op : uint8_t { eq, ne, lt, le, gt, ge };  // = != < <= > >=

enum class Filter_type : uint8_t { skip /* F: skip rows that fail */, stop /* W: end the scan */ };

struct Filter {
  Filter_type type;
  Compare_op op;
  uint32_t column;  // position in the open index's filter column list
  Datum value;
};

enum class Modify_op : uint8_t { none, update, increment, decrement, remove };

}  // namespace tablesocket
#endif
