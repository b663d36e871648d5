#include "bench/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::bench {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const std::vector<std::string>& argv,
                                                              const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("argv must not be empty");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string log = log_path.empty() ? "/dev/null" : log_path;
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    // The parent may block signals in its threads; the child starts with none blocked.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid));
}

Subprocess::~Subprocess() { Stop(); }

bool Subprocess::Running() {
  if (reaped_) return false;
  const pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

int Subprocess::Stop(absl::Duration grace) {
  if (!Running()) return status_;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (!Running()) return status_;
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status_, 0);
  reaped_ = true;
  return status_;
}

absl::StatusOr<int> WaitForPortFile(const std::string& path, Subprocess* child,
                                    absl::Duration timeout, bool zero_ok) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    int port = -1;
    if (in && (in >> port) && (port > 0 || (zero_ok && port == 0))) return port;
    if (child != nullptr && !child->Running()) {
      return absl::AbortedError(
          absl::StrCat("process ", child->pid(), " exited before writing ", path));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no port in ", path, " after ", absl::FormatDuration(timeout)));
}

}  // namespace psync::bench
