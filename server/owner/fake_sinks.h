// Fakes for tests of the Coordinator: sessions (SessionSink) and shared transports (NoticeBatcher)
// that write every call into one CallLog (or, the Null ones, do nothing), so a test asserts the
// exact order of calls across all of them; hooks let a sink call back into the coordinator from
// inside Send or Close. Plus a job builder: ranks that each contribute "dense" to every chunk and
// sync it in one group "dp".
//
// Thread-safe: the log has its own lock, and no lock is held while a hook runs. Test-only.
#ifndef PSYNC_SERVER_OWNER_FAKE_SINKS_H_
#define PSYNC_SERVER_OWNER_FAKE_SINKS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "server/core/test_util.h"
#include "server/core/types.h"
#include "server/owner/session_sink.h"

namespace psync::server::testing {

class CallLog {
 public:
  void Add(std::string entry) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(std::move(entry));
  }
  // Returns the entries so far and empties the log.
  std::vector<std::string> Take() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return std::exchange(entries_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> entries_ ABSL_GUARDED_BY(mu_);
};

// Logs "<name> <notice>" for each Send ("a directive g1 s0 c0 seq1") and "<name> close <status>"
// for each Close, then runs the hook, if any (set the hooks before the sink is shared).
class FakeSink final : public SessionSink {
 public:
  FakeSink(std::string name, CallLog* log, NoticeBatcher* batcher = nullptr)
      : name_(std::move(name)), log_(log), batcher_(batcher) {}

  void Send(const core::Notice& notice) override {
    log_->Add(absl::StrCat(name_, " ", core::testing::NoticeText(notice)));
    if (on_send) on_send(notice);
  }
  void Close(const absl::Status& status) override {
    log_->Add(absl::StrCat(name_, " close ", status.ToString()));
    if (on_close) on_close(status);
  }
  NoticeBatcher* batcher() override { return batcher_; }

  const std::string& name() const { return name_; }

  std::function<void(const core::Notice&)> on_send;
  std::function<void(const absl::Status&)> on_close;

 private:
  const std::string name_;
  CallLog* const log_;
  NoticeBatcher* const batcher_;
};

// Logs "<name> cork", "<name> uncork" and, for SendToRanks, "<name> each <sink names>: <notice>",
// then hands the notice to each rank's sink, as a transport would. Its sinks are FakeSinks,
// registered with Add (before the batcher is shared). on_uncork, if set (before the batcher is
// shared), runs after each Uncork is logged.
class FakeBatcher final : public NoticeBatcher {
 public:
  FakeBatcher(std::string name, CallLog* log) : name_(std::move(name)), log_(log) {}

  // `sink` is rank `rank`'s (of any job), with this batcher as its batcher().
  void Add(core::RankId rank, FakeSink* sink) { sinks_[rank] = sink; }

  void Cork() override { log_->Add(absl::StrCat(name_, " cork")); }
  void Uncork() override {
    log_->Add(absl::StrCat(name_, " uncork"));
    if (on_uncork) on_uncork();
  }
  std::function<void()> on_uncork;

  void SendToRanks(const std::string& /*job_id*/, absl::Span<const core::RankId> ranks,
                   const core::Notice& notice) override {
    std::vector<std::string> names;
    for (core::RankId r : ranks) names.push_back(sinks_.at(r)->name());
    log_->Add(absl::StrCat(name_, " each ", absl::StrJoin(names, " "), ": ",
                           core::testing::NoticeText(notice)));
    for (core::RankId r : ranks) sinks_.at(r)->Send(notice);
  }

 private:
  const std::string name_;
  CallLog* const log_;
  std::map<core::RankId, FakeSink*> sinks_;
};

// A transport and a sink that do nothing, for tests of what is addressed where rather than of
// what is sent.
class NullTransport final : public NoticeBatcher {
 public:
  void Cork() override {}
  void Uncork() override {}
  void SendToRanks(const std::string& /*job_id*/, absl::Span<const core::RankId> /*ranks*/,
                   const core::Notice& /*notice*/) override {}
};

class NullSink final : public SessionSink {
 public:
  explicit NullSink(NoticeBatcher* transport = nullptr) : transport_(transport) {}
  void Send(const core::Notice& /*notice*/) override {}
  void Close(const absl::Status& /*status*/) override {}
  NoticeBatcher* batcher() override { return transport_; }

 private:
  NoticeBatcher* const transport_;
};

// Rank `rank`'s plan in a job of `world` ranks and `chunks` chunks where every rank contributes
// "dense" to every chunk and every chunk is synced by the group "dp" of all ranks.
inline core::RankPlan DensePlan(const std::string& job_id, core::RankId rank, uint32_t world,
                                uint32_t chunks) {
  std::vector<core::RankId> all;
  for (core::RankId r = 0; r < world; ++r) all.push_back(r);
  std::vector<core::ChunkPart> parts;
  for (core::ChunkId c = 0; c < chunks; ++c) {
    parts.push_back(core::testing::Part(c, {"dense"}, {core::testing::Group("dp", all)}));
  }
  return core::testing::Plan(rank, world, chunks, std::move(parts), "i0", 0, job_id);
}

// The SyncDone items of one rank for `chunks` of `step` in a DensePlan job (agreeing checksums).
inline std::vector<core::SyncDoneItem> DenseDone(core::Step step,
                                                 std::vector<core::ChunkId> chunks) {
  std::vector<core::SyncDoneItem> items;
  for (core::ChunkId c : chunks) {
    items.push_back(core::testing::Done(step, c, {{"dp", 1000 * step + c}}));
  }
  return items;
}

}  // namespace psync::server::testing

#endif  // PSYNC_SERVER_OWNER_FAKE_SINKS_H_
