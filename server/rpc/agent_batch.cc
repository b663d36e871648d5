#include "server/rpc/agent_batch.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "wire/wire_status.h"

namespace psync::server {
namespace {

enum class Seen : uint8_t { kNone, kStaged, kSkip, kSyncDone, kLeave };

const char* SeenName(Seen s) {
  switch (s) {
    case Seen::kStaged:
      return "staged";
    case Seen::kSkip:
      return "skips";
    case Seen::kSyncDone:
      return "sync_dones";
    case Seen::kLeave:
      return "leaves";
    case Seen::kNone:
      break;
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

absl::Status ExpandAgentBatch(const v1::AgentBatch& batch, ExpandedBatch* out) {
  out->messages.clear();
  out->staged_items.clear();
  out->sync_done_items.clear();
  if (batch.job_id().empty()) {
    return absl::InvalidArgumentError("batch.job_id must not be empty");
  }
  const size_t n = batch.ranks_size();
  if (n == 0 || n > wire::kMaxAgentBatchMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch.ranks: ", n, " messages; allowed 1..", wire::kMaxAgentBatchMessages));
  }
  std::vector<Seen> seen(n, Seen::kNone);
  std::vector<uint32_t>& items_of = out->scratch;  // staged items per message
  items_of.assign(n, 0);
  size_t staged_total = 0;
  for (int g = 0; g < batch.staged_size(); ++g) {
    const v1::MergedStaged& m = batch.staged(g);
    if (m.messages_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch.staged[", g, "].messages must not be empty"));
    }
    for (int k = 0; k < m.messages_size(); ++k) {
      const uint32_t index = m.messages(k);
      if (k > 0 && index <= m.messages(k - 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch.staged[", g, "].messages[", k, "]: ", index,
                         " must be above the previous index ", m.messages(k - 1)));
      }
      if (index >= n || seen[index] != Seen::kStaged) {
        const std::string field = absl::StrCat("batch.staged[", g, "].messages[", k, "]");
        if (absl::Status s = Claim(field, index, Seen::kStaged, &seen); !s.ok()) return s;
      }
      ++items_of[index];
      ++staged_total;
    }
  }
  size_t done_total = 0;
  for (int i = 0; i < batch.skips_size(); ++i) {
    const std::string field = absl::StrCat("batch.skips[", i, "].message");
    if (absl::Status s = Claim(field, batch.skips(i).message(), Seen::kSkip, &seen); !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < batch.sync_dones_size(); ++i) {
    const std::string field = absl::StrCat("batch.sync_dones[", i, "].message");
    if (absl::Status s = Claim(field, batch.sync_dones(i).message(), Seen::kSyncDone, &seen);
        !s.ok()) {
      return s;
    }
    done_total += batch.sync_dones(i).items_size();
  }
  for (int i = 0; i < batch.leaves_size(); ++i) {
    const std::string field = absl::StrCat("batch.leaves[", i, "].message");
    if (absl::Status s = Claim(field, batch.leaves(i).message(), Seen::kLeave, &seen); !s.ok()) {
      return s;
    }
  }

  // Staged items grouped by message (a counting sort: within a message they keep the order of
  // `staged`, the order the rank sent them in, see agent/merge.h, so item indices in errors
  // match). items_of becomes each message's next free position.
  out->staged_items.resize(staged_total);
  uint32_t start = 0;
  for (uint32_t& count : items_of) {
    const uint32_t c = count;
    count = start;
    start += c;
  }
  out->messages.resize(n);
  for (size_t i = 0; i < n; ++i) {
    RankMessage& m = out->messages[i];
    m.rank = batch.ranks(static_cast<int>(i));
    const uint32_t end = i + 1 < n ? items_of[i + 1] : static_cast<uint32_t>(staged_total);
    m.staged = absl::MakeConstSpan(out->staged_items.data() + items_of[i], end - items_of[i]);
  }
  for (const v1::MergedStaged& m : batch.staged()) {
    for (uint32_t index : m.messages()) {
      core::StagedItem& item = out->staged_items[items_of[index]++];
      item.step = m.step();
      item.chunk = m.chunk();
      item.optimizer = wire::BoundEcho(m.optimizer());  // as StagedFromProto (convert.h)
      if (m.has_shard_checksum()) item.checksum = m.shard_checksum();
    }
  }
  for (const v1::IndexedSkip& skip : batch.skips()) {
    RankMessage& m = out->messages[skip.message()];
    m.kind = RankMessage::Kind::kSkip;
    m.skip_step = skip.step();
    m.skip_reason = wire::BoundEchoView(skip.reason());  // a view into the batch
  }
  out->sync_done_items.reserve(done_total);  // no reallocation below: the spans stay valid
  for (const v1::IndexedSyncDone& done : batch.sync_dones()) {
    const size_t first = out->sync_done_items.size();
    for (const v1::SyncDone& d : done.items()) {
      core::SyncDoneItem& item = out->sync_done_items.emplace_back();
      item.step = d.step();
      item.chunk = d.chunk();
      for (const v1::GroupChecksum& c : d.checksums()) {
        item.checksums.push_back({wire::BoundEcho(c.group()), c.checksum()});
      }
      item.executions = std::max<uint32_t>(1, d.executions());
    }
    RankMessage& m = out->messages[done.message()];
    m.kind = RankMessage::Kind::kSyncDone;
    m.sync_done = absl::MakeConstSpan(out->sync_done_items.data() + first,
                                      out->sync_done_items.size() - first);
  }
  for (const v1::IndexedLeave& leave : batch.leaves()) {
    RankMessage& m = out->messages[leave.message()];
    m.kind = RankMessage::Kind::kLeave;
    m.leave_finished = leave.finished();
  }
  return absl::OkStatus();
}

}  // namespace psync::server
