// MakeRandomPlan; what a RandomPlan holds and guarantees is in random_plan.h.
#include "server/core/random_plan.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/test_util.h"

namespace psync::core::testing {
namespace {

enum class ChunkKind { kMixed, kDense, kExpert };

}  // namespace

RandomPlan MakeRandomPlan(std::mt19937& rng, Step steps) {
  auto uniform = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  RandomPlan p;
  p.steps = steps;
  p.world_size = uniform(1, 16);
  p.num_chunks = uniform(1, 6);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= p.world_size; ++d) {
    if (p.world_size % d == 0) divisors.push_back(d);
  }
  p.expert_dp = divisors[uniform(0, divisors.size() - 1)];
  p.first_step = uniform(0, 3);
  p.history_steps = uniform(1, 16);
  const uint32_t num_edp = p.world_size / p.expert_dp;  // edp<k> = {r : r % num_edp == k}
  auto edp_name = [&](RankId r) { return absl::StrCat("edp", r % num_edp); };
  auto edp_ranks = [&](RankId r) {
    std::vector<RankId> ranks;
    for (RankId x = r % num_edp; x < p.world_size; x += num_edp) ranks.push_back(x);
    return ranks;
  };
  std::vector<RankId> all(p.world_size);
  for (RankId r = 0; r < p.world_size; ++r) all[r] = r;

  p.plans.resize(p.world_size);
  for (RankId r = 0; r < p.world_size; ++r) {
    p.plans[r] = Plan(r, p.world_size, p.num_chunks, {}, "inc0", p.first_step);
  }
  p.expected.resize(p.num_chunks);
  std::vector<std::string> chunk_texts;
  for (ChunkId c = 0; c < p.num_chunks; ++c) {
    // Chunk 0 always has a dense part, so every rank syncs at least one chunk with contributors.
    const ChunkKind kind = c == 0 ? (chance(0.5) ? ChunkKind::kMixed : ChunkKind::kDense)
                                  : static_cast<ChunkKind>(uniform(0, 2));
    std::vector<bool> no_expert(p.world_size);
    for (RankId r = 0; r < p.world_size; ++r) no_expert[r] = chance(0.25);
    std::vector<bool> edp_in(num_edp, true);  // expert-only: which expert groups take part
    if (kind == ChunkKind::kExpert) {
      for (uint32_t k = 0; k < num_edp; ++k) edp_in[k] = chance(0.7);
      edp_in[uniform(0, num_edp - 1)] = true;
      bool any = false;
      for (RankId r = 0; r < p.world_size; ++r) any |= edp_in[r % num_edp] && !no_expert[r];
      if (!any) {
        for (RankId r = 0; r < p.world_size; ++r) {
          if (edp_in[r % num_edp]) {
            no_expert[r] = false;
            break;
          }
        }
      }
    }
    ExpectedChunk& expected = p.expected[c];
    std::string text = absl::StrCat("c", c,
                                    kind == ChunkKind::kMixed   ? " mixed"
                                    : kind == ChunkKind::kDense ? " dense"
                                                                : " expert",
                                    ":");
    for (RankId r = 0; r < p.world_size; ++r) {
      ChunkPart part;
      part.chunk = c;
      switch (kind) {
        case ChunkKind::kMixed:
          part.optimizers = {"dense"};
          if (!no_expert[r]) part.optimizers.push_back("expert");
          part.groups = {Group("dp", all), Group(edp_name(r), edp_ranks(r))};
          break;
        case ChunkKind::kDense:
          part.optimizers = {"dense"};
          part.groups = {Group("dp", all)};
          break;
        case ChunkKind::kExpert:
          if (!edp_in[r % num_edp]) continue;  // this rank does not take part in the chunk
          if (!no_expert[r]) part.optimizers = {"expert"};
          part.groups = {Group(edp_name(r), edp_ranks(r))};
          break;
      }
      for (const std::string& opt : part.optimizers) expected.contributors.push_back({r, opt});
      expected.members.push_back(r);  // every group of the rank includes it, and dp is everyone
      absl::StrAppend(&text, " ", r, "[", absl::StrJoin(part.optimizers, "+"), "]");
      p.plans[r].chunks.push_back(std::move(part));
    }
    chunk_texts.push_back(text);
  }
  p.synced.resize(p.world_size);
  for (ChunkId c = 0; c < p.num_chunks; ++c) {
    if (p.expected[c].contributors.empty()) continue;
    for (RankId r : p.expected[c].members) p.synced[r].push_back(c);
  }
  for (Step s = p.first_step; s < p.first_step + steps; ++s) {
    if (chance(0.15)) p.skipped.insert(s);
  }
  p.description =
      absl::StrCat("W=", p.world_size, " E=", p.expert_dp, " C=", p.num_chunks,
                   " first_step=", p.first_step, " history=", p.history_steps, " skipped=[",
                   absl::StrJoin(p.skipped, ","), "]\n  ", absl::StrJoin(chunk_texts, "\n  "));
  return p;
}

}  // namespace psync::core::testing
