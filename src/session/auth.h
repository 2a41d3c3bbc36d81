/* A connection's identity, shared by the HandlerSocket and memcached sessions: which MariaDB
   account (Principal) its requests run as, how it logs in, and the policy for connections that
   have not logged in (tablesocket_require_auth, tablesocket_anonymous_account). See
   docs/security.md. */
#ifndef TABLESOCKET_SESSION_AUTH_H
#define TABLESOCKET_SESSION_AUTH_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/config.h"
#include "common/peer.h"
#include "common/stats.h"
#include "store/store.h"

namespace tablesocket {

class Auth_state {
 public:
  Auth_state(Store &store, const Config &cfg, const Peer &peer, Counters &counters)
      : store_(store), cfg_(cfg), peer_(peer), counters_(counters) {}
  ~Auth_state();
  Auth_state(const Auth_state &) = delete;
  Auth_state &operator=(const Auth_state &) = delete;

  enum class Identity : uint8_t {
    unrestricted,     // no account and none required: HandlerSocket's behaviour, no privilege checks
    account,          // *principal is the account requests run as
    unauthenticated,  // no account, and the configuration requires one: only logins are allowed
  };
  /* The identity requests run as now. On first use this logs in with a verified TLS client
     certificate or as tablesocket_anonymous_account when those apply. table_busy: retry later. */
  Store_status identity(Identity *id, Principal **principal, bool allow_anonymous_account = true);

  /* A fresh challenge for the native login: 20 random bytes, written as 40 hex digits to hex. */
  void new_challenge(std::string *hex);
  /* Logs in as user. native: secret is the 20-byte token for the last challenge (consumed);
     cleartext: the password, allowed only on a confidential connection or when configured.
     On success the connection's account changes (the caller forgets what it opened for the old
     one). Failures are counted and logged with a rate limit. table_busy: retry later. */
  Store_status login(Login_method method, std::string_view user, std::string_view secret);
  /* Counts and logs (rate limited) a failed shared-secret check. */
  void secret_failed();
  /* One request (a read, or a write) against the account's MAX_QUERIES_PER_HOUR and
     MAX_UPDATES_PER_HOUR, counted over every tablesocket connection and port (apart from SQL's
     own counts): access_denied with the server's message once a limit is reached. Free for a
     connection without an account or an account without such limits. */
  Store_status charge_request(bool write);

  bool has_account() const { return principal_ != nullptr; }
  void account(std::string *user, std::string *host) const {
    *user = principal_ ? principal_->user() : std::string();
    *host = principal_ ? principal_->host() : std::string();
  }
  /* Whether a connection that has not logged in may do nothing until it does: require_auth is on
     and no anonymous account applies (allow_anonymous_account: whether the protocol uses one). */
  static bool login_required(const Config &cfg, bool allow_anonymous_account) {
    return cfg.require_auth && !(allow_anonymous_account && !cfg.anonymous_account.empty());
  }
  /* After a login changed the account: the caller has dropped every Open_index made for the old
     one, so the old account's context can go. */
  void forget_previous_account() {
    if (!previous_) return;
    /* A write of this connection queued for a row lock runs as the old account (the job points
       to it): cancelled before the account goes, as when the connection closes. */
    store_.forget_current_requester();
    previous_.reset();
  }
  bool cleartext_allowed() const { return peer_.confidential() || cfg_.allow_cleartext_passwords; }

 private:
  Store_status adopt(std::unique_ptr<Principal> p, bool count_connection);
  /* A failed login: counted, logged (rate limited), answered with why. */
  Store_status refuse(std::string_view user, std::string why);
  void release_account_slot();
  void failed(std::string_view user, std::string_view why);

  Store &store_;
  const Config &cfg_;
  const Peer &peer_;
  Counters &counters_;
  std::unique_ptr<Principal> principal_;
  std::unique_ptr<Principal> previous_;  // kept until the session's old open indexes are gone
  std::string counted_account_;    // the account this connection holds a connection slot of
  unsigned char nonce_[20] = {};
  bool has_nonce_ = false;
  bool tried_default_ = false;     // certificate / anonymous mapping attempted
  std::string last_error_;
};

}  // namespace tablesocket
#endif
