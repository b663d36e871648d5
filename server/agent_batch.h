// ExpandAgentBatch: the per-rank Session messages a node agent merged into one AgentBatch, back in
// the core's types and in the agent's order. Pure; thread-safe.
//
// Only the batch's shape is checked here (indices in range, each message of one kind); what the
// messages say is for the tracker to judge, rank by rank. A malformed batch is INVALID_ARGUMENT
// naming the field (e.g. "batch.staged[2].messages[1]: 9 is out of range [0, 8)").
#ifndef PSYNC_SERVER_AGENT_BATCH_H_
#define PSYNC_SERVER_AGENT_BATCH_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/rank_message.h"

namespace psync::server {

// Messages one AgentBatch may carry.
inline constexpr size_t kMaxAgentBatchMessages = 65536;

absl::StatusOr<std::vector<RankMessage>> ExpandAgentBatch(const v1::AgentBatch& batch);

}  // namespace psync::server

#endif  // PSYNC_SERVER_AGENT_BATCH_H_
