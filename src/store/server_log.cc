#include "store/server_incl.h"

#include <cstdarg>
#include <cstdio>

#include "store/server_log.h"

namespace tablesocket {
namespace {
void emit(void (*sink)(const char *, ...), const char *fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  sink("tablesocket: %s", buf);
}
}  // namespace

void log_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(sql_print_error, fmt, ap);
  va_end(ap);
}
void log_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(sql_print_warning, fmt, ap);
  va_end(ap);
}
void log_info(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(sql_print_information, fmt, ap);
  va_end(ap);
}
}  // namespace tablesocket
