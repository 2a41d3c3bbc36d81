/* Writing to the server's error log without including server headers outside store/. */
#ifndef TABLESOCKET_STORE_SERVER_LOG_H
#define TABLESOCKET_STORE_SERVER_LOG_H

namespace tablesocket {
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace tablesocket
#endif
