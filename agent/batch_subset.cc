#include "agent/batch_subset.h"

#include <limits>

namespace psync::agent {

bool IndicesInRange(const v1::AgentBatch& batch) {
  const uint32_t n = static_cast<uint32_t>(batch.ranks_size());
  for (const v1::MergedStaged& m : batch.staged()) {
    for (uint32_t index : m.messages()) {
      if (index >= n) return false;
    }
  }
  for (const v1::IndexedSkip& s : batch.skips()) {
    if (s.message() >= n) return false;
  }
  for (const v1::IndexedSyncDone& d : batch.sync_dones()) {
    if (d.message() >= n) return false;
  }
  for (const v1::IndexedLeave& l : batch.leaves()) {
    if (l.message() >= n) return false;
  }
  return true;
}

v1::AgentBatch KeepMessages(const v1::AgentBatch& batch, const std::vector<bool>& keep,
                            std::vector<uint32_t>* index_of) {
  constexpr uint32_t kDropped = std::numeric_limits<uint32_t>::max();
  v1::AgentBatch out;
  out.set_job_id(batch.job_id());
  out.set_generation(batch.generation());
  index_of->clear();
  std::vector<uint32_t> renumbered(batch.ranks_size(), kDropped);
  for (int i = 0; i < batch.ranks_size(); ++i) {
    if (!keep[i]) continue;
    renumbered[i] = static_cast<uint32_t>(index_of->size());
    index_of->push_back(static_cast<uint32_t>(i));
    out.add_ranks(batch.ranks(i));
  }
  for (const v1::MergedStaged& m : batch.staged()) {
    v1::MergedStaged kept;
    for (uint32_t index : m.messages()) {
      if (renumbered[index] != kDropped) kept.add_messages(renumbered[index]);
    }
    if (kept.messages().empty()) continue;
    kept.set_step(m.step());
    kept.set_chunk(m.chunk());
    kept.set_optimizer(m.optimizer());
    if (m.has_shard_checksum()) kept.set_shard_checksum(m.shard_checksum());
    *out.add_staged() = std::move(kept);
  }
  for (const v1::IndexedSkip& s : batch.skips()) {
    if (renumbered[s.message()] == kDropped) continue;
    v1::IndexedSkip* kept = out.add_skips();
    *kept = s;
    kept->set_message(renumbered[s.message()]);
  }
  for (const v1::IndexedSyncDone& d : batch.sync_dones()) {
    if (renumbered[d.message()] == kDropped) continue;
    v1::IndexedSyncDone* kept = out.add_sync_dones();
    *kept = d;
    kept->set_message(renumbered[d.message()]);
  }
  for (const v1::IndexedLeave& l : batch.leaves()) {
    if (renumbered[l.message()] == kDropped) continue;
    v1::IndexedLeave* kept = out.add_leaves();
    *kept = l;
    kept->set_message(renumbered[l.message()]);
  }
  return out;
}

}  // namespace psync::agent
