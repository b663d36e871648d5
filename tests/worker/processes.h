// Child processes for end-to-end tests: spawn a binary with its output captured in a file, and
// wait for a set of children with a deadline (no polling: one thread blocks in waitpid per child).
//
// Thread-compatible. Every child a ProcessGroup started is waited for (and killed first if the
// deadline passed) before Wait() returns.
#ifndef PSYNC_TESTS_WORKER_PROCESSES_H_
#define PSYNC_TESTS_WORKER_PROCESSES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psync::testing {

struct ChildResult {
  std::string output_path;  // stdout and stderr
  int exit_code = -1;       // -1 when killed by a signal
  int signal = 0;
  bool killed_at_deadline = false;

  // The whole output (empty if unreadable).
  std::string Output() const;
};

class ProcessGroup {
 public:
  // Starts argv[0] with the arguments argv[1..], stdout and stderr to `output_path`.
  absl::Status Spawn(const std::vector<std::string>& argv, const std::string& output_path);

  // Waits until every child exited or `timeout` passed; the children still running then are
  // killed (SIGKILL) and marked killed_at_deadline. Results in Spawn() order.
  std::vector<ChildResult> Wait(absl::Duration timeout);

 private:
  std::vector<pid_t> pids_;
  std::vector<std::string> outputs_;
};

// "$TEST_SRCDIR/psync/<path>": a runfile of the test.
std::string Runfile(const std::string& path);
// A fresh path under $TEST_TMPDIR (or /tmp).
std::string TempPath(const std::string& name);

}  // namespace psync::testing

#endif  // PSYNC_TESTS_WORKER_PROCESSES_H_
