// Fuzz target: the input bytes are a small MoE job and a sequence of operations on its
// JobTracker, audited by TrackerHarness (the invariant checker on every output, rejected inputs
// leave the state unchanged, NoticesToHold() and the snapshot agree with what was delivered).
//
// Layout: 3 header bytes (world size W in 1..6, chunks C in 1..4 and whether ranks may declare
// inconsistent plans, expert data-parallel size and first step), 2 bytes per chunk (its kind:
// mixed, dense or expert-only, and which expert groups take part; which ranks have no expert
// parameters), then operations (an op code, a rank, then a fixed number of bytes per op; at most
// 400 ops) until the input ends: joins (new incarnations, reconnects, mutated
// plans), check-in batches (the rank's whole step, or random steps, chunks and optimizers,
// repeats with the same or another checksum), skips, SyncDones (of the pending directives, or
// early, repeated, with mismatching checksums), time advances, attaches, ChunkAt queries and
// aborts. Missing bytes read as zero, so every input is valid.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/job_tracker.h"
#include "server/core/plan.h"
#include "server/core/types.h"
#include "tests/fuzz/tracker_harness.h"

namespace psync::fuzz {
namespace {

using core::ChunkId;
using core::ChunkPart;
using core::GroupDecl;
using core::RankId;
using core::RankPlan;
using core::Step;

constexpr size_t kMaxOps = 400;

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

enum class ChunkKind { kMixed, kDense, kExpert };

// The job as the fuzzer's ranks see it: canonical plans and their mutations.
struct Job {
  uint32_t world_size = 1;
  uint32_t num_chunks = 1;
  uint32_t expert_dp = 1;
  Step first_step = 0;
  bool inconsistent = false;
  std::vector<RankPlan> plans;  // canonical, per rank
};

Job MakeJob(ByteReader& in) {
  Job job;
  const uint8_t b0 = in.Byte(), b1 = in.Byte(), b2 = in.Byte();
  job.world_size = 1 + b0 % 6;
  job.num_chunks = 1 + b1 % 4;
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= job.world_size; ++d) {
    if (job.world_size % d == 0) divisors.push_back(d);
  }
  job.expert_dp = divisors[b2 % divisors.size()];
  job.first_step = (b2 >> 4) % 3;
  job.inconsistent = (b1 & 0x80) != 0;
  const uint32_t num_edp = job.world_size / job.expert_dp;  // edp<k> = {r : r % num_edp == k}
  std::vector<RankId> all(job.world_size);
  for (RankId r = 0; r < job.world_size; ++r) all[r] = r;
  auto edp_ranks = [&](RankId r) {
    std::vector<RankId> ranks;
    for (RankId x = r % num_edp; x < job.world_size; x += num_edp) ranks.push_back(x);
    return ranks;
  };

