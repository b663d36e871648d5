// Processes of the chaos tests: spawn a binary with its output appended to a file, kill one and
// reap it, and wait for a daemon's port file. Thread-compatible.
#ifndef PSYNC_TESTS_CHAOS_SPAWN_H_
#define PSYNC_TESTS_CHAOS_SPAWN_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace psync::chaos {

// Starts argv[0] with argv[1..], stdout and stderr appended to `output`; -1 when it cannot.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& output);
// SIGKILL, then waitpid.
void KillAndReap(pid_t pid);
// Reaps, without waiting, each of `pids` not marked in `exited` that has exited: marks it, and
// adds a test failure naming it (through `name(i)`) with the start of `stderr_of(i)`'s contents
// unless it exited with code 0. Returns how many are still running. `exited` has pids.size()
// entries.
size_t ReapExited(const std::vector<pid_t>& pids, std::vector<bool>* exited,
                  const std::function<std::string(size_t)>& name,
                  const std::function<std::string(size_t)>& stderr_of);
// How long a test's run may take from its start: bazel's TEST_TIMEOUT less a minute for the
// verdict and the cleanup (so a loaded machine, or one core under taskset, given a longer
// --test_timeout gets the time too), `fallback` without it.
absl::Duration RunBudget(absl::Duration fallback);
// The whole file (empty if unreadable).
std::string ReadFile(const std::string& path);
// The port written to `port_file` (serve/daemon.h's WritePortFile), waiting up to 20 s; 0 when
// none came.
int WaitForPort(const std::string& port_file);

}  // namespace psync::chaos

#endif  // PSYNC_TESTS_CHAOS_SPAWN_H_
