#include "server/convert.h"

#include <algorithm>
#include <variant>

#include "absl/time/time.h"

namespace psync::server {

core::RankPlan RankPlanFromProto(const v1::JoinRequest& request) {
  core::RankPlan plan;
  plan.job_id = request.job_id();
  plan.world_size = request.world_size();
  plan.rank = request.rank();
  plan.num_chunks = request.num_chunks();
  plan.first_step = request.first_step();
  plan.incarnation = request.incarnation();
  for (const v1::ChunkPlan& c : request.chunks()) {
    core::ChunkPart part;
    part.chunk = c.chunk();
    part.optimizers.assign(c.optimizers().begin(), c.optimizers().end());
    for (const v1::SyncGroup& g : c.groups()) {
      part.groups.push_back({g.name(), {g.ranks().begin(), g.ranks().end()}});
    }
    plan.chunks.push_back(std::move(part));
  }
  return plan;
}

std::vector<core::StagedItem> StagedFromProto(const v1::StagedBatch& batch) {
  std::vector<core::StagedItem> items;
  items.reserve(batch.items_size());
  for (const v1::Staged& s : batch.items()) {
    core::StagedItem item;
    item.step = s.step();
    item.chunk = s.chunk();
    item.optimizer = s.optimizer();
    if (s.has_shard_checksum()) item.checksum = s.shard_checksum();
    items.push_back(std::move(item));
  }
  return items;
}

std::vector<core::SyncDoneItem> SyncDoneFromProto(const v1::SyncDoneBatch& batch) {
  std::vector<core::SyncDoneItem> items;
  items.reserve(batch.items_size());
  for (const v1::SyncDone& s : batch.items()) {
    core::SyncDoneItem item;
    item.step = s.step();
    item.chunk = s.chunk();
    for (const v1::GroupChecksum& g : s.checksums()) item.checksums.push_back({g.group(), g.checksum()});
    item.executions = std::max<uint32_t>(1, s.executions());
    items.push_back(std::move(item));
  }
  return items;
}

namespace {

struct NoticeWriter {
  v1::SessionDown* out;
  void operator()(const core::SyncDirective& d) const {
    v1::SyncDirective* p = out->mutable_directive();
    p->set_generation(d.generation);
    p->set_step(d.step);
    p->set_chunk(d.chunk);
    p->set_sequence(d.sequence);
    p->set_last_rank(d.last.rank);
    p->set_last_optimizer(d.last.optimizer);
    p->set_wait_micros(absl::ToInt64Microseconds(d.wait));
  }
  void operator()(const core::StepSkipped& s) const {
    v1::StepSkipped* p = out->mutable_step_skipped();
    p->set_generation(s.generation);
    p->set_step(s.step);
  }
  void operator()(const core::AbortNotice& a) const {
    v1::Abort* p = out->mutable_abort();
    p->set_generation(a.generation);
    p->set_step(a.step);
    p->set_reason(a.reason);
  }
};

void ContributorToProto(const core::Contributor& c, v1::Contributor* out) {
  out->set_rank(c.rank);
  out->set_optimizer(c.optimizer);
}

}  // namespace

v1::SessionDown NoticeToProto(const core::Notice& notice) {
  v1::SessionDown down;
  std::visit(NoticeWriter{&down}, notice);
  return down;
}

void JobStatusToProto(const JobStatusView& view, v1::JobStatus* out) {
  const core::JobSnapshot& s = view.snapshot;
  out->set_job_id(s.job_id);
  out->set_generation(s.generation);
  out->set_state(core::JobStateName(s.state));
  out->set_world_size(s.world_size);
  out->set_num_chunks(s.num_chunks);
  out->set_ranks_joined(s.ranks_joined);
  out->set_sessions_connected(view.sessions_connected);
  out->set_min_rank_step(s.min_rank_step);
  out->set_abort_reason(s.abort_reason);
  for (const core::ChunkSnapshot& c : s.chunks) {
    v1::ChunkStatus* p = out->add_chunks();
    p->set_chunk(c.chunk);
    p->set_step(c.step);
    p->set_state(c.state);
    for (const auto& who : c.staged) ContributorToProto(who, p->add_staged());
    for (const auto& who : c.missing) ContributorToProto(who, p->add_missing());
    p->set_waiting_micros(absl::ToInt64Microseconds(c.waiting));
    for (core::RankId r : c.sync_pending) p->add_sync_pending_ranks(r);
  }
  v1::JobCounters* k = out->mutable_counters();
  k->set_checkins(view.counters.checkins);
  k->set_duplicate_checkins(view.counters.duplicate_checkins);
  k->set_releases(view.counters.releases);
  k->set_syncs_done(view.counters.syncs_done);
  k->set_skipped_steps(view.counters.skipped_steps);
  k->set_violations(view.counters.violations);
  k->set_rejected(view.counters.rejected);
}

void JobSummaryToProto(const JobStatusView& view, v1::JobSummary* out) {
  out->set_job_id(view.snapshot.job_id);
  out->set_generation(view.snapshot.generation);
  out->set_state(core::JobStateName(view.snapshot.state));
  out->set_world_size(view.snapshot.world_size);
  out->set_ranks_joined(view.snapshot.ranks_joined);
  out->set_min_rank_step(view.snapshot.min_rank_step);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace psync::server