  job.plans.resize(job.world_size);
  for (RankId r = 0; r < job.world_size; ++r) {
    RankPlan& p = job.plans[r];
    p.job_id = "job";
    p.world_size = job.world_size;
    p.rank = r;
    p.num_chunks = job.num_chunks;
    p.first_step = job.first_step;
  }
  for (ChunkId c = 0; c < job.num_chunks; ++c) {
    const uint8_t kind_byte = in.Byte();
    const uint8_t mask = in.Byte();
    // Chunk 0 always has a dense part, so that every rank takes part in some chunk.
    const ChunkKind kind = c == 0 ? static_cast<ChunkKind>(kind_byte & 1)
                                  : static_cast<ChunkKind>((kind_byte & 3) % 3);
    for (RankId r = 0; r < job.world_size; ++r) {
      const bool no_expert = (mask >> r) & 1;
      const bool edp_in = ((kind_byte >> 2) >> (r % num_edp)) & 1 || r % num_edp == 0;
      ChunkPart part;
      part.chunk = c;
      switch (kind) {
        case ChunkKind::kMixed:
          part.optimizers = {"dense"};
          if (!no_expert) part.optimizers.push_back("expert");
          part.groups = {GroupDecl{"dp", all},
                         GroupDecl{absl::StrCat("edp", r % num_edp), edp_ranks(r)}};
          break;
        case ChunkKind::kDense:
          part.optimizers = {"dense"};
          part.groups = {GroupDecl{"dp", all}};
          break;
        case ChunkKind::kExpert:
          if (!edp_in) continue;  // this rank takes no part in the chunk
          if (!no_expert) part.optimizers = {"expert"};
          part.groups = {GroupDecl{absl::StrCat("edp", r % num_edp), edp_ranks(r)}};
          break;
      }
      job.plans[r].chunks.push_back(std::move(part));
    }
  }
  return job;
}

// A plan for `rank`: canonical, or (inconsistent jobs only) deliberately conflicting.
RankPlan PlanFor(const Job& job, RankId rank, uint8_t variant, uint8_t which) {
  RankPlan p;
  if (rank < job.world_size) {
    p = job.plans[rank];
  } else {  // a rank outside the job
    p = job.plans[0];
    p.rank = rank;
  }
  if (!job.inconsistent) return p;
  ChunkPart& part = p.chunks[which % p.chunks.size()];
  switch (variant % 9) {
    case 2:
      p.world_size += 1;
      break;
    case 3:
      p.num_chunks += 1;
      break;
    case 4:
      p.first_step += 1;
      break;
    case 5:  // leave out (or rename) a group
      if (part.groups.size() > 1) {
        part.groups.pop_back();
      } else {
        part.groups[0].name += "x";
      }
      break;
    case 6: {  // another membership for the first group
      std::vector<RankId>& ranks = part.groups[0].ranks;
      const RankId other = (rank + 1) % job.world_size;
      auto at = std::find(ranks.begin(), ranks.end(), other);
      if (other == rank) {
        ranks.push_back(job.world_size);
      } else if (at != ranks.end()) {
        ranks.erase(at);
      } else {
        ranks.push_back(other);
      }
      break;
    }
    case 7:  // an extra contributor, or none
      if (std::find(part.optimizers.begin(), part.optimizers.end(), "expert") ==
          part.optimizers.end()) {
        part.optimizers.push_back("expert");
      } else {
        part.optimizers.clear();
      }
      break;
    case 8:  // leave out a whole chunk
      if (p.chunks.size() > 1) p.chunks.erase(p.chunks.begin() + which % p.chunks.size());
      break;
    default:
      break;
  }
  return p;
}

uint64_t Checksum(uint64_t generation, Step step, ChunkId chunk, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {generation, step, static_cast<uint64_t>(chunk)})
    h = (h ^ v) * 1099511628211ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// What one simulated rank process knows.
struct Client {
  uint32_t incarnation = 0;
  bool joined = false;
  uint64_t generation = 0;
  RankPlan plan;
};

class Driver {
 public:
  explicit Driver(Job job)
      : job_(std::move(job)), harness_("job", Options()), clients_(job_.world_size + 1) {}

  void Run(ByteReader& in) {
    for (size_t op = 0; op < kMaxOps && !in.empty(); ++op) {
      const uint8_t code = in.Byte();
      const RankId rank = PickRank(in.Byte());
      switch (code % 16) {
        case 0:
        case 1:
          Join(in, rank);
          break;
        case 2:
        case 3:
        case 4:
          StageStep(in, rank);
          break;
        case 5:
        case 6:
          StageRandom(in, rank);
          break;
        case 7:
          Repeat(in);
          break;
        case 8:
        case 9:
        case 10:
          SyncPending(in, rank);
          break;
        case 11:
          SyncRandom(in, rank);
          break;
        case 12:
          Skip(in, rank);
          break;
        case 13:
          harness_.Advance(absl::Milliseconds(37 * in.Byte()));
          break;
        case 14:
          Attach(in, rank);
          break;
        case 15: {
          const uint8_t b = in.Byte(), step = in.Byte(), chunk = in.Byte();
          if (b % 4 == 0) {
            harness_.Abort("rank lost");
          } else {
            harness_.Query(Near(step, rank), chunk % (job_.num_chunks + 1));
          }
          break;
        }
      }
    }
  }

 private:
  static core::TrackerOptions Options() {
    core::TrackerOptions options;
    options.history_steps = 2;  // small, so that trimming happens
    options.max_batch_items = 16;
    return options;
  }

