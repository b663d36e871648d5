// MergedMirror: contract in merged_mirror.h.
#include "server/core/merged_mirror.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/test_util.h"

namespace psync::core::testing {
namespace {

bool Mergeable(const Event& e) {
  return e.kind == EventKind::kCheckin || e.kind == EventKind::kSyncDone;
}

// An event as compared: what it says, not when.
using Fact = std::tuple<EventKind, int64_t, int64_t, int64_t, std::string, uint64_t>;
Fact FactOf(const Event& e, std::optional<RankId> rank) {
  return {e.kind,
          e.step ? static_cast<int64_t>(*e.step) : -1,
          e.chunk ? static_cast<int64_t>(*e.chunk) : -1,
          rank ? static_cast<int64_t>(*rank) : -1,
          e.optimizer,
          e.sequence};
}

// The events as runs: each other event, preceded by the check-ins and SyncDones since the last
// one (one per rank, as a multiset); the last run has no event after it.
struct Run {
  std::map<Fact, int> ranks_inputs;
  std::optional<Fact> then;
};
std::vector<Run> Runs(const std::vector<Event>& events) {
  std::vector<Run> runs(1);
  for (const Event& e : events) {
    if (Mergeable(e)) {
      ForEachRank(e, [&](RankId r) { ++runs.back().ranks_inputs[FactOf(e, r)]; });
      continue;
    }
    runs.back().then = FactOf(e, e.rank);
    runs.emplace_back();
  }
  return runs;
}

std::string FactText(const Fact& f) {
  return absl::StrCat(EventKindName(std::get<0>(f)), " step ", std::get<1>(f), " chunk ",
                      std::get<2>(f), " rank ", std::get<3>(f), " ", std::get<4>(f), " seq ",
                      std::get<5>(f));
}

}  // namespace

absl::Status MergedMirror::Batched(const Call& call, const absl::Status& status,
                                   const Decisions& out, absl::Time now) {
  if (batch_left_ == 0) {
    if (auto s = Flush(); !s.ok()) return s;
    batch_left_ = std::uniform_int_distribution<size_t>(1, 8)(rng_);
    batch_time_ = now;
  }
  --batch_left_;
  batch_.merge_rank_events = true;
  const absl::Status mirrored = call(tracker_, batch_time_, &batch_);
  if (mirrored != status) {
    return absl::InternalError(absl::StrCat("merged batch answered ", mirrored.ToString(),
                                            ", one at a time ", status.ToString()));
  }
  one_by_one_deliveries_.insert(one_by_one_deliveries_.end(), out.deliveries.begin(),
                                out.deliveries.end());
  one_by_one_events_.insert(one_by_one_events_.end(), out.events.begin(), out.events.end());
  return absl::OkStatus();
}

absl::Status MergedMirror::Alone(const Call& call, const absl::Status& status, const Decisions& out,
                                 absl::Time now) {
  if (auto s = Flush(); !s.ok()) return s;
  Decisions alone;
  const absl::Status mirrored = call(tracker_, now, &alone);
  if (mirrored != status || DeliveryTexts(alone) != DeliveryTexts(out) ||
      EventTexts(alone) != EventTexts(out)) {
    return absl::InternalError("the mirror's join decided otherwise");
  }
  return absl::OkStatus();
}

absl::Status MergedMirror::Flush() {
  Decisions one_by_one;
  one_by_one.deliveries = std::move(one_by_one_deliveries_);
  one_by_one.events = std::move(one_by_one_events_);
  absl::Status result = absl::OkStatus();
  if (DeliveryTexts(batch_) != DeliveryTexts(one_by_one)) {
    result = absl::InternalError("a merged batch delivered otherwise than its calls one at a time");
  }
  const std::vector<Run> merged = Runs(batch_.events);
  const std::vector<Run> single = Runs(one_by_one.events);
  if (result.ok() && merged.size() != single.size()) {
    result = absl::InternalError(absl::StrCat("a merged batch made ", merged.size() - 1,
                                              " other events, one at a time ", single.size() - 1));
  }
  for (size_t i = 0; result.ok() && i < merged.size(); ++i) {
    if (merged[i].then != single[i].then) {
      result = absl::InternalError(absl::StrCat(
          "other event ", i, ": merged ", merged[i].then ? FactText(*merged[i].then) : "none",
          ", one at a time ", single[i].then ? FactText(*single[i].then) : "none"));
    } else if (merged[i].ranks_inputs != single[i].ranks_inputs) {
      result = absl::InternalError(absl::StrCat("the check-ins and SyncDones before other event ",
                                                i, " differ once expanded"));
    }
  }
  for (const Event& e : batch_.events) merged_records_ += Mergeable(e) && !e.rank.has_value();
  batch_ = Decisions();
  one_by_one_deliveries_.clear();
  one_by_one_events_.clear();
  batch_left_ = 0;
  return result;
}

}  // namespace psync::core::testing
