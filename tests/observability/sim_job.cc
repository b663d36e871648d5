#include "tests/observability/sim_job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psync::testing {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace

SimJob::SimJob(std::shared_ptr<grpc::Channel> channel, SimJobOptions options)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Coordinator::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<SimJob>> SimJob::Start(const std::string& target,
                                                      SimJobOptions options) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  std::unique_ptr<SimJob> job(new SimJob(channel, std::move(options)));
  const SimJobOptions& o = job->options_;
  std::vector<v1::JoinResponse> joined(o.world_size);
  for (uint32_t r = 0; r < o.world_size; ++r) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::JoinRequest request =
        MakeJoin(o.job_id, o.world_size, r, o.num_chunks, o.expert_chunks, o.experts);
    if (o.ranks_per_node > 0) request.set_node(absl::StrCat("node-", r / o.ranks_per_node));
    grpc::Status s = job->stub_->Join(&context, request, &joined[r]);
    if (!s.ok()) return FromGrpc(s, absl::StrCat("Join rank ", r));
  }
  job->generation_ = joined.back().generation();
  for (uint32_t r = 0; r < o.world_size; ++r) {
    auto session = std::make_unique<RawSession>(job->stub_.get());
    grpc::Status s = session->Attach(o.job_id, r, job->generation_, joined[r].session_id());
    if (!s.ok()) return FromGrpc(s, absl::StrCat("attach rank ", r));
    job->sessions_.push_back(std::move(session));
  }
  return job;
}

std::vector<std::string> SimJob::Optimizers(uint32_t chunk) const {
  const auto& e = options_.expert_chunks;
  if (std::find(e.begin(), e.end(), chunk) != e.end()) return {"dense", "expert"};
  return {"dense"};
}

absl::Status SimJob::Stage(uint32_t rank, uint64_t step, uint32_t chunk,
                           const std::string& optimizer) {
  return FromGrpc(
      sessions_[rank]->Stage(generation_, step, chunk, optimizer),
      absl::StrCat("stage rank ", rank, " step ", step, " chunk ", chunk, " ", optimizer));
}

absl::Status SimJob::StageStep(uint64_t step, const std::set<Holdback>& held, int straggler,
                               absl::Duration delay) {
  for (uint32_t c = 0; c < options_.num_chunks; ++c) {
    for (uint32_t r = 0; r < options_.world_size; ++r) {
      if (static_cast<int>(r) == straggler) continue;
      for (const std::string& opt : Optimizers(c)) {
        if (held.count({r, c, opt}) > 0) continue;
        if (auto s = Stage(r, step, c, opt); !s.ok()) return s;
      }
    }
    if (straggler < 0) continue;
    absl::SleepFor(delay);
    for (const std::string& opt : Optimizers(c)) {
      if (held.count({static_cast<uint32_t>(straggler), c, opt}) > 0) continue;
      if (auto s = Stage(straggler, step, c, opt); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status SimJob::SyncChunk(uint64_t step, uint32_t chunk, int skip_rank) {
  for (uint32_t r = 0; r < options_.world_size; ++r) {
    // Directives may already have been read while waiting for Acks; look there first.
    bool found = false;
    for (const v1::SessionDown& n : sessions_[r]->notices()) {
      if (n.has_directive() && n.directive().step() == step && n.directive().chunk() == chunk) {
        found = true;
      }
    }
    while (!found) {
      v1::SessionDown notice;
      if (!sessions_[r]->ReadNotice(&notice)) {
        return absl::UnavailableError(absl::StrCat("rank ", r, ": stream ended"));
      }
      found = notice.has_directive() && notice.directive().step() == step &&
              notice.directive().chunk() == chunk;
    }
    if (static_cast<int>(r) == skip_rank) continue;
    grpc::Status s = sessions_[r]->SyncDone(generation_, step, chunk);
    if (!s.ok()) {
      return FromGrpc(s, absl::StrCat("SyncDone rank ", r, " step ", step, " chunk ", chunk));
    }
  }
  return absl::OkStatus();
}

absl::Status SimJob::RunStep(uint64_t step, int straggler, absl::Duration delay) {
  if (auto s = StageStep(step, {}, straggler, delay); !s.ok()) return s;
  for (uint32_t c = 0; c < options_.num_chunks; ++c) {
    if (auto s = SyncChunk(step, c); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace psync::testing