  RankId PickRank(uint8_t b) const {
    return b >= 240 ? job_.world_size : b % job_.world_size;  // now and then a rank outside
  }

  // A step near the rank's own: mostly the same, sometimes before or ahead.
  Step Near(uint8_t b, RankId rank) const {
    static constexpr int kDelta[8] = {0, 0, 0, 0, -1, 1, -2, 2};
    const int64_t step = static_cast<int64_t>(harness_.tracker().rank_step(rank)) + kDelta[b % 8];
    return step < 0 ? 0 : static_cast<Step>(step);
  }

  // The generation the rank's messages carry: its own, now and then a stale or future one.
  uint64_t GenerationOf(uint8_t b, RankId rank) const {
    const uint64_t g = clients_[rank].generation;
    if (b % 16 == 14) return g == 0 ? 0 : g - 1;
    if (b % 16 == 15) return g + 1;
    return g;
  }

  std::optional<uint64_t> PickChecksum(uint8_t b, Step step, ChunkId chunk,
                                       const std::string& opt) const {
    switch (b % 4) {
      case 0:
        return std::nullopt;
      case 1:
        return Checksum(0, step, chunk, opt);
      default:
        return b % 4;
    }
  }

  void Join(ByteReader& in, RankId rank) {
    const uint8_t flags = in.Byte();
    Client& client = clients_[rank];
    if (flags & 1) ++client.incarnation;  // the process restarted
    RankPlan plan = PlanFor(job_, rank, flags >> 1, in.Byte());
    plan.incarnation = absl::StrCat("inc", client.incarnation);
    if (!core::ValidateRankPlan(plan, core::PlanLimits()).ok()) return;  // refused at the edge
    absl::StatusOr<core::JoinResult> joined = harness_.Join(plan);
    if (!joined.ok()) return;
    client.joined = true;
    client.generation = joined->generation;
    client.plan = plan;
  }

  // The rank stages its whole step (or its first few check-ins), as a worker does.
  void StageStep(ByteReader& in, RankId rank) {
    const Client& client = clients_[rank];
    const uint8_t b = in.Byte(), g = in.Byte();
    if (!client.joined) return;
    const Step step = harness_.tracker().rank_step(rank);
    std::vector<core::StagedItem> items;
    for (const ChunkPart& part : client.plan.chunks) {
      for (const std::string& opt : part.optimizers) {
        items.push_back({step, part.chunk, opt, PickChecksum(b, step, part.chunk, opt)});
      }
    }
    if (items.empty()) return;
    if (b & 0x80) items.resize(1 + (b >> 2) % items.size());
    if (b & 0x40) std::reverse(items.begin(), items.end());
    Stage(rank, GenerationOf(g, rank), std::move(items));
  }

  void StageRandom(ByteReader& in, RankId rank) {
    static const char* const kOptimizers[] = {"dense", "expert", "dense", "expert", "bogus", ""};
    const size_t n = 1 + in.Byte() % 4;
    std::vector<core::StagedItem> items;
    for (size_t i = 0; i < n; ++i) {
      const Step step = Near(in.Byte(), rank);
      const ChunkId chunk = in.Byte() % (job_.num_chunks + 1);
      const uint8_t b = in.Byte();
      const std::string opt = kOptimizers[b % 6];
      items.push_back({step, chunk, opt, PickChecksum(b >> 3, step, chunk, opt)});
    }
    Stage(rank, GenerationOf(in.Byte(), rank), std::move(items));
  }

  void Stage(RankId rank, uint64_t generation, std::vector<core::StagedItem> items) {
    harness_.Stage(rank, generation, items).IgnoreError();
    last_stage_rank_ = rank;
    last_stage_generation_ = generation;
    last_stage_ = std::move(items);
  }

  // The last batch again: a retry (same checksums) or a conflicting one.
  void Repeat(ByteReader& in) {
    const uint8_t b = in.Byte();
    if (last_stage_.empty()) return;
    std::vector<core::StagedItem> items = last_stage_;
    if (b & 1) {
      core::StagedItem& item = items[(b >> 1) % items.size()];
      item.checksum = item.checksum ? std::optional<uint64_t>() : std::optional<uint64_t>(b);
    }
    harness_.Stage(last_stage_rank_, last_stage_generation_, items).IgnoreError();
  }

