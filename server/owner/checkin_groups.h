// CheckinGroups: a node's batch of one-item check-ins grouped by the item they carry, so that
// Coordinator::ApplyBatch applies each group at once (core::JobTracker::StageMerged) instead of
// message by message. A batch is grouped only where the order of its messages cannot change an
// answer: every message is a StagedBatch of exactly one item, and, where one of its check-ins
// comes with two checksums (or an equal item starts a second group past Build's scan), no rank
// repeats a check-in. Such messages read and write disjoint state (each its own rank's mark of one
// chunk-step), except for the chunk's release, which waits for all of them either way. Otherwise
// a rank repeating an item stays in that item's group, in its messages' order, so the repeat is
// answered after the first, as a duplicate, exactly as on its own. Anything else (a SyncDone, a
// skip, a leave, several items, a rank repeating a check-in in a batch where some check-in is in
// two groups, more than 256 distinct items) is applied in order, message by message (where
// consecutive messages carry one SyncDone item alike, Job::ApplyMessages records their common
// reports together, in their order).
//
// SplitIntoRuns cuts a batch that mixes kinds (a node's SyncDones of one chunk beside its next
// check-ins, or a relay's batch of several nodes' messages) into runs applied in the batch's order:
// each maximal run of one-item check-ins that CheckinGroups groups, and the messages between them
// one by one. A run's messages see every message before the run applied and none after it, as
// they would one by one, so the answers are those of the batch applied message by message.
//
// Thread-compatible. Views the messages given to Build, which must outlive its use.
#ifndef PSYNC_SERVER_OWNER_CHECKIN_GROUPS_H_
#define PSYNC_SERVER_OWNER_CHECKIN_GROUPS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "server/core/types.h"
#include "server/owner/rank_message.h"

namespace psync::server {

class CheckinGroups {
 public:
  struct Group {
    const core::StagedItem* item = nullptr;  // the first message's; the others carry an equal one
    uint32_t begin = 0;                      // into ranks() and messages()
    uint32_t end = 0;
  };

  // Groups `messages`; false (and no groups) when they must be applied message by message.
  bool Build(absl::Span<const RankMessage> messages);

  const std::vector<Group>& groups() const { return groups_; }
  // A group's ranks, in the order of their messages, and those messages' indices in the batch.
  absl::Span<const core::RankId> ranks(const Group& g) const {
    return absl::MakeConstSpan(ranks_).subspan(g.begin, g.end - g.begin);
  }
  absl::Span<const uint32_t> messages(const Group& g) const {
    return absl::MakeConstSpan(messages_).subspan(g.begin, g.end - g.begin);
  }

 private:
  // An item's address and the group its messages went to.
  struct AddressGroup {
    const core::StagedItem* item = nullptr;
    uint32_t group = 0;
  };
  static constexpr size_t kAddressSlots = 64;
  static size_t AddressSlot(const core::StagedItem* item) {
    const auto bits = reinterpret_cast<uintptr_t>(item);
    return (bits ^ (bits >> 6) ^ (bits >> 12)) % kAddressSlots;
  }

  std::array<AddressGroup, kAddressSlots> by_address_;
  std::vector<Group> groups_;
  std::vector<uint32_t> base_of_;    // per group: the first group of its (step, chunk, optimizer)
  std::vector<uint32_t> group_of_;   // per message
  std::vector<uint64_t> keys_;       // (base << 32) | rank per message, when a base is shared
  std::vector<core::RankId> ranks_;  // grouped
  std::vector<uint32_t> messages_;   // grouped
};

// A part of a batch: messages [begin, end), grouped (indices in `groups` count from `begin`) or,
// without groups, applied one by one.
struct BatchRun {
  uint32_t begin = 0;
  uint32_t end = 0;
  std::optional<CheckinGroups> groups;
};

// The batch as runs, in its order (see above); one ungrouped run when nothing groups.
std::vector<BatchRun> SplitIntoRuns(absl::Span<const RankMessage> messages);

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_CHECKIN_GROUPS_H_
