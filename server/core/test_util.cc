#include "server/core/test_util.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::core::testing {
namespace {

std::string ContributorsText(const std::vector<Contributor>& contributors) {
  return absl::StrCat("[",
                      absl::StrJoin(contributors, ",",
                                    [](std::string* out, const Contributor& c) {
                                      absl::StrAppend(out, c.rank, "/", c.optimizer);
                                    }),
                      "]");
}

}  // namespace

GroupDecl Group(std::string name, std::vector<RankId> ranks) {
  return GroupDecl{std::move(name), std::move(ranks)};
}

ChunkPart Part(ChunkId chunk, std::vector<std::string> optimizers, std::vector<GroupDecl> groups) {
  return ChunkPart{chunk, std::move(optimizers), std::move(groups)};
}

RankPlan Plan(RankId rank, uint32_t world_size, uint32_t num_chunks, std::vector<ChunkPart> parts,
              std::string incarnation, Step first_step, std::string job_id) {
  RankPlan plan;
  plan.job_id = std::move(job_id);
  plan.world_size = world_size;
  plan.rank = rank;
  plan.num_chunks = num_chunks;
  plan.first_step = first_step;
  plan.incarnation = std::move(incarnation);
  plan.chunks = std::move(parts);
  return plan;
}

StagedItem Item(Step step, ChunkId chunk, std::string optimizer, std::optional<uint64_t> checksum) {
  return StagedItem{step, chunk, std::move(optimizer), checksum};
}

SyncDoneItem Done(Step step, ChunkId chunk, std::vector<GroupChecksum> checksums) {
  return SyncDoneItem{step, chunk, GroupChecksums(checksums.begin(), checksums.end())};
}

std::string NoticeText(const Notice& notice) {
  if (const auto* d = std::get_if<SyncDirective>(&notice)) {
    return absl::StrCat("directive g", d->generation, " s", d->step, " c", d->chunk, " seq",
                        d->sequence);
  }
  if (const auto* s = std::get_if<StepSkipped>(&notice)) {
    return absl::StrCat("skipped g", s->generation, " s", s->step);
  }
  const auto& a = std::get<AbortNotice>(notice);
  return absl::StrCat("abort g", a.generation, " s", a.step);
}

std::string DeliveryText(const Delivery& delivery) {
  if (delivery.members_of.has_value()) {
    return absl::StrCat("members of c", *delivery.members_of, " ", NoticeText(*delivery.notice));
  }
  return absl::StrCat("r", delivery.rank, " ", NoticeText(*delivery.notice));
}

std::vector<std::string> DeliveryTexts(const Decisions& decisions) {
  std::vector<std::string> out;
  for (const Delivery& d : decisions.deliveries) out.push_back(DeliveryText(d));
  return out;
}

std::string EventText(const Event& event) {
  std::string out = absl::StrCat(EventKindName(event.kind), " g", event.generation);
  if (event.step) absl::StrAppend(&out, " s", *event.step);
  if (event.chunk) absl::StrAppend(&out, " c", *event.chunk);
  if (event.rank) absl::StrAppend(&out, " r", *event.rank);
  if (!event.optimizer.empty()) absl::StrAppend(&out, " ", event.optimizer);
  if (event.sequence != 0) absl::StrAppend(&out, " seq", event.sequence);
  return out;
}

std::vector<std::string> EventTexts(const Decisions& decisions) {
  std::vector<std::string> out;
  for (const Event& e : decisions.events) out.push_back(EventText(e));
  return out;
}

std::vector<Event> EventsOf(const Decisions& decisions, EventKind kind) {
  std::vector<Event> out;
  for (const Event& e : decisions.events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

std::string StateText(const JobTracker& tracker, absl::Time now) {
  const JobSnapshot snap = tracker.Snapshot(now);
  std::string out = absl::StrCat("job ", snap.job_id, " generation ", snap.generation, " ",
                                 JobStateName(snap.state), " world ", snap.world_size, " chunks ",
                                 snap.num_chunks, " joined ", snap.ranks_joined, " min_step ",
                                 snap.min_rank_step, " abort '", snap.abort_reason, "' ranks [",
                                 absl::StrJoin(tracker.JoinedRanks(), ","), "]\n");
  for (const ChunkSnapshot& c : snap.chunks) {
    absl::StrAppend(&out, "  chunk ", c.chunk, " step ", c.step, " ", c.state, " staged ",
                    ContributorsText(c.staged), " missing ", ContributorsText(c.missing),
                    " waiting ", absl::FormatDuration(c.waiting), " sync_pending [",
                    absl::StrJoin(c.sync_pending, ","), "]\n");
  }
  for (RankId r = 0; r < snap.world_size; ++r) {
    std::vector<std::string> pending;
    for (const Notice& n : tracker.NoticesToHold(r)) pending.push_back(NoticeText(n));
    absl::StrAppend(&out, "  rank ", r, " step ", tracker.rank_step(r), " pending [",
                    absl::StrJoin(pending, ", "), "]\n");
  }
  return out;
}

}  // namespace psync::core::testing
