// CheckAgentBatchShape: whether an AgentBatch is well formed, the one check both ends of a shared
// AgentSession apply: the coordinator before it expands a batch (server/rpc/agent_batch.h), and a
// relaying agent before it merges batches of several node agents into one (agent/relay_hub.h), so
// that a merged batch is never refused as a whole for one part's fault. Pure; thread-safe.
//
// Well formed: a job id; 1..kMaxAgentBatchMessages messages; every entry of `staged` and of
// `merged_sync_dones` names at least one message, in strictly increasing order; every index in
// range; each message of one kind (staged entries, or one skip, one sync_done, one
// merged_sync_dones entry or one leave). What the messages say is for the
// tracker to judge. A malformed batch is INVALID_ARGUMENT naming the field, e.g.
// "batch.staged[2].messages[1]: 9 is out of range [0, 8)".
#ifndef PSYNC_WIRE_AGENT_BATCH_SHAPE_H_
#define PSYNC_WIRE_AGENT_BATCH_SHAPE_H_

#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::wire {

absl::Status CheckAgentBatchShape(const v1::AgentBatch& batch);

}  // namespace psync::wire

#endif  // PSYNC_WIRE_AGENT_BATCH_SHAPE_H_
