// SimReplica: a coordinator replica's membership and job ownership in the simulated world. It
// runs what server/ha/replica.h runs on its two threads, as rounds of events over a SimEtcd link:
// the lease round (grant and register, or a keepalive when due; the answer handled by
// Ownership::KeepAliveResult), the view round (replicas and job keys read every poll interval,
// not applied when a claim was made meanwhile), and the claim of an unowned job before its first
// Join. Every decision is Ownership's (server/ha/ownership.h), every answer RouteStatus's: only the
// threads and the blocking etcd calls are replaced. (The audit ledger is not simulated.)
//
// It is the JobGate of its process's Coordinator. A crash loses everything (the lease is not
// revoked: it expires in etcd); Start begins a new incarnation. While the process is paused
// (paused_until), nothing of it runs: its rounds and etcd answers wait for the pause to end.
//
// Not thread-safe (one simulation thread). Does not own the world or the etcd.
#ifndef PSYNC_TESTS_SIMULATION_SIM_REPLICA_H_
#define PSYNC_TESTS_SIMULATION_SIM_REPLICA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/ha/ownership.h"
#include "server/owner/job_gate.h"
#include "tests/simulation/sim_etcd.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

struct SimReplicaOptions {
  server::ha::OwnershipOptions ownership;
  absl::Duration poll_interval = absl::Milliseconds(200);
};

class SimReplica final : public server::JobGate {
 public:
  using LostCallback = std::function<void(const std::vector<std::string>& jobs)>;

  // `paused_until` is the process's pause (read at every event).
  SimReplica(World* world, SimEtcd* etcd, SimReplicaOptions options, const absl::Time* paused_until,
             LostCallback on_lost);

  const std::string& self() const { return options_.ownership.self; }
  // A new incarnation: no lease, no view; its rounds start.
  void Start();
  // Everything is lost; the rounds stop.
  void Crash();

  // Before a Join of `job`: when this replica is to claim it, claims it in etcd; `done` runs when
  // the Join may go on (the Coordinator's AdmitJoin then answers from what is known).
  void BeforeJoin(const std::string& job, std::function<void()> done);

  absl::StatusOr<uint64_t> AdmitJoin(const std::string& job_id) override;
  absl::StatusOr<uint64_t> AdmitMessage(const std::string& job_id) override;
  absl::StatusOr<uint64_t> AdmitQuery(const std::string& job_id) override;

  // The epoch it holds `job` at, when it owns it.
  std::optional<uint64_t> OwnedEpoch(const std::string& job) const;
  // Its link to etcd (for faults: SimEtcd::Partition, Slow).
  size_t etcd_link() const { return link_; }
  uint64_t lapses() const { return lapses_; }
  uint64_t claims() const { return claims_; }

 private:
  // Runs `fn` now, or when the process's pause ends; never after a crash of this incarnation.
  void Run(std::function<void()> fn);
  void After(absl::Duration delay, std::function<void()> fn);
  template <typename T>
  void Call(std::function<absl::StatusOr<T>(server::ha::EtcdClient&)> op,
            std::function<void(absl::StatusOr<T>)> done);
  void LeaseRound();
  void ViewRound();
  void HandLost(const char* why);
  void NextLeaseRound();

  World* const world_;
  SimEtcd* const etcd_;
  const SimReplicaOptions options_;
  const absl::Time* const paused_until_;
  const LostCallback on_lost_;
  const uint64_t origin_;
  const size_t link_;
  uint64_t incarnation_ = 0;
  std::unique_ptr<server::ha::Ownership> ownership_;  // null while crashed
  uint64_t claims_ = 0;
  uint64_t lapses_ = 0;       // over every incarnation
  uint64_t lapses_seen_ = 0;  // of this incarnation's Ownership
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIM_REPLICA_H_