  core::GroupChecksums Checksums(const Client& client, uint64_t generation, Step step,
                                 ChunkId chunk) const {
    core::GroupChecksums sums;
    for (const ChunkPart& part : client.plan.chunks) {
      if (part.chunk != chunk) continue;
      for (const GroupDecl& g : part.groups) {
        sums.push_back({g.name, Checksum(generation, step, chunk, g.name)});
      }
    }
    return sums;
  }

  // Damages a SyncDone item now and then: a mismatching checksum, a group left out, an unknown
  // or repeated group, a second execution.
  void Perturb(uint8_t b, core::SyncDoneItem* item) const {
    switch (b % 16) {
      case 10:
        if (!item->checksums.empty()) item->checksums[0].checksum ^= 1;
        break;
      case 11:
        if (!item->checksums.empty()) item->checksums.pop_back();
        break;
      case 12:
        item->checksums.push_back({"bogus", 1});
        break;
      case 13:
        if (!item->checksums.empty()) item->checksums.push_back(item->checksums[0]);
        break;
      case 14:
        item->executions = 2;
        break;
      default:
        break;
    }
  }

  // The rank executes the directives it holds and reports them, as a worker does.
  void SyncPending(ByteReader& in, RankId rank) {
    const Client& client = clients_[rank];
    const uint8_t b = in.Byte(), perturb = in.Byte(), g = in.Byte();
    std::vector<core::SyncDoneItem> items;
    for (const core::Notice& n : harness_.tracker().NoticesToHold(rank)) {
      const auto* d = std::get_if<core::SyncDirective>(&n);
      if (d == nullptr) continue;
      core::SyncDoneItem item{d->step, d->chunk,
                              Checksums(client, d->generation, d->step, d->chunk)};
      if (!items.empty() && (b & 0x80)) continue;  // one at a time
      items.push_back(std::move(item));
    }
    if (items.empty()) return;
    Perturb(perturb, &items[0]);
    if (b & 0x40) items.push_back(items[0]);  // repeated within the batch
    const uint64_t generation = GenerationOf(g, rank);
    harness_.SyncDone(rank, generation, items).IgnoreError();
    if (b & 0x20) harness_.SyncDone(rank, generation, items).IgnoreError();  // a retry
  }

  void SyncRandom(ByteReader& in, RankId rank) {
    const Client& client = clients_[rank];
    const size_t n = 1 + in.Byte() % 3;
    std::vector<core::SyncDoneItem> items;
    const uint64_t generation = GenerationOf(in.Byte(), rank);
    for (size_t i = 0; i < n; ++i) {
      const Step step = Near(in.Byte(), rank);
      const ChunkId chunk = in.Byte() % (job_.num_chunks + 1);
      core::SyncDoneItem item{step, chunk, Checksums(client, generation, step, chunk)};
      Perturb(in.Byte(), &item);
      items.push_back(std::move(item));
    }
    harness_.SyncDone(rank, generation, items).IgnoreError();
  }

  void Skip(ByteReader& in, RankId rank) {
    const uint8_t b = in.Byte();
    const std::string reason = b == 255 ? std::string(300, 'x') : "found_inf";
    harness_.Skip(rank, GenerationOf(in.Byte(), rank), Near(b, rank), reason).IgnoreError();
  }

  void Attach(ByteReader& in, RankId rank) {
    const uint8_t b = in.Byte();
    const std::string session = b % 8 == 7 ? "bogus" : harness_.session(rank);
    harness_.Attach(rank, GenerationOf(b >> 3, rank), session).IgnoreError();
  }

  const Job job_;
  TrackerHarness harness_;
  std::vector<Client> clients_;  // per rank, and one rank outside the job
  RankId last_stage_rank_ = 0;
  uint64_t last_stage_generation_ = 0;
  std::vector<core::StagedItem> last_stage_;
};

}  // namespace
}  // namespace psync::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psync::fuzz::ByteReader in(data, size);
  psync::fuzz::Driver driver(psync::fuzz::MakeJob(in));
  driver.Run(in);
  return 0;
}
