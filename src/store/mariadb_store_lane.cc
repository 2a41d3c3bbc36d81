/* The lock queue: a write that keeps meeting a row lock is run on a session of its own that waits
   in InnoDB's lock queue, as an SQL statement would.

   A worker only ever *tries* row locks (innodb_lock_wait_timeout=0), so a parked request is retried
   and never queues: on a row that SQL transactions hand to each other back to back (one commits
   while the next already waits, and InnoDB grants the lock to that waiter at once) every retry
   fails, and the request timed out after tablesocket_lock_wait_timeout while SQL went on (three
   SQL sessions updating one row in turn: 0 of 3 requests done in 150 s). So once a requester's
   write has met a row lock for tablesocket_lock_queue_after, the store copies the request and
   runs it on a thread with a store of its own (commit overlap off) whose batch THD waits for row
   locks, at most a second per attempt: between attempts its tables are closed, so DDL waits for
   it about a second at most. The job commits on its own; the requester stays parked and its
   retries are answered lock_queued (no InnoDB call) until the outcome is there, which the same
   call then returns. At most tablesocket_lock_queue_sessions jobs per worker; the others keep
   being retried by the worker. */
#include "store/mariadb_store.h"
#include "common/clock.h"

#include <unistd.h>

#include <cstring>
#include <ctime>

namespace tablesocket {
namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void *p, size_t n) {
    const unsigned char *c = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  }
  template <typename T>
  void pod(const T &v) { bytes(&v, sizeof v); }
  void datum(const Datum &d) {
    pod(uint8_t(d.is_null()));
    pod(d.len);
    if (!d.is_null()) bytes(d.ptr, d.len);
  }
  void datums(const Datum *d, uint32_t n) {
    pod(n);
    for (uint32_t i = 0; i < n; ++i) datum(d[i]);
  }
};

std::string join_names(const std::vector<std::string> &names) {
  std::string out;
  for (const auto &n : names) {
    if (!out.empty()) out.push_back(',');
    out += n;
  }
  return out;
}

}  // namespace

Store_status Mariadb_store::insert(Open_index &idx, const Datum *values, uint32_t n, bool upsert,
                                   Insert_result *result) {
  Lane_call call{Lane_kind::insert, &idx};
  call.values = values;
  call.nvalues = n;
  call.upsert = upsert;
  call.insert_result = result;
  Store_status st;
  write_committed_ = false;
  if (lane_answer(call, &st)) return st;
  return after_attempt(call, insert_here(idx, values, n, upsert, result));
}

Store_status Mariadb_store::modify(Open_index &idx, const Find_request &req, const Modify_request &mod,
                                   Row_sink &sink, uint64_t *modified) {
  Lane_call call{Lane_kind::modify, &idx};
  call.req = &req;
  call.mod = &mod;
  call.modified = modified;
  Store_status st;
  write_committed_ = false;
  if (lane_answer(call, &st)) return st;
  return after_attempt(call, modify_here(idx, req, mod, sink, modified));
}

Store_status Mariadb_store::kv_write(Open_index &idx, const Kv_layout &layout, const Kv_request &req,
                                     Kv_result *result) {
  Lane_call call{Lane_kind::kv, &idx};
  call.layout = &layout;
  call.kv = &req;
  call.kv_result = result;
  Store_status st;
  write_committed_ = false;
  if (lane_answer(call, &st)) return st;
  return after_attempt(call, kv_write_here(idx, layout, req, result));
}

