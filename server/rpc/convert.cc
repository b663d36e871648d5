#include "server/rpc/convert.h"

#include <algorithm>
#include <variant>

#include "absl/time/time.h"
#include "server/ha/owner_audit.h"

namespace psync::server {

core::RankPlan RankPlanFromProto(const v1::JoinRequest& request) {
  core::RankPlan plan;
  plan.job_id = request.job_id();
  plan.world_size = request.world_size();
  plan.rank = request.rank();
  plan.num_chunks = request.num_chunks();
  plan.first_step = request.first_step();
  plan.incarnation = request.incarnation();
  plan.token = request.token();
  plan.node = request.node();
  if (request.has_resume()) {
    core::ResumeState resume;
    resume.generation = request.resume().generation();
    resume.restarted_after = request.resume().restarted_after();
    resume.step = request.resume().step();
    for (const v1::Staged& staged : request.resume().staged()) {
      resume.staged.emplace_back(staged.chunk(), staged.optimizer());
    }
    resume.synced_chunks.assign(request.resume().synced_chunks().begin(),
                                request.resume().synced_chunks().end());
    resume.released_chunks.assign(request.resume().released_chunks().begin(),
                                  request.resume().released_chunks().end());
    resume.skipped_steps.assign(request.resume().skipped_steps().begin(),
                                request.resume().skipped_steps().end());
    for (const v1::ReleasedAhead& ahead : request.resume().released_ahead()) {
      resume.released_ahead.emplace_back(ahead.step(), ahead.chunk());
    }
    if (!request.resume().skip_reason().empty()) {
      resume.skip_reason = request.resume().skip_reason();
    }
    plan.resume = std::move(resume);
  }
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

v1::JoinResponse JoinResponseToProto(const core::JoinResult& joined) {
  v1::JoinResponse response;
  response.set_generation(joined.generation);
  response.set_session_id(joined.session_id);
  response.set_next_step(joined.next_step);
  response.set_resumed(joined.resumed);
  response.set_restarted_after(joined.restarted_after);
  return response;
}

std::vector<core::StagedItem> StagedFromProto(const v1::StagedBatch& batch) {
  std::vector<core::StagedItem> items;
  items.reserve(batch.items_size());
  for (const v1::Staged& s : batch.items()) {
    core::StagedItem item;
    item.step = s.step();
    item.chunk = s.chunk();
    // Cut like echoed text (a longer name is never declared; its refusal quotes it, and the
    // coordinator records the refusal).
    item.optimizer = wire::BoundEcho(s.optimizer());
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
    for (const v1::GroupChecksum& g : s.checksums())
      item.checksums.push_back({wire::BoundEcho(g.group()), g.checksum()});
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
    p->set_epoch(d.epoch);
    if (d.released_at != absl::InfinitePast()) {
      p->set_released_unix_micros(absl::ToUnixMicros(d.released_at));
    }
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
    p->set_reason(wire::BoundEcho(a.reason));
    p->set_rejoin(a.rejoin);
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

void JobStatusToProto(const JobStatusView& view, v1::JobStatus* out, size_t list_limit) {
  const core::JobSnapshot& s = view.snapshot;
  out->set_job_id(s.job_id);
  out->set_generation(s.generation);
  out->set_state(JobStateText(view));
  out->set_world_size(s.world_size);
  out->set_num_chunks(s.num_chunks);
  for (core::RankId r : view.lost_ranks) out->add_lost_ranks(r);
  out->set_ranks_joined(s.ranks_joined);
  out->set_sessions_connected(view.sessions_connected);
  out->set_min_rank_step(s.min_rank_step);
  out->set_abort_reason(wire::BoundEcho(s.abort_reason));
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    ChunkStatusToProto(s.chunks[i],
                       i < view.deadlines.size() ? view.deadlines[i] : absl::ZeroDuration(),
                       out->add_chunks(), list_limit);
  }
  for (const observe::StragglerScore& score : view.stragglers) {
    v1::StragglerScore* p = out->add_stragglers();
    p->set_rank(score.rank);
    p->set_score_seconds(score.score_seconds);
    p->set_last_seconds(score.last_seconds);
    p->set_samples(score.samples);
    p->set_times_last(score.times_last);
  }
  AuditTotalsToProto(view.audit, out->mutable_audit());
  out->set_end_reason(view.end.reason);
  if (view.end.kind != JobEndKind::kLive)
    out->set_ended_unix_micros(absl::ToUnixMicros(view.end.time));
  v1::JobCounters* k = out->mutable_counters();
  k->set_checkins(view.counters.checkins);
  k->set_duplicate_checkins(view.counters.duplicate_checkins);
  k->set_releases(view.counters.releases);
  k->set_syncs_done(view.counters.syncs_done);
  k->set_skipped_steps(view.counters.skipped_steps);
  k->set_violations(view.counters.violations);
  k->set_rejected(view.counters.rejected);
  k->set_stalls(view.stalls);
}

void ChunkStatusToProto(const core::ChunkSnapshot& c, absl::Duration deadline, v1::ChunkStatus* p,
                        size_t list_limit) {
  p->set_chunk(c.chunk);
  p->set_step(c.step);
  p->set_state(c.state);
  const size_t staged = std::min(c.staged.size(), list_limit);
  for (size_t i = 0; i < staged; ++i) ContributorToProto(c.staged[i], p->add_staged());
  const size_t missing = std::min(c.missing.size(), list_limit);
  for (size_t i = 0; i < missing; ++i) ContributorToProto(c.missing[i], p->add_missing());
  p->set_waiting_micros(absl::ToInt64Microseconds(c.waiting));
  const size_t pending = std::min(c.sync_pending.size(), list_limit);
  for (size_t i = 0; i < pending; ++i) p->add_sync_pending_ranks(c.sync_pending[i]);
  p->set_deadline_micros(absl::ToInt64Microseconds(deadline));
  const size_t after = std::min(c.staged_after.size(), list_limit);
  for (size_t i = 0; i < after; ++i) {
    p->add_staged_after_micros(absl::ToInt64Microseconds(c.staged_after[i]));
  }
  p->set_staged_count(c.staged_count);
  p->set_missing_count(c.missing_count);
  p->set_sync_pending_count(c.sync_pending_count);
}

void AuditToProto(const std::vector<observe::SyncAudit>& records,
                  const observe::AuditTotals& totals,
                  const std::vector<std::string>& earlier_owners, v1::GetAuditResponse* out) {
  for (const observe::SyncAudit& a : records) {
    v1::SyncAuditRecord* r = out->add_records();
    r->set_generation(a.generation);
    r->set_step(a.step);
    r->set_chunk(a.chunk);
    r->set_sequence(a.sequence);
    r->set_releases(a.releases);
    r->set_resumed(a.resumed);
    r->set_syncs_done(a.syncs_done);
    r->set_complete(a.complete);
    r->set_checksum_mismatch(a.checksum_mismatch);
    r->set_early_syncs(a.early_syncs);
    r->set_repeated_syncs(a.repeated_syncs);
    r->set_wait_micros(absl::ToInt64Microseconds(a.wait));
    r->set_sync_micros(absl::ToInt64Microseconds(a.sync_duration));
  }
  AuditTotalsToProto(totals, out->mutable_totals());
  AddEarlierOwners(earlier_owners, out);
}

void EventToProto(const core::Event& e, v1::Event* out) {
  out->set_index(e.index);
  out->set_kind(core::EventKindName(e.kind));
  out->set_time_unix_micros(absl::ToUnixMicros(e.time));
  out->set_job_id(e.job_id);
  out->set_generation(e.generation);
  if (e.step) out->set_step(*e.step);
  if (e.chunk) out->set_chunk(*e.chunk);
  if (e.rank) out->set_rank(*e.rank);
  out->set_optimizer(e.optimizer);
  out->set_sequence(e.sequence);
  out->set_duration_micros(absl::ToInt64Microseconds(e.duration));
  for (const auto& who : e.contributors) ContributorToProto(who, out->add_contributors());
  for (core::RankId r : e.ranks) out->add_ranks(r);
  out->set_detail(wire::BoundEcho(e.detail));
  out->set_missing_count(e.missing_count);
}

void JobSummaryToProto(const JobStatusView& view, v1::JobSummary* out) {
  out->set_job_id(view.snapshot.job_id);
  out->set_generation(view.snapshot.generation);
  out->set_state(JobStateText(view));
  out->set_world_size(view.snapshot.world_size);
  out->set_ranks_joined(view.snapshot.ranks_joined);
  out->set_min_rank_step(view.snapshot.min_rank_step);
  out->set_end_reason(view.end.reason);
  if (view.end.kind != JobEndKind::kLive)
    out->set_ended_unix_micros(absl::ToUnixMicros(view.end.time));
}

}  // namespace psync::server
