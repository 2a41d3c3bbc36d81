/* Connections per client address (tablesocket_max_connections_per_host). The worker that accepts
   a connection takes a slot before it serves it (or hands it to another worker); the worker that
   serves it gives it back when the connection closes. One mutex, taken only at accept and at close (never on the request path). */
#ifndef TABLESOCKET_NET_HOST_SLOTS_H
#define TABLESOCKET_NET_HOST_SLOTS_H

#include <mutex>
#include <string>
#include <unordered_map>

namespace tablesocket {

class Host_slots {
 public:
  explicit Host_slots(unsigned limit) : limit_(limit) {}
  Host_slots(const Host_slots &) = delete;
  Host_slots &operator=(const Host_slots &) = delete;

  /* 0: no limit; nothing is counted. */
  bool enabled() const { return limit_ != 0; }

  /* Takes a slot for `host`; false (nothing taken) when it already holds the limit. */
  bool take(const std::string &host) {
    std::lock_guard<std::mutex> g(mu_);
    unsigned &n = held_[host];
    if (n >= limit_) {
      if (n == 0) held_.erase(host);
      return false;
    }
    ++n;
    return true;
  }

  /* Gives back a slot take() returned true for. */
  void give_back(const std::string &host) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = held_.find(host);
    if (it == held_.end()) return;
    if (--it->second == 0) held_.erase(it);
  }

  unsigned held(const std::string &host) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = held_.find(host);
    return it == held_.end() ? 0 : it->second;
  }
  size_t hosts() const {
    std::lock_guard<std::mutex> g(mu_);
    return held_.size();
  }

 private:
  const unsigned limit_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, unsigned> held_;  // hosts holding at least one slot
};

}  // namespace tablesocket
#endif