uint64_t Mariadb_store::fingerprint(const Lane_call &call, uint32_t slot) {
  /* What identifies the request a parked requester asks again (not the time or a new CAS, which
     its session computes afresh on every try). */
  Fnv f;
  f.pod(uint8_t(call.kind));
  f.pod(slot);
  switch (call.kind) {
    case Lane_kind::insert:
      f.pod(uint8_t(call.upsert));
      f.datums(call.values, call.nvalues);
      break;
    case Lane_kind::modify: {
      const Find_request &r = *call.req;
      f.pod(uint8_t(r.op));
      f.datums(r.keys, r.nkeys);
      f.pod(r.limit);
      f.pod(r.offset);
      f.pod(uint8_t(r.has_in));
      f.pod(r.in_column);
      f.datums(r.in_values, r.nin_values);
      f.pod(r.nfilters);
      for (uint32_t i = 0; i < r.nfilters; ++i) {
        f.pod(uint8_t(r.filters[i].type));
        f.pod(uint8_t(r.filters[i].op));
        f.pod(r.filters[i].column);
        f.datum(r.filters[i].value);
      }
      f.pod(uint8_t(call.mod->op));
      f.pod(uint8_t(call.mod->returns_rows));
      f.datums(call.mod->values, call.mod->nvalues);
      break;
    }
    case Lane_kind::kv: {
      const Kv_request &k = *call.kv;
      f.pod(uint8_t(k.op));
      f.datum(k.key);
      f.datum(k.value);
      f.pod(k.flags);
      f.pod(uint8_t(k.set_flags));
      f.pod(uint8_t(k.set_expiry));
      f.pod(k.cas);
      f.pod(k.expect_cas);
      f.pod(k.delta);
      break;
    }
  }
  return f.h;
}

bool Mariadb_store::lane_answer(const Lane_call &call, Store_status *st) {
  if (lane_jobs_.empty() || !requester_) return false;
  auto it = std::find_if(lane_jobs_.begin(), lane_jobs_.end(),
                         [this](const std::unique_ptr<Lane_job> &j) { return j->requester == requester_; });
  if (it == lane_jobs_.end()) return false;
  Lane_job &job = **it;
  const bool same = job.fp == fingerprint(call, call.idx->slot_);
  if (!job.done.load(std::memory_order_acquire)) {
    if (!same) {
      /* Not the request queued: its IN list, taken from another index (^), found other rows this
         time, or the requester moved on. The queued copy is stopped (a commit under way
         finishes), so that it does not go on writing for a request the worker now runs itself. */
      lane_stop(job);
    } else if (monotonic_ms() < job.deadline_ms) {
      *st = Store_status::of(Store_errc::lock_queued);
      return true;
    } else {
      /* Its tablesocket_lock_wait_timeout is over, while the job waits out a row lock attempt of
         a whole second (InnoDB counts in seconds): stopped now (the wait ends at once; a commit
         under way finishes), and what it did is what the client is told. */
      job.timed_out = true;
      lane_stop(job);
    }
  }
  if (job.thread.joinable()) job.thread.join();
  add_counters(counters_, job.counters);
  if (!same) {  // its requester moved on without it (a best-effort write that does not wait)
    lane_jobs_.erase(it);
    return false;
  }
  switch (call.kind) {
    case Lane_kind::insert: *call.insert_result = job.insert_result; break;
    case Lane_kind::modify: *call.modified = job.modified; break;
    case Lane_kind::kv: *call.kv_result = job.kv_result; break;
  }
  lane_message_ = std::move(job.message);
  /* Stopped at its deadline without writing (its lock wait or statement interrupted): a timeout,
     not a shutdown nor an engine error. */
  const bool interrupted = job.errc == Store_errc::server_shutdown || job.errc == Store_errc::row_locked ||
                           (job.errc == Store_errc::handler_error && job.handler_error == HA_ERR_ABORTED_BY_USER);
  if (job.timed_out && interrupted) {
    job.errc = Store_errc::lock_wait_timeout;
    job.handler_error = 0;
    lane_message_.clear();
  }
  *st = Store_status::of(job.errc, job.handler_error);
  write_committed_ = st->ok();  // the job committed it (or, failing, rolled it back)
  st->message = lane_message_;
  lane_jobs_.erase(it);
  end_row_wait();
  return true;
}

