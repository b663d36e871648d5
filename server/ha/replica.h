// Replica: a coordinator replica's membership and job ownership in etcd: Ownership (the pure
// decisions, ownership.h) behind a lock, the etcd calls, and a thread that keeps the lease alive
// and refreshes the view. It is the Coordinator's JobGate (server/owner/job_gate.h).
//
// Two threads, so that a slow read of the view never delays a keepalive:
//   - the lease thread (KeepLease): without a lease, grants one (TTL ownership.lease_ttl) and
//     registers /psync/replicas/<self> under it; with one, sends a keepalive when due (a third of
//     the TTL after the last was sent) and wakes at the deadline; a keepalive that finds the lease
//     expired, or is answered too late, lapses it;
//   - the view thread (RefreshView), every poll_interval: reads /psync/replicas/ and /psync/jobs/
//     into the view, then runs a round of the audit ledger (audit_ledger.h: each owner's part of
//     a job's audit, published under /psync/audit/).
// Both hand the jobs that may no longer be served here (the lease lapsed, or etcd shows the job's
// key gone or someone else's) to the on_lost callback, once each. A lapse seen first by
// AdmitMessage (the deadline passed between rounds) refuses at once; its jobs go to on_lost at
// the next round.
// AdmitJoin claims an unowned job this replica is preferred for with a create-if-absent
// transaction (the etcd call is made without the lock held); AdmitMessage decides from memory.
//
// Thread-safe. Does not own the EtcdClient or the Clock; owns its thread (Start/Stop). Callbacks
// run on that thread with no lock held.
#ifndef PSYNC_SERVER_HA_REPLICA_H_
#define PSYNC_SERVER_HA_REPLICA_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "serve/clock.h"
#include "server/ha/audit_ledger.h"
#include "server/ha/etcd_client.h"
#include "server/ha/ownership.h"
#include "server/owner/job_gate.h"

namespace psync::server::ha {

struct ReplicaOptions {
  OwnershipOptions ownership;
  // How often the view is refreshed from etcd (and lost jobs are found).
  absl::Duration poll_interval = absl::Milliseconds(200);
  // Each owner's part of a job's audit in etcd (audit_ledger.h), kept by the view thread.
  AuditLedgerOptions audit;
  // Log ownership changes (claims, takeovers, losses, lease lapses) to stderr, one line each.
  bool log = true;
};

// What Describe() returns: for ListReplicas, psyncctl, the dashboard and metrics.
struct ReplicaSnapshot {
  std::string self;
  std::vector<std::string> replicas;  // live ones, sorted
  std::vector<JobOwner> owners;       // sorted by job
  bool holding = false;               // a lease is held now
  int64_t lease = 0;
  uint64_t jobs_owned = 0;
  uint64_t claims = 0;        // jobs claimed here
  uint64_t takeovers = 0;     // of those, jobs seen owned by another replica before
  uint64_t jobs_lost = 0;     // jobs dropped here (lease lapsed, key gone)
  uint64_t lease_lapses = 0;  // leases lost
  uint64_t etcd_errors = 0;   // etcd calls that failed
};

class Replica final : public JobGate {
 public:
  using LostCallback = std::function<void(const std::vector<std::string>& jobs)>;

  Replica(ReplicaOptions options, EtcdClient* etcd, serve::Clock* clock);
  ~Replica() override;
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Called with the jobs lost at each Tick (set before Start).
  void SetOnLost(LostCallback on_lost) { on_lost_ = std::move(on_lost); }
  // What this replica publishes as its part of a job's audit (set before Start).
  void SetAuditSource(AuditLedger::Source source, AuditLedger::EmptyRecord empty) {
    ledger_.SetSource(std::move(source), std::move(empty));
  }
  // Starts the lease thread and the view thread (see above), until Stop.
  void Start();
  // Stops the thread and revokes the lease (the jobs owned here are released at once). Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // One round of each thread: KeepLease, then RefreshView (tests call these instead of Start).
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);
  void KeepLease() ABSL_LOCKS_EXCLUDED(mu_);
  void RefreshView() ABSL_LOCKS_EXCLUDED(mu_);
  // When the lease thread runs KeepLease next: the next keepalive or the deadline, whichever is
  // first; poll_interval from now without a lease.
  absl::Time NextLeaseRound() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<uint64_t> AdmitJoin(const std::string& job_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<uint64_t> AdmitMessage(const std::string& job_id) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<uint64_t> AdmitQuery(const std::string& job_id) override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> EarlierOwnerAudits(const std::string& job_id) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void JobEnded(const std::string& job_id) override;

  ReplicaSnapshot Describe() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The status (or epoch) a route amounts to (RouteStatus).
  absl::StatusOr<uint64_t> Answer(const std::string& job_id, const Route& route) const;
  void Log(const std::string& line) const;
  // Logs a lapse Ownership recorded since the last call (`why`: "expired", "passed its
  // deadline"), once each, and returns the jobs lost since the last call, counted.
  std::vector<std::string> TakeLostLocked(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs `lost` and hands it to on_lost (no lock held).
  void HandLost(const std::vector<std::string>& lost) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const ReplicaOptions options_;
  EtcdClient* const etcd_;
  serve::Clock* const clock_;
  LostCallback on_lost_;
  AuditLedger ledger_;  // thread-safe; its rounds run on the view thread

  mutable absl::Mutex mu_;
  Ownership ownership_ ABSL_GUARDED_BY(mu_);
  // Jobs seen owned by another replica (a later claim here is a takeover).
  absl::flat_hash_set<std::string> owned_elsewhere_ ABSL_GUARDED_BY(mu_);
  ReplicaSnapshot counters_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;

  absl::Notification stop_;
  std::thread lease_thread_;
  std::thread view_thread_;
};

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_REPLICA_H_
