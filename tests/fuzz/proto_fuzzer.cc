// Fuzz target: the input bytes are a sequence of wire messages, psync.v1.JoinRequest and
// psync.v1.SessionUp, parsed with ParseFromArray, converted with server/rpc/convert.h and validated
// as the coordinator does, then fed to the JobTracker of their job through TrackerHarness (the
// invariant checker on every output, rejected inputs leave the state unchanged).
//
// Layout: records of [tag][length, 2 bytes little-endian][message bytes], until the input ends.
// tag % 8: 0-1 JoinRequest; 2-5 SessionUp on session slot (tag / 8) % 4 (the first message of a
// slot must attach it to a (job, rank), as on a real Session stream); 6 time advance (the
// length's low byte, in 37 ms units); 7 abort of the first job (an owner's abort, e.g. a lost
// rank). At most two jobs are held; plans are limited to 64 ranks and 64 chunks so that each
// input runs fast (larger ones are refused by ValidateRankPlan, as they would be with those
// limits).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/core/job_tracker.h"
#include "server/core/plan.h"
#include "server/rpc/convert.h"
#include "tests/fuzz/tracker_harness.h"

namespace psync::fuzz {
namespace {

constexpr size_t kMaxJobs = 2;
constexpr size_t kSlots = 4;

core::TrackerOptions Options() {
  core::TrackerOptions options;
  options.limits.max_world_size = 64;
  options.limits.max_chunks = 64;
  options.history_steps = 4;
  return options;
}

class Driver {
 public:
  void Run(const uint8_t* data, size_t size) {
    size_t pos = 0;
    while (pos < size) {
      const uint8_t tag = data[pos++];
      size_t len = 0;
      if (pos < size) len = data[pos++];
      if (pos < size) len |= static_cast<size_t>(data[pos++]) << 8;
      const size_t avail = size - pos;
      if (len > avail) len = avail;
      const uint8_t* msg = data + pos;
      pos += len;
      switch (tag % 8) {
        case 0:
        case 1:
          Join(msg, len);
          break;
        case 2:
        case 3:
        case 4:
        case 5:
          Session(&slots_[(tag / 8) % kSlots], msg, len);
          break;
        case 6:
          for (auto& [id, job] : jobs_) job->Advance(absl::Milliseconds(37 * (len & 0xff)));
          break;
        case 7:
          if (!jobs_.empty()) jobs_.begin()->second->Abort("rank lost");
          break;
      }
    }
  }

 private:
  struct Slot {
    bool attached = false;
    std::string job_id;
    core::RankId rank = 0;
  };

  void Join(const uint8_t* msg, size_t len) {
    v1::JoinRequest request;
    if (!request.ParseFromArray(msg, static_cast<int>(len))) return;
    const core::RankPlan plan = server::RankPlanFromProto(request);
    if (!core::ValidateRankPlan(plan, options_.limits).ok()) return;
    auto it = jobs_.find(plan.job_id);
    if (it == jobs_.end()) {
      if (jobs_.size() >= kMaxJobs) return;
      it =
          jobs_.emplace(plan.job_id, std::make_unique<TrackerHarness>(plan.job_id, options_)).first;
    }
    absl::StatusOr<core::JoinResult> joined = it->second->Join(plan);
    // A job whose first join failed is not kept (as in the coordinator).
    if (!joined.ok() && it->second->tracker().generation() == 0) jobs_.erase(it);
  }

  void Session(Slot* slot, const uint8_t* msg, size_t len) {
    v1::SessionUp up;
    if (!up.ParseFromArray(msg, static_cast<int>(len))) return;
    if (up.has_attach()) {
      // A new stream in this slot: attach replaces whatever the slot held.
      slot->attached = false;
      const v1::Attach& a = up.attach();
      auto it = jobs_.find(a.job_id());
      if (a.job_id().empty() || a.session_id().empty() || it == jobs_.end()) return;
      if (it->second->Attach(a.rank(), a.generation(), a.session_id()).ok()) {
        *slot = Slot{true, a.job_id(), a.rank()};
      }
      return;
    }
    if (!slot->attached) return;  // refused: the first message must attach
    auto it = jobs_.find(slot->job_id);
    if (it == jobs_.end()) return;
    TrackerHarness& job = *it->second;
    switch (up.kind_case()) {
      case v1::SessionUp::kStaged:
        job.Stage(slot->rank, up.staged().generation(), server::StagedFromProto(up.staged()))
            .IgnoreError();
        break;
      case v1::SessionUp::kSkip:
        job.Skip(slot->rank, up.skip().generation(), up.skip().step(), up.skip().reason())
            .IgnoreError();
        break;
      case v1::SessionUp::kSyncDone:
        job.SyncDone(slot->rank, up.sync_done().generation(),
                     server::SyncDoneFromProto(up.sync_done()))
            .IgnoreError();
        break;
      default:
        break;
    }
  }

  const core::TrackerOptions options_ = Options();
  std::map<std::string, std::unique_ptr<TrackerHarness>> jobs_;
  Slot slots_[kSlots];
};

}  // namespace
}  // namespace psync::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psync::fuzz::Driver driver;
  driver.Run(data, size);
  return 0;
}
