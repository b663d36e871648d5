// EtcdProcess: a real etcd (/usr/bin/etcd, Debian's etcd-server) for tests, on free 127.0.0.1
// ports with a data dir of the test's; it can be killed (kill -9) and started again on the same
// ports and data. Thread-compatible.
#ifndef PSYNC_TESTS_HA_ETCD_PROCESS_H_
#define PSYNC_TESTS_HA_ETCD_PROCESS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace psync::testing {

// A free TCP port on 127.0.0.1, below the kernel's range of ephemeral ports where one is free, so
// that no outgoing connection of the machine is given it before the caller listens on it (a test
// that listens later, or again after a restart, at an address chosen now). Bound and released:
// another process choosing ports the same way may still take it, which the caller sees as a
// failure to listen.
int FreePort();

class EtcdProcess {
 public:
  // Uses `dir` for its data and log (created).
  explicit EtcdProcess(std::string dir);
  ~EtcdProcess();

  // Starts etcd and waits (at most 30 s) until it answers a Range. FAILED_PRECONDITION when
  // /usr/bin/etcd is missing, UNAVAILABLE when it did not come up (its log is named).
  absl::Status Start();
  // kill -9 and reap; the data dir stays.
  void Kill();
  // "127.0.0.1:<client port>".
  std::string endpoint() const;

 private:
  const std::string dir_;
  const int client_port_;
  const int peer_port_;
  pid_t pid_ = -1;
  int starts_ = 0;
};

}  // namespace psync::testing

#endif  // PSYNC_TESTS_HA_ETCD_PROCESS_H_
