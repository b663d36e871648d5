// RendezvousCleanup: frees a job's rendezvous keys when the job leaves the coordinator (a
// job_ended or job_evicted event), and completes its parked KvGets with FAILED_PRECONDITION, so
// that a coordinator serving many jobs over months holds keys of live jobs only.
// An EventSink of the Coordinator, registered by the constructor and removed by the destructor.
// Thread-safe. Owns neither the coordinator nor the store; both must outlive it.
#ifndef PSYNC_SERVER_KV_RENDEZVOUS_CLEANUP_H_
#define PSYNC_SERVER_KV_RENDEZVOUS_CLEANUP_H_

#include <vector>

#include "server/kv/rendezvous_store.h"
#include "server/owner/coordinator.h"

namespace psync::server {

class RendezvousCleanup final : public EventSink {
 public:
  RendezvousCleanup(Coordinator* coordinator, RendezvousStore* store);
  ~RendezvousCleanup() override;
  RendezvousCleanup(const RendezvousCleanup&) = delete;
  RendezvousCleanup& operator=(const RendezvousCleanup&) = delete;

  void OnEvents(const std::vector<core::Event>& events) override;

 private:
  Coordinator* const coordinator_;
  RendezvousStore* const store_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_KV_RENDEZVOUS_CLEANUP_H_
