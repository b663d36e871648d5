#include "server/core/invariant_checker.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::core {
namespace {

std::string KeyText(uint64_t generation, Step step, ChunkId chunk) {
  return absl::StrCat("generation ", generation, " step ", step, " chunk ", chunk);
}

std::string ContributorText(const Contributor& c) {
  return absl::StrCat("rank ", c.rank, " ", c.optimizer);
}

}  // namespace

InvariantChecker::InvariantChecker(std::vector<ExpectedChunk> chunks) : chunks_(std::move(chunks)) {
  for (size_t c = 0; c < chunks_.size(); ++c) {
    ExpectedChunk& chunk = chunks_[c];
    std::sort(chunk.contributors.begin(), chunk.contributors.end());
    std::sort(chunk.members.begin(), chunk.members.end());
    if (std::adjacent_find(chunk.contributors.begin(), chunk.contributors.end()) !=
            chunk.contributors.end() ||
        std::adjacent_find(chunk.members.begin(), chunk.members.end()) != chunk.members.end()) {
      init_status_ = absl::InvalidArgumentError(
          absl::StrCat("expected chunk ", c, " lists a contributor or a member twice"));
      break;
    }
  }
  first_violation_ = init_status_;
}

absl::Status InvariantChecker::Fail(std::string message) {
  if (first_violation_.ok()) first_violation_ = absl::FailedPreconditionError(std::move(message));
  return first_violation_;
}

void InvariantChecker::OnStaged(RankId rank, uint64_t generation,
                                absl::Span<const StagedItem> items) {
  for (const StagedItem& item : items) {
    staged_[Key{generation, item.step, item.chunk}].insert(Contributor{rank, item.optimizer});
  }
}

absl::Status InvariantChecker::CheckRelease(const Event& event) {
  if (!event.step.has_value() || !event.chunk.has_value()) {
    return Fail(
        absl::StrCat("release event of generation ", event.generation, " without step or chunk"));
  }
  const Step step = *event.step;
  const ChunkId chunk = *event.chunk;
  const std::string where = KeyText(event.generation, step, chunk);
  if (chunk >= chunks_.size()) {
    return Fail(absl::StrCat("release of ", where, ": the plan has ", chunks_.size(), " chunks"));
  }
  const ExpectedChunk& expected = chunks_[chunk];
  if (expected.contributors.empty()) {
    return Fail(absl::StrCat("release of ", where, ": the chunk has no contributors"));
  }
  const Key key{event.generation, step, chunk};
  const auto staged = staged_.find(key);
  std::vector<std::string> missing;
  for (const Contributor& c : expected.contributors) {
    if (staged == staged_.end() || staged->second.count(c) == 0) {
      missing.push_back(ContributorText(c));
    }
  }
  if (!missing.empty()) {
    return Fail(absl::StrCat("early release of ", where, " (sequence ", event.sequence,
                             "): no accepted check-in from ", absl::StrJoin(missing, ", ")));
  }
  if (skipped_.count({event.generation, step}) > 0) {
    return Fail(absl::StrCat("release of ", where, ", a step every rank skipped"));
  }
  if (const auto known = releases_.find(key); known != releases_.end()) {
    return Fail(absl::StrCat("second release of ", where, ": sequence ", event.sequence,
                             " after sequence ", known->second.sequence));
  }
  if (event.sequence <= last_sequence_) {
    return Fail(absl::StrCat("release of ", where, " has sequence ", event.sequence,
                             ", not above the previous release's ", last_sequence_));
  }
  last_sequence_ = event.sequence;
  releases_[key].sequence = event.sequence;
  return absl::OkStatus();
}

