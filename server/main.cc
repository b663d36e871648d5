// psync-coordinator: serves psync.v1.Coordinator until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/coordinator_server.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:7070", "host:port to serve gRPC on (port 0: any free port)");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file once serving");
ABSL_FLAG(int, max_receive_message_bytes, 1 << 20, "largest accepted client message");
ABSL_FLAG(uint32_t, history_steps, 16, "finished steps kept per job to answer late duplicates");
ABSL_FLAG(uint32_t, max_jobs, 1024, "jobs held at once");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("psync coordinator: gates each chunk's param sync until every "
                               "declared contributor staged, exactly once.");
  absl::ParseCommandLine(argc, argv);

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  psync::server::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.coordinator.tracker.history_steps = absl::GetFlag(FLAGS_history_steps);
  options.coordinator.max_jobs = absl::GetFlag(FLAGS_max_jobs);
  auto server = psync::server::CoordinatorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "psync-coordinator: " << server.status() << "\n";
    return 1;
  }
  std::cerr << "psync-coordinator: serving psync.v1 on port " << (*server)->port() << "\n";
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp) << (*server)->port() << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::cerr << "psync-coordinator: stopping on signal " << signal << "\n";
    (*server)->Shutdown();
  });
  (*server)->Wait();
  stopper.join();
  return 0;
}
