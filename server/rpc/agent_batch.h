// ExpandAgentBatch: the per-rank Session messages a node agent merged into one AgentBatch, back in
// the core's types and in the agent's order. Pure; thread-compatible (one ExpandedBatch per
// caller).
//
// Only the batch's shape is checked here (wire/agent_batch_shape.h, the check a relaying agent
// applies too); what the messages say is for the tracker to judge, rank by rank. A malformed batch
// is INVALID_ARGUMENT naming the field (e.g. "batch.staged[2].messages[1]: 9 is out of range
// [0, 8)").
#ifndef PSYNC_SERVER_RPC_AGENT_BATCH_H_
#define PSYNC_SERVER_RPC_AGENT_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/owner/rank_message.h"
#include "wire/limits.h"

namespace psync::server {

// The messages of one AgentBatch. Each message views its run of the two item pools (and a skip's
// reason views the AgentBatch), so a batch costs a few allocations however many ranks it names,
// and none once a reused ExpandedBatch has grown to the size of the batches it sees. The messages
// of one entry (a MergedStaged whose messages carry only its item, a MergedSyncDone) view one copy
// of its items. Move-only: a copy would leave the messages viewing the original's pools.
struct ExpandedBatch {
  ExpandedBatch() = default;
  ExpandedBatch(ExpandedBatch&&) = default;
  ExpandedBatch& operator=(ExpandedBatch&&) = default;
  ExpandedBatch(const ExpandedBatch&) = delete;
  ExpandedBatch& operator=(const ExpandedBatch&) = delete;

  std::vector<RankMessage> messages;  // in the batch's order (message i is batch.ranks(i))
  // One item per `staged` entry, then the runs of messages carrying several items.
  std::vector<core::StagedItem> staged_items;
  std::vector<core::SyncDoneItem> sync_done_items;
  std::vector<uint32_t> scratch;  // per message: staged items, then where its run starts (or 0)
};

// Fills `out` (its earlier contents are discarded, its capacity kept) with the messages of
// `batch`. `out` views `batch` (skip reasons): keep `batch` unchanged while `out` is used. On an
// error `out` is left empty.
absl::Status ExpandAgentBatch(const v1::AgentBatch& batch, ExpandedBatch* out);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_AGENT_BATCH_H_
