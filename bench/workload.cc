#include "bench/workload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psync::bench {

std::string OptimizerName(uint32_t k) { return absl::StrCat("opt", k); }

std::string GroupName(const Workload& w, uint32_t rank) {
  const uint32_t g = w.group_size;
  return g == 0 || g >= w.ranks ? "dp" : absl::StrCat("dp", rank / g);
}

v1::JoinRequest JoinRequestFor(const Workload& w, uint32_t rank) {
  v1::JoinRequest req;
  req.set_job_id(w.job_id);
  req.set_world_size(w.ranks);
  req.set_rank(rank);
  req.set_num_chunks(w.chunks);
  req.set_first_step(0);
  req.set_incarnation(absl::StrCat("bench-", w.seed, "-", rank));
  const uint32_t size = w.group_size == 0 || w.group_size >= w.ranks ? w.ranks : w.group_size;
  const uint32_t first = rank / size * size;
  const uint32_t end = std::min(w.ranks, first + size);
  v1::SyncGroup group;
  group.set_name(GroupName(w, rank));
  for (uint32_t r = first; r < end; ++r) group.add_ranks(r);
  for (uint32_t c = 0; c < w.chunks; ++c) {
    v1::ChunkPlan* chunk = req.add_chunks();
    chunk->set_chunk(c);
    for (uint32_t k = 0; k < w.optimizers; ++k) chunk->add_optimizers(OptimizerName(k));
    *chunk->add_groups() = group;
  }
  return req;
}

v1::SyncDone SyncDoneFor(const Workload& w, uint32_t rank, uint64_t step, uint32_t chunk) {
  v1::SyncDone done;
  done.set_step(step);
  done.set_chunk(chunk);
  v1::GroupChecksum* checksum = done.add_checksums();
  checksum->set_group(GroupName(w, rank));
  checksum->set_checksum(step * 1000003 + chunk);  // every member gathered the same weights
  done.set_executions(1);
  return done;
}

}  // namespace psync::bench
