// Conversions between psync.v1 messages and the core's domain types. Statuses go on the wire
// through wire/wire_status.h (included here for ToGrpcStatus). Pure functions; thread-safe.
#ifndef PSYNC_SERVER_RPC_CONVERT_H_
#define PSYNC_SERVER_RPC_CONVERT_H_

#include <cstdint>
#include <vector>

#include "proto/psync/v1/coordinator.pb.h"
#include "server/core/types.h"
#include "server/owner/coordinator.h"
#include "wire/wire_status.h"

namespace psync::server {

core::RankPlan RankPlanFromProto(const v1::JoinRequest& request);
v1::JoinResponse JoinResponseToProto(const core::JoinResult& joined);
// Client text in them (optimizer and group names) is cut by BoundEcho (wire_status.h): a longer
// name is never a declared one, and what the coordinator quotes and records stays bounded.
std::vector<core::StagedItem> StagedFromProto(const v1::StagedBatch& batch);
std::vector<core::SyncDoneItem> SyncDoneFromProto(const v1::SyncDoneBatch& batch);

v1::SessionDown NoticeToProto(const core::Notice& notice);
// `list_limit`: at most this many entries in each chunk's staged, missing, sync_pending_ranks
// (and staged_after_micros) lists; the *_count fields say how many there are.
// A request's list_limit as the views take it: 0 (or absent) is every entry.
inline size_t ListLimit(uint64_t requested) { return requested == 0 ? SIZE_MAX : requested; }

void JobStatusToProto(const JobStatusView& view, v1::JobStatus* out, size_t list_limit = SIZE_MAX);
void JobSummaryToProto(const JobStatusView& view, v1::JobSummary* out);
void ChunkStatusToProto(const core::ChunkSnapshot& chunk, absl::Duration deadline,
                        v1::ChunkStatus* out, size_t list_limit = SIZE_MAX);
// `earlier_owners`: the records Coordinator::Audit returns (server/ha/owner_audit.h).
void AuditToProto(const std::vector<observe::SyncAudit>& records,
                  const observe::AuditTotals& totals,
                  const std::vector<std::string>& earlier_owners, v1::GetAuditResponse* out);
void EventToProto(const core::Event& event, v1::Event* out);

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_CONVERT_H_
