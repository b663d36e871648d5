// Owner audits: one replica's part of a job's audit (psync.v1.OwnerAudit) as it publishes it in
// etcd (server/ha/audit_ledger.h), and the whole job's totals from the parts (GetAuditResponse's
// earlier_owners and job_totals). A record is the OwnerAudit in protobuf's JSON, so that
// `etcdctl get --prefix /psync/audit/` reads as text.
// Pure functions; thread-safe.
#ifndef PSYNC_SERVER_HA_OWNER_AUDIT_H_
#define PSYNC_SERVER_HA_OWNER_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/observe/job_observer.h"

namespace psync::server {

void AuditTotalsToProto(const observe::AuditTotals& totals, psync::v1::AuditTotals* out);

// The record `replica` publishes for its part of a job it owns at `epoch`.
std::string EncodeOwnerAudit(const std::string& replica, uint64_t epoch,
                             const observe::AuditTotals& totals);
// A record as EncodeOwnerAudit wrote it; INVALID_ARGUMENT for anything else.
absl::StatusOr<psync::v1::OwnerAudit> DecodeOwnerAudit(const std::string& record);

// Fills out->earlier_owners from `earlier_owners` (records, oldest first; one that does not decode
// is left out) and out->job_totals from them and out->totals (set before).
void AddEarlierOwners(const std::vector<std::string>& earlier_owners,
                      psync::v1::GetAuditResponse* out);

}  // namespace psync::server

#endif  // PSYNC_SERVER_HA_OWNER_AUDIT_H_
