#include "server/ha/owner_audit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace psync::server {

void AuditTotalsToProto(const observe::AuditTotals& t, v1::AuditTotals* out) {
  out->set_released(t.released);
  out->set_resumed(t.resumed);
  out->set_complete(t.complete);
  out->set_double_releases(t.double_releases);
  out->set_checksum_mismatches(t.checksum_mismatches);
  out->set_early_syncs(t.early_syncs);
  out->set_repeated_syncs(t.repeated_syncs);
}

std::string EncodeOwnerAudit(const std::string& replica, uint64_t epoch,
                             const observe::AuditTotals& totals) {
  v1::OwnerAudit audit;
  audit.set_replica(replica);
  audit.set_epoch(epoch);
  AuditTotalsToProto(totals, audit.mutable_totals());
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Cannot fail for a message of known fields and valid UTF-8 (replica is a host:port).
  (void)google::protobuf::util::MessageToJsonString(audit, &json, options);
  return json;
}

absl::StatusOr<v1::OwnerAudit> DecodeOwnerAudit(const std::string& record) {
  v1::OwnerAudit audit;
  if (auto s = google::protobuf::util::JsonStringToMessage(record, &audit); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("owner audit record is not a psync.v1.OwnerAudit: ", s.message().ToString()));
  }
  return audit;
}

namespace {

void Add(const v1::AuditTotals& t, v1::AuditTotals* sum) {
  sum->set_released(sum->released() + t.released());
  sum->set_resumed(sum->resumed() + t.resumed());
  sum->set_complete(sum->complete() + t.complete());
  sum->set_double_releases(sum->double_releases() + t.double_releases());
  sum->set_checksum_mismatches(sum->checksum_mismatches() + t.checksum_mismatches());
  sum->set_early_syncs(sum->early_syncs() + t.early_syncs());
  sum->set_repeated_syncs(sum->repeated_syncs() + t.repeated_syncs());
}

}  // namespace

void AddEarlierOwners(const std::vector<std::string>& earlier_owners, v1::GetAuditResponse* out) {
  v1::AuditTotals* job = out->mutable_job_totals();
  *job = v1::AuditTotals();
  uint64_t released_before = 0;  // re-announced to a later owner: released by an earlier one
  for (const std::string& record : earlier_owners) {
    absl::StatusOr<v1::OwnerAudit> part = DecodeOwnerAudit(record);
    if (!part.ok()) continue;
    if (out->earlier_owners_size() > 0) released_before += part->totals().resumed();
    Add(part->totals(), job);
    *out->add_earlier_owners() = std::move(*part);
  }
  if (out->earlier_owners_size() > 0) released_before += out->totals().resumed();
  Add(out->totals(), job);
  // Each owner's resumed are among its released, so this never exceeds the sum; kept defensive.
  job->set_released(job->released() - std::min(released_before, job->released()));
}

}  // namespace psync::server
