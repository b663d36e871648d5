// psync-agent: serves the node's ranks until SIGINT or SIGTERM (see agent/agent.h).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "agent/agent.h"
#include "serve/daemon.h"
#include "serve/daemon_cpus.h"
#include "serve/flag_help.h"

ABSL_FLAG(std::string, target, "",
          "the coordinator's address, e.g. 10.0.0.1:7070, or its replicas, comma-separated "
          "(a:7070,b:7070,c:7070): jobs follow their owners (required)");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "where the node's ranks connect: host:port (port 0: any free port) or unix:PATH");
ABSL_FLAG(std::string, port_file, "",
          "if set, written once serving: the bound port (0 for a unix socket)");
ABSL_FLAG(absl::Duration, flush_window, absl::Milliseconds(20),
          "how long a queued message may wait for others to merge with; a check-in that completes "
          "a chunk on the node (or of a rank whose Join the agent did not forward) and a skip vote "
          "never wait (0: none, send when the stream is free)");
ABSL_FLAG(uint64_t, flush_messages, 1024, "send at once when this many messages are queued");
ABSL_FLAG(absl::Duration, relay_flush_window, absl::Milliseconds(2),
          "relaying other agents: how long their batches may wait for more to "
          "merge into one message to the coordinator, after the oldest arrived (0: none, send "
          "when the stream is free)");
ABSL_FLAG(
    int, relay_fanout_threads, -1,
    "relaying other agents: threads that write their shares of each coordinator message "
    "side by side, an agent's in order (0: the thread reading the coordinator writes them "
    "all; -1: one fewer than the CPUs the process is given (--cpus), at most 4, none below 3)");
ABSL_FLAG(uint64_t, max_batch_messages, 1024, "local messages per merged upstream message");
ABSL_FLAG(bool, merge_sync_dones, true,
          "send the ranks' equal SyncDones as one entry (AgentBatch.merged_sync_dones); false for "
          "a coordinator older than that field, which rejects them");
ABSL_FLAG(std::string, http_listen, "",
          "host:port (port 0: any free port) to serve GET /metrics on (Prometheus: the agent's "
          "counters and how long messages wait in it, both ways); empty: no HTTP side");
ABSL_FLAG(std::string, http_port_file, "", "if set, written once serving: the bound HTTP port");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(5),
          "on SIGTERM or SIGINT: health turns NOT_SERVING, no new rank call is accepted, and the "
          "ranks' open Sessions get this long to end before they are cancelled");

int main(int argc, char** argv) {
  const std::vector<psync::serve::FlagGroup> groups = {
      {"Serving the node's ranks", {"listen", "port_file", "drain_timeout", "cpus"}},
      {"Upstream (the coordinator)",
       {"target", "flush_window", "flush_messages", "max_batch_messages", "merge_sync_dones",
        "relay_flush_window", "relay_fanout_threads"}},
      {"Metrics", {"http_listen", "http_port_file"}},
  };
  psync::serve::ParseDaemonFlags(argc, argv, "psync-agent",
                                 "psync-agent: one coordinator stream for the node's ranks, "
                                 "check-ins merged, directives fanned out.",
                                 groups, "agent/main.cc");
  psync::serve::UseReleaseMutexSettings();
  const psync::serve::CpuBudget cpus = psync::serve::UseCpuBudget("psync-agent", argv);

  // Block the stop signals in every thread; one thread waits for them.
  const sigset_t stop_signals = psync::serve::BlockStopSignals();

  psync::agent::AgentOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.flush_window = absl::GetFlag(FLAGS_flush_window);
  options.flush_messages = absl::GetFlag(FLAGS_flush_messages);
  options.relay_flush_window = absl::GetFlag(FLAGS_relay_flush_window);
  options.relay_fanout_threads = absl::GetFlag(FLAGS_relay_fanout_threads);
  if (options.relay_fanout_threads == -1) {
    options.relay_fanout_threads = static_cast<int>(psync::agent::RelayFanoutThreadsFor(cpus.cpus));
  }
  options.max_batch_messages = absl::GetFlag(FLAGS_max_batch_messages);
  options.merge_sync_dones = absl::GetFlag(FLAGS_merge_sync_dones);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  auto agent = psync::agent::Agent::Start(options);
  if (!agent.ok()) {
    std::cerr << "psync-agent: " << agent.status() << "\n";
    return agent.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::cerr << "psync-agent: serving ranks at " << (*agent)->local_target() << ", coordinator "
            << options.target << "\n";
  if ((*agent)->http_port() != 0) {
    std::cerr << "psync-agent: metrics at http://localhost:" << (*agent)->http_port()
              << "/metrics\n";
  }
  psync::serve::WritePortFile(absl::GetFlag(FLAGS_port_file), (*agent)->port());
  psync::serve::WritePortFile(absl::GetFlag(FLAGS_http_port_file), (*agent)->http_port());
  std::thread stopper([&] {
    const int signal = psync::serve::WaitForStopSignal(stop_signals);
    std::cerr << "psync-agent: stopping on signal " << signal << "\n";
    (*agent)->Drain(absl::GetFlag(FLAGS_drain_timeout));
  });
  (*agent)->Wait();
  stopper.join();
  const psync::agent::AgentStats s = (*agent)->stats();
  std::cerr << "psync-agent: " << s.local_messages << " local messages (" << s.local_checkins
            << " check-ins) in " << s.upstream_batches << " upstream batches (" << s.lazy_batches
            << " lazy); " << s.notices_received << " notices for " << s.notices_delivered
            << " rank deliveries; " << s.local_acks << " local acks and " << s.local_lazy_acks
            << " lazy ones; " << s.reconnects << " reconnects; " << s.redirects << " redirects, "
            << s.rotations << " rotations, " << s.replicas_lost << " replicas lost\n";
  if (s.relayed_attaches > 0) {
    std::cerr << "psync-agent: relayed " << s.relayed_attaches << " attaches and "
              << s.relayed_batches << " batches of other agents (" << s.relay_merged_batches
              << " merged into another's, " << s.relay_refused << " messages refused), "
              << s.relay_notices << " notice entries down to them\n";
  }
  return 0;
}
