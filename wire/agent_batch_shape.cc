#include "wire/agent_batch_shape.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "wire/limits.h"

namespace psync::wire {
namespace {

enum class Seen : uint8_t { kNone, kStaged, kSkip, kSyncDone, kMergedSyncDone, kLeave };

const char* SeenName(Seen s) {
  switch (s) {
    case Seen::kStaged:
      return "staged";
    case Seen::kSkip:
      return "skips";
    case Seen::kSyncDone:
      return "sync_dones";
    case Seen::kMergedSyncDone:
      return "merged_sync_dones";
    case Seen::kLeave:
      return "leaves";
    case Seen::kNone:
      break;
  }
  return "none";
}

// Checks that message `index` (named by `field()`, which is called only for an error) is in range
// and may be of kind `kind`.
template <typename FieldName>
absl::Status Claim(const FieldName& field, uint32_t index, Seen kind, std::vector<Seen>* seen) {
  if (index >= seen->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field(), ": ", index, " is out of range [0, ", seen->size(), ")"));
  }
  Seen& s = (*seen)[index];
  if (s != Seen::kNone && (s != Seen::kStaged || kind != Seen::kStaged)) {
    return absl::InvalidArgumentError(absl::StrCat(field(), ": message ", index,
                                                   " is already named in ", SeenName(s),
                                                   "; a message has one kind"));
  }
  s = kind;
  return absl::OkStatus();
}

// Entry `g` of the batch's list `list`, naming `messages`: at least one, strictly increasing, each
// claimed as `kind` (a message may be named by several staged entries, by one entry of any other
// list).
absl::Status CheckEntry(absl::string_view list, int g,
                        const google::protobuf::RepeatedField<uint32_t>& messages, Seen kind,
                        std::vector<Seen>* seen) {
  if (messages.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch.", list, "[", g, "].messages must not be empty"));
  }
  for (int k = 0; k < messages.size(); ++k) {
    const uint32_t index = messages[k];
    if (k > 0 && index <= messages[k - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch.", list, "[", g, "].messages[", k, "]: ", index,
                       " must be above the previous index ", messages[k - 1]));
    }
    if (index < seen->size() && (*seen)[index] == Seen::kStaged && kind == Seen::kStaged) continue;
    const auto field = [&] { return absl::StrCat("batch.", list, "[", g, "].messages[", k, "]"); };
    if (absl::Status s = Claim(field, index, kind, seen); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAgentBatchShape(const v1::AgentBatch& batch) {
  if (batch.job_id().empty()) {
    return absl::InvalidArgumentError("batch.job_id must not be empty");
  }
  const size_t n = batch.ranks_size();
  if (n == 0 || n > kMaxAgentBatchMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch.ranks: ", n, " messages; allowed 1..", kMaxAgentBatchMessages));
  }
  std::vector<Seen> seen(n, Seen::kNone);
  for (int g = 0; g < batch.staged_size(); ++g) {
    if (absl::Status s = CheckEntry("staged", g, batch.staged(g).messages(), Seen::kStaged, &seen);
        !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < batch.skips_size(); ++i) {
    const auto field = [i] { return absl::StrCat("batch.skips[", i, "].message"); };
    if (absl::Status s = Claim(field, batch.skips(i).message(), Seen::kSkip, &seen); !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < batch.sync_dones_size(); ++i) {
    const auto field = [i] { return absl::StrCat("batch.sync_dones[", i, "].message"); };
    if (absl::Status s = Claim(field, batch.sync_dones(i).message(), Seen::kSyncDone, &seen);
        !s.ok()) {
      return s;
    }
  }
  for (int g = 0; g < batch.merged_sync_dones_size(); ++g) {
    if (absl::Status s = CheckEntry("merged_sync_dones", g, batch.merged_sync_dones(g).messages(),
                                    Seen::kMergedSyncDone, &seen);
        !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < batch.leaves_size(); ++i) {
    const auto field = [i] { return absl::StrCat("batch.leaves[", i, "].message"); };
    if (absl::Status s = Claim(field, batch.leaves(i).message(), Seen::kLeave, &seen); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace psync::wire
