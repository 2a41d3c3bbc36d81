/* Accounts and privileges: logins checked against what the server stores for an account
   (mysql.global_priv), security contexts built the way the server builds them (acl_getroot, the
   account's default role), and privilege checks made the way SQL makes them (check_table_access,
   check_grant_column), cached per open index for privilege_check_interval_ms. */
#include "store/mariadb_store.h"

#include <time.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "common/account_record.h"
#include "common/clock.h"
#include "common/peer.h"
#include "hostname.h"
#include "sql_acl.h"
#include "sql_parse.h"
#include "store/server_log.h"
#include <mysql/service_sha1.h>

namespace tablesocket {

namespace {

constexpr uint8_t kPrivRead = 1, kPrivWhere = 2, kPrivInsert = 4, kPrivUpdate = 8, kPrivDelete = 16;

/* Captures the first column of the first row. */
class First_value_sink final : public Row_sink {
 public:
  explicit First_value_sink(std::string &out) : out_(out) {}
  void begin(size_t) override {}
  void value(const char *p, size_t n) override { if (!got) { out_.assign(p, n); got = true; } }
  void null() override {}
  void end() override {}
  void cancel() override { got = false; }
  bool would_overflow() const override { return out_.size() > (1u << 20); }
  bool got = false;

 private:
  std::string &out_;
};

/* SHA1(SHA1(password)): what mysql_native_password stores. */
void native_stage2_of(std::string_view password, unsigned char out[20]) {
  unsigned char stage1[MY_SHA1_HASH_SIZE];
  my_sha1(stage1, password.data(), password.size());
  my_sha1(out, reinterpret_cast<const char *>(stage1), sizeof stage1);
}

/* Whether the credentials match one mysql_native_password method of the account. *native is set
   when the account has such a method at all. */
bool native_credentials_match(const Account_record &rec, const Login_request &req, bool *native) {
  *native = false;
  bool ok = false;
  for (const Auth_method &m : rec.methods) {
    if (m.plugin != "mysql_native_password") continue;
    *native = true;
    if (m.auth_string.empty()) {
      ok |= req.secret.empty();
      continue;
    }
    unsigned char stage2[20];
    if (!native_hash_stage2(m.auth_string, stage2)) continue;
    if (req.method == Login_method::native) {
      if (req.secret.size() == SCRAMBLE_LENGTH && req.nonce)
        ok |= !check_scramble(reinterpret_cast<const unsigned char *>(req.secret.data()),
                              reinterpret_cast<const char *>(req.nonce), stage2);
    } else {
      unsigned char got[20];
      native_stage2_of(req.secret, got);
      ok |= equal_constant_time(std::string_view(reinterpret_cast<const char *>(got), sizeof got),
                                std::string_view(reinterpret_cast<const char *>(stage2), sizeof stage2));
    }
  }
  return ok;
}

/* The privilege tables' version (the server's grant_version: FLUSH PRIVILEGES, GRANT, REVOKE,
   ... move it on), as GRANT_INFO::read() stamps it. */
uint privilege_tables_version(Security_context *sctx) {
  GRANT_INFO gi;
  mysql_rwlock_rdlock(&LOCK_grant);
  gi.read(sctx, "mysql", "global_priv");
  mysql_rwlock_unlock(&LOCK_grant);
  return gi.version;
}

/* max_password_errors for tablesocket's logins: wrong passwords in a row per account, across
   workers (a login's path only, never a request's). The server keeps its own count for SQL
   logins where a plugin cannot reach it, so the two are counted apart; like the server's, a
   count is forgotten on a successful login, on FLUSH PRIVILEGES (any change of the privilege
   tables) and when the account changes (ALTER USER). */
class Password_errors {
 public:
  static Password_errors &instance() {
    static Password_errors p;
    return p;
  }
  /* Errors counted for the account (its record's hash: another record starts again at 0). */
  uint32_t count(const std::string &account, size_t record, uint version) {
    std::lock_guard<std::mutex> g(mu_);
    forget_if_reloaded(version);
    auto it = counts_.find(account);
    return it == counts_.end() || it->second.record != record ? 0 : it->second.errors;
  }
  void failed(const std::string &account, size_t record, uint version) {
    std::lock_guard<std::mutex> g(mu_);
    forget_if_reloaded(version);
    if (counts_.size() >= kMaxAccounts && !counts_.count(account)) return;  // bounded: accounts, not guesses
    Entry &e = counts_[account];
    if (e.record != record) e = Entry{record, 0};
    if (e.errors < UINT32_MAX) ++e.errors;
  }
  void succeeded(const std::string &account) {
    std::lock_guard<std::mutex> g(mu_);
    counts_.erase(account);
  }

