#include "server/agent_batch.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace psync::server {
namespace {

enum class Seen : uint8_t { kNone, kStaged, kSkip, kSyncDone };

const char* SeenName(Seen s) {
  switch (s) {
    case Seen::kStaged: return "staged";
    case Seen::kSkip: return "skips";
    case Seen::kSyncDone: return "sync_dones";
    case Seen::kNone: break;
  }
  return "none";
}

// Checks that message `index` (named by `field`) is in range and may be of kind `kind`.
absl::Status Claim(const std::string& field, uint32_t index, Seen kind, std::vector<Seen>* seen) {
  if (index >= seen->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", index, " is out of range [0, ", seen->size(), ")"));
  }
  Seen& s = (*seen)[index];
  if (s != Seen::kNone && (s != Seen::kStaged || kind != Seen::kStaged)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": message ", index,
                                                   " is already named in ", SeenName(s),
                                                   "; a message has one kind"));
  }
  s = kind;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<RankMessage>> ExpandAgentBatch(const v1::AgentBatch& batch) {
  if (batch.job_id().empty()) {
    return absl::InvalidArgumentError("batch.job_id must not be empty");
  }
  const size_t n = batch.ranks_size();
  if (n == 0 || n > kMaxAgentBatchMessages) {
    return absl::InvalidArgumentError(absl::StrCat("batch.ranks: ", n, " messages; allowed 1..",
                                                   kMaxAgentBatchMessages));
  }
  std::vector<RankMessage> out(n);
  std::vector<Seen> seen(n, Seen::kNone);
  for (size_t i = 0; i < n; ++i) out[i].rank = batch.ranks(static_cast<int>(i));

  for (int g = 0; g < batch.staged_size(); ++g) {
    const v1::MergedStaged& m = batch.staged(g);
    if (m.messages_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch.staged[", g, "].messages must not be empty"));
    }
    for (int k = 0; k < m.messages_size(); ++k) {
      const std::string field = absl::StrCat("batch.staged[", g, "].messages[", k, "]");
      const uint32_t index = m.messages(k);
      if (k > 0 && index <= m.messages(k - 1)) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": ", index,
                                                       " must be above the previous index ",
                                                       m.messages(k - 1)));
      }
      if (absl::Status s = Claim(field, index, Seen::kStaged, &seen); !s.ok()) return s;
    }
  }
  // A message's items are the entries naming it, in the order of `staged`: the agent keeps the
  // order the rank sent them in (see agent/merge.h), so item indices in errors match.
  for (const v1::MergedStaged& m : batch.staged()) {
    for (uint32_t index : m.messages()) {
      core::StagedItem item;
      item.step = m.step();
      item.chunk = m.chunk();
      item.optimizer = m.optimizer();
      if (m.has_shard_checksum()) item.checksum = m.shard_checksum();
      out[index].staged.push_back(std::move(item));
    }
  }
  for (int i = 0; i < batch.skips_size(); ++i) {
    const v1::IndexedSkip& skip = batch.skips(i);
    const std::string field = absl::StrCat("batch.skips[", i, "].message");
    if (absl::Status s = Claim(field, skip.message(), Seen::kSkip, &seen); !s.ok()) return s;
    RankMessage& m = out[skip.message()];
    m.kind = RankMessage::Kind::kSkip;
    m.skip_step = skip.step();
    m.skip_reason = skip.reason();
  }
  for (int i = 0; i < batch.sync_dones_size(); ++i) {
    const v1::IndexedSyncDone& done = batch.sync_dones(i);
    const std::string field = absl::StrCat("batch.sync_dones[", i, "].message");
    if (absl::Status s = Claim(field, done.message(), Seen::kSyncDone, &seen); !s.ok()) return s;
    RankMessage& m = out[done.message()];
    m.kind = RankMessage::Kind::kSyncDone;
    for (const v1::SyncDone& d : done.items()) {
      core::SyncDoneItem item;
      item.step = d.step();
      item.chunk = d.chunk();
      for (const v1::GroupChecksum& c : d.checksums()) {
        item.checksums.push_back({c.group(), c.checksum()});
      }
      item.executions = std::max<uint32_t>(1, d.executions());
      m.sync_done.push_back(std::move(item));
    }
  }
  return out;
}

}  // namespace psync::server
