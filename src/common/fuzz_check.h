/* The libFuzzer targets' check: a broken promise aborts with where and what (the fuzzer then keeps
   the input that broke it). For the fuzz targets (src/proto/<proto>/<name>_fuzz.cc) only. */
#ifndef TABLESOCKET_COMMON_FUZZ_CHECK_H
#define TABLESOCKET_COMMON_FUZZ_CHECK_H

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#endif
