#include "supervisor/background.h"

#include <iterator>
#include <vector>

#include "supervisor/exec_request.h"
#include "worker_proto/messages.h"

namespace corral::supervisor {

using proto::ErrorCode;
using Clock = std::chrono::steady_clock;

struct BackgroundTable::Record {
  std::string id;
  uid_t owner = 0;
  std::shared_ptr<Scope> scope;  // while running
  std::uint64_t hook = 0;
  Execution exec;
  std::string out, err;  // written since the last poll
  bool paused = false;
  bool ended = false;
  Result result;
  Clock::time_point ended_at;
};

BackgroundTable::~BackgroundTable() {
  for (auto& [id, r] : records_) r->exec.terminate();
}

StatusOr<std::string> BackgroundTable::start(ExecSpec spec, const std::shared_ptr<Scope>& scope, uid_t owner,
                                             std::function<void(const Result&)> log_line) {
  purge();
  if (scope->background_count >= kMaxBackgroundPerScope)
    return Status::error("limit", EAGAIN,
                         "scope " + scope->id() + " already holds " + std::to_string(scope->background_count) +
                             " background commands (the limit is " + std::to_string(kMaxBackgroundPerScope) + ")");
  Owner& o = owners_[owner];
  if (o.records >= kMaxBackgroundRecordsPerUid)
    return Status::error("limit", EAGAIN,
                         "uid " + std::to_string(owner) + " already has " + std::to_string(o.records) +
                             " background commands running or ended and not yet polled (the limit is " +
                             std::to_string(kMaxBackgroundRecordsPerUid) + "); poll the ended ones first");
  ++o.records;
  auto rec = std::make_shared<Record>();
  rec->id = "bg" + std::to_string(next_id_++);
  rec->owner = owner;
  rec->scope = scope;
  spec.retain_output = false;
  std::weak_ptr<Record> weak = rec;
  auto sink = [this, weak](StreamId s, std::string_view data) {
    auto r = weak.lock();
    if (!r) return;
    (s == StreamId::err ? r->err : r->out).append(data);
    Owner& held = owners_[r->owner];
    held.bytes += data.size();
    if (!r->paused && (r->out.size() + r->err.size() >= kBackgroundBufferBytes || held.bytes >= kBackgroundBytesPerUid)) {
      r->paused = true;
      r->exec.pause_output();
    }
  };
  auto done = [weak, log_line = std::move(log_line)](Result result) {
    auto r = weak.lock();
    if (log_line) log_line(result);
    if (!r) return;
    r->ended = true;
    r->ended_at = Clock::now();
    r->result = std::move(result);
    r->scope->detach(r->hook);
    --r->scope->background_count;
    r->scope.reset();  // a closed scope's temp dir goes once its commands are reaped
  };
  ++scope->background_count;
  rec->hook = scope->attach([weak] {
    if (auto r = weak.lock()) r->exec.terminate();
  });
  rec->exec = Execution::start(io_, std::move(spec), sink, done);
  records_[rec->id] = rec;
  return rec->id;
}

proto::Frame BackgroundTable::poll(std::uint64_t request_id, const std::string& id, uid_t uid) {
  purge();
  auto it = records_.find(id);
  if (it == records_.end()) return proto::make_error(request_id, ErrorCode::not_found, "no background command '" + id + "'");
  auto r = it->second;
  if (uid != 0 && uid != r->owner)
    return proto::make_error(request_id, ErrorCode::permission_denied, "background command '" + id + "' belongs to uid " + std::to_string(r->owner));
  const char* state = "running";
  if (r->ended) {
    state = r->result.status == ExitStatus::exited      ? "exited"
            : r->result.status == ExitStatus::cancelled ? "stopped"
                                                        : "failed";
  }
  // Built before the output is cleared and the record dropped: PollInfo only views them.
  proto::Frame reply = proto::make_poll_reply(
      request_id, {r->id, state, r->out, r->err,
                   r->ended ? std::optional<proto::ExecResultInfo>(exec_result_info(r->result)) : std::nullopt});
  owners_[r->owner].bytes -= r->out.size() + r->err.size();
  r->out.clear();
  r->err.clear();
  if (r->ended) {
    erase(it);  // the end has been seen: the record's job is done
  } else if (r->paused) {
    // The polled one goes on even while the uid is over its budget: the sink pauses it again
    // after one read (so the budget is exceeded by at most a read per record), and a client
    // that polls only this command still sees it through.
    r->paused = false;
    r->exec.resume_output();
  }
  resume_within_budget(r->owner);
  return reply;
}

void BackgroundTable::resume_within_budget(uid_t uid) {
  auto owner = owners_.find(uid);
  if (owner == owners_.end()) return;  // no record of the uid's left
  for (auto& [id, rec] : records_) {
    if (owner->second.bytes >= kBackgroundBytesPerUid) return;
    if (rec->owner != uid || !rec->paused || rec->ended || rec->out.size() + rec->err.size() >= kBackgroundBufferBytes)
      continue;
    rec->paused = false;
    rec->exec.resume_output();
  }
}

void BackgroundTable::erase(std::map<std::string, std::shared_ptr<Record>>::iterator it) {
  const std::shared_ptr<Record>& r = it->second;
  auto o = owners_.find(r->owner);
  if (o != owners_.end()) {
    o->second.bytes -= r->out.size() + r->err.size();
    if (--o->second.records == 0) owners_.erase(o);
  }
  records_.erase(it);
}

proto::Frame BackgroundTable::stop(std::uint64_t request_id, const std::string& id, bool force, uid_t uid) {
  auto it = records_.find(id);
  if (it == records_.end()) return proto::make_error(request_id, ErrorCode::not_found, "no background command '" + id + "'");
  auto& r = it->second;
  if (uid != 0 && uid != r->owner)
    return proto::make_error(request_id, ErrorCode::permission_denied, "background command '" + id + "' belongs to uid " + std::to_string(r->owner));
  if (!r->ended) {
    if (force) r->exec.terminate();
    else r->exec.stop();
  }
  return proto::make_ack(request_id);
}

void BackgroundTable::abandon(const std::string& id) {
  auto it = records_.find(id);
  if (it != records_.end()) it->second->exec.terminate();
}

std::size_t BackgroundTable::running() const {
  std::size_t n = 0;
  for (const auto& [id, r] : records_) n += !r->ended;
  return n;
}

void BackgroundTable::purge() {
  const auto now = Clock::now();
  std::vector<uid_t> freed;
  for (auto it = records_.begin(); it != records_.end();) {
    auto next = std::next(it);
    if (it->second->ended && now - it->second->ended_at > kBackgroundRecordTtl) {
      freed.push_back(it->second->owner);
      erase(it);
    }
    it = next;
  }
  for (uid_t uid : freed) resume_within_budget(uid);
}

}  // namespace corral::supervisor
