// KeepMessages: an AgentBatch reduced to some of its messages, renumbered, as a relaying agent
// forwards it when some of its messages may not go up (their rank is not attached on the stream
// they came on). Pure; thread-safe.
//
// The kept messages keep their order and their content: a kept message's check-ins are the
// entries that named it, in the same order, so the coordinator expands it exactly as before.
// Entries left naming no message are dropped.
#ifndef PSYNC_AGENT_BATCH_SUBSET_H_
#define PSYNC_AGENT_BATCH_SUBSET_H_

#include <cstdint>
#include <vector>

#include "proto/psync/v1/coordinator.pb.h"

namespace psync::agent {

// Whether every message index the batch names is below ranks_size() (what KeepMessages needs).
bool IndicesInRange(const v1::AgentBatch& batch);

// The messages i of `batch` with keep[i] (keep.size() == ranks_size()), renumbered 0..; *index_of
// gets, for each message of the result, its index in `batch`. Requires IndicesInRange(batch).
v1::AgentBatch KeepMessages(const v1::AgentBatch& batch, const std::vector<bool>& keep,
                            std::vector<uint32_t>* index_of);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_BATCH_SUBSET_H_
