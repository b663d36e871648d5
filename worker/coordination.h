// Coordination: what the worker's training loop needs from the psync coordinator, as a small
// interface: check in a staged chunk, wait for a chunk's sync directive, report a sync done.
//
// The production links forward to psync::Client (client/client.h), so the data flows worker ->
// client library -> Session stream -> coordinator, and statuses come back unchanged (the Ack's
// code: FAILED_PRECONDITION for a SyncDone before the release, ...):
//  * NewClientCoordination: every report waits for its Ack (one round trip each).
//  * NewAsyncClientCoordination: reports use the client's asynchronous calls and return at once, so
//  the
//    training loop never waits a round trip per check-in. The client writes them in the order
//    they were made (a SyncDone of step s reaches the coordinator before the check-ins of step
//    s + 1). The first report the coordinator refuses is kept: from then on every call returns it
//    (prefixed with the report it answered). Flush() waits (at most the client's call timeout
//    since the last answer arrived) until every report was answered and returns that first
//    error, or OK; the destructor flushes.
// Tests substitute a fake.
//
// Thread-safety: as the implementation; the client links are thread-safe.
#ifndef PSYNC_WORKER_COORDINATION_H_
#define PSYNC_WORKER_COORDINATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync {
namespace worker {

class Coordination {
 public:
  virtual ~Coordination() = default;

  // `optimizer` of this rank staged `chunk` for `step`.
  virtual absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) = 0;
  // Several check-ins in one report, applied all or none. The default sends them one by one.
  virtual absl::Status ReportStagedBatch(const std::vector<psync::v1::Staged>& items) {
    for (const psync::v1::Staged& item : items) {
      absl::Status status = ReportStaged(item.step(), item.chunk(), item.optimizer());
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  // This rank ran the param sync of (step, chunk) `executions` times so far (>= 1); one checksum
  // per sync group (may be empty).
  virtual absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                                      std::vector<psync::v1::GroupChecksum> checksums,
                                      uint32_t executions) = 0;
  // The directive of (step, chunk), once; DEADLINE_EXCEEDED after `timeout`.
  virtual absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                                    absl::Duration timeout) = 0;
  // Returns once every report made so far was answered: the first error among them, or OK.
  // Links that answer each report before returning have nothing to wait for.
  virtual absl::Status Flush() { return absl::OkStatus(); }
};

// Links over `client` (borrowed; must outlive the link).
std::unique_ptr<Coordination> NewClientCoordination(psync::Client* client);
// `flush_timeout`: how long Flush() waits without any answer arriving.
std::unique_ptr<Coordination> NewAsyncClientCoordination(psync::Client* client,
                                                         absl::Duration flush_timeout);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COORDINATION_H_
