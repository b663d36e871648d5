#include "agent/batch_parts.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace psync::agent {

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
  for (const v1::MergedSyncDone& d : batch.merged_sync_dones()) {
    v1::MergedSyncDone kept;
    for (uint32_t index : d.messages()) {
      if (renumbered[index] != kDropped) kept.add_messages(renumbered[index]);
    }
    if (kept.messages().empty()) continue;
    *kept.mutable_items() = d.items();
    *out.add_merged_sync_dones() = std::move(kept);
  }
  for (const v1::IndexedLeave& l : batch.leaves()) {
    if (renumbered[l.message()] == kDropped) continue;
    v1::IndexedLeave* kept = out.add_leaves();
    *kept = l;
    kept->set_message(renumbered[l.message()]);
  }
  return out;
}

namespace {

// Moves every element of `from` to the end of `to` (heap messages: no copy, no allocation per
// element).
template <typename T>
void MoveAll(google::protobuf::RepeatedPtrField<T>* from,
             google::protobuf::RepeatedPtrField<T>* to) {
  std::vector<T*> elements(from->size());
  from->ExtractSubrange(0, from->size(), elements.data());
  for (T* e : elements) to->AddAllocated(e);
}

}  // namespace

uint32_t AppendBatch(v1::AgentBatch part, v1::AgentBatch* merged) {
  const uint32_t offset = static_cast<uint32_t>(merged->ranks_size());
  if (offset == 0) {
    merged->set_job_id(part.job_id());
    merged->set_generation(part.generation());
  }
  merged->mutable_ranks()->Add(part.ranks().begin(), part.ranks().end());
  for (v1::MergedStaged& m : *part.mutable_staged()) {
    for (uint32_t& index : *m.mutable_messages()) index += offset;
  }
  for (v1::IndexedSkip& skip : *part.mutable_skips()) skip.set_message(skip.message() + offset);
  for (v1::IndexedSyncDone& done : *part.mutable_sync_dones()) {
    done.set_message(done.message() + offset);
  }
  for (v1::MergedSyncDone& done : *part.mutable_merged_sync_dones()) {
    for (uint32_t& index : *done.mutable_messages()) index += offset;
  }
  for (v1::IndexedLeave& leave : *part.mutable_leaves())
    leave.set_message(leave.message() + offset);
  MoveAll(part.mutable_staged(), merged->mutable_staged());
  MoveAll(part.mutable_skips(), merged->mutable_skips());
  MoveAll(part.mutable_sync_dones(), merged->mutable_sync_dones());
  MoveAll(part.mutable_merged_sync_dones(), merged->mutable_merged_sync_dones());
  MoveAll(part.mutable_leaves(), merged->mutable_leaves());
  return offset;
}

std::vector<std::vector<v1::MessageStatus>> SplitRejected(const v1::AgentAck& ack,
                                                          const std::vector<uint32_t>& counts) {
  std::vector<uint32_t> ends;  // exclusive end of each part
  ends.reserve(counts.size());
  uint32_t end = 0;
  for (uint32_t c : counts) ends.push_back(end += c);
  std::vector<std::vector<v1::MessageStatus>> by_part(counts.size());
  for (const v1::MessageStatus& r : ack.rejected()) {
    const size_t k = std::upper_bound(ends.begin(), ends.end(), r.index()) - ends.begin();
    if (k == ends.size()) continue;
    v1::MessageStatus local = r;
    local.set_index(r.index() - (ends[k] - counts[k]));
    by_part[k].push_back(std::move(local));
  }
  return by_part;
}

}  // namespace psync::agent
