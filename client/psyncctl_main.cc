// psyncctl: see client/psyncctl.h for the commands, output and exit codes.
#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/psyncctl.h"

int main(int argc, char** argv) {
  // SIGINT/SIGTERM are handled by one thread: it stops a running `watch` (which then exits 0, or 1
  // when it printed a violation or stall); any other command still running after a short grace is
  // ended with the conventional status 130.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  static psync::ctl::Interrupt interrupt;
  std::thread([stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    interrupt.Fire();
    absl::SleepFor(absl::Seconds(2));
    std::_Exit(130);
  }).detach();

  const std::vector<std::string> args(argv + 1, argv + argc);
  const int code = psync::ctl::RunPsyncctl(args, std::cout, std::cerr, &interrupt);
  std::cout.flush();
  return code;
}
