// RankMessage: one Session message of one rank (a StagedBatch, a SkipStep or a SyncDoneBatch) in
// the core's types, for applying several ranks' messages at once (Coordinator::ApplyBatch, fed by
// node agents). A plain value type. Thread-compatible.
#ifndef PSYNC_SERVER_RANK_MESSAGE_H_
#define PSYNC_SERVER_RANK_MESSAGE_H_

#include <string>
#include <vector>

#include "server/core/types.h"

namespace psync::server {

struct RankMessage {
  enum class Kind { kStaged, kSkip, kSyncDone };

  core::RankId rank = 0;
  Kind kind = Kind::kStaged;
  std::vector<core::StagedItem> staged;      // kStaged
  core::Step skip_step = 0;                  // kSkip
  std::string skip_reason;                   // kSkip
  std::vector<core::SyncDoneItem> sync_done;  // kSyncDone
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_RANK_MESSAGE_H_
