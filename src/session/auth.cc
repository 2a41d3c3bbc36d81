#include "session/auth.h"

#include <sys/random.h>
#include <time.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "common/account_record.h"
#include "common/clock.h"
#include "store/server_log.h"

namespace tablesocket {
namespace {

/* Logged-in connections per account, over all workers. Taken only at login and close, never on
   the request path. */
class Account_connections {
 public:
  bool acquire(const std::string &account, int64_t limit) {
    std::lock_guard<std::mutex> g(mu_);
    int64_t &n = counts_[account];
    if (limit > 0 && n >= limit) {
      if (n == 0) counts_.erase(account);
      return false;
    }
    ++n;
    return true;
  }
  void release(const std::string &account) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = counts_.find(account);
    if (it != counts_.end() && --it->second <= 0) counts_.erase(it);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int64_t> counts_;
};

Account_connections &account_connections() {
  static Account_connections a;
  return a;
}

Hourly_counts &hourly_counts() {
  static Hourly_counts h;
  return h;
}

int64_t now_us() { return int64_t(monotonic_ns() / 1000); }

std::string limit_reached(const std::string &account, const char *resource, int64_t limit) {
  return "User " + account + " has exceeded the '" + resource + "' resource (" + std::to_string(limit) + ")";
}

/* Failed logins go to the error log at most once per interval; the rest are counted and the
   count is reported with the next line. */
std::atomic<int64_t> g_last_failure_log_s{0};
std::atomic<uint64_t> g_suppressed_failures{0};

void fill_random(unsigned char *p, size_t n) {
  while (n) {
    ssize_t got = getrandom(p, n, 0);
    if (got <= 0) {
      /* getrandom only fails before the pool is seeded or on EINTR; fall back to a clock mix
         rather than fail the login (the nonce needs freshness, not secrecy). */
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t x = uint64_t(ts.tv_nsec) * 0x9E3779B97F4A7C15ull ^ uint64_t(ts.tv_sec) ^ uint64_t(uintptr_t(p));
      for (size_t i = 0; i < n; ++i, x = x * 6364136223846793005ull + 1442695040888963407ull) p[i] ^= (unsigned char)(x >> 56);
      return;
    }
    p += got;
    n -= size_t(got);
  }
}

}  // namespace

Auth_state::~Auth_state() { release_account_slot(); }

void Auth_state::release_account_slot() {
  if (!counted_account_.empty()) {
    account_connections().release(counted_account_);
    counted_account_.clear();
  }
}

void Auth_state::failed(std::string_view user, std::string_view why) {
  counters_.add(counters_.auth_failures);
  const int64_t now = int64_t(time(nullptr));
  int64_t last = g_last_failure_log_s.load(std::memory_order_relaxed);
  if (now - last < int64_t(cfg_.auth_log_interval_s) ||
      !g_last_failure_log_s.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    g_suppressed_failures.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t suppressed = g_suppressed_failures.exchange(0, std::memory_order_relaxed);
  std::string u(user.substr(0, 64));
  for (char &c : u)
    if ((unsigned char)c < 0x20 || c == 0x7f) c = '?';
  std::string w(why.substr(0, 200));
  log_warning("failed login from %s for user '%s': %s (%llu more failed logins not logged in the last %u s)",
              peer_.unix_socket ? "the unix socket" : peer_.ip.c_str(), u.c_str(), w.c_str(),
              (unsigned long long)suppressed, cfg_.auth_log_interval_s.get());
}

void Auth_state::secret_failed() { failed("", "wrong HandlerSocket shared secret"); }

void Auth_state::new_challenge(std::string *hex) {
  fill_random(nonce_, sizeof nonce_);
  has_nonce_ = true;
  static const char digits[] = "0123456789abcdef";
  hex->clear();
  for (unsigned char b : nonce_) {
    hex->push_back(digits[b >> 4]);
    hex->push_back(digits[b & 15]);
  }
}

Store_status Auth_state::refuse(std::string_view user, std::string why) {
  last_error_ = std::move(why);
  failed(user, last_error_);
  Store_status st = Store_status::of(Store_errc::access_denied);
  st.message = last_error_;
  return st;
}

Store_status Auth_state::adopt(std::unique_ptr<Principal> p, bool count_connection) {
  if (count_connection) {
    const std::string account = p->account();
    int64_t limit = int64_t(cfg_.max_user_connections);
    if (p->max_user_connections > 0 && (limit == 0 || p->max_user_connections < limit)) limit = p->max_user_connections;
    /* A re-login as the same account keeps its slot. */
    const bool new_slot = account != counted_account_;
    if (new_slot && !account_connections().acquire(account, limit)) {
      last_error_ = limit_reached(account, "max_user_connections", limit);
      return Store_status::of(Store_errc::access_denied);  // the caller refuses with last_error_
    }
    /* MAX_CONNECTIONS_PER_HOUR: every login counts, as every SQL connect (and COM_CHANGE_USER)
       does; one MAX_USER_CONNECTIONS refused does not (the server checks that first too). */
    if (p->hourly.connections > 0 && !hourly_counts().charge_connection(account, p->hourly, now_us())) {
      if (new_slot) account_connections().release(account);
      last_error_ = limit_reached(account, "max_connections_per_hour", p->hourly.connections);
      return Store_status::of(Store_errc::access_denied);
    }
    if (new_slot) {
      release_account_slot();
      counted_account_ = account;
    }
  }
  previous_ = std::move(principal_);
  principal_ = std::move(p);
  return {};
}

Store_status Auth_state::charge_request(bool write) {
  if (!principal_ || (principal_->hourly.questions <= 0 && principal_->hourly.updates <= 0)) return {};
  const char *resource = nullptr;
  int64_t limit = 0;
  const std::string account = principal_->account();
  if (hourly_counts().charge_request(account, principal_->hourly, write, now_us(), &resource, &limit)) return {};
  last_error_ = limit_reached(account, resource, limit);
  Store_status st = Store_status::of(Store_errc::access_denied);
  st.message = last_error_;  // valid until the next call, as Store_status messages are
  return st;
}

Store_status Auth_state::login(Login_method method, std::string_view user, std::string_view secret) {
  Login_request rq;
  rq.method = method;
  rq.user = user;
  rq.secret = secret;
  if (method == Login_method::native) {
    if (!has_nonce_) return refuse(user, "no challenge: request one with 'A 2' first");
    rq.nonce = nonce_;
  }
  if (method == Login_method::cleartext && !cleartext_allowed())
    return refuse(user, "cleartext passwords are refused on an unencrypted connection: use TLS, the challenge "
                        "login, or set tablesocket_allow_cleartext_passwords");
  std::unique_ptr<Principal> p;
  Store_status st = store_.login(peer_, rq, &p);
  if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return st;  // retried; nonce kept
  has_nonce_ = false;  // one challenge, one attempt
  if (!st.ok()) return refuse(user, std::string(st.message));
  st = adopt(std::move(p), true);
  if (!st.ok()) return refuse(user, last_error_);
  tried_default_ = true;
  counters_.add(counters_.auth_successes);
  return {};
}

Store_status Auth_state::identity(Identity *id, Principal **principal, bool allow_anonymous_account) {
  *principal = nullptr;
  if (!principal_ && !tried_default_) {
    std::unique_ptr<Principal> p;
    Store_status st;
    bool done = false;
    if (peer_.cert_verified && !peer_.cert_cn.empty()) {
      Login_request rq;
      rq.method = Login_method::certificate;
      st = store_.login(peer_, rq, &p);
      if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return st;
      if (st.ok()) {
        st = adopt(std::move(p), true);
        if (st.ok()) {
          counters_.add(counters_.auth_successes);
          done = true;
        } else {
          failed(peer_.cert_cn, last_error_);
        }
      } else {
        failed(peer_.cert_cn, std::string(st.message));
      }
    }
    if (!done && allow_anonymous_account && !cfg_.anonymous_account.empty()) {
      std::string user, host;
      if (!split_account_name(cfg_.anonymous_account, &user, &host)) {
        log_warning("tablesocket_anonymous_account '%s' is not an account name", cfg_.anonymous_account.c_str());
      } else {
        Login_request rq;
        rq.method = Login_method::mapped;
        rq.user = user;
        rq.host = host;
        st = store_.login(peer_, rq, &p);
        if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return st;
        if (st.ok()) {
          adopt(std::move(p), false);
        } else {
          log_warning("tablesocket_anonymous_account: %.*s", int(st.message.size()), st.message.data());
        }
      }
    }
    tried_default_ = true;
  }
  if (principal_) {
    *id = Identity::account;
    *principal = principal_.get();
  } else {
    /* A configured anonymous account that cannot be used leaves the connection with nothing,
       never with more than the account would have had. */
    *id = cfg_.require_auth || (allow_anonymous_account && !cfg_.anonymous_account.empty())
              ? Identity::unauthenticated
              : Identity::unrestricted;
  }
  return {};
}

}  // namespace tablesocket
