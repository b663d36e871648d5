#include "tests/worker/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

extern char** environ;

namespace psync::testing {

std::string ChildResult::Output() const {
  std::ifstream in(output_path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status ProcessGroup::Spawn(const std::vector<std::string>& argv,
                                 const std::string& output_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": error ", error));
  }
  pids_.push_back(pid);
  outputs_.push_back(output_path);
  return absl::OkStatus();
}

std::vector<ChildResult> ProcessGroup::Wait(absl::Duration timeout) {
  const size_t n = pids_.size();
  std::vector<ChildResult> results(n);
  absl::Mutex mu;
  std::vector<bool> done(n, false);
  size_t remaining = n;
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < n; ++i) {
    results[i].output_path = outputs_[i];
    waiters.emplace_back([&, i] {
      // Wait without reaping first: while the child is a zombie its pid cannot be reused, so the
      // deadline below may still kill() it safely.
      siginfo_t info;
      while (waitid(P_PID, pids_[i], &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
      }
      {
        absl::MutexLock lock(&mu);
        done[i] = true;
        --remaining;
      }
      int status = 0;
      while (waitpid(pids_[i], &status, 0) < 0 && errno == EINTR) {
      }
      if (WIFEXITED(status)) results[i].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) results[i].signal = WTERMSIG(status);
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto all_done = [&remaining]() { return remaining == 0; };
    if (!mu.AwaitWithTimeout(absl::Condition(&all_done), timeout)) {
      // Not marked done, so not reaped: the pids still name our children.
      for (size_t i = 0; i < n; ++i) {
        if (done[i]) continue;
        results[i].killed_at_deadline = true;
        kill(pids_[i], SIGKILL);
      }
    }
  }
  for (std::thread& t : waiters) t.join();
  pids_.clear();
  outputs_.clear();
  return results;
}

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  return absl::StrCat(root != nullptr ? root : ".", "/psync/", path);
}

std::string TempPath(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
}

}  // namespace psync::testing
