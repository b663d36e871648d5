// RankMessage: one Session message of one rank (a StagedBatch, a SkipStep, a SyncDoneBatch or a
// Leave) in
// the core's types, for applying several ranks' messages at once (Coordinator::ApplyBatch, fed by
// node agents).
//
// A view: its items live in the ExpandedBatch (server/rpc/agent_batch.h) it came from and are valid
// as long as that batch is neither changed nor destroyed. Thread-compatible.
#ifndef PSYNC_SERVER_OWNER_RANK_MESSAGE_H_
#define PSYNC_SERVER_OWNER_RANK_MESSAGE_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::server {

struct RankMessage {
  enum class Kind { kStaged, kSkip, kSyncDone, kLeave };

  core::RankId rank = 0;
  Kind kind = Kind::kStaged;
  absl::Span<const core::StagedItem> staged;       // kStaged
  core::Step skip_step = 0;                        // kSkip
  absl::string_view skip_reason;                   // kSkip
  absl::Span<const core::SyncDoneItem> sync_done;  // kSyncDone
  bool leave_finished = false;                     // kLeave
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_RANK_MESSAGE_H_
