#include "agent/merge.h"

#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace psync::agent {
namespace {

using StagedKey = std::tuple<uint64_t, uint32_t, std::string, bool, uint64_t>;

StagedKey KeyOf(const v1::Staged& s) {
  return {s.step(), s.chunk(), s.optimizer(), s.has_shard_checksum(),
          s.has_shard_checksum() ? s.shard_checksum() : 0};
}

bool SameSyncDone(const v1::SyncDone& a, const v1::SyncDone& b) {
  if (a.step() != b.step() || a.chunk() != b.chunk() || a.executions() != b.executions() ||
      a.checksums_size() != b.checksums_size()) {
    return false;
  }
  for (int i = 0; i < a.checksums_size(); ++i) {
    if (a.checksums(i).checksum() != b.checksums(i).checksum() ||
        a.checksums(i).group() != b.checksums(i).group()) {
      return false;
    }
  }
  return true;
}

bool SameItems(const google::protobuf::RepeatedPtrField<v1::SyncDone>& a,
               const google::protobuf::RepeatedPtrField<v1::SyncDone>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!SameSyncDone(a[i], b[i])) return false;
  }
  return true;
}

// The merged_sync_dones entry carrying exactly `items`, or a new one. A node's ranks send the
// same few SyncDones: the newest kMaxScan entries are compared (beyond, equal items get an entry
// of their own, which is correct, only less merged).
v1::MergedSyncDone* EntryFor(const google::protobuf::RepeatedPtrField<v1::SyncDone>& items,
                             v1::AgentBatch* batch) {
  constexpr int kMaxScan = 16;
  const int n = batch->merged_sync_dones_size();
  for (int k = n - 1; k >= 0 && n - k <= kMaxScan; --k) {
    if (SameItems(batch->merged_sync_dones(k).items(), items)) {
      return batch->mutable_merged_sync_dones(k);
    }
  }
  v1::MergedSyncDone* entry = batch->add_merged_sync_dones();
  *entry->mutable_items() = items;
  return entry;
}

}  // namespace

uint64_t GenerationOf(const v1::SessionUp& up) {
  switch (up.kind_case()) {
    case v1::SessionUp::kStaged:
      return up.staged().generation();
    case v1::SessionUp::kSkip:
      return up.skip().generation();
    case v1::SessionUp::kSyncDone:
      return up.sync_done().generation();
    case v1::SessionUp::kLeave:
      return up.leave().generation();
    default:
      return 0;
  }
}

v1::AgentBatch MergeMessages(const std::string& job_id, uint64_t generation,
                             absl::Span<const MergeInput> messages, const MergeOptions& options) {
  v1::AgentBatch batch;
  batch.set_job_id(job_id);
  batch.set_generation(generation);
  // Newest entry of each check-in.
  absl::flat_hash_map<StagedKey, int> newest;
  for (size_t i = 0; i < messages.size(); ++i) {
    const uint32_t index = static_cast<uint32_t>(i);
    const v1::SessionUp& up = *messages[i].up;
    batch.add_ranks(messages[i].rank);
    switch (up.kind_case()) {
      case v1::SessionUp::kStaged: {
        int previous = -1;  // entry of this message's previous item
        for (const v1::Staged& item : up.staged().items()) {
          StagedKey key = KeyOf(item);
          auto it = newest.find(key);
          int entry;
          if (it != newest.end() && it->second > previous) {
            entry = it->second;
          } else {
            entry = batch.staged_size();
            v1::MergedStaged* m = batch.add_staged();
            m->set_step(item.step());
            m->set_chunk(item.chunk());
            m->set_optimizer(item.optimizer());
            if (item.has_shard_checksum()) m->set_shard_checksum(item.shard_checksum());
            newest[std::move(key)] = entry;
          }
          batch.mutable_staged(entry)->add_messages(index);
          previous = entry;
        }
        break;
      }
      case v1::SessionUp::kSkip: {
        v1::IndexedSkip* skip = batch.add_skips();
        skip->set_message(index);
        skip->set_step(up.skip().step());
        skip->set_reason(up.skip().reason());
        break;
      }
      case v1::SessionUp::kSyncDone: {
        if (options.merge_sync_dones) {
          EntryFor(up.sync_done().items(), &batch)->add_messages(index);
          break;
        }
        v1::IndexedSyncDone* done = batch.add_sync_dones();
        done->set_message(index);
        *done->mutable_items() = up.sync_done().items();
        break;
      }
      case v1::SessionUp::kLeave: {
        v1::IndexedLeave* leave = batch.add_leaves();
        leave->set_message(index);
        leave->set_finished(up.leave().finished());
        break;
      }
      default:
        break;
    }
  }
  return batch;
}

}  // namespace psync::agent
