// OwnershipChecker; contract: ownership_checker.h.
#include "tests/simulation/ownership_checker.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "server/ha/ownership.h"

namespace psync::simulation {

std::string OwnershipChecker::Holder(const std::string& job) {
  const std::optional<server::ha::KeyValue> key = etcd_->Truth(server::ha::kJobPrefix + job);
  if (!key.has_value()) return "no owner (the key is gone)";
  return absl::StrCat("'", key->value, "' at epoch ", key->create_revision);
}

void OwnershipChecker::OnRelease(const std::string& replica, const std::string& job,
                                 uint64_t epoch) {
  ++releases_;
  const std::optional<server::ha::KeyValue> key = etcd_->Truth(server::ha::kJobPrefix + job);
  if (!key.has_value() || key->value != replica ||
      static_cast<uint64_t>(key->create_revision) != epoch) {
    report_->Violation(absl::StrCat("replica '", replica, "' released job '", job, "' at epoch ",
                                    epoch, " while etcd names ", Holder(job),
                                    ": an unfenced release"));
    return;
  }
  if (stopped_.contains(std::make_tuple(replica, job, epoch))) {
    report_->Violation(absl::StrCat("replica '", replica, "' released job '", job, "' at epoch ",
                                    epoch,
                                    " after it said it no longer serves it: a revived lease"));
    return;
  }
  serving_[{replica, job}] = epoch;
}

void OwnershipChecker::OnNotServed(const std::string& replica, const std::string& job) {
  auto it = serving_.find({replica, job});
  if (it == serving_.end()) return;
  stopped_.insert({replica, job, it->second});
  serving_.erase(it);
}

void OwnershipChecker::OnReadAnswered(const std::string& replica, const std::string& job) {
  ++reads_;
  const std::optional<server::ha::KeyValue> key = etcd_->Truth(server::ha::kJobPrefix + job);
  if (!key.has_value() || key->value != replica) {
    report_->Violation(absl::StrCat("replica '", replica, "' answered a read of job '", job,
                                    "' from its state while etcd names ", Holder(job),
                                    ": an unfenced read"));
  }
}

}  // namespace psync::simulation