absl::Status InvariantChecker::CheckDirective(RankId rank, const SyncDirective& directive) {
  const std::string where = KeyText(directive.generation, directive.step, directive.chunk);
  const auto release = releases_.find(Key{directive.generation, directive.step, directive.chunk});
  if (release == releases_.end()) {
    return Fail(
        absl::StrCat("SyncDirective for ", where, " to rank ", rank, " without a release event"));
  }
  if (directive.sequence != release->second.sequence) {
    return Fail(absl::StrCat("SyncDirective for ", where, " to rank ", rank, " has sequence ",
                             directive.sequence, ", the release has ", release->second.sequence));
  }
  const std::vector<RankId>& members = chunks_[directive.chunk].members;
  if (!std::binary_search(members.begin(), members.end(), rank)) {
    return Fail(absl::StrCat("SyncDirective for ", where, " sent to rank ", rank,
                             ", not a member of the chunk [", absl::StrJoin(members, ","), "]"));
  }
  if (!release->second.delivered.insert(rank).second) {
    return Fail(absl::StrCat("SyncDirective for ", where, " sent to rank ", rank, " twice"));
  }
  return absl::OkStatus();
}

absl::Status InvariantChecker::CheckStepSkipped(const StepSkipped& skipped) {
  skipped_.insert({skipped.generation, skipped.step});
  const auto first = releases_.lower_bound(Key{skipped.generation, skipped.step, 0});
  if (first != releases_.end() && std::get<0>(first->first) == skipped.generation &&
      std::get<1>(first->first) == skipped.step) {
    return Fail(absl::StrCat("step ", skipped.step, " of generation ", skipped.generation,
                             " was skipped after chunk ", std::get<2>(first->first),
                             " was released"));
  }
  return absl::OkStatus();
}

absl::Status InvariantChecker::OnDecisions(const Decisions& decisions) {
  if (!first_violation_.ok()) return first_violation_;
  // Releases first: the tracker lists a release's deliveries before its event.
  for (const Event& event : decisions.events) {
    if (event.kind != EventKind::kRelease) continue;
    if (auto s = CheckRelease(event); !s.ok()) return s;
  }
  for (const Delivery& delivery : decisions.deliveries) {
    if (const auto* directive = std::get_if<SyncDirective>(delivery.notice.get())) {
      if (delivery.members_of.has_value()) {
        // To every member of the chunk: each as its own directive (the members expected).
        if (*delivery.members_of != directive->chunk) {
          return Fail(absl::StrCat("a directive of chunk ", directive->chunk,
                                   " was addressed to the members of chunk ",
                                   *delivery.members_of));
        }
        if (directive->chunk >= chunks_.size()) {
          return Fail(
              absl::StrCat("a directive to the members of undeclared chunk ", directive->chunk));
        }
        for (RankId member : chunks_[directive->chunk].members) {
          if (auto s = CheckDirective(member, *directive); !s.ok()) return s;
        }
        continue;
      }
      if (auto s = CheckDirective(delivery.rank, *directive); !s.ok()) return s;
    } else if (const auto* skipped = std::get_if<StepSkipped>(delivery.notice.get())) {
      if (auto s = CheckStepSkipped(*skipped); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status InvariantChecker::CheckComplete(uint64_t generation, absl::Span<const Step> steps,
                                             absl::Span<const Step> skipped_steps) {
  if (!first_violation_.ok()) return first_violation_;
  for (Step step : skipped_steps) {
    const auto first = releases_.lower_bound(Key{generation, step, 0});
    if (first != releases_.end() && std::get<0>(first->first) == generation &&
        std::get<1>(first->first) == step) {
      return Fail(absl::StrCat("skipped step ", step, " of generation ", generation,
                               " has a release of chunk ", std::get<2>(first->first)));
    }
  }
  for (Step step : steps) {
    if (std::find(skipped_steps.begin(), skipped_steps.end(), step) != skipped_steps.end())
      continue;
    for (ChunkId chunk = 0; chunk < chunks_.size(); ++chunk) {
      const ExpectedChunk& expected = chunks_[chunk];
      if (expected.contributors.empty()) continue;
      const std::string where = KeyText(generation, step, chunk);
      const auto release = releases_.find(Key{generation, step, chunk});
      if (release == releases_.end()) return Fail(absl::StrCat(where, " was never released"));
      std::vector<RankId> undelivered;
      for (RankId member : expected.members) {
        if (release->second.delivered.count(member) == 0) undelivered.push_back(member);
      }
      if (!undelivered.empty()) {
        return Fail(absl::StrCat(where, " (sequence ", release->second.sequence,
                                 "): no SyncDirective delivered to ranks [",
                                 absl::StrJoin(undelivered, ","), "]"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace psync::core
