// MergeMessages: several local ranks' Session messages (of one job and generation) as one
// AgentBatch, the message a node agent sends up its AgentSession. Pure; thread-safe.
//
// Message i of the batch is messages[i] (ranks[i] = its rank). Check-ins equal in (step, chunk,
// optimizer, shard_checksum) share one MergedStaged entry listing the messages that carry them,
// as long as each message's items stay in the order its rank sent them: an item joins the newest
// entry of its kind only if that entry comes after the message's previous item, else it opens a
// new entry (so an item repeated within one message also gets two entries). SyncDoneBatches with
// the same items (the members of a sync group report one checksum) share one merged_sync_dones
// entry, or, without MergeOptions::merge_sync_dones, are carried per message as skips are. The
// coordinator's ExpandAgentBatch (server/rpc/agent_batch.h) restores exactly the original
// messages.
#ifndef PSYNC_AGENT_MERGE_H_
#define PSYNC_AGENT_MERGE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::agent {

struct MergeInput {
  uint32_t rank = 0;
  // staged, skip or sync_done; any other kind is carried as an empty StagedBatch. Not owned.
  const v1::SessionUp* up = nullptr;
};

struct MergeOptions {
  // SyncDoneBatches in AgentBatch.merged_sync_dones; false: one IndexedSyncDone per message, the
  // only form a coordinator older than merged_sync_dones reads.
  bool merge_sync_dones = true;
};

v1::AgentBatch MergeMessages(const std::string& job_id, uint64_t generation,
                             absl::Span<const MergeInput> messages,
                             const MergeOptions& options = {});

// The generation a staged, skip or sync_done message carries (0 for other kinds).
uint64_t GenerationOf(const v1::SessionUp& up);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_MERGE_H_
