/* An account's hourly resource limits (MAX_QUERIES_PER_HOUR, MAX_UPDATES_PER_HOUR,
   MAX_CONNECTIONS_PER_HOUR) and the counts they are checked against, kept as the server keeps
   its own (USER_CONN): per account, started again once an hour has passed since the account's
   counts last started. Process-wide, shared by every worker and protocol; only accounts that
   have a limit are ever looked up, so connections of other accounts never take its lock.
   Pure: no server headers, unit-tested. */
#ifndef TABLESOCKET_COMMON_HOURLY_LIMITS_H
#define TABLESOCKET_COMMON_HOURLY_LIMITS_H

#include <cstdint>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tablesocket {

struct Hourly_limits {
  int64_t questions = 0;    // requests per hour (MAX_QUERIES_PER_HOUR); 0 = no limit
  int64_t updates = 0;      // write requests per hour (MAX_UPDATES_PER_HOUR); 0 = no limit
  int64_t connections = 0;  // logins per hour (MAX_CONNECTIONS_PER_HOUR); 0 = no limit
  bool any() const { return questions > 0 || updates > 0 || connections > 0; }
};

class Hourly_counts {
 public:
  static constexpr int64_t kHourUs = 3600LL * 1000000;

  /* Counts one request of account (a write counts as a question and an update, as SQL's
     INSERT/UPDATE/DELETE do). False, counting nothing, when that would pass a limit: *resource
     then names it as the server does ("max_queries_per_hour", "max_updates_per_hour") and
     *limit is its value. */
  bool charge_request(const std::string &account, const Hourly_limits &lim, bool write, int64_t now_us,
                      const char **resource, int64_t *limit) {
    if (lim.questions <= 0 && (!write || lim.updates <= 0)) return true;
    std::lock_guard<std::mutex> g(m_);
    Entry &e = entry(account, now_us);
    if (lim.questions > 0 && e.questions >= lim.questions) {
      *resource = "max_queries_per_hour";
      *limit = lim.questions;
      return false;
    }
    if (write && lim.updates > 0 && e.updates >= lim.updates) {
      *resource = "max_updates_per_hour";
      *limit = lim.updates;
      return false;
    }
    ++e.questions;
    if (write) ++e.updates;
    return true;
  }

  /* Counts one login of account; false (not counted) past MAX_CONNECTIONS_PER_HOUR. */
  bool charge_connection(const std::string &account, const Hourly_limits &lim, int64_t now_us) {
    if (lim.connections <= 0) return true;
    std::lock_guard<std::mutex> g(m_);
    Entry &e = entry(account, now_us);
    if (e.connections >= lim.connections) return false;
    ++e.connections;
    return true;
  }

  size_t accounts() const {
    std::lock_guard<std::mutex> g(m_);
    return map_.size();
  }

 private:
  struct Entry {
    int64_t started_us = 0;
    int64_t questions = 0, updates = 0, connections = 0;
  };
  static constexpr size_t kPruneAt = 4096;  // entries; those whose hour is over are dropped then

  Entry &entry(const std::string &account, int64_t now_us) {
    auto it = map_.find(account);
    if (it == map_.end()) {
      if (map_.size() >= kPruneAt) {
        for (auto p = map_.begin(); p != map_.end();)
          p = now_us - p->second.started_us >= kHourUs ? map_.erase(p) : std::next(p);
      }
      it = map_.emplace(account, Entry{}).first;
      it->second.started_us = now_us;
    }
    Entry &e = it->second;
    if (now_us - e.started_us >= kHourUs) e = Entry{now_us, 0, 0, 0};
    return e;
  }

  mutable std::mutex m_;
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace tablesocket
#endif
