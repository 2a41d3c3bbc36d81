/* A Row_sink that keeps every value a store call produces, for protocols (and configuration
   readers) that need rows back as data rather than encoded on the wire. */
#ifndef TABLESOCKET_SESSION_CAPTURED_ROWS_H
#define TABLESOCKET_SESSION_CAPTURED_ROWS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/store.h"

namespace tablesocket {

class Captured_rows final : public Row_sink {
 public:
  /* max_rows: would_overflow() once more rows than this were captured. */
  explicit Captured_rows(size_t max_rows = SIZE_MAX) : max_rows_(max_rows) {}
  void begin(size_t ncols) override { ncols_ = ncols ? ncols : 1; }
  void value(const char *p, size_t n) override {
    cells.emplace_back(p, n);
    nulls.push_back(false);
  }
  void null() override {
    cells.emplace_back();
    nulls.push_back(true);
  }
  void end() override {}
  void cancel() override {
    cells.clear();
    nulls.clear();
  }
  bool would_overflow() const override { return nrows() > max_rows_; }

  size_t ncols() const { return ncols_; }
  size_t nrows() const { return cells.size() / ncols_; }
  const std::string &cell(size_t row, size_t col) const { return cells[row * ncols_ + col]; }
  bool is_null(size_t row, size_t col) const { return nulls[row * ncols_ + col]; }

  std::vector<std::string> cells;  // row-major, ncols() per row; NULL is an empty string...
  std::vector<bool> nulls;         // ...with its flag set here

 private:
  size_t max_rows_;
  size_t ncols_ = 1;
};

}  // namespace tablesocket
#endif
