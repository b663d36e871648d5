#include "server/owner/checkin_groups.h"

#include <algorithm>

namespace psync::server {
namespace {

bool SameCheckin(const core::StagedItem& a, const core::StagedItem& b) {
  return a.step == b.step && a.chunk == b.chunk && a.optimizer == b.optimizer;
}

bool SameItem(const core::StagedItem& a, const core::StagedItem& b) {
  // A node's one-item check-ins of one entry view one item (ExpandAgentBatch).
  if (&a == &b) return true;
  return SameCheckin(a, b) && a.checksum == b.checksum;
}

}  // namespace

bool CheckinGroups::Build(absl::Span<const RankMessage> messages) {
  groups_.clear();
  base_of_.clear();
  group_of_.clear();
  keys_.clear();
  ranks_.clear();
  messages_.clear();
  // A node's ranks send the same few items: the group of the item's address is tried first
  // (below), then that of the message before, then the others from the newest, at most kMaxScan of
  // them (beyond, an equal item starts a group of its own, which is correct, only less merged).
  constexpr size_t kMaxScan = 64;
  // More distinct check-ins than a node sends at once: the batch is applied message by message.
  // The bound keeps Build linear in the batch (a new group's base is found by scanning the groups
  // before it).
  constexpr size_t kMaxGroups = 256;
  uint32_t last = 0;
  bool shared_base = false;  // two groups carry the same check-in (with different checksums)
  // The group last found for an item's address, by a hash of the address: the messages of one
  // entry of a batch view one item (ExpandAgentBatch), so a message finds its entry's group in
  // one probe, whichever entries' messages come between, and compares no optimizer name.
  by_address_.fill(AddressGroup{});
  for (const RankMessage& m : messages) {
    if (m.kind != RankMessage::Kind::kStaged || m.staged.size() != 1) {
      groups_.clear();
      return false;
    }
    const core::StagedItem& item = m.staged[0];
    AddressGroup& seen = by_address_[AddressSlot(&item)];
    bool found = seen.item == &item;
    if (found) last = seen.group;
    if (!found && !groups_.empty()) found = SameItem(*groups_[last].item, item);
    for (size_t k = groups_.size(); !found && k > 0 && groups_.size() - k < kMaxScan; --k) {
      found = SameItem(*groups_[k - 1].item, item);
      if (found) last = static_cast<uint32_t>(k - 1);
    }
    if (!found) {
      if (groups_.size() == kMaxGroups) {
        groups_.clear();
        return false;
      }
      last = static_cast<uint32_t>(groups_.size());
      uint32_t base = last;  // the same check-in with another checksum shares its base
      for (uint32_t g = 0; g < groups_.size(); ++g) {
        if (SameCheckin(*groups_[g].item, item)) {
          base = base_of_[g];
          shared_base = true;
          break;
        }
      }
      groups_.push_back({&item, 0, 0});
      base_of_.push_back(base);
    }
    seen = {&item, last};
    ++groups_[last].end;  // a count for now
    group_of_.push_back(last);
  }
  // A rank repeating a check-in within one group is applied in its messages' order there (the
  // repeat answered as on its own). Across groups of one check-in (two checksums, or an equal item
  // past the scan) the groups' order would decide the answers: where a check-in is in two groups,
  // a batch with any rank repeating a check-in goes message by message.
  if (shared_base) {
    for (size_t i = 0; i < messages.size(); ++i) {
      keys_.push_back((static_cast<uint64_t>(base_of_[group_of_[i]]) << 32) | messages[i].rank);
    }
    std::sort(keys_.begin(), keys_.end());
    if (std::adjacent_find(keys_.begin(), keys_.end()) != keys_.end()) {
      groups_.clear();
      return false;
    }
  }
  // Counting sort of the messages by group, keeping their order within a group.
  uint32_t start = 0;
  for (Group& g : groups_) {
    g.begin = start;
    start += g.end;
    g.end = g.begin;
  }
  ranks_.resize(messages.size());
  messages_.resize(messages.size());
  for (uint32_t i = 0; i < messages.size(); ++i) {
    Group& g = groups_[group_of_[i]];
    ranks_[g.end] = messages[i].rank;
    messages_[g.end] = i;
    ++g.end;
  }
  return true;
}

std::vector<BatchRun> SplitIntoRuns(absl::Span<const RankMessage> messages) {
  const auto is_checkin = [](const RankMessage& m) {
    return m.kind == RankMessage::Kind::kStaged && m.staged.size() == 1;
  };
  std::vector<BatchRun> runs;
  const auto one_by_one = [&runs](uint32_t begin, uint32_t end) {
    if (!runs.empty() && !runs.back().groups.has_value() && runs.back().end == begin) {
      runs.back().end = end;  // joins the messages applied one by one before it
    } else {
      runs.push_back({begin, end, std::nullopt});
    }
  };
  const uint32_t n = static_cast<uint32_t>(messages.size());
  for (uint32_t begin = 0; begin < n;) {
    uint32_t end = begin + 1;
    const bool checkins = is_checkin(messages[begin]);
    while (end < n && is_checkin(messages[end]) == checkins) ++end;
    CheckinGroups groups;
    if (checkins && groups.Build(messages.subspan(begin, end - begin))) {
      runs.push_back({begin, end, std::move(groups)});
    } else {
      one_by_one(begin, end);
    }
    begin = end;
  }
  return runs;
}

}  // namespace psync::server
