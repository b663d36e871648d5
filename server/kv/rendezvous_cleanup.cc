#include "server/kv/rendezvous_cleanup.h"

#include "absl/strings/str_cat.h"

namespace psync::server {

RendezvousCleanup::RendezvousCleanup(Coordinator* coordinator, RendezvousStore* store)
    : coordinator_(coordinator), store_(store) {
  coordinator_->AddEventSink(this, nullptr);
}

RendezvousCleanup::~RendezvousCleanup() { coordinator_->RemoveEventSink(this); }

void RendezvousCleanup::OnEvents(const std::vector<core::Event>& events) {
  for (const core::Event& e : events) {
    if (e.kind != core::EventKind::kJobEnded && e.kind != core::EventKind::kJobEvicted) continue;
    store_->DropJob(e.job_id, absl::FailedPreconditionError(absl::StrCat(
                                  "job_id '", e.job_id.str(), "' has ",
                                  e.kind == core::EventKind::kJobEnded ? "ended" : "been evicted",
                                  ": ", e.detail)));
  }
}

}  // namespace psync::server