Store_status Mariadb_store::after_attempt(const Lane_call &call, Store_status st) {
  if (st.errc != Store_errc::row_locked) {
    end_row_wait();
    return st;
  }
  if (!requester_ || !cfg_.lock_queue_sessions) return st;
  /* A modify that returns the rows it changed sends them through the caller's sink, which may
     refuse them (too large) after the job committed the change: such requests keep being retried
     here. */
  if (call.kind == Lane_kind::modify && call.mod->returns_rows) return st;
  const uint64_t now = monotonic_ms();
  const uint64_t fp = fingerprint(call, call.idx->slot_);
  auto ins = row_waits_.try_emplace(requester_, Row_wait{fp, now});
  Row_wait &w = ins.first->second;
  if (!ins.second && w.fp != fp) w = Row_wait{fp, now};
  if (now - w.since_ms < cfg_.lock_queue_after_ms) return st;
  size_t running = 0;
  for (const auto &j : lane_jobs_) {
    if (j->requester == requester_) return st;
    running += !j->done.load(std::memory_order_acquire);
  }
  if (running >= cfg_.lock_queue_sessions) return st;  // the worker goes on trying it
  if (!lane_submit(call, fp, w.since_ms)) return st;
  counters_.add(counters_.lock_queued);
  return Store_status::of(Store_errc::lock_queued);
}

bool Mariadb_store::lane_submit(const Lane_call &call, uint64_t fp, uint64_t since_ms) {
  const Open_index &idx = *call.idx;
  if (idx.slot_ >= slots_.size()) return false;
  const Table_slot &s = slots_[idx.slot_];
  auto job = std::make_unique<Lane_job>();
  Lane_job &j = *job;
  j.requester = requester_;
  j.fp = fp;
  j.kind = uint8_t(call.kind);
  j.db = s.db;
  j.table = s.name;
  j.index = idx.index_name_;
  j.columns = join_names(idx.column_names_);
  j.filter_columns = join_names(idx.filter_names_);
  j.unique_on_first_column = idx.unique_on_first_column_;
  j.principal = idx.principal_;
  j.deadline_ms = since_ms + cfg_.lock_wait_timeout_ms;
  j.notify_fd = notify_fd_;
  switch (call.kind) {
    case Lane_kind::insert:
      for (uint32_t i = 0; i < call.nvalues; ++i) j.values.push_back(j.own(call.values[i]));
      j.upsert = call.upsert;
      break;
    case Lane_kind::modify: {
      const Find_request &r = *call.req;
      j.req = r;
      for (uint32_t i = 0; i < r.nkeys; ++i) j.keys.push_back(j.own(r.keys[i]));
      for (uint32_t i = 0; i < r.nin_values; ++i) j.in_values.push_back(j.own(r.in_values[i]));
      for (uint32_t i = 0; i < r.nfilters; ++i) {
        Filter f = r.filters[i];
        f.value = j.own(f.value);
        j.filters.push_back(f);
      }
      j.req.keys = j.keys.data();
      j.req.in_values = j.in_values.data();
      j.req.filters = j.filters.data();
      j.mod = *call.mod;
      for (uint32_t i = 0; i < call.mod->nvalues; ++i) j.values.push_back(j.own(call.mod->values[i]));
      j.mod.values = j.values.data();
      break;
    }
    case Lane_kind::kv:
      j.layout = *call.layout;
      j.kv = *call.kv;
      j.kv.key = j.own(call.kv->key);
      j.kv.value = j.own(call.kv->value);
      break;
  }
  j.errc = Store_errc::lock_wait_timeout;
  try {
    j.thread = std::thread([this, &j] { lane_run(j); });
  } catch (const std::exception &e) {
    sql_print_warning("tablesocket: cannot start a lock-queue thread: %s", e.what());
    return false;
  }
  lane_jobs_.push_back(std::move(job));
  return true;
}

void Mariadb_store::end_row_wait() {
  /* The requester's request was answered: an identical request after it waits from its own start
     (its row wait kept the first one's, and timed out at once or early). */
  if (!row_waits_.empty() && requester_) row_waits_.erase(requester_);
}

void Mariadb_store::reap_lanes() {
  /* A job whose requester has not asked again yet keeps its outcome; its thread is joined now
     (its stack freed). One the requester will never ask for (its request took another path once
     the job's write was in: a memcached mg N that now finds the item) goes with its next write or
     its connection. */
  for (auto &job : lane_jobs_)
    if (job->done.load(std::memory_order_acquire) && job->thread.joinable()) job->thread.join();
}

void Mariadb_store::lane_stop(Lane_job &job) {
  {
    std::lock_guard<std::mutex> g(job.m);
    job.cancel = true;
    if (job.thd) job.thd->awake(KILL_QUERY);  // ends its row lock wait (or its commit's lock wait)
  }
  if (job.thread.joinable()) job.thread.join();
}

