/* One HandlerSocket connection's protocol state: its open indexes and the request it is parked on.
   Executes complete requests from the connection's input against the worker's Store and appends
   replies to its output. Knows nothing about sockets. */
#ifndef TABLESOCKET_SESSION_HS_SESSION_H
#define TABLESOCKET_SESSION_HS_SESSION_H

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/byte_buffer.h"
#include "common/config.h"
#include "common/stats.h"
#include "proto/hs/hs_protocol.h"
#include "session/auth.h"
#include "session/session.h"
#include "store/store.h"

namespace tablesocket {

/* Per-listener settings a session needs (the port's role and its shared secret, if any). */
struct Hs_port_policy {
  bool writable = false;
  std::string plain_secret;  // HandlerSocket `A 1 <secret>`; empty = no authentication required
};

class Hs_session final : public Session {
 public:
  using Outcome = Session_outcome;

  Hs_session(Store &store, const Config &cfg, const Hs_port_policy &policy, const Peer &peer,
             Counters &counters)
      : Session(peer), store_(store), cfg_(cfg), policy_(policy), counters_(counters),
        auth_(store, cfg, peer, counters), authorized_(policy.plain_secret.empty()) {}

  /* Executes up to max_requests complete requests from in (consuming them), writing to out. */
  Outcome run(Byte_buffer &in, Byte_buffer &out, unsigned max_requests) override;
  bool parked() const override { return parked_; }
  bool awaiting_login() const override { return !auth_.has_account() && login_required(cfg_); }
  void account(std::string *user, std::string *host) const override { auth_.account(user, host); }
  size_t retained_bytes() const override { return index_bytes_; }
  /* HandlerSocket connections use tablesocket_anonymous_account whenever it is set. */
  static bool login_required(const Config &cfg) { return Auth_state::login_required(cfg, true); }

 private:
  enum class Exec : uint8_t { done, park };
  /* The answer to a line the parser refused, in HandlerSocket's order of checks. */
  void reply_parse_error(const hs::Request &req, const hs::Parse_result &pr, Byte_buffer &out);
  Exec execute(const hs::Request &req, Byte_buffer &out);
  Exec exec_open(const hs::Open_index_request &r, Byte_buffer &out);
  Exec exec_on_index(const hs::Exec_request &r, Byte_buffer &out);
  Exec exec_auth(const hs::Auth_request &r, Byte_buffer &out);
  /* Replies `3\t1\t<message>` (escaped): authentication and privilege errors. */
  void reply_denied(Byte_buffer &out, std::string_view message);
  /* The one place store errors become HandlerSocket wire text. Returns park for table_busy. */
  Exec reply_error(const Store_status &st, Byte_buffer &out);
  Exec exec_write(Open_index &idx, const hs::Exec_request &r, Byte_buffer &out);
  static bool to_find_request(const hs::Exec_request &r, Find_request *fr);
  /* For `@ <icol> ^ <id2> ...`: runs index id2's lookup and points fr's IN list at the first
     column of its rows (kept in in_values_). Sets *answered when it answered the request itself:
     an error, or no groups found (no rows on idx, or a modify's count 0). */
  Exec resolve_in_source(const hs::Exec_request &r, const Open_index &idx, Find_request *fr, Byte_buffer &out,
                         bool *answered);
  void reply_client_error(Byte_buffer &out, uint32_t code, const char *msg);
  void lock_wait_ended() override { store_.end_row_wait(); }

  Store &store_;
  const Config &cfg_;
  const Hs_port_policy &policy_;
  Counters &counters_;
  Auth_state auth_;  // before indexes_: their Open_index objects point to its account
  bool authorized_;  // passed the port's shared secret (or needs none)
  std::unordered_map<uint32_t, Open_index> indexes_;
  size_t index_bytes_ = 0;  // memory_bytes() of indexes_ together
  hs::Parse_scratch scratch_;
  std::string in_bytes_;            // IN values fetched from another index, back to back
  std::vector<Datum> in_values_;
  hs::Request parked_req_;
  size_t parked_len_ = 0;
  bool parked_ = false;
};

}  // namespace tablesocket
#endif
