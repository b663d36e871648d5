// What a relay's AgentBatch costs the coordinator before its tracker sees it: parsing the bytes
// and expanding them into per-rank messages (server/rpc/agent_batch.h). SyncDones: each rank's in
// an IndexedSyncDone of its own, or equal ones merged into one MergedSyncDone entry (agent/merge.h,
// psync-agent --merge_sync_dones). Check-ins: one-item StagedBatches merged into MergedStaged
// entries, expanded and grouped by item (SplitIntoRuns, server/owner/checkin_groups.h). The batch
// is built as a relay builds it: each node's ranks merged by MergeMessages, the nodes' batches
// concatenated by AppendBatch. Counters: bytes on the wire and CPU time per message.
//
//   bazel run -c opt //bench:agent_batch_bench
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/batch_parts.h"
#include "agent/merge.h"
#include "benchmark/benchmark.h"
#include "server/owner/checkin_groups.h"
#include "server/rpc/agent_batch.h"

namespace psync {
namespace {

constexpr uint32_t kRanksPerNode = 8;

// `nodes` nodes of 8 ranks, each rank reporting SyncDone of (step 12, chunk 3) with its node's
// group checksum (a sync group per node, as psync-bench --group_size=8 lays them out).
std::string RelayBatchBytes(uint32_t nodes, bool merged) {
  agent::MergeOptions options;
  options.merge_sync_dones = merged;
  v1::AgentBatch relay;
  for (uint32_t n = 0; n < nodes; ++n) {
    std::vector<v1::SessionUp> ups(kRanksPerNode);
    std::vector<agent::MergeInput> inputs;
    for (uint32_t i = 0; i < kRanksPerNode; ++i) {
      v1::SyncDone* done = ups[i].mutable_sync_done()->add_items();
      ups[i].mutable_sync_done()->set_generation(1);
      done->set_step(12);
      done->set_chunk(3);
      done->set_executions(1);
      v1::GroupChecksum* sum = done->add_checksums();
      sum->set_group(absl::StrCat("dp", n));
      sum->set_checksum(0x9e3779b97f4a7c15ULL * (n + 1));
      inputs.push_back({n * kRanksPerNode + i, &ups[i]});
    }
    agent::AppendBatch(agent::MergeMessages("job", 1, inputs, options), &relay);
  }
  return relay.SerializeAsString();
}

void BM_ParseAndExpandRelaySyncDones(benchmark::State& state) {
  const uint32_t nodes = static_cast<uint32_t>(state.range(0));
  const bool merged = state.range(1) != 0;
  const std::string bytes = RelayBatchBytes(nodes, merged);
  server::ExpandedBatch expanded;
  for (auto _ : state) {
    v1::AgentBatch batch;
    if (!batch.ParseFromString(bytes)) state.SkipWithError("parse");
    if (!server::ExpandAgentBatch(batch, &expanded).ok()) state.SkipWithError("expand");
    benchmark::DoNotOptimize(expanded.messages.data());
  }
  const double sync_dones = static_cast<double>(nodes) * kRanksPerNode;
  state.counters["bytes_per_sync_done"] = static_cast<double>(bytes.size()) / sync_dones;
  // Seconds of CPU per SyncDone (printed with an SI prefix: "59n" is 59 ns).
  state.counters["s_per_sync_done"] = benchmark::Counter(
      sync_dones, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ParseAndExpandRelaySyncDones)
    ->ArgNames({"nodes", "merged"})
    ->Args({16, 0})
    ->Args({16, 1})
    ->Args({128, 0})
    ->Args({128, 1});

// `nodes` nodes of 8 ranks, each rank's check-ins of (step 12, chunk 3) by both optimizers, each
// its own one-item StagedBatch, as psync::Client sends them.
std::string RelayCheckinBytes(uint32_t nodes) {
  v1::AgentBatch relay;
  for (uint32_t n = 0; n < nodes; ++n) {
    std::vector<v1::SessionUp> ups(2 * kRanksPerNode);
    std::vector<agent::MergeInput> inputs;
    for (uint32_t k = 0; k < 2; ++k) {
      for (uint32_t i = 0; i < kRanksPerNode; ++i) {
        v1::SessionUp& up = ups[k * kRanksPerNode + i];
        up.mutable_staged()->set_generation(1);
        v1::Staged* item = up.mutable_staged()->add_items();
        item->set_step(12);
        item->set_chunk(3);
        item->set_optimizer(k == 0 ? "dense" : "expert");
        inputs.push_back({n * kRanksPerNode + i, &up});
      }
    }
    agent::AppendBatch(agent::MergeMessages("job", 1, inputs), &relay);
  }
  return relay.SerializeAsString();
}

void BM_ParseExpandAndGroupRelayCheckins(benchmark::State& state) {
  const uint32_t nodes = static_cast<uint32_t>(state.range(0));
  const std::string bytes = RelayCheckinBytes(nodes);
  server::ExpandedBatch expanded;
  for (auto _ : state) {
    v1::AgentBatch batch;
    if (!batch.ParseFromString(bytes)) state.SkipWithError("parse");
    if (!server::ExpandAgentBatch(batch, &expanded).ok()) state.SkipWithError("expand");
    const std::vector<server::BatchRun> runs = server::SplitIntoRuns(expanded.messages);
    if (runs.size() != 1 || !runs[0].groups.has_value()) state.SkipWithError("not grouped");
    benchmark::DoNotOptimize(runs.data());
  }
  const double checkins = 2.0 * nodes * kRanksPerNode;
  state.counters["bytes_per_checkin"] = static_cast<double>(bytes.size()) / checkins;
  state.counters["s_per_checkin"] = benchmark::Counter(
      checkins, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ParseExpandAndGroupRelayCheckins)->ArgName("nodes")->Arg(16)->Arg(128);

}  // namespace
}  // namespace psync

BENCHMARK_MAIN();
