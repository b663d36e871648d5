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
ABSL_FLAG(std::string, http_listen, "0.0.0.0:7071",
          "host:port for /metrics, the JSON API and the dashboard (empty: off; port 0: any)");
ABSL_FLAG(std::string, http_port_file, "", "if set, write the bound HTTP port to this file");
ABSL_FLAG(absl::Duration, inspect_interval, absl::Milliseconds(50),
          "how often to look for stalled chunks");
ABSL_FLAG(absl::Duration, rank_lease, absl::Seconds(10),
          "a joined rank without a session for this long is lost (job DEGRADED)");
ABSL_FLAG(absl::Duration, lost_rank_abort_after, absl::Seconds(30),
          "a rank lost this long aborts its generation (every rank gets Abort)");
ABSL_FLAG(double, stall_multiplier, 3.0, "stall deadline = multiplier x p99 of the chunk's waits");
ABSL_FLAG(absl::Duration, stall_floor, absl::Milliseconds(100), "smallest stall deadline");
ABSL_FLAG(absl::Duration, stall_ceiling, absl::Seconds(30), "largest stall deadline");
ABSL_FLAG(absl::Duration, stall_initial, absl::Seconds(1),
          "stall deadline before a chunk has enough history");
ABSL_FLAG(int, max_receive_message_bytes, 1 << 20, "largest accepted client message");
ABSL_FLAG(uint32_t, history_steps, 16, "finished steps kept per job to answer late duplicates");
ABSL_FLAG(uint32_t, max_jobs, 1024, "jobs held at once");

namespace {

// Writes `port` to `path` atomically (rename), so a reader never sees a partial file.
void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

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
  options.coordinator.observer.deadline.multiplier = absl::GetFlag(FLAGS_stall_multiplier);
  options.coordinator.observer.deadline.floor = absl::GetFlag(FLAGS_stall_floor);
  options.coordinator.observer.deadline.ceiling = absl::GetFlag(FLAGS_stall_ceiling);
  options.coordinator.observer.deadline.initial = absl::GetFlag(FLAGS_stall_initial);
  options.inspect_interval = absl::GetFlag(FLAGS_inspect_interval);
  options.coordinator.rank_lease = absl::GetFlag(FLAGS_rank_lease);
  options.coordinator.lost_rank_abort_after = absl::GetFlag(FLAGS_lost_rank_abort_after);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  auto server = psync::server::CoordinatorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "psync-coordinator: " << server.status() << "\n";
    return 1;
  }
  std::cerr << "psync-coordinator: serving psync.v1 on port " << (*server)->port() << "\n";
  if ((*server)->http_port() != 0) {
    std::cerr << "psync-coordinator: metrics at http://localhost:" << (*server)->http_port()
              << "/metrics, dashboard at http://localhost:" << (*server)->http_port() << "/\n";
  }
  WritePortFile(absl::GetFlag(FLAGS_port_file), (*server)->port());
  WritePortFile(absl::GetFlag(FLAGS_http_port_file), (*server)->http_port());
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
