// Limits both ends of a psync stream check: the coordinator refuses a message past them, and the
// node agent keeps its own settings within them. Constants only; no state.
#ifndef PSYNC_WIRE_LIMITS_H_
#define PSYNC_WIRE_LIMITS_H_

#include <cstddef>

namespace psync::wire {

// Messages one AgentBatch may carry.
inline constexpr size_t kMaxAgentBatchMessages = 65536;

}  // namespace psync::wire

#endif  // PSYNC_WIRE_LIMITS_H_