 private:
  static constexpr size_t kMaxAccounts = 100000;
  struct Entry {
    size_t record = 0;
    uint32_t errors = 0;
  };
  void forget_if_reloaded(uint version) {
    if (version == version_) return;
    version_ = version;
    counts_.clear();
  }
  std::mutex mu_;
  std::unordered_map<std::string, Entry> counts_;
  uint version_ = 0;
};

std::string denied_message(std::string_view user, const char *host_or_ip, bool using_password) {
  std::string m = "Access denied for user '";
  m.append(user);
  m += "'@'";
  m += host_or_ip ? host_or_ip : "";
  m += using_password ? "' (using password: YES)" : "' (using password: NO)";
  return m;
}

}  // namespace

Store_status Mariadb_store::deny(std::string message) {
  last_error_ = std::move(message);
  return denied_by_last_error();
}

/* A login whose user@host names no account is refused after the same work as a wrong password
   to an existing one: a read of mysql.global_priv (of no row: the name is not there), a record
   parsed and a token checked against a password nobody has. Refused at once, it took ~33 µs
   against ~58 µs, which told anyone counting microseconds which names exist. */
Store_status Mariadb_store::deny_unknown(const Login_request &req, Mariadb_principal &p, const std::string &denied) {
  std::string json;
  bool found = false;
  Store_status st = read_account("%", p.login_user.c_str(), &json, &found);
  if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return st;  // as a real login's read
  return deny_after_decoy_check(req, p, denied);
}

/* The rest of a wrong password's work once the account's record was read (or found missing). */
Store_status Mariadb_store::deny_after_decoy_check(const Login_request &req, Mariadb_principal &p,
                                                   const std::string &denied) {
  static constexpr std::string_view kDecoy =
      R"({"access":0,"version_id":101118,"plugin":"mysql_native_password",)"
      R"("authentication_string":"*0000000000000000000000000000000000000000",)"
      R"("password_last_changed":1,"password_lifetime":-1,"account_locked":false})";
  Account_record rec;
  std::string error;
  if (parse_account_record(kDecoy, &rec, &error)) {
    /* Counted (read only: a name that is no account never gets a count) as for an account. */
    const std::string account = p.login_user + "'@'%";
    (void)Password_errors::instance().count(account, std::hash<std::string_view>()(kDecoy),
                                            privilege_tables_version(&p.sctx));
    bool native = false;
    (void)native_credentials_match(rec, req, &native);
  }
  return deny(denied);
}

Store_status Mariadb_store::denied_by_last_error() { return with_last_error(Store_errc::access_denied); }

bool Mariadb_store::rebuild_context(Mariadb_principal &p) {
  /* acl_getroot points the context's user/host/ip at our strings (we own them). */
  if (acl_getroot(&p.sctx, p.login_user.c_str(), p.conn_host.c_str(),
                  p.conn_ip.empty() ? nullptr : p.conn_ip.c_str(), nullptr))
    return false;
  apply_role(p);
  return true;
}

void Mariadb_store::apply_role(Mariadb_principal &p) {
  if (p.role.empty()) return;
  Security_context *saved = thd_->security_ctx;
  thd_->security_ctx = &p.sctx;
  privilege_t access(NO_ACL);
  if (acl_check_setrole(thd_, p.role.c_str(), &access) == 0) acl_setrole(thd_, p.role.c_str(), access);
  thd_->security_ctx = saved;
  clear_diagnostics();
}

Store_status Mariadb_store::read_account(const char *host, const char *user, std::string *json, bool *found) {
  Index_spec spec;
  spec.db = "mysql";
  spec.table = "global_priv";
  spec.index = "PRIMARY";
  spec.columns = "Priv";
  Open_index idx;
  Store_status st = open_index(spec, idx);
  if (!st.ok()) return st;
  Datum keys[2];
  keys[0].ptr = host;
  keys[0].len = strlen(host);
  keys[1].ptr = user;
  keys[1].len = strlen(user);
  Find_request fr;
  fr.counts_rows = false;
  fr.op = Find_op::eq;
  fr.keys = keys;
  fr.nkeys = 2;
  fr.limit = 1;
  First_value_sink sink(*json);
  st = find(idx, fr, sink);
  *found = sink.got;
  return st;
}

Store_status Mariadb_store::login(const Peer &peer, const Login_request &req, std::unique_ptr<Principal> *out) {
  auto p = std::make_unique<Mariadb_principal>();
  const bool using_password = req.method == Login_method::native || req.method == Login_method::cleartext
                                  ? !req.secret.empty() : false;
  p->login_user.assign(req.method == Login_method::certificate ? std::string_view(peer.cert_cn) : req.user);
  if (p->login_user.empty() || p->login_user.size() > USERNAME_CHAR_LENGTH * 4 ||
      memchr(p->login_user.data(), 0, p->login_user.size()))
    return deny(denied_message(p->login_user, peer.unix_socket ? "localhost" : peer.ip.c_str(), using_password));

  /* The connection's host and ip, set as the server sets them for a SQL connection
     (thd_set_peer_addr): "localhost" for a unix socket; else the address, and with name
     resolution on, the name ip_to_hostname() finds (loopback is "localhost"). A configured
     account (mapped) is matched by its own host pattern. */
  if (req.method == Login_method::mapped) {
    p->conn_host.assign(req.host.empty() ? std::string_view("%") : req.host);
  } else if (peer.unix_socket) {
    p->conn_host = "localhost";
  } else {
    p->conn_ip = peer.ip;
    if (!opt_skip_name_resolve && peer.addr_len) {
      const char *name = nullptr;
      uint errors = 0;
      sockaddr_storage addr = peer.addr;
      int rc = ip_to_hostname(&addr, p->conn_ip.c_str(), &name, &errors);
      if (name) {
        p->conn_host = name;
        if (name != my_localhost) my_free(const_cast<char *>(name));
      }
      if (rc == RC_BLOCKED_HOST) {
        clear_diagnostics();
        return deny("Host '" + p->conn_ip + "' is blocked because of many connection errors");
      }
    }
    if (p->conn_host.empty()) p->conn_host = p->conn_ip;
  }
  /* As the server names the client in its messages (host_or_ip). */
  const std::string denied = denied_message(p->login_user, p->conn_host.c_str(), using_password);

  if (!rebuild_context(*p)) return deny_unknown(req, *p, denied);
  const char *priv_host = p->sctx.priv_host[0] ? p->sctx.priv_host : "%";
  if (req.method == Login_method::mapped && strcmp(priv_host, p->conn_host.c_str()) != 0)
    return deny("tablesocket_anonymous_account names no account: '" + p->login_user + "'@'" + p->conn_host + "'");

  std::string json;
  bool found = false;
  Store_status st = read_account(priv_host, p->sctx.priv_user, &json, &found);
  if (st.errc == Store_errc::table_busy || st.errc == Store_errc::row_locked) return st;
  if (!st.ok() || !found) return deny_after_decoy_check(req, *p, denied);  // its record was read: not again
  Account_record rec;
  std::string error;
  if (!parse_account_record(json, &rec, &error)) {
    log_warning("cannot read the account '%s'@'%s' from mysql.global_priv: %s", p->sctx.priv_user, priv_host,
                error.c_str());
    return deny(denied);
  }

  /* max_password_errors, checked before the credentials as the server checks it (a blocked
     account is refused even the right password), except for the server's own exemption: an
     account with CONNECTION ADMIN or SUPER on a local host. */
  const std::string account = std::string(p->sctx.priv_user) + "'@'" + priv_host;
  const size_t record_hash = std::hash<std::string>()(json);
  const bool exempt = (p->sctx.master_access & PRIV_IGNORE_MAX_PASSWORD_ERRORS) &&
                      (!strcasecmp(priv_host, "localhost") || !strcmp(priv_host, "127.0.0.1") ||
                       !strcmp(priv_host, "::1"));
  const uint version = privilege_tables_version(&p->sctx);
  if (req.method != Login_method::mapped && !exempt &&
      Password_errors::instance().count(account, record_hash, version) >= max_password_errors)
    return deny("User is blocked because of too many credential errors; unblock with 'ALTER USER / FLUSH "
                "PRIVILEGES'");

  /* Credentials. */
  switch (req.method) {
    case Login_method::native:
    case Login_method::cleartext: {
      bool native = false;
      if (!native_credentials_match(rec, req, &native)) {
        /* A wrong password counts, as the server counts it (an empty one, or a plugin's secret
           tablesocket cannot check, does not). */
        if (native && using_password) Password_errors::instance().failed(account, record_hash, version);
        if (!native && !rec.methods.empty())
          return deny("Access denied for user '" + p->login_user + "': the account authenticates with '" +
                      rec.methods[0].plugin +
                      "', which tablesocket cannot verify (use a mysql_native_password account, or a TLS "
                      "client certificate with an account that REQUIREs X509)");
        return deny(denied);
      }
      break;
    }
    case Login_method::certificate: {
      if (!peer.cert_verified || rec.ssl_type < 2)
        return deny("Access denied for user '" + p->login_user +
                    "': certificate logins need an account with REQUIRE X509, SUBJECT or ISSUER");
      /* The certificate alone is what SQL accepts only for an account without a password; one
         with a password (or another plugin's secret) wants both. */
      bool no_secret = false;
      for (const Auth_method &m : rec.methods)
        no_secret |= m.plugin == "mysql_native_password" && m.auth_string.empty();
      if (!no_secret)
        return deny("Access denied for user '" + p->login_user +
                    "': the account has a password: log in with it over this TLS connection (the certificate alone is not enough, as in SQL)");
      break;
    }
    case Login_method::mapped:
      break;
  }

  /* What the account itself demands. */
  if (rec.account_locked) return deny("Access denied, this account is locked");
  if (req.method != Login_method::mapped) {
    int64_t lifetime = rec.password_lifetime < 0 ? int64_t(default_password_lifetime) : rec.password_lifetime;
    if (rec.password_last_changed == 0 ||
        (lifetime > 0 && rec.password_last_changed > 0 && int64_t(time(nullptr)) > rec.password_last_changed + lifetime * 86400))
      return deny("Your password has expired. To log in you must change it using a client that supports "
                  "expired passwords");
  }
  if (rec.ssl_type >= 1 && !peer.tls) return deny(denied + ": the account requires TLS");
  if (rec.ssl_type >= 2 && !peer.cert_verified)
    return deny(denied + ": the account requires a verified client certificate");
  if (rec.ssl_type == 3) {
    if ((!rec.x509_issuer.empty() && rec.x509_issuer != peer.cert_issuer) ||
        (!rec.x509_subject.empty() && rec.x509_subject != peer.cert_subject) ||
        (!rec.ssl_cipher.empty() && rec.ssl_cipher != peer.tls_cipher))
      return deny(denied + ": the client certificate or cipher does not match the account's REQUIRE");
  }

  if (using_password) Password_errors::instance().succeeded(account);
  p->role = rec.default_role;
  apply_role(*p);
  p->set_account(p->sctx.priv_user, priv_host);
  p->max_user_connections = rec.max_user_connections > 0 ? rec.max_user_connections : 0;
  p->hourly.questions = rec.max_questions > 0 ? rec.max_questions : 0;
  p->hourly.updates = rec.max_updates > 0 ? rec.max_updates : 0;
  p->hourly.connections = rec.max_connections > 0 ? rec.max_connections : 0;
  p->refreshed_ms = monotonic_ms();
  *out = std::move(p);
  return {};
}

/* ---- privileges ---------------------------------------------------------------------------- */

bool Mariadb_store::table_privilege(Mariadb_principal &p, const Table_slot &s, uint64_t want_bits,
                                    const std::vector<const char *> &columns, bool any_combination,
                                    bool report) {
  const privilege_t want(static_cast<privilege_t>(want_bits));
  Security_context *saved = thd_->security_ctx;
  const char *saved_info = thd_->proc_info;  // check_table_access() says "checking permissions"
  thd_->security_ctx = &p.sctx;
  TABLE_LIST tl;
  LEX_CSTRING db{s.db.c_str(), s.db.size()}, name{s.name.c_str(), s.name.size()};
  tl.init_one_table(&db, &name, nullptr, TL_READ);
  bool denied = check_table_access(thd_, want, &tl, any_combination, 1, !report);
  if (!denied && !any_combination) {
    for (const char *c : columns) {
      if (check_grant_column(thd_, &tl.grant, s.db.c_str(), s.name.c_str(), c, strlen(c), &p.sctx)) {
        denied = true;
        break;
      }
    }
  }
  thd_->security_ctx = saved;
  thd_->proc_info = saved_info;  // SHOW PROCESSLIST: the worker's own state, not a check long over
  if (denied && report) {
    last_error_ = thd_->get_stmt_da()->is_error() ? thd_->get_stmt_da()->message() : "access denied";
  }
  clear_diagnostics();
  return !denied;
}

Store_status Mariadb_store::check_table_visible(Mariadb_principal &p, const Table_slot &s) {
  static const privilege_t kinds[] = {SELECT_ACL, INSERT_ACL, UPDATE_ACL, DELETE_ACL};
  for (privilege_t k : kinds)
    if (table_privilege(p, s, uint64_t(k), {}, true, false)) return {};
  table_privilege(p, s, uint64_t(SELECT_ACL), {}, false, true);
  return denied_by_last_error();
}

void Mariadb_store::refresh_principal(Mariadb_principal &p, uint64_t now) {
  if (now - p.refreshed_ms < cfg_.privilege_check_interval_ms) return;
  p.valid = rebuild_context(p);
  p.refreshed_ms = now;
}

Store_status Mariadb_store::account_gone(const Mariadb_principal &p) {
  return deny("Access denied: the account " + p.account() + " no longer exists");
}

Store_status Mariadb_store::check_reload_privilege(Principal &principal) {
  Mariadb_principal &p = static_cast<Mariadb_principal &>(principal);
  refresh_principal(p, monotonic_ms());
  if (!p.valid) return account_gone(p);
  /* The account's global privileges with its active role's (acl_getroot, acl_setrole). */
  if (p.sctx.master_access & RELOAD_ACL) return {};
  return deny("Access denied; you need (at least one of) the RELOAD privilege(s) for this operation");
}

Store_status Mariadb_store::authorize(Open_index &idx, uint8_t want) {
  Mariadb_principal &p = static_cast<Mariadb_principal &>(*idx.principal_);
  const uint64_t now = monotonic_ms();
  refresh_principal(p, now);
  if (now - idx.privileges_checked_ms_ >= cfg_.privilege_check_interval_ms) {
    idx.granted_ = idx.denied_ = 0;
    idx.privileges_checked_ms_ = now;
  }
  if ((idx.granted_ & want) == want) return {};
  if (!p.valid) return account_gone(p);
  const Table_slot &s = slots_[idx.slot_];
  TABLE *t = s.table;
  /* The statement's own privilege first (as SQL reports it), then reading. */
  for (uint8_t bit : {kPrivInsert, kPrivUpdate, kPrivDelete, kPrivRead, kPrivWhere}) {
    if (!(want & bit) || (idx.granted_ & bit)) continue;
    const unsigned slot = unsigned(__builtin_ctz(bit));
    if (idx.denied_ & bit) {
      /* Denied earlier in this interval: the same answer, without taking the ACL locks again. */
      last_error_ = idx.denied_messages_[slot];
      return denied_by_last_error();
    }
    const uint64_t acl = bit == kPrivInsert ? INSERT_ACL
                         : bit == kPrivUpdate ? UPDATE_ACL
                         : bit == kPrivDelete ? DELETE_ACL
                                              : SELECT_ACL;
    std::vector<const char *> cols;
    if (bit == kPrivWhere) {
      const KEY &k = t->key_info[idx.index_no_];
      for (uint i = 0; i < k.user_defined_key_parts; ++i) cols.push_back(k.key_part[i].field->field_name.str);
      for (uint16_t f : idx.filter_columns_) cols.push_back(t->field[f]->field_name.str);
    } else if (bit != kPrivDelete) {
      for (uint16_t f : idx.columns_) cols.push_back(t->field[f]->field_name.str);  // what it reads or writes
    }
    if (!table_privilege(p, s, acl, cols, false, true)) {
      idx.denied_ |= bit;
      idx.denied_messages_.resize(5);
      idx.denied_messages_[slot] = last_error_;
      return denied_by_last_error();
    }
    idx.granted_ |= bit;
  }
  return {};
}

Store_status Mariadb_store::authorize_open(Open_index &idx) {
  /* The read port needs SELECT on what it returns and searches; the write port any of SELECT,
     INSERT, UPDATE, DELETE (each request then checks its own). */
  Store_status st = authorize(idx, kPrivRead | kPrivWhere);
  if (st.ok() || !idx.for_write_) return st;
  std::string first = last_error_;
  for (uint8_t bit : {kPrivInsert, kPrivUpdate, kPrivDelete})
    if (authorize(idx, bit).ok()) return {};
  last_error_ = first;
  return denied_by_last_error();
}

uint8_t Mariadb_store::privileges_for(enum_sql_command command, const Modify_request *mod, const Kv_request *kv,
                                      bool upsert) {
  if (kv) {
    switch (kv->op) {
      case Kv_op::set: return kPrivInsert | kPrivUpdate | kPrivWhere;
      case Kv_op::add: return kPrivInsert | kPrivWhere;
      case Kv_op::remove: return kPrivDelete | kPrivWhere;
      default: return kPrivUpdate | kPrivWhere | kPrivRead;
    }
  }
  if (mod) {
    uint8_t w = kPrivWhere | (mod->op == Modify_op::remove ? kPrivDelete : kPrivUpdate);
    if (mod->returns_rows || mod->op == Modify_op::increment || mod->op == Modify_op::decrement) w |= kPrivRead;
    return w;
  }
  if (command == SQLCOM_INSERT) return upsert ? kPrivInsert | kPrivUpdate : kPrivInsert;
  return kPrivRead | kPrivWhere;
}

}  // namespace tablesocket
