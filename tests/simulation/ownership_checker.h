// OwnershipChecker: the invariants of coordinator replicas, judged from what the replicas send
// (ReplicaWire) against what etcd holds at that moment (SimEtcd::Truth), never from a replica's
// own account of its lease:
//  * fenced releases: a directive of job J stamped with epoch E leaves replica R only while etcd
//    holds J's key for R, created at revision E (the key lives with R's lease, so it is there only
//    while etcd has not expired that lease);
//  * no revived lease: once R has answered "not served here" for J while serving J at epoch E,
//    R never releases J at epoch E again (serving again takes a new claim, a new epoch);
//  * fenced reads: R answers a read of J from J's live state only while etcd holds J's key for R.
// Violations go to the RankChecker, as safety violations.
//
// Not thread-safe (one simulation thread). Does not own the etcd or the RankChecker.
#ifndef PSYNC_TESTS_SIMULATION_OWNERSHIP_CHECKER_H_
#define PSYNC_TESTS_SIMULATION_OWNERSHIP_CHECKER_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "tests/simulation/rank_checker.h"
#include "tests/simulation/sim_coordinator.h"
#include "tests/simulation/sim_etcd.h"

namespace psync::simulation {

class OwnershipChecker final : public ReplicaWire {
 public:
  OwnershipChecker(SimEtcd* etcd, RankChecker* report) : etcd_(etcd), report_(report) {}

  void OnRelease(const std::string& replica, const std::string& job, uint64_t epoch) override;
  void OnNotServed(const std::string& replica, const std::string& job) override;
  void OnReadAnswered(const std::string& replica, const std::string& job) override;

  uint64_t releases_checked() const { return releases_; }
  uint64_t reads_checked() const { return reads_; }

 private:
  // What etcd holds for `job` now, in words.
  std::string Holder(const std::string& job);

  SimEtcd* const etcd_;
  RankChecker* const report_;
  // (replica, job) -> the epoch of its last release.
  absl::flat_hash_map<std::pair<std::string, std::string>, uint64_t> serving_;
  // (replica, job, epoch) it said it no longer serves.
  absl::flat_hash_set<std::tuple<std::string, std::string, uint64_t>> stopped_;
  uint64_t releases_ = 0;
  uint64_t reads_ = 0;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_OWNERSHIP_CHECKER_H_
