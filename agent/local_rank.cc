#include "agent/local_rank.h"

#include <utility>

#include "wire/wire_status.h"

namespace psync::agent {

void LocalRank::AttachResult(const absl::Status& status) {
  if (!status.ok()) {
    Close(wire::ToGrpcStatus(status));
    return;
  }
  Enqueue(wire::AckFor(attach_request_id_, absl::OkStatus()));
}

void LocalRank::Ack(uint64_t request_id, const absl::Status& status) {
  counters_->local_acks.fetch_add(1);
  Enqueue(wire::AckFor(request_id, status));
}

void LocalRank::AckLater(uint64_t request_id) {
  counters_->local_lazy_acks.fetch_add(1);
  writer_.AckLater(request_id);
}

void LocalRank::FlushLazyAcks() { writer_.FlushLazyAcks(); }

void LocalRank::Notice(const v1::SessionDown& notice) {
  if (notice.has_directive()) {
    const v1::SyncDirective& d = notice.directive();
    absl::MutexLock lock(&mu_);
    if (!directives_.insert({d.generation(), d.step(), d.chunk()}).second) {
      counters_->duplicate_directives_dropped.fetch_add(1);
      return;
    }
    if (d.step() > newest_step_) {
      newest_step_ = d.step();
      // Forget directives far behind (a repeat that old is left to the client's own check).
      while (!directives_.empty() &&
             std::get<1>(*directives_.begin()) + kDirectiveWindowSteps < newest_step_) {
        directives_.erase(directives_.begin());
      }
    }
  }
  counters_->notices_delivered.fetch_add(1);
  Enqueue(notice);
}

void LocalRank::Enqueue(v1::SessionDown message) { writer_.Enqueue(std::move(message)); }

void LocalRank::Close(const grpc::Status& status) { writer_.Close(status); }

void LocalRank::WriteDone(bool ok) { writer_.WriteDone(ok); }

void LocalRank::DetachReactor() { writer_.Detach(); }

}  // namespace psync::agent
