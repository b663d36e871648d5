// The surgery a relaying agent does on AgentBatches (agent/relay_hub.h). Pure; thread-safe.
//
// KeepMessages: a batch reduced to some of its messages, renumbered, when some of them may not go
// up (their rank is not attached on the stream they came on). The kept messages keep their order
// and their content: a kept message's check-ins are the entries that named it, in the same order,
// so the coordinator expands it exactly as before. Entries left naming no message are dropped.
//
// AppendBatch / SplitRejected: several node agents' batches of one job and generation as one
// (each part's messages after the previous part's, every index moved by the part's offset: the
// coordinator expands the merged batch into exactly the parts' messages, in order), and the
// coordinator's answer to it split back by part. All require well-formed batches
// (wire/agent_batch_shape.h).
#ifndef PSYNC_AGENT_BATCH_PARTS_H_
#define PSYNC_AGENT_BATCH_PARTS_H_

#include <cstdint>
#include <vector>

#include "proto/psync/v1/coordinator.pb.h"

namespace psync::agent {

// The messages i of `batch` with keep[i] (keep.size() == ranks_size()), renumbered 0..; *index_of
// gets, for each message of the result, its index in `batch`. Requires a well-formed batch
// (wire/agent_batch_shape.h).
v1::AgentBatch KeepMessages(const v1::AgentBatch& batch, const std::vector<bool>& keep,
                            std::vector<uint32_t>* index_of);

// Appends `part`'s messages and entries to `merged`, every index moved by the number of messages
// `merged` had, which is returned (the part's offset). An empty `merged` takes the part's job and
// generation.
uint32_t AppendBatch(v1::AgentBatch part, v1::AgentBatch* merged);

// The rejected messages of `ack`, an answer to a batch made of parts of `counts` messages in
// order, by part, each renumbered from its part's first message. Indices past the parts are
// dropped.
std::vector<std::vector<v1::MessageStatus>> SplitRejected(const v1::AgentAck& ack,
                                                          const std::vector<uint32_t>& counts);

}  // namespace psync::agent

#endif  // PSYNC_AGENT_BATCH_PARTS_H_