void Mariadb_store::forget_requester(const void *who) {
  row_waits_.erase(who);
  for (auto it = lane_jobs_.begin(); it != lane_jobs_.end();) {
    Lane_job &job = **it;
    if (job.requester != who) {
      ++it;
      continue;
    }
    /* Nobody is left to answer; a job already committing finishes first (its write stays, as an
       SQL client's COMMIT does when the client hangs up). */
    lane_stop(job);
    add_counters(counters_, job.counters);
    it = lane_jobs_.erase(it);
  }
}

void Mariadb_store::lane_run(Lane_job &job) const {
  static const char kName[] = "tablesocket lock queue";
  Store_errc errc = Store_errc::lock_wait_timeout;
  int handler_error = 0;
  std::string message;
  while (true) {
    {
      std::lock_guard<std::mutex> g(job.m);
      if (job.cancel) {
        errc = Store_errc::server_shutdown;
        break;
      }
    }
    const uint64_t now = monotonic_ms();
    if (now >= job.deadline_ms) {
      errc = Store_errc::lock_wait_timeout;
      break;
    }
    /* One attempt: a store of its own (its tables, its THDs, its metadata locks), which waits for
       a row lock up to a second, then commits here; everything released after it. */
    Mariadb_store lane(job.counters, cfg_, false);
    if (!lane.attach(kName, charset_.c_str()) || !set_row_lock_wait(lane.thd_, 1)) {
      errc = Store_errc::server_shutdown;
      message = "cannot start a lock-queue session";
      break;
    }
    {
      std::lock_guard<std::mutex> g(job.m);
      job.thd = lane.thd_;
      if (job.cancel) job.thd->awake(KILL_QUERY);
    }
    Store_status st;
    {
      Open_index idx;
      Index_spec spec;
      spec.db = job.db;
      spec.table = job.table;
      spec.index = job.index;
      spec.columns = job.columns;
      spec.filter_columns = job.filter_columns;
      spec.for_write = true;
      spec.unique_on_first_column = job.unique_on_first_column;
      spec.principal = job.principal;
      st = lane.open_index(spec, idx);
      if (st.ok()) {
        switch (Lane_kind(job.kind)) {
          case Lane_kind::insert:
            st = lane.insert_here(idx, job.values.data(), uint32_t(job.values.size()), job.upsert, &job.insert_result);
            break;
          case Lane_kind::modify: {
            Discard_rows none;  // modify() without returns_rows sends no rows
            job.modified = 0;
            st = lane.modify_here(idx, job.req, job.mod, none, &job.modified);
            break;
          }
          case Lane_kind::kv:
            if (job.kv.now) job.kv.now = int64_t(time(nullptr));  // expiry as of this attempt, not the first
            st = lane.kv_write_here(idx, job.layout, job.kv, &job.kv_result);
            break;
        }
      }
      errc = st.errc;
      handler_error = st.handler_error;
      message.assign(st.message.data(), st.message.size());
    }
    lane.end_batch(false);  // commits (overlap off: here, durably) or ends what a failed attempt left
    if (st.ok() && lane.batch_lost_writes()) {
      errc = Store_errc::commit_failed;
      handler_error = 0;
      message = "the commit failed (see the server's error log)";
    }
    const bool killed = lane.killed();
    {
      std::lock_guard<std::mutex> g(job.m);
      job.thd = nullptr;
    }
    if (killed && !st.ok()) {
      errc = Store_errc::server_shutdown;
      break;
    }
    if (errc != Store_errc::row_locked) break;  // done, or failed for another reason than the lock
    /* The lock stayed held for the whole attempt (or InnoDB chose this one as a deadlock's victim):
       again, with the tables closed in between. */
  }
  /* A metadata lock (DDL waiting): the requester parks again, as any request does for DDL. */
  job.errc = errc;
  job.handler_error = handler_error;
  job.message = std::move(message);
  const int fd = job.notify_fd;
  job.done.store(true, std::memory_order_release);
  lane_finished_.store(true, std::memory_order_release);
  if (fd >= 0) {
    uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }
}

}  // namespace tablesocket
