#include "server/core/plan.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::core {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", problem));
}

// A value the wire allows but this coordinator is configured to refuse (a --max_* flag).
absl::Status OverLimit(absl::string_view field, uint32_t value, absl::string_view limit,
                       uint32_t max) {
  return absl::ResourceExhaustedError(
      absl::StrCat(field, " ", value, " exceeds this coordinator's ", limit, "=", max));
}

absl::Status CheckNodeName(const std::string& node) {
  if (node.size() > kMaxNodeName) {
    return Invalid("node", absl::StrCat("must be at most ", kMaxNodeName, " characters (got ",
                                        node.size(), ")"));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const char c = node[i];
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._-:@/").find(c) == std::string_view::npos) {
      return Invalid("node", absl::StrCat("character ", i,
                                          " is not a letter, a digit or one of "
                                          "\"._-:@/\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLength(absl::string_view field, const std::string& value, size_t max) {
  if (value.empty() || value.size() > max) {
    return Invalid(field, absl::StrCat("must be 1..", max, " characters (got ", value.size(), ")"));
  }
  return absl::OkStatus();
}

std::vector<RankId> Sorted(std::vector<RankId> ranks) {
  // Clients list group members in order nearly always; a world-wide group is checked on every join.
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// Whether `listed` holds the ranks of `sorted` (sorted, no repeats), in any order; without a copy
// when `listed` is in order, as clients list members nearly always.
bool SameMembers(const std::vector<RankId>& sorted, const std::vector<RankId>& listed) {
  if (std::is_sorted(listed.begin(), listed.end())) return sorted == listed;
  return sorted == Sorted(listed);
}

// A group's ranks listed in strictly increasing order: none repeated.
bool StrictlyIncreasing(const std::vector<RankId>& ranks) {
  return std::adjacent_find(ranks.begin(), ranks.end(),
                            [](RankId a, RankId b) { return a >= b; }) == ranks.end();
}

std::string RankList(const std::vector<RankId>& ranks) {
  return absl::StrCat("[", absl::StrJoin(ranks, ","), "]");
}

}  // namespace

absl::Status ValidateRankPlan(const RankPlan& plan, const PlanLimits& limits) {
  if (auto s = CheckLength("job_id", plan.job_id, limits.max_id_length); !s.ok()) return s;
  if (plan.world_size < 1) return Invalid("world_size", "must be at least 1 (got 0)");
  if (plan.world_size > kMaxWorldSize) {
    return Invalid("world_size",
                   absl::StrCat(plan.world_size, " out of range [1, ", kMaxWorldSize, "]"));
  }
  if (plan.world_size > limits.max_world_size) {
    return OverLimit("world_size", plan.world_size, "max_world_size", limits.max_world_size);
  }
  if (plan.rank >= plan.world_size) {
    return Invalid("rank", absl::StrCat(plan.rank, " out of range [0, ", plan.world_size, ")"));
  }
  if (plan.num_chunks < 1) return Invalid("num_chunks", "must be at least 1 (got 0)");
  if (plan.num_chunks > kMaxChunks) {
    return Invalid("num_chunks",
                   absl::StrCat(plan.num_chunks, " out of range [1, ", kMaxChunks, "]"));
  }
  if (plan.num_chunks > limits.max_chunks) {
    return OverLimit("num_chunks", plan.num_chunks, "max_chunks", limits.max_chunks);
  }
  if (auto s = CheckLength("incarnation", plan.incarnation, limits.max_id_length); !s.ok()) {
    return s;
  }
  if (auto s = CheckNodeName(plan.node); !s.ok()) return s;
  if (plan.chunks.empty()) {
    return Invalid("chunks", "must list at least one chunk the rank takes part in");
  }
  std::set<ChunkId> seen_chunks;
  // The ranks of the group being checked, one bit per rank of the world (cleared after each group),
  // for a group not listed in increasing order: a data-parallel group lists every rank of the
  // world, and each rank's join checks it.
  std::vector<bool> listed;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ChunkPart& part = plan.chunks[i];
    const std::string where = absl::StrCat("chunks[", i, "]");
    if (part.chunk >= plan.num_chunks) {
      return Invalid(absl::StrCat(where, ".chunk"),
                     absl::StrCat(part.chunk, " out of range [0, ", plan.num_chunks, ")"));
    }
    if (!seen_chunks.insert(part.chunk).second) {
      return Invalid(absl::StrCat(where, ".chunk"), absl::StrCat(part.chunk, " is listed twice"));
    }
    if (part.optimizers.size() > limits.max_optimizers_per_chunk) {
      return Invalid(absl::StrCat(where, ".optimizers"),
                     absl::StrCat("has ", part.optimizers.size(), " entries (at most ",
                                  limits.max_optimizers_per_chunk, ")"));
    }
    std::set<std::string> seen_optimizers;
    for (size_t j = 0; j < part.optimizers.size(); ++j) {
      const std::string field = absl::StrCat(where, ".optimizers[", j, "]");
      if (auto s = CheckLength(field, part.optimizers[j], limits.max_name_length); !s.ok()) {
        return s;
      }
      if (!seen_optimizers.insert(part.optimizers[j]).second) {
        return Invalid(field, absl::StrCat("'", part.optimizers[j], "' is listed twice"));
      }
    }
    if (part.groups.empty() || part.groups.size() > limits.max_groups_per_chunk) {
      return Invalid(absl::StrCat(where, ".groups"),
                     absl::StrCat("must have 1..", limits.max_groups_per_chunk, " entries (got ",
                                  part.groups.size(), ")"));
    }
    std::set<std::string> seen_groups;
    for (size_t j = 0; j < part.groups.size(); ++j) {
      const GroupDecl& group = part.groups[j];
      const std::string field = absl::StrCat(where, ".groups[", j, "]");
      if (auto s = CheckLength(absl::StrCat(field, ".name"), group.name, limits.max_name_length);
          !s.ok()) {
        return s;
      }
      if (!seen_groups.insert(group.name).second) {
        return Invalid(absl::StrCat(field, ".name"),
                       absl::StrCat("'", group.name, "' is listed twice"));
      }
      bool has_self = false;
      if (StrictlyIncreasing(group.ranks) &&
          (group.ranks.empty() || group.ranks.back() < plan.world_size)) {
        // The common case, in one pass: in range, none repeated (the loop below names the first
        // rank that is not).
        has_self = std::binary_search(group.ranks.begin(), group.ranks.end(), plan.rank);
      } else {
        if (listed.empty()) listed.assign(plan.world_size, false);
        for (RankId r : group.ranks) {
          if (r >= plan.world_size) {
            return Invalid(absl::StrCat(field, ".ranks"),
                           absl::StrCat("rank ", r, " out of range [0, ", plan.world_size, ")"));
          }
          if (listed[r]) {
            return Invalid(absl::StrCat(field, ".ranks"),
                           absl::StrCat("rank ", r, " is listed twice"));
          }
          listed[r] = true;
          has_self |= (r == plan.rank);
        }
        for (RankId r : group.ranks) listed[r] = false;
      }
      if (!has_self) {
        return Invalid(absl::StrCat(field, ".ranks"),
                       absl::StrCat("must include the declaring rank ", plan.rank));
      }
    }
  }
  if (plan.resume.has_value()) {
    const ResumeState& resume = *plan.resume;
    if (resume.step < plan.first_step) {
      return Invalid("resume.step",
                     absl::StrCat(resume.step, " is before first_step ", plan.first_step));
    }
    // A run began after the abort of restarted_after and goes on in generations opened after it.
    if (resume.restarted_after > 0 && resume.restarted_after >= resume.generation) {
      return Invalid("resume.restarted_after",
                     absl::StrCat(resume.restarted_after, " is not before resume.generation ",
                                  resume.generation));
    }
    for (size_t i = 0; i < resume.staged.size(); ++i) {
      const auto& [chunk, optimizer] = resume.staged[i];
      const ChunkPart* part = nullptr;
      for (const ChunkPart& p : plan.chunks) {
        if (p.chunk == chunk) part = &p;
      }
      if (part == nullptr || std::find(part->optimizers.begin(), part->optimizers.end(),
                                       optimizer) == part->optimizers.end()) {
        return Invalid(absl::StrCat("resume.staged[", i, "]"),
                       absl::StrCat("chunk ", chunk, " optimizer '", optimizer,
                                    "' is not declared in this plan"));
      }
    }
    if (resume.skip_reason.has_value()) {
      if (!resume.staged.empty()) {
        return Invalid("resume.skip_reason",
                       absl::StrCat("a rank that voted to skip step ", resume.step,
                                    " staged nothing in it, but resume.staged has ",
                                    resume.staged.size(), " check-ins"));
      }
      if (resume.skip_reason->size() > kMaxResumeSkipReason) {
        return Invalid("resume.skip_reason",
                       absl::StrCat("must be at most ", kMaxResumeSkipReason, " bytes (got ",
                                    resume.skip_reason->size(), ")"));
      }
    }
    if (resume.skipped_steps.size() > kMaxResumeSkippedSteps) {
      return Invalid("resume.skipped_steps",
                     absl::StrCat("must have at most ", kMaxResumeSkippedSteps, " steps (got ",
                                  resume.skipped_steps.size(), ")"));
    }
    for (size_t i = 0; i < resume.skipped_steps.size(); ++i) {
      const Step skipped = resume.skipped_steps[i];
      if (skipped >= resume.step || skipped < plan.first_step) {
        return Invalid(absl::StrCat("resume.skipped_steps[", i, "]"),
                       absl::StrCat(skipped, " is not in [first_step ", plan.first_step,
                                    ", resume.step ", resume.step, ")"));
      }
    }
    if (resume.released_ahead.size() > kMaxResumeReleasedAhead) {
      return Invalid("resume.released_ahead",
                     absl::StrCat("must have at most ", kMaxResumeReleasedAhead, " entries (got ",
                                  resume.released_ahead.size(), ")"));
    }
    for (size_t i = 0; i < resume.released_ahead.size(); ++i) {
      const auto& [ahead_step, ahead_chunk] = resume.released_ahead[i];
      if (ahead_step <= resume.step) {
        return Invalid(absl::StrCat("resume.released_ahead[", i, "].step"),
                       absl::StrCat(ahead_step, " is not after resume.step ", resume.step));
      }
      if (seen_chunks.count(ahead_chunk) == 0) {
        return Invalid(absl::StrCat("resume.released_ahead[", i, "].chunk"),
                       absl::StrCat("chunk ", ahead_chunk, " is not a chunk of this plan"));
      }
    }
    for (const auto* list : {&resume.synced_chunks, &resume.released_chunks}) {
      const char* field =
          list == &resume.synced_chunks ? "resume.synced_chunks" : "resume.released_chunks";
      for (size_t i = 0; i < list->size(); ++i) {
        const ChunkId chunk = (*list)[i];
        if (seen_chunks.count(chunk) == 0) {
          return Invalid(absl::StrCat(field, "[", i, "]"),
                         absl::StrCat("chunk ", chunk, " is not a chunk of this plan"));
        }
      }
    }
  }
  return absl::OkStatus();
}

std::string PlanDifference(const RankPlan& a, const RankPlan& b) {
  auto changed = [](absl::string_view field, const auto& was, const auto& now) {
    return absl::StrCat(field, " ", was, " -> ", now);
  };
  if (a.job_id != b.job_id) return changed("job_id", a.job_id, b.job_id);
  if (a.world_size != b.world_size) return changed("world_size", a.world_size, b.world_size);
  if (a.rank != b.rank) return changed("rank", a.rank, b.rank);
  if (a.num_chunks != b.num_chunks) return changed("num_chunks", a.num_chunks, b.num_chunks);
  if (a.first_step != b.first_step) return changed("first_step", a.first_step, b.first_step);
  if (a.chunks.size() != b.chunks.size()) {
    return changed("chunks (entries)", a.chunks.size(), b.chunks.size());
  }
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    const ChunkPart& x = a.chunks[i];
    const ChunkPart& y = b.chunks[i];
    const std::string where = absl::StrCat("chunks[", i, "]");
    if (x.chunk != y.chunk) return changed(absl::StrCat(where, ".chunk"), x.chunk, y.chunk);
    if (x.optimizers != y.optimizers) {
      return changed(absl::StrCat(where, ".optimizers"),
                     absl::StrCat("[", absl::StrJoin(x.optimizers, ","), "]"),
                     absl::StrCat("[", absl::StrJoin(y.optimizers, ","), "]"));
    }
    if (x.groups.size() != y.groups.size()) {
      return changed(absl::StrCat(where, ".groups (entries)"), x.groups.size(), y.groups.size());
    }
    for (size_t j = 0; j < x.groups.size(); ++j) {
      const std::string group = absl::StrCat(where, ".groups[", j, "]");
      if (x.groups[j].name != y.groups[j].name) {
        return changed(absl::StrCat(group, ".name"), x.groups[j].name, y.groups[j].name);
      }
      const std::vector<RankId> was = Sorted(x.groups[j].ranks);
      const std::vector<RankId> now = Sorted(y.groups[j].ranks);
      if (was != now) return changed(absl::StrCat(group, ".ranks"), RankList(was), RankList(now));
    }
  }
  return "";
}

bool SamePlan(const RankPlan& a, const RankPlan& b) { return PlanDifference(a, b).empty(); }

std::string JobPlan::DifferenceFromJoined(const RankPlan& plan) const {
  const RankPlan* joined = rank_plan(plan.rank);
  if (joined == nullptr) return absl::StrCat("rank ", plan.rank, " has not joined");
  // The joined plan keeps groups by name (rank_plan); their members are the merged chunk's.
  RankPlan names_only = plan;
  for (size_t i = 0; i < names_only.chunks.size(); ++i) {
    ChunkPart& part = names_only.chunks[i];
    if (part.chunk >= chunks_.size()) break;  // PlanDifference names the chunk
    for (size_t j = 0; j < part.groups.size(); ++j) {
      GroupDecl& group = part.groups[j];
      auto known = chunks_[part.chunk].groups.find(group.name);
      if (known != chunks_[part.chunk].groups.end()) {
        const std::vector<RankId> now = Sorted(group.ranks);
        if (known->second != now) {
          return absl::StrCat("chunks[", i, "].groups[", j, "].ranks ", RankList(known->second),
                              " -> ", RankList(now));
        }
      }
      group.ranks.clear();
    }
  }
  return PlanDifference(*joined, names_only);
}

const RankPlan* JobPlan::rank_plan(RankId rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : it->second.get();
}

const ChunkPart* JobPlan::part(RankId rank, ChunkId chunk) const {
  const RankPlan* plan = rank_plan(rank);
  if (plan == nullptr) return nullptr;
  for (const ChunkPart& p : plan->chunks) {
    if (p.chunk == chunk) return &p;
  }
  return nullptr;
}

const std::vector<ChunkId>& JobPlan::synced_chunks(RankId rank) const {
  static const std::vector<ChunkId>* const kNone = new std::vector<ChunkId>();
  return rank < synced_list_of_.size() ? synced_lists_[synced_list_of_[rank]] : *kNone;
}

absl::Status JobPlan::CheckGroups(const RankPlan& plan) const {
  for (const ChunkPart& part : plan.chunks) {
    const ChunkInfo& info = chunks_[part.chunk];
    for (const GroupDecl& group : part.groups) {
      auto known = info.groups.find(group.name);
      if (known != info.groups.end()) {
        if (!SameMembers(known->second, group.ranks)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "chunk ", part.chunk, " group '", group.name, "' declared by rank ", plan.rank,
              " as ", RankList(Sorted(group.ranks)), " but earlier as ", RankList(known->second)));
        }
        continue;
      }
      for (RankId other : Sorted(group.ranks)) {
        if (other == plan.rank || rank_plan(other) == nullptr) continue;
        return absl::FailedPreconditionError(absl::StrCat(
            "chunk ", part.chunk, " group '", group.name, "': rank ", plan.rank, " lists rank ",
            other, ", but rank ", other, " joined without that group"));
      }
    }
    // Groups that earlier ranks declared with this rank as a member must be declared by it too
    // (the first such group by name is reported).
    const std::string* missing = nullptr;
    for (const std::string& name : info.GroupsListing(plan.rank)) {
      const bool declared = std::any_of(part.groups.begin(), part.groups.end(),
                                        [&](const GroupDecl& g) { return g.name == name; });
      if (!declared && (missing == nullptr || name < *missing)) missing = &name;
    }
    if (missing != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chunk ", part.chunk, " group '", *missing, "' ", RankList(info.groups.at(*missing)),
          " includes rank ", plan.rank, ", but rank ", plan.rank, " did not declare it"));
    }
  }
  // Chunks this rank does not take part in at all, where others listed it.
  for (ChunkId c = 0; c < chunks_.size(); ++c) {
    const bool listed = std::any_of(plan.chunks.begin(), plan.chunks.end(),
                                    [&](const ChunkPart& p) { return p.chunk == c; });
    if (listed) continue;
    const std::vector<std::string>& names = chunks_[c].GroupsListing(plan.rank);
    if (names.empty()) continue;
    const std::string& name = *std::min_element(names.begin(), names.end());
    return absl::FailedPreconditionError(absl::StrCat(
        "chunk ", c, " group '", name, "' ", RankList(chunks_[c].groups.at(name)),
        " includes rank ", plan.rank, ", but rank ", plan.rank, " did not declare chunk ", c));
  }
  return absl::OkStatus();
}

