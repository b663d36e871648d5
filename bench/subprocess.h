// Subprocess: a child process the benchmark starts (the coordinator, node agents, the echo server)
// and stops when it is done.
//
// Start() runs argv[0] with argv (no shell), its stdout and stderr appended to `log_path` (or
// /dev/null when empty), in its own process group. WaitForPortFile() polls for a file the child
// writes once it serves (psync-coordinator's --port_file) and returns the port (0 is accepted with
// `zero_ok`: psync-agent listening on a unix socket writes 0); it fails early with the child's exit
// status if the child dies. Stop() sends SIGTERM, waits up to `grace`, then
// SIGKILL; the destructor calls Stop(). Errors: INTERNAL when fork/exec fails, DEADLINE_EXCEEDED
// when the port file does not appear in time, ABORTED when the child exited first.
// Thread-compatible.
#ifndef PSYNC_BENCH_SUBPROCESS_H_
#define PSYNC_BENCH_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psync::bench {

class Subprocess {
 public:
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const std::vector<std::string>& argv,
                                                           const std::string& log_path);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // True while the child has not exited (reaps it if it has).
  bool Running();
  // SIGTERM, then SIGKILL after `grace`. Returns the exit status as waitpid reports it (-1 when
  // already reaped).
  int Stop(absl::Duration grace = absl::Seconds(5));

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool reaped_ = false;
  int status_ = -1;
};

absl::StatusOr<int> WaitForPortFile(const std::string& path, Subprocess* child,
                                    absl::Duration timeout, bool zero_ok = false);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_SUBPROCESS_H_
