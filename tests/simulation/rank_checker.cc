// RankChecker; contract: rank_checker.h.
#include "tests/simulation/rank_checker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psync::simulation {

RankChecker::RankChecker(World* world, std::vector<core::ExpectedChunk> chunks,
                         std::set<uint64_t> skipped, uint64_t first_step, uint64_t end_step)
    : world_(world),
      chunks_(std::move(chunks)),
      skipped_(std::move(skipped)),
      first_step_(first_step),
      end_step_(end_step) {}

void RankChecker::Violation(const std::string& what, bool safety) {
  world_->Trace(absl::StrCat("VIOLATION: ", what));
  if (first_.ok()) {
    first_is_safety_ = safety;
    first_ = absl::InternalError(
        absl::StrCat("at ", absl::FormatDuration(world_->now() - world_->start()), ": ", what));
  }
}

void RankChecker::Fail(const std::string& what) { Violation(what, /*safety=*/false); }

void RankChecker::OnStageSent(uint32_t rank, uint64_t step, uint32_t chunk,
                              const std::string& optimizer) {
  staged_.insert({step, chunk, rank, optimizer});
}

void RankChecker::OnDirectiveArrived(uint32_t rank, uint64_t incarnation,
                                     const v1::SyncDirective& d) {
  // A replica that lost the job and claimed it again holds a new state (a new epoch), which may
  // number its generations from 1 again when every rank joined it afresh.
  const auto key = std::make_tuple(incarnation, d.epoch(), d.generation(), d.step(), d.chunk());
  auto [it, first] = sequences_.emplace(key, d.sequence());
  if (!first && it->second != d.sequence()) {
    Violation(absl::StrCat("released twice: coordinator incarnation ", incarnation, " (epoch ",
                           d.epoch(), ") sent (generation ", d.generation(), ", step ", d.step(),
                           ", chunk ", d.chunk(), ") with sequence ", it->second, " and ",
                           d.sequence()));
  }
  if (!arrivals_.insert({rank, incarnation, d.generation(), d.step(), d.chunk()}).second) {
    ++repeated_arrivals_;
  }
}

void RankChecker::OnHandedOut(uint32_t rank, uint32_t run, uint64_t step, uint32_t chunk) {
  ++handed_out_;
  const std::string what =
      absl::StrCat("rank ", rank, " handed (step ", step, ", chunk ", chunk, ")");
  handed_any_run_.insert({rank, step, chunk});
  if (!handed_.insert({rank, run, step, chunk}).second) {
    Violation(absl::StrCat(what, " twice: a sync executed twice"));
    return;
  }
  if (chunk >= chunks_.size() || step < first_step_ || step >= end_step_) {
    Violation(absl::StrCat(what, ": outside the run's plan"));
    return;
  }
  if (skipped_.count(step) > 0) {
    Violation(absl::StrCat(what, ": the step is skipped by every rank"));
    return;
  }
  const core::ExpectedChunk& expected = chunks_[chunk];
  if (std::find(expected.members.begin(), expected.members.end(), rank) == expected.members.end()) {
    Violation(absl::StrCat(what, ": not a member of the chunk"));
    return;
  }
  for (const core::Contributor& c : expected.contributors) {
    if (staged_.count({step, chunk, c.rank, c.optimizer}) == 0) {
      Violation(absl::StrCat("early release: ", what, " before rank ", c.rank, "'s ", c.optimizer,
                             " optimizer staged it"));
      return;
    }
  }
}

void RankChecker::OnRefused(uint32_t rank, const std::string& what, const absl::Status& status) {
  Violation(absl::StrCat("rank ", rank, "'s ", what, " refused: ", status.ToString()),
            /*safety=*/false);
}

void RankChecker::OnFreshJoin(uint32_t rank, uint64_t next_step) {
  uint64_t& at = started_at_[rank];
  at = std::max(at, next_step);
}

absl::Status RankChecker::CheckComplete(uint32_t world_size) {
  if (!first_.ok()) return first_;
  for (uint64_t step = first_step_; step < end_step_; ++step) {
    if (skipped_.count(step) > 0) continue;
    for (uint32_t chunk = 0; chunk < chunks_.size(); ++chunk) {
      if (chunks_[chunk].contributors.empty()) continue;
      for (uint32_t rank : chunks_[chunk].members) {
        auto started = started_at_.find(rank);
        if (started != started_at_.end() && step < started->second) continue;
        if (rank < world_size && handed_any_run_.count({rank, step, chunk}) == 0) {
          Violation(
              absl::StrCat("rank ", rank, " was never handed (step ", step, ", chunk ", chunk, ")"),
              /*safety=*/false);
          return first_;
        }
      }
    }
  }
  return first_;
}

}  // namespace psync::simulation