absl::Status JobPlan::Merge(const RankPlan& plan) {
  if (!ranks_.empty()) {
    auto conflict = [&](absl::string_view field, uint64_t mine, uint64_t theirs) {
      return absl::FailedPreconditionError(absl::StrCat(field, " ", mine, " of rank ", plan.rank,
                                                        " conflicts with ", theirs,
                                                        " declared by rank ", first_rank_));
    };
    if (plan.world_size != world_size_) return conflict("world_size", plan.world_size, world_size_);
    if (plan.num_chunks != num_chunks_) return conflict("num_chunks", plan.num_chunks, num_chunks_);
    if (plan.first_step != first_step_) return conflict("first_step", plan.first_step, first_step_);
    if (ranks_.contains(plan.rank)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", plan.rank, " already joined this generation"));
    }
    if (auto s = CheckGroups(plan); !s.ok()) return s;
  } else {
    world_size_ = plan.world_size;
    num_chunks_ = plan.num_chunks;
    first_step_ = plan.first_step;
    first_rank_ = plan.rank;
    chunks_.assign(num_chunks_, ChunkInfo{});
  }
  // What SameAsJoined and part() need: the declaration without its token (a secret), resume
  // (applied at the join) and incarnation (the tracker keeps it), and groups by name (see
  // rank_plan). Held by pointer: a map slot of a whole RankPlan is 250 bytes, empty ones included.
  auto kept = std::make_unique<RankPlan>();
  kept->job_id = plan.job_id;
  kept->world_size = plan.world_size;
  kept->rank = plan.rank;
  kept->num_chunks = plan.num_chunks;
  kept->first_step = plan.first_step;
  kept->chunks.reserve(plan.chunks.size());  // every field of each part but its groups' ranks
  for (const ChunkPart& part : plan.chunks) {
    ChunkPart& copy = kept->chunks.emplace_back();
    copy.chunk = part.chunk;
    copy.optimizers = part.optimizers;
    copy.groups.reserve(part.groups.size());
    for (const GroupDecl& group : part.groups) copy.groups.push_back({group.name, {}});
  }
  ranks_.emplace(plan.rank, std::move(kept));
  for (const ChunkPart& part : plan.chunks) {
    ChunkInfo& info = chunks_[part.chunk];
    for (const std::string& opt : part.optimizers) {
      info.contributors_while_joining.insert(Contributor{plan.rank, opt});
    }
    for (const GroupDecl& group : part.groups) {
      // Declared before with the same members (CheckGroups): nothing to add, nothing copied.
      if (info.groups.count(group.name) > 0) continue;
      auto declared = info.groups.emplace(group.name, Sorted(group.ranks)).first;
      for (RankId r : declared->second) {
        info.groups_listing[r].push_back(group.name);
        auto at = std::lower_bound(info.members.begin(), info.members.end(), r);
        if (at == info.members.end() || *at != r) info.members.insert(at, r);
      }
    }
  }
  if (complete()) {
    std::vector<std::vector<ChunkId>> synced(world_size_);
    for (ChunkId c = 0; c < num_chunks_; ++c) {
      ChunkInfo& info = chunks_[c];
      info.slots = ChunkSlots(info.contributors_while_joining, info.members, info.groups);
      info.complete = true;
      // No join merges into a complete plan (every rank has joined): what only joins read goes
      // (about 20 MiB at 16,384 ranks x 8 chunks).
      absl::btree_set<Contributor>().swap(info.contributors_while_joining);
      absl::flat_hash_map<RankId, std::vector<std::string>>().swap(info.groups_listing);
      if (info.num_contributors() == 0) continue;
      for (RankId r : info.members) synced[r].push_back(c);
    }
    synced_lists_.clear();
    synced_list_of_.assign(world_size_, 0);
    std::map<std::vector<ChunkId>, uint32_t> list_index;
    for (RankId r = 0; r < world_size_; ++r) {
      auto [it, added] =
          list_index.try_emplace(std::move(synced[r]), static_cast<uint32_t>(synced_lists_.size()));
      if (added) synced_lists_.push_back(it->first);
      synced_list_of_[r] = it->second;
    }
  }
  return absl::OkStatus();
}

}  // namespace psync::core
