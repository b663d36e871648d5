#include "worker/coordinator_link.h"

#include <utility>

namespace psync {
namespace worker {
namespace {

class ClientLink final : public CoordinatorLink {
 public:
  explicit ClientLink(psync::Client* client) : client_(client) {}

  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override {
    return client_->ReportStaged(step, chunk, optimizer);
  }
  absl::Status ReportStagedBatch(const std::vector<psync::v1::Staged>& items) override {
    return client_->ReportStagedBatch(items);
  }

  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override {
    return client_->ReportSyncDone(step, chunk, std::move(checksums), executions);
  }

  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration timeout) override {
    return client_->WaitForDirective(step, chunk, timeout);
  }

 private:
  psync::Client* const client_;
};

}  // namespace

std::unique_ptr<CoordinatorLink> NewClientLink(psync::Client* client) {
  return std::make_unique<ClientLink>(client);
}

}  // namespace worker
}  // namespace psync
