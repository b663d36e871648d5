#include "server/rpc/agent_batch.h"

#include <algorithm>
#include <utility>

#include "wire/agent_batch_shape.h"
#include "wire/wire_status.h"

namespace psync::server {
namespace {

// Appends `items` to `pool` (reserved beforehand, so earlier views stay valid) and views them.
absl::Span<const core::SyncDoneItem> AppendSyncDones(
    const google::protobuf::RepeatedPtrField<v1::SyncDone>& items,
    std::vector<core::SyncDoneItem>* pool) {
  const size_t first = pool->size();
  for (const v1::SyncDone& d : items) {
    core::SyncDoneItem& item = pool->emplace_back();
    item.step = d.step();
    item.chunk = d.chunk();
    for (const v1::GroupChecksum& c : d.checksums()) {
      item.checksums.push_back({wire::BoundEcho(c.group()), c.checksum()});
    }
    item.executions = std::max<uint32_t>(1, d.executions());
  }
  return absl::MakeConstSpan(pool->data() + first, pool->size() - first);
}

}  // namespace

absl::Status ExpandAgentBatch(const v1::AgentBatch& batch, ExpandedBatch* out) {
  out->messages.clear();
  out->staged_items.clear();
  out->sync_done_items.clear();
  if (absl::Status s = wire::CheckAgentBatchShape(batch); !s.ok()) return s;
  const size_t n = batch.ranks_size();
  std::vector<uint32_t>& items_of = out->scratch;  // staged items per message
  items_of.assign(n, 0);
  for (const v1::MergedStaged& m : batch.staged()) {
    for (uint32_t index : m.messages()) ++items_of[index];
  }
  // The pool: first one item per entry, viewed by every message that carries only that item (the
  // common case: a rank's check-in of one chunk); then the items of messages carrying several,
  // grouped by message (a counting sort: within a message they keep the order of `staged`, the
  // order the rank sent them in, see agent/merge.h, so item indices in errors match). items_of
  // becomes each such message's next free position.
  const size_t entries = batch.staged_size();
  uint32_t start = static_cast<uint32_t>(entries);
  for (uint32_t& count : items_of) {
    const uint32_t c = count;
    count = c > 1 ? start : 0;
    if (c > 1) start += c;
  }
  out->staged_items.resize(start);
  out->messages.resize(n);
  for (size_t i = 0; i < n; ++i) out->messages[i].rank = batch.ranks(static_cast<int>(i));
  for (size_t g = 0; g < entries; ++g) {
    const v1::MergedStaged& m = batch.staged(static_cast<int>(g));
    core::StagedItem& shared = out->staged_items[g];
    shared.step = m.step();
    shared.chunk = m.chunk();
    shared.optimizer = wire::BoundEcho(m.optimizer());  // as StagedFromProto (convert.h)
    if (m.has_shard_checksum()) shared.checksum = m.shard_checksum();
    for (uint32_t index : m.messages()) {
      RankMessage& message = out->messages[index];
      if (items_of[index] == 0) {  // its only item
        message.staged = absl::MakeConstSpan(&shared, 1);
        continue;
      }
      core::StagedItem* next = &out->staged_items[items_of[index]++];
      *next = shared;
      message.staged = absl::MakeConstSpan(next - message.staged.size(), message.staged.size() + 1);
    }
  }
  size_t done_total = 0;
  for (const v1::IndexedSyncDone& d : batch.sync_dones()) done_total += d.items_size();
  for (const v1::MergedSyncDone& d : batch.merged_sync_dones()) done_total += d.items_size();
  for (const v1::IndexedSkip& skip : batch.skips()) {
    RankMessage& m = out->messages[skip.message()];
    m.kind = RankMessage::Kind::kSkip;
    m.skip_step = skip.step();
    m.skip_reason = wire::BoundEchoView(skip.reason());  // a view into the batch
  }
  out->sync_done_items.reserve(done_total);  // no reallocation below: the spans stay valid
  for (const v1::IndexedSyncDone& done : batch.sync_dones()) {
    RankMessage& m = out->messages[done.message()];
    m.kind = RankMessage::Kind::kSyncDone;
    m.sync_done = AppendSyncDones(done.items(), &out->sync_done_items);
  }
  for (const v1::MergedSyncDone& done : batch.merged_sync_dones()) {
    // One copy of the items, viewed by every message carrying them.
    const absl::Span<const core::SyncDoneItem> items =
        AppendSyncDones(done.items(), &out->sync_done_items);
    for (uint32_t index : done.messages()) {
      RankMessage& m = out->messages[index];
      m.kind = RankMessage::Kind::kSyncDone;
      m.sync_done = items;
    }
  }
  for (const v1::IndexedLeave& leave : batch.leaves()) {
    RankMessage& m = out->messages[leave.message()];
    m.kind = RankMessage::Kind::kLeave;
    m.leave_finished = leave.finished();
  }
  return absl::OkStatus();
}

}  // namespace psync::server
