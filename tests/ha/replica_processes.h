// ReplicaProcesses: psync-coordinator replicas as processes for the HA tests, on one etcd
// (tests/ha/etcd_process.h), each at a fixed 127.0.0.1 address of its own (--listen and
// --advertise), so that a replica killed and started again comes back at the same address.
// OwnerOf asks a replica which replica owns a job (ListReplicas). Thread-compatible; the
// destructor kills what is still running.
#ifndef PSYNC_TESTS_HA_REPLICA_PROCESSES_H_
#define PSYNC_TESTS_HA_REPLICA_PROCESSES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace psync::testing {

struct ReplicaOptions {
  std::string binary;  // psync-coordinator
  std::string dir;     // logs and port files
  std::string etcd;    // the etcd endpoint
  int replicas = 3;
  absl::Duration lease_ttl = absl::Seconds(2);
};

class ReplicaProcesses {
 public:
  // Picks a free address per replica; starts none.
  explicit ReplicaProcesses(ReplicaOptions options);
  ~ReplicaProcesses();
  ReplicaProcesses(const ReplicaProcesses&) = delete;
  ReplicaProcesses& operator=(const ReplicaProcesses&) = delete;

  // Starts replica i (again) at its address and waits for its port file; false when none came.
  bool Start(int i);
  // kill -9 and reap; its address stays its own.
  void Kill(int i);
  pid_t pid(int i) const { return pids_[i]; }
  const std::vector<std::string>& addresses() const { return addresses_; }
  // The addresses, comma-separated (a client's or an agent's target list).
  std::string targets() const;
  // The index of `address` in addresses(), or -1.
  int IndexOf(const std::string& address) const;
  // The owner of `job` as the first running replica that names one sees it ("" when none does).
  std::string Owner(const std::string& job) const;
  // What each running replica's ListReplicas answers now, one line each (its status when the call
  // fails): for the message of a test that found no owner.
  std::string Views() const;

 private:
  const ReplicaOptions options_;
  std::vector<std::string> addresses_;
  std::vector<pid_t> pids_;
  int starts_ = 0;
};

// The owner of `job` as the replica at `target` sees it ("" when unknown or unreachable).
std::string OwnerOf(const std::string& target, const std::string& job);

}  // namespace psync::testing

#endif  // PSYNC_TESTS_HA_REPLICA_PROCESSES_H_
