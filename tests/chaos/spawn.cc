#include "tests/chaos/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace psync::chaos {

pid_t Spawn(const std::vector<std::string>& argv, const std::string& output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int WaitForPort(const std::string& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    int port = 0;
    std::string text = ReadFile(port_file);
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

size_t ReapExited(const std::vector<pid_t>& pids, std::vector<bool>* exited,
                  const std::function<std::string(size_t)>& name,
                  const std::function<std::string(size_t)>& stderr_of) {
  size_t running = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    if ((*exited)[i]) continue;
    int status = 0;
    if (waitpid(pids[i], &status, WNOHANG) != pids[i]) {
      ++running;
      continue;
    }
    (*exited)[i] = true;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << name(i) << " exited with " << status << ":\n"
        << stderr_of(i).substr(0, 2000);
  }
  return running;
}

absl::Duration RunBudget(absl::Duration fallback) {
  const char* timeout = std::getenv("TEST_TIMEOUT");
  int seconds = 0;
  if (timeout != nullptr && absl::SimpleAtoi(timeout, &seconds) && seconds > 120) {
    return absl::Seconds(seconds - 60);
  }
  return fallback;
}

}  // namespace psync::chaos
