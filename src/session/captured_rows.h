/* A Row_sink that keeps every value a store call produces, for protocols (and configuration
   readers) that need rows back as data rather than encoded on the wire. The values live in one
   flat byte buffer with a (offset, length, null) entry per cell, so a sink reused across requests
   (clear() keeps both buffers' capacity) captures rows without allocating. */
#ifndef TABLESOCKET_SESSION_CAPTURED_ROWS_H
#define TABLESOCKET_SESSION_CAPTURED_ROWS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_buffer.h"
#include "store/store.h"

namespace tablesocket {

class Captured_rows final : public Row_sink {
 public:
  /* max_rows: would_overflow() once more rows than this were captured. */
  explicit Captured_rows(size_t max_rows = SIZE_MAX) : max_rows_(max_rows) {}
  void begin(size_t ncols) override { ncols_ = ncols ? ncols : 1; }
  void value(const char *p, size_t n) override {
    cells_.push_back(Cell{bytes_.size(), n, false});
    if (n) bytes_.append(p, n);
  }
  void null() override { cells_.push_back(Cell{bytes_.size(), 0, true}); }
  void end() override {}
  void cancel() override { clear(); }
  bool would_overflow() const override { return nrows() > max_rows_; }

  /* Forgets the rows, keeps the memory. */
  void clear() {
    cells_.clear();
    bytes_.clear();
  }
  /* Forgets the rows, and gives the memory back where a buffer holds more than keep bytes. */
  void trim(size_t keep) {
    clear();
    bytes_.shrink_if_idle(keep);
    if (cells_.capacity() * sizeof(Cell) > keep) std::vector<Cell>().swap(cells_);
  }
  size_t size_bytes() const { return bytes_.size() + cells_.size() * sizeof(Cell); }
  size_t capacity_bytes() const { return bytes_.capacity() + cells_.capacity() * sizeof(Cell); }
  size_t ncols() const { return ncols_; }
  size_t nrows() const { return cells_.size() / ncols_; }
  size_t ncells() const { return cells_.size(); }
  /* Cell i in row-major order (ncols() per row); NULL reads as empty, with is_null() set. */
  std::string_view cell(size_t i) const {
    const char *b = bytes_.data();  // null until a non-empty value was captured: "" then, never null
    return {b ? b + cells_[i].offset : "", cells_[i].size};
  }
  bool is_null(size_t i) const { return cells_[i].null; }
  std::string_view cell(size_t row, size_t col) const { return cell(row * ncols_ + col); }
  bool is_null(size_t row, size_t col) const { return is_null(row * ncols_ + col); }

 private:
  struct Cell {
    size_t offset, size;
    bool null;
  };
  std::vector<Cell> cells_;
  Byte_buffer bytes_;  // appends without std::string's per-call overhead (most of a get's capture)
  size_t max_rows_;
  size_t ncols_ = 1;
};

}  // namespace tablesocket
#endif
