// psync-bench: release latency, throughput and cost of the psync coordinator under N simulated
// ranks x K optimizers x C chunks x S steps over loopback, with the gRPC round-trip floor measured
// in the same run. See bench/README.md for the method and docs/performance.md for results.
//
//   psync-bench --coordinator=bazel-bin/server/psync-coordinator --ranks=256 --chunks=8 --json
//   psync-bench --target=127.0.0.1:7070 --coordinator_pid=1234 ...   (a running coordinator)
//   psync-bench --target=127.0.0.1:7070,127.0.0.1:7080 ...   (replicas: the job's owner is found)
//   psync-bench --coordinator=... --throughput --ranks=64 --chunks=32 --optimizers=8
//   psync-bench --coordinator=... --sweep_ranks=8,64,512 --sweep_chunks=1,8,32 --json
//   psync-bench --coordinator=... --agents=4 --agent_binary=bazel-bin/agent/psync-agent ...
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/agent_waits.h"
#include "bench/echo_floor.h"
#include "bench/latency_summary.h"
#include "bench/node_driver.h"
#include "bench/node_processes.h"
#include "bench/owner_probe.h"
#include "bench/proc_stats.h"
#include "bench/rank_driver.h"
#include "bench/release_watch.h"
#include "bench/subprocess.h"
#include "bench/workload.h"
#include "serve/daemon.h"
#include "serve/daemon_cpus.h"
#include "serve/processor_count.h"

ABSL_DECLARE_FLAG(int, cpus);

ABSL_FLAG(std::string, coordinator, "", "psync-coordinator binary to start for each run");
ABSL_FLAG(std::string, coordinator_args, "",
          "extra flags for the coordinator, space separated (e.g. '--inspect_interval=1s')");
ABSL_FLAG(std::string, target, "",
          "host:port of a running coordinator (instead of --coordinator), or a comma-separated "
          "list of coordinator replicas: each run's job goes to the replica that owns it");
ABSL_FLAG(int, coordinator_pid, 0,
          "with --target: the coordinator's pid, to sample its CPU/memory");
ABSL_FLAG(uint32_t, ranks, 8, "simulated ranks (N)");
ABSL_FLAG(uint32_t, optimizers, 2, "optimizers per rank, each contributing to every chunk (K)");
ABSL_FLAG(uint32_t, chunks, 8, "model chunks (C); every rank is a member of every chunk");
ABSL_FLAG(uint64_t, steps, 20, "measured steps (S)");
ABSL_FLAG(uint64_t, warmup_steps, 2, "steps run before measuring (not counted)");
ABSL_FLAG(
    int64_t, spread_us, 500,
    "each check-in is sent after a delay uniform in [0, spread_us] from its rank's step start");
ABSL_FLAG(double, step_period_ms, 0,
          "0: a rank starts its next step as soon as it holds every directive; else steps start "
          "every step_period_ms (e.g. 500 for 2 steps/s)");
ABSL_FLAG(uint32_t, max_batch_items, 1,
          "check-ins of one rank due at the same moment share a StagedBatch of at most this many");
ABSL_FLAG(bool, batch_sync_done, false, "one SyncDoneBatch per rank and step (else one per chunk)");
ABSL_FLAG(bool, lazy_acks, false,
          "ranks ask for lazy acks of their check-ins and SyncDones (SessionUp.lazy_ack), as "
          "psync::Client's asynchronous calls do; simulated nodes ask it for their batches "
          "(AgentUp.lazy_ack), as psync-agent does for batches of asynchronous reports");
ABSL_FLAG(bool, throughput, false,
          "throughput mode: no arrival delays, each rank sends its K*C check-ins of a step in one "
          "StagedBatch and its C SyncDones in one SyncDoneBatch, steps back to back");
ABSL_FLAG(uint32_t, connections, 0, "TCP connections per target (0: one per rank)");
ABSL_FLAG(uint32_t, group_size, 0, "sync group size (0: one 'dp' group of every rank)");
ABSL_FLAG(uint32_t, join_concurrency, 64, "Join calls in flight at once");
ABSL_FLAG(int, timeout_s, 180, "bound on each phase of a run (joins, attaches, steps, close)");
ABSL_FLAG(uint64_t, seed, 1, "random seed of the arrival delays");
ABSL_FLAG(std::string, sweep_ranks, "", "comma-separated N values: one run per (N, C) pair");
ABSL_FLAG(std::string, sweep_chunks, "", "comma-separated C values (default: --chunks)");
ABSL_FLAG(bool, hop_times, false,
          "also split each release's latency at the coordinator (its release events, read by "
          "WatchEvents): \"hops\" in the JSON, the way up (last check-in sent -> release "
          "decided) and down (-> first and last rank or node); a single coordinator only");
ABSL_FLAG(bool, json, false, "print one JSON object per run (one line) instead of a summary");
ABSL_FLAG(std::string, label, "", "the run's 'system' in the JSON (default psync / psync+agents)");
ABSL_FLAG(bool, floor, true,
          "measure the gRPC round-trip floor (echo ping-pong) once per invocation");
ABSL_FLAG(int, floor_round_trips, 3000, "round trips of the floor measurement");
ABSL_FLAG(int, floor_streams, 0,
          "also measure the echo server's CPU per message with this many paced streams (each on "
          "its own connection; 0: not measured)");
ABSL_FLAG(double, floor_interval_ms, 10,
          "with --floor_streams: one round trip per stream this often");
ABSL_FLAG(double, floor_seconds, 5, "with --floor_streams: how long the paced streams run");
ABSL_FLAG(std::string, server_taskset, "",
          "CPU list (taskset -c) for the coordinator and the echo server, e.g. 0 or 0-1; the "
          "benchmark itself runs wherever it was started");
ABSL_FLAG(std::string, agent_taskset, "",
          "CPU list (taskset -c) the node agents (--agents) run on, e.g. 2-9, so that they do "
          "not share cores with the coordinator or the benchmark's ranks");
ABSL_FLAG(uint32_t, agents, 0,
          "node agents to start; rank r connects to agent r / (N / agents); agent i to the "
          "coordinator, or with --relays to relay i % relays");
ABSL_FLAG(std::string, agent_binary, "", "the node agent binary (psync-agent)");
ABSL_FLAG(std::string, agent_args,
          "--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}",
          "flags of each agent; {coordinator} is the coordinator's host:port, {port_file} a file "
          "the agent writes its bound port to, {index} the agent's number; with "
          "--listen=unix:PATH (e.g. unix:/tmp/agent-{index}.sock) its ranks connect there");
ABSL_FLAG(std::string, relay_args,
          "--target={coordinator} --listen=127.0.0.1:0 --port_file={port_file}",
          "flags of each relay (--relays), as --agent_args");
ABSL_FLAG(uint32_t, relays, 0,
          "relays to start (psync-agent processes, --agent_binary, relaying AgentSessions): node "
          "agents (--agents) or simulated nodes (--simulated_nodes) go to them round-robin "
          "instead of to the coordinator; 0: none");
ABSL_FLAG(std::string, relay_taskset, "", "CPU list (taskset -c) the relays (--relays) run on");
ABSL_FLAG(bool, agent_metrics, false,
          "relays, agents and the coordinator serve /metrics on 127.0.0.1; the JSON's "
          "relay_waits and agent_waits are the agents' wait histograms over the measured steps "
          "(how long messages waited inside them, both ways; agent/README.md, \"Metrics\"), and "
          "coordinator_agent_stream_down_wait and _write the coordinator's AgentSession queue "
          "wait and write time");
ABSL_FLAG(uint32_t, simulated_nodes, 0,
          "ranks per simulated node agent: the benchmark speaks AgentSession for nodes of this "
          "many ranks itself (bench/node_driver.h; needs --step_period_ms, no --agents); 0: off");
ABSL_FLAG(uint32_t, node_processes, 1,
          "processes the load is spread over (child processes of psync-bench; "
          "bench/node_processes.h): with --simulated_nodes node n in process n % N, so that one "
          "process does not read every node's stream; otherwise rank r (its own Session, direct "
          "or through --agents) in process r % N, as separate rank processes would be; not with "
          "--hold_nodes");
ABSL_FLAG(int32_t, node_worker, -1, "internal: this process is load process N of a run");
ABSL_FLAG(std::string, node_worker_dir, "", "internal: the load processes' meeting folder");
ABSL_FLAG(std::string, node_worker_job, "", "internal: the run's job id");
ABSL_FLAG(std::vector<std::string>, node_worker_targets, {}, "internal: where the nodes connect");
ABSL_FLAG(uint32_t, pump_threads, 4,
          "With --simulated_nodes: threads that build and start the nodes' batches (the JSON's "
          "pump_lag says how late they ran against the schedule)");
ABSL_FLAG(int64_t, node_tick_us, 1000,
          "with --simulated_nodes: how often each node sends what became due (its flush window)");
ABSL_FLAG(bool, node_merge_sync_dones, true,
          "with --simulated_nodes: equal SyncDones of a batch share one merged_sync_dones "
          "entry (AgentBatch), as psync-agent sends them; false: one IndexedSyncDone each");
ABSL_FLAG(bool, node_flush_on_complete, true,
          "with --simulated_nodes: a node also sends at once when a check-in completes a chunk's "
          "step on the node (as psync-agent does), instead of waiting for the next tick");
ABSL_FLAG(int64_t, node_sync_done_delay_us, 0,
          "with --simulated_nodes: how long a rank's param sync takes: its SyncDone of a chunk "
          "is due this long after its node read the chunk's directive (0: in the node's next "
          "batch)");
ABSL_FLAG(std::vector<std::string>, slow_nodes, {},
          "with --simulated_nodes: nodes (0, 1, ...) whose check-ins come --slow_by_us later in "
          "every step (stragglers)");
ABSL_FLAG(int64_t, slow_by_us, 0, "with --slow_nodes: how much later");
ABSL_FLAG(std::vector<std::string>, hold_nodes, {},
          "with --simulated_nodes: after the measured steps, one more step in which these nodes' "
          "ranks never stage --hold_chunk for optimizer --hold_optimizer, held open for "
          "--hold_seconds (to look at the dashboard and psyncctl at scale)");
ABSL_FLAG(uint32_t, hold_chunk, 0, "with --hold_nodes: the chunk they hold back");
ABSL_FLAG(uint32_t, hold_optimizer, 1, "with --hold_nodes: the optimizer (opt<k>) held back");
ABSL_FLAG(int64_t, hold_seconds, 60, "with --hold_nodes: how long the held step stays open");
ABSL_FLAG(std::string, log_dir, "/tmp", "where the coordinator's and agents' logs go");
ABSL_FLAG(bool, serve_echo, false, "internal: serve the echo floor service (see echo_floor.h)");
ABSL_FLAG(std::string, echo_port_file, "", "internal: with --serve_echo, where to write the port");

namespace psync::bench {
namespace {

struct RunConfig {
  uint32_t ranks = 0;
  uint32_t chunks = 0;
};

std::vector<std::string> SplitArgs(const std::string& args) {
  return absl::StrSplit(args, ' ', absl::SkipWhitespace());
}

// The comma-separated counts of --<flag> (`text`), or just `unswept` when it is empty.
absl::StatusOr<std::vector<uint32_t>> SweepValues(const std::string& flag, const std::string& text,
                                                  uint32_t unswept) {
  if (text.empty()) return std::vector<uint32_t>{unswept};
  std::vector<uint32_t> values;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", part, "' is not a count"));
    }
    values.push_back(v);
  }
  return values;
}

std::string TempPath(const std::string& what) {
  return absl::StrCat(absl::GetFlag(FLAGS_log_dir), "/psync-bench-", getpid(), "-", what);
}

// --simulated_nodes runs paced steps of arrivals spread within the period, with no agents.
absl::Status CheckSimulatedNodeFlags() {
  const uint32_t processes = absl::GetFlag(FLAGS_node_processes);
  if (processes == 0) return absl::InvalidArgumentError("--node_processes must be at least 1");
  if (processes > absl::GetFlag(FLAGS_ranks) && absl::GetFlag(FLAGS_sweep_ranks).empty()) {
    return absl::InvalidArgumentError("--node_processes must be at most --ranks");
  }
  if (processes > 1 && !absl::GetFlag(FLAGS_hold_nodes).empty()) {
    return absl::InvalidArgumentError(
        "--node_processes above 1 and --hold_nodes exclude each other");
  }
  if (absl::GetFlag(FLAGS_simulated_nodes) == 0) return absl::OkStatus();
  if (absl::GetFlag(FLAGS_agents) > 0) {
    return absl::InvalidArgumentError("--simulated_nodes and --agents exclude each other");
  }

  if (absl::GetFlag(FLAGS_throughput)) {
    return absl::InvalidArgumentError("--simulated_nodes and --throughput exclude each other");
  }
  const double period_ms = absl::GetFlag(FLAGS_step_period_ms);
  if (!(period_ms > 0)) {
    return absl::InvalidArgumentError("--simulated_nodes needs --step_period_ms > 0");
  }
  if (absl::GetFlag(FLAGS_spread_us) < 0 || absl::GetFlag(FLAGS_spread_us) >= period_ms * 1000) {
    return absl::InvalidArgumentError(
        "--simulated_nodes needs --spread_us in [0, step_period_ms x 1000)");
  }
  if (absl::GetFlag(FLAGS_node_tick_us) <= 0) {
    return absl::InvalidArgumentError("--node_tick_us must be positive");
  }
  if (absl::GetFlag(FLAGS_node_sync_done_delay_us) < 0) {
    return absl::InvalidArgumentError("--node_sync_done_delay_us must not be negative");
  }
  return absl::OkStatus();
}

double Mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// argv run on the CPUs `cpus` lists (taskset -c) when it is not empty.
std::vector<std::string> OnCpus(const std::string& cpus, std::vector<std::string> argv) {
  if (cpus.empty()) return argv;
  argv.insert(argv.begin(), {"/usr/bin/taskset", "-c", cpus});
  return argv;
}

// argv run on the --server_taskset CPUs when that is set.
std::vector<std::string> OnServerCpus(std::vector<std::string> argv) {
  return OnCpus(absl::GetFlag(FLAGS_server_taskset), std::move(argv));
}

struct Floor {
  LatencySummary rtt;
  // --floor_streams: the echo server's CPU per message under paced streams.
  int streams = 0;
  double round_trips_per_s = 0;
  double cpu_fraction = 0;
  double cpu_us_per_message = 0;

  std::string CpuJson() const {
    return absl::StrFormat(
        "{\"streams\":%d,\"interval_ms\":%.3f,\"round_trips_per_s\":%.1f,\"cpu_fraction\":%.4f,"
        "\"cpu_us_per_message\":%.3f}",
        streams, absl::GetFlag(FLAGS_floor_interval_ms), round_trips_per_s, cpu_fraction,
        cpu_us_per_message);
  }
};

// The gRPC floor: an echo server in a child process (this binary), one ping-pong stream for the
// round trip, then (--floor_streams) paced streams for the server's CPU per message.
absl::StatusOr<Floor> MeasureFloor(const std::string& self) {
  const std::string port_file = TempPath("echo.port");
  std::remove(port_file.c_str());
  auto server = Subprocess::Start(
      OnServerCpus({self, "--serve_echo", absl::StrCat("--echo_port_file=", port_file)}),
      TempPath("echo.log"));
  if (!server.ok()) return server.status();
  auto port = WaitForPortFile(port_file, server->get(), absl::Seconds(20));
  if (!port.ok()) return port.status();
  const std::string target = absl::StrCat("127.0.0.1:", *port);
  auto rtts = MeasureRoundTrips(target, absl::GetFlag(FLAGS_floor_round_trips), 200, 24);
  if (!rtts.ok()) return rtts.status();
  Floor floor;
  floor.rtt = Summarize(*rtts);
  if (const int streams = absl::GetFlag(FLAGS_floor_streams); streams > 0) {
    const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_floor_seconds));
    auto before = SampleProcess((*server)->pid());
    const absl::Time start = absl::Now();
    auto round_trips = RunEchoLoad(
        target, streams, absl::Microseconds(absl::GetFlag(FLAGS_floor_interval_ms) * 1000),
        duration, 24);
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    auto after = SampleProcess((*server)->pid());
    if (!round_trips.ok()) return round_trips.status();
    if (!before.ok() || !after.ok()) return before.ok() ? after.status() : before.status();
    const double cpu = after->cpu_seconds - before->cpu_seconds;
    floor.streams = streams;
    floor.round_trips_per_s = static_cast<double>(*round_trips) / elapsed;
    floor.cpu_fraction = cpu / elapsed;
    floor.cpu_us_per_message = *round_trips > 0 ? cpu / (2.0 * *round_trips) * 1e6 : 0;
  }
  (*server)->Stop();
  std::remove(port_file.c_str());
  return floor;
}

struct Processes {
  std::unique_ptr<Subprocess> coordinator;
  std::vector<std::unique_ptr<Subprocess>> relays;
  std::vector<std::unique_ptr<Subprocess>> agents;
  // With --agent_metrics: their /metrics ports (the coordinator's: 0 when not started here).
  int coordinator_http_port = 0;
  std::vector<int> relay_http_ports;
  std::vector<int> agent_http_ports;
  pid_t coordinator_pid = 0;
  std::string coordinator_target;
  std::vector<std::string> rank_targets;
};

absl::StatusOr<Processes> StartProcesses(const RunConfig& run, int index) {
  Processes p;
  const std::string binary = absl::GetFlag(FLAGS_coordinator);
  if (!binary.empty()) {
    const std::string port_file = TempPath(absl::StrCat("coordinator-", index, ".port"));
    const std::string http_port_file = port_file + ".http";
    std::remove(port_file.c_str());
    std::remove(http_port_file.c_str());
    const bool metrics = absl::GetFlag(FLAGS_agent_metrics);
    std::vector<std::string> argv = {
        binary,
        "--listen=127.0.0.1:0",
        absl::StrCat("--port_file=", port_file),
        metrics ? "--http_listen=127.0.0.1:0" : "--http_listen=",
        metrics ? absl::StrCat("--http_port_file=", http_port_file) : "--http_port_file=",
        "--http_threads=2",
        absl::StrCat("--max_sessions=", std::max<uint64_t>(65536, 2ull * run.ranks)),
        // A benchmark run has no lost ranks; long leases keep liveness out of the picture.
        "--rank_lease=3600s",
        "--lost_rank_abort_after=7200s",
    };
    for (const std::string& a : SplitArgs(absl::GetFlag(FLAGS_coordinator_args))) argv.push_back(a);
    auto child = Subprocess::Start(OnServerCpus(std::move(argv)),
                                   TempPath(absl::StrCat("coordinator-", index, ".log")));
    if (!child.ok()) return child.status();
    auto port = WaitForPortFile(port_file, child->get(), absl::Seconds(30));
    std::remove(port_file.c_str());
    if (!port.ok()) return port.status();
    if (metrics) {
      auto http_port = WaitForPortFile(http_port_file, child->get(), absl::Seconds(30));
      std::remove(http_port_file.c_str());
      if (!http_port.ok()) return http_port.status();
      p.coordinator_http_port = *http_port;
    }
    p.coordinator_pid = (*child)->pid();
    p.coordinator = std::move(*child);
    p.coordinator_target = absl::StrCat("127.0.0.1:", *port);
  } else {
    p.coordinator_target = absl::GetFlag(FLAGS_target);
    p.coordinator_pid = absl::GetFlag(FLAGS_coordinator_pid);
  }
  const uint32_t agents = absl::GetFlag(FLAGS_agents);
  const uint32_t relays = absl::GetFlag(FLAGS_relays);
  if (agents == 0 && relays == 0) {
    p.rank_targets = absl::StrSplit(p.coordinator_target, ',', absl::SkipWhitespace());
    return p;
  }
  const std::string agent_binary = absl::GetFlag(FLAGS_agent_binary);
  if (agent_binary.empty() || access(agent_binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--agents=", agents, " --relays=", relays,
                     " need --agent_binary naming an executable (got '", agent_binary, "')"));
  }
  const bool agent_metrics = absl::GetFlag(FLAGS_agent_metrics);
  // One psync-agent process given `target`, on `cpus`; its address (and with --agent_metrics its
  // /metrics port, appended to `http_ports`).
  auto start_agent = [&](const std::string& what, uint32_t i, const std::string& target,
                         const std::string& args, const std::string& cpus,
                         std::vector<std::unique_ptr<Subprocess>>* into,
                         std::vector<int>* http_ports) -> absl::StatusOr<std::string> {
    const std::string port_file = TempPath(absl::StrCat(what, "-", index, "-", i, ".port"));
    const std::string http_port_file = port_file + ".http";
    std::remove(port_file.c_str());
    std::remove(http_port_file.c_str());
    std::vector<std::string> argv = {agent_binary};
    std::string unix_address;  // "unix:PATH" when it listens on a unix socket
    for (const std::string& a : SplitArgs(args)) {
      argv.push_back(absl::StrReplaceAll(
          a,
          {{"{coordinator}", target}, {"{port_file}", port_file}, {"{index}", absl::StrCat(i)}}));
      if (absl::StartsWith(argv.back(), "--listen=unix:")) {
        unix_address = argv.back().substr(std::strlen("--listen="));
      }
    }
    if (agent_metrics) {
      argv.push_back("--http_listen=127.0.0.1:0");
      argv.push_back(absl::StrCat("--http_port_file=", http_port_file));
    }
    auto child = Subprocess::Start(OnCpus(cpus, std::move(argv)),
                                   TempPath(absl::StrCat(what, "-", index, "-", i, ".log")));
    if (!child.ok()) return child.status();
    auto port = WaitForPortFile(port_file, child->get(), absl::Seconds(30), !unix_address.empty());
    std::remove(port_file.c_str());
    if (!port.ok()) {
      return absl::Status(port.status().code(),
                          absl::StrCat(what, " ", i, ": ", port.status().message()));
    }
    if (agent_metrics) {
      auto http_port = WaitForPortFile(http_port_file, child->get(), absl::Seconds(30));
      std::remove(http_port_file.c_str());
      if (!http_port.ok()) {
        return absl::Status(
            http_port.status().code(),
            absl::StrCat(what, " ", i, " /metrics: ", http_port.status().message()));
      }
      http_ports->push_back(*http_port);
    }
    into->push_back(std::move(*child));
    if (!unix_address.empty()) return unix_address;
    return absl::StrCat("127.0.0.1:", *port);
  };
  if (relays > 0 && p.coordinator_target.find(',') != std::string::npos) {
    return absl::InvalidArgumentError("--relays needs a single coordinator, not replicas");
  }
  std::vector<std::string> upstreams = {p.coordinator_target};
  if (relays > 0) upstreams.clear();
  for (uint32_t i = 0; i < relays; ++i) {
    auto address = start_agent("relay", i, p.coordinator_target, absl::GetFlag(FLAGS_relay_args),
                               absl::GetFlag(FLAGS_relay_taskset), &p.relays, &p.relay_http_ports);
    if (!address.ok()) return address.status();
    upstreams.push_back(*address);
  }
  if (agents == 0) {
    p.rank_targets = upstreams;  // simulated nodes go to the relays
    return p;
  }
  for (uint32_t i = 0; i < agents; ++i) {
    auto address =
        start_agent("agent", i, upstreams[i % upstreams.size()], absl::GetFlag(FLAGS_agent_args),
                    absl::GetFlag(FLAGS_agent_taskset), &p.agents, &p.agent_http_ports);
    if (!address.ok()) return address.status();
    p.rank_targets.push_back(*address);
  }
  return p;
}

struct CpuMem {
  double cpu_seconds = 0;
  int64_t rss = 0;
  int64_t hwm = 0;
};

CpuMem Sample(pid_t pid) {
  CpuMem m;
  if (pid <= 0) return m;
  if (auto s = SampleProcess(pid); s.ok()) {
    m.cpu_seconds = s->cpu_seconds;
    m.rss = s->rss_bytes;
    m.hwm = s->hwm_bytes;
  }
  return m;
}

// The node numbers of a --slow_nodes or --hold_nodes list.
absl::Status NodeIndices(const char* flag, const std::vector<std::string>& items,
                         std::vector<uint32_t>* out) {
  for (const std::string& item : items) {
    uint32_t index = 0;
    if (!absl::SimpleAtoi(item, &index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", item, "' is not a node number"));
    }
    out->push_back(index);
  }
  return absl::OkStatus();
}

// The wait histograms of the agents (or the coordinator) on `ports`, summed; a scrape that fails is
// reported on stderr and left out (the run's JSON then says fewer observations, not wrong ones).
AgentWaits ScrapeAll(const std::vector<int>& ports) {
  AgentWaits total;
  for (int port : ports) {
    absl::StatusOr<AgentWaits> w = ScrapeAgentWaits(port);
    if (!w.ok()) {
      std::cerr << "psync-bench: " << w.status() << "\n";
      continue;
    }
    total.Add(*w);
  }
  return total;
}

CpuMem SampleAll(const std::vector<std::unique_ptr<Subprocess>>& procs) {
  CpuMem total;
  for (const auto& p : procs) {
    CpuMem m = Sample(p->pid());
    total.cpu_seconds += m.cpu_seconds;
    total.rss += m.rss;
    total.hwm += m.hwm;
  }
  return total;
}

// A run's workload and pacing from the flags (targets and job id are the caller's).
DriverOptions DriverOptionsFromFlags(const RunConfig& run) {
  const bool throughput = absl::GetFlag(FLAGS_throughput);
  DriverOptions o;
  o.ranks = run.ranks;
  o.optimizers = absl::GetFlag(FLAGS_optimizers);
  o.chunks = run.chunks;
  o.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.steps = absl::GetFlag(FLAGS_steps);
  o.spread = throughput ? absl::ZeroDuration() : absl::Microseconds(absl::GetFlag(FLAGS_spread_us));
  o.step_period = absl::Microseconds(absl::GetFlag(FLAGS_step_period_ms) * 1000.0);
  o.max_batch_items = throughput ? o.optimizers * o.chunks : absl::GetFlag(FLAGS_max_batch_items);
  o.batch_sync_done = throughput || absl::GetFlag(FLAGS_batch_sync_done);
  o.lazy_acks = absl::GetFlag(FLAGS_lazy_acks);
  o.connections = absl::GetFlag(FLAGS_connections);
  o.group_size = absl::GetFlag(FLAGS_group_size);
  o.join_concurrency = absl::GetFlag(FLAGS_join_concurrency);
  o.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  o.seed = absl::GetFlag(FLAGS_seed);
  return o;
}

// The simulated nodes' options from the flags, for the run `o` describes (its targets and job);
// the measure callbacks and the held step are the caller's.
absl::StatusOr<NodeOptions> NodeOptionsFromFlags(const DriverOptions& o) {
  NodeOptions n;
  n.targets = o.targets;
  n.workload = {o.job_id, o.ranks, o.optimizers, o.chunks, o.group_size, o.seed};
  n.ranks_per_node = absl::GetFlag(FLAGS_simulated_nodes);
  n.warmup_steps = o.warmup_steps;
  n.steps = o.steps;
  n.spread = o.spread;
  n.step_period = o.step_period;
  n.tick = absl::Microseconds(absl::GetFlag(FLAGS_node_tick_us));
  n.flush_on_complete = absl::GetFlag(FLAGS_node_flush_on_complete);
  n.merge_sync_dones = absl::GetFlag(FLAGS_node_merge_sync_dones);
  n.sync_done_delay = absl::Microseconds(absl::GetFlag(FLAGS_node_sync_done_delay_us));
  n.lazy_acks = o.lazy_acks;
  n.join_concurrency = o.join_concurrency;
  n.pump_threads = absl::GetFlag(FLAGS_pump_threads);
  n.timeout = o.timeout;
  if (auto s = NodeIndices("slow_nodes", absl::GetFlag(FLAGS_slow_nodes), &n.slow_nodes); !s.ok()) {
    return s;
  }
  n.slow_by = absl::Microseconds(absl::GetFlag(FLAGS_slow_by_us));
  return n;
}

// This process's command line (main() sets it): node processes are started with it.
std::vector<std::string>& CommandLine() {
  static auto* argv = new std::vector<std::string>();
  return *argv;
}

// A load process (--node_worker): simulates its share of the run's nodes (--simulated_nodes) or
// drives its share of the ranks, meets the others and the parent at bench/node_processes.h's
// points, and writes its result there.
int RunNodeWorker() {
  DriverOptions o =
      DriverOptionsFromFlags(RunConfig{absl::GetFlag(FLAGS_ranks), absl::GetFlag(FLAGS_chunks)});
  o.targets = absl::GetFlag(FLAGS_node_worker_targets);
  o.job_id = absl::GetFlag(FLAGS_node_worker_job);
  const std::string dir = absl::GetFlag(FLAGS_node_worker_dir);
  const uint32_t worker = static_cast<uint32_t>(absl::GetFlag(FLAGS_node_worker));
  o.share.worker = worker;
  o.share.workers = absl::GetFlag(FLAGS_node_processes);
  o.share.rendezvous = WorkerRendezvous(dir, worker, o.timeout);
  std::string records;
  o.share.on_records = [&](ReleaseRecords& r, const DriverCounters& counters) {
    records = FormatWorkerRecords(r, o.warmup_steps + o.steps, o.chunks, counters);
  };
  absl::StatusOr<DriverResult> result;
  if (absl::GetFlag(FLAGS_simulated_nodes) > 0) {
    absl::StatusOr<NodeOptions> n = NodeOptionsFromFlags(o);
    if (!n.ok()) {
      std::cerr << "psync-bench load process " << worker << ": " << n.status() << "\n";
      return 2;
    }
    n->share = o.share;
    result = RunNodes(*n);
  } else {
    result = RunRanks(o);
  }
  absl::Status written = result.status();
  if (written.ok()) written = WriteWorkerResult(dir, worker, records, *result);
  if (!written.ok()) {
    std::cerr << "psync-bench load process " << worker << ": " << written << "\n";
    return 1;
  }
  return 0;
}

// Runs the load in `processes` child processes of this one (bench/node_processes.h), each
// started with this process's command line and its worker's flags.
absl::StatusOr<DriverResult> RunInProcesses(const WorkerRun& run, const DriverOptions& o,
                                            uint32_t processes, int index,
                                            std::vector<pid_t>* pids) {
  NodeProcessOptions p;
  p.processes = processes;
  p.dir = TempPath(absl::StrCat("load-", index));
  std::filesystem::remove_all(p.dir);
  std::filesystem::create_directories(p.dir);
  p.worker_argv = [&](uint32_t worker) {
    std::vector<std::string> argv = CommandLine();
    argv.push_back(absl::StrCat("--ranks=", o.ranks));
    argv.push_back(absl::StrCat("--chunks=", o.chunks));
    argv.push_back(absl::StrCat("--node_worker=", worker));
    argv.push_back(absl::StrCat("--node_worker_dir=", p.dir));
    argv.push_back(absl::StrCat("--node_worker_job=", o.job_id));
    argv.push_back(absl::StrCat("--node_worker_targets=", absl::StrJoin(o.targets, ",")));
    return argv;
  };
  p.on_started = [pids](const std::vector<pid_t>& started) { *pids = started; };
  return RunWorkerProcesses(run, p);
}

// One run: start the processes, drive the ranks, sample, stop. Returns the JSON object; *ok is
// false when a correctness check failed.
absl::StatusOr<std::string> RunOnce(const RunConfig& run, int index,
                                    const std::optional<Floor>& floor, bool print_text,
                                    bool* ok_out) {
  auto procs = StartProcesses(run, index);
  if (!procs.ok()) return procs.status();
  const pid_t cpid = procs->coordinator_pid;
  absl::SleepFor(absl::Milliseconds(200));  // let the coordinator settle before the idle sample
  const CpuMem idle = Sample(cpid);
  const CpuMem agents_idle = SampleAll(procs->agents);
  const CpuMem relays_idle = SampleAll(procs->relays);

  const bool throughput = absl::GetFlag(FLAGS_throughput);
  DriverOptions o = DriverOptionsFromFlags(run);
  o.targets = procs->rank_targets;
  o.job_id = absl::StrCat("bench-", getpid(), "-", index, "-", absl::ToUnixMicros(absl::Now()));
  if (o.targets.size() > 1 && procs->agents.empty() && procs->relays.empty()) {
    // Coordinator replicas: every rank goes to the job's owner.
    absl::StatusOr<std::string> owner =
        FindOwner(o.targets,
                  JoinRequestFor(
                      Workload{o.job_id, o.ranks, o.optimizers, o.chunks, o.group_size, o.seed}, 0),
                  o.timeout);
    if (!owner.ok()) return owner.status();
    o.targets = {*owner};
  }
  std::unique_ptr<ReleaseWatch> watch;
  if (absl::GetFlag(FLAGS_hop_times)) {
    if (procs->coordinator_target.find(',') != std::string::npos) {
      return absl::InvalidArgumentError("--hop_times needs a single coordinator, not replicas");
    }
    absl::StatusOr<std::unique_ptr<ReleaseWatch>> started =
        ReleaseWatch::Start(procs->coordinator_target, o.job_id);
    if (!started.ok()) return started.status();
    watch = std::move(*started);
  }
  CpuMem start, end, agents_start, agents_end, self_start, self_end;
  std::vector<CpuMem> relays_start, relays_end;  // per relay
  // --agent_metrics: end minus start of the measured steps.
  AgentWaits relay_waits, agent_waits, coordinator_waits;
  std::vector<int> coordinator_http_ports;
  if (procs->coordinator_http_port != 0) coordinator_http_ports = {procs->coordinator_http_port};
  // The load generator: this process, and its node processes (--node_processes) once started.
  std::vector<pid_t> node_process_pids;
  auto sample_self = [&] {
    CpuMem m = Sample(getpid());
    for (pid_t pid : node_process_pids) m.cpu_seconds += Sample(pid).cpu_seconds;
    return m;
  };
  auto sample_each = [](const std::vector<std::unique_ptr<Subprocess>>& procs) {
    std::vector<CpuMem> each;
    for (const auto& p : procs) each.push_back(Sample(p->pid()));
    return each;
  };
  o.on_measure_start = [&] {
    start = Sample(cpid);
    agents_start = SampleAll(procs->agents);
    relays_start = sample_each(procs->relays);
    self_start = sample_self();
    relay_waits.Add(ScrapeAll(procs->relay_http_ports), -1);
    agent_waits.Add(ScrapeAll(procs->agent_http_ports), -1);
    coordinator_waits.Add(ScrapeAll(coordinator_http_ports), -1);
  };
  o.on_measure_end = [&] {
    end = Sample(cpid);
    agents_end = SampleAll(procs->agents);
    relays_end = sample_each(procs->relays);
    self_end = sample_self();
    relay_waits.Add(ScrapeAll(procs->relay_http_ports));
    agent_waits.Add(ScrapeAll(procs->agent_http_ports));
    coordinator_waits.Add(ScrapeAll(coordinator_http_ports));
  };
  const auto load = LoadAverage();
  const uint32_t ranks_per_node = absl::GetFlag(FLAGS_simulated_nodes);
  const uint32_t processes = absl::GetFlag(FLAGS_node_processes);
  absl::StatusOr<DriverResult> r;
  if (ranks_per_node > 0) {
    absl::StatusOr<NodeOptions> nodes = NodeOptionsFromFlags(o);
    if (!nodes.ok()) return nodes.status();
    NodeOptions& n = *nodes;
    n.on_measure_start = o.on_measure_start;
    n.on_measure_end = o.on_measure_end;
    std::vector<uint32_t> held;
    if (auto s = NodeIndices("hold_nodes", absl::GetFlag(FLAGS_hold_nodes), &held); !s.ok()) {
      return s;
    }
    if (!held.empty()) {
      const uint32_t chunk = absl::GetFlag(FLAGS_hold_chunk);
      const uint32_t optimizer = absl::GetFlag(FLAGS_hold_optimizer);
      n.withhold = [held, chunk, optimizer, ranks_per_node](uint32_t rank, uint32_t c, uint32_t k) {
        return c == chunk && k == optimizer &&
               std::find(held.begin(), held.end(), rank / ranks_per_node) != held.end();
      };
      n.hold_open = absl::Seconds(absl::GetFlag(FLAGS_hold_seconds));
    }
    if (processes > 1) {
      r = RunInProcesses(WorkerRunOf(n), o, processes, index, &node_process_pids);
    } else {
      r = RunNodes(n);
    }
  } else if (processes > 1) {
    r = RunInProcesses(WorkerRunOf(o), o, processes, index, &node_process_pids);
  } else {
    r = RunRanks(o);
  }
  if (watch != nullptr && r.ok()) watch->Stop(r->releases_expected, absl::Seconds(10));
  for (auto& a : procs->agents) a->Stop();
  for (auto& a : procs->relays) a->Stop();
  if (procs->coordinator) procs->coordinator->Stop();
  if (!r.ok()) return r.status();

  const LatencySummary latency = Summarize(r->release_latency_ns);
  const LatencySummary first_latency = Summarize(r->release_first_latency_ns);
  const double checkins = static_cast<double>(r->checkins_measured);
  const double measured = r->measured_seconds;
  const double coord_cpu = end.cpu_seconds - start.cpu_seconds;
  const double agents_cpu = agents_end.cpu_seconds - agents_start.cpu_seconds;
  const bool ok = r->releases_complete == r->releases_expected &&
                  r->distinct_sequences == r->releases_expected && r->duplicate_directives == 0 &&
                  r->unexpected_directives == 0 && r->sequence_mismatches == 0;
  std::string system = absl::GetFlag(FLAGS_label);
  if (system.empty()) {
    system = ranks_per_node > 0 ? "psync+nodes" : procs->agents.empty() ? "psync" : "psync+agents";
    if (!procs->relays.empty()) system += "+relays";
  }
  std::string json = absl::StrCat(
      "{\"system\":\"", system, "\",\"mode\":\"", throughput ? "throughput" : "latency", "\"",
      ",\"ranks\":", o.ranks, ",\"optimizers\":", o.optimizers, ",\"chunks\":", o.chunks,
      ",\"steps\":", o.steps, ",\"warmup_steps\":", o.warmup_steps,
      ",\"spread_us\":", absl::ToInt64Microseconds(o.spread),
      absl::StrFormat(",\"step_period_ms\":%.3f", absl::ToDoubleMilliseconds(o.step_period)),
      ",\"max_batch_items\":", o.max_batch_items,
      ",\"batch_sync_done\":", o.batch_sync_done ? "true" : "false",
      ",\"lazy_acks\":", o.lazy_acks ? "true" : "false", ",\"connections\":", o.connections,
      ",\"group_size\":", o.group_size, ",\"agents\":", procs->agents.size(),
      ",\"ranks_per_node\":", ranks_per_node,
      ",\"node_tick_us\":", ranks_per_node > 0 ? absl::GetFlag(FLAGS_node_tick_us) : 0,
      ",\"pump_threads\":", ranks_per_node > 0 ? absl::GetFlag(FLAGS_pump_threads) : 0,
      ",\"node_flush_on_complete\":",
      ranks_per_node > 0 && absl::GetFlag(FLAGS_node_flush_on_complete) ? "true" : "false",
      ",\"node_merge_sync_dones\":",
      ranks_per_node > 0 && absl::GetFlag(FLAGS_node_merge_sync_dones) ? "true" : "false",
      ",\"node_sync_done_delay_us\":",
      ranks_per_node > 0 ? absl::GetFlag(FLAGS_node_sync_done_delay_us) : 0,
      ",\"ok\":", ok ? "true" : "false", ",\"release_latency\":", latency.Json(),
      ",\"release_first_latency\":", first_latency.Json(),
      r->pump_lag_ns.empty() ? ""
                             : absl::StrCat(",\"pump_lag\":", Summarize(r->pump_lag_ns).Json()),
      ",\"releases_expected\":", r->releases_expected,
      ",\"releases_complete\":", r->releases_complete,
      ",\"distinct_sequences\":", r->distinct_sequences,
      ",\"duplicate_directives\":", r->duplicate_directives,
      ",\"unexpected_directives\":", r->unexpected_directives,
      ",\"sequence_mismatches\":", r->sequence_mismatches, ",\"checkins\":", r->checkins_measured,
      ",\"directives\":", r->directives, ",\"messages_up\":", r->messages_up,
      ",\"messages_down\":", r->messages_down,
      absl::StrFormat(",\"measured_s\":%.4f,\"checkins_per_s\":%.1f", measured,
                      measured > 0 ? checkins / measured : 0),
      absl::StrFormat(",\"join_s\":%.3f,\"attach_s\":%.3f", r->join_seconds, r->attach_seconds));
  if (cpid > 0) {
    absl::StrAppend(
        &json,
        absl::StrFormat(
            ",\"coordinator\":{\"cpu_s\":%.3f,\"cpu_fraction\":%.4f,\"cpu_s_per_1m_checkins\":%.3f,"
            "\"rss_idle_mib\":%.2f,\"rss_mib\":%.2f,\"hwm_mib\":%.2f,\"bytes_per_rank\":%.0f}",
            coord_cpu, measured > 0 ? coord_cpu / measured : 0,
            checkins > 0 ? coord_cpu / checkins * 1e6 : 0, Mib(idle.rss), Mib(end.rss),
            Mib(end.hwm), static_cast<double>(end.hwm - idle.rss) / o.ranks));
  }
  if (!procs->agents.empty()) {
    absl::StrAppend(
        &json, absl::StrFormat(",\"agents_total\":{\"cpu_s\":%.3f,\"cpu_fraction\":%.4f,"
                               "\"cpu_s_per_1m_checkins\":%.3f,\"rss_idle_mib\":%.2f,"
                               "\"rss_mib\":%.2f,\"hwm_mib\":%.2f}",
                               agents_cpu, measured > 0 ? agents_cpu / measured : 0,
                               checkins > 0 ? agents_cpu / checkins * 1e6 : 0, Mib(agents_idle.rss),
                               Mib(agents_end.rss), Mib(agents_end.hwm)));
  }
  if (!procs->relays.empty()) {
    // Every relay's own share: the tier's target is each process within one core.
    double total = 0, max_fraction = 0, max_hwm = 0;
    for (size_t i = 0; i < relays_end.size() && i < relays_start.size(); ++i) {
      const double cpu = relays_end[i].cpu_seconds - relays_start[i].cpu_seconds;
      total += cpu;
      if (measured > 0) max_fraction = std::max(max_fraction, cpu / measured);
      max_hwm = std::max(max_hwm, Mib(relays_end[i].hwm));
    }
    absl::StrAppend(
        &json,
        absl::StrFormat(",\"relays\":{\"count\":%d,\"cpu_s\":%.3f,\"cpu_fraction\":%.4f,"
                        "\"cpu_fraction_max\":%.4f,\"cpu_s_per_1m_checkins\":%.3f,"
                        "\"rss_idle_mib\":%.2f,\"hwm_mib_max\":%.2f}",
                        static_cast<int>(procs->relays.size()), total,
                        measured > 0 ? total / measured : 0, max_fraction,
                        checkins > 0 ? total / checkins * 1e6 : 0, Mib(relays_idle.rss), max_hwm));
  }
  if (watch != nullptr) absl::StrAppend(&json, ",\"hops\":", watch->Split(r->release_times).Json());
  if (absl::GetFlag(FLAGS_agent_metrics)) {
    if (!procs->relays.empty()) absl::StrAppend(&json, ",\"relay_waits\":", relay_waits.Json());
    if (!procs->agents.empty()) absl::StrAppend(&json, ",\"agent_waits\":", agent_waits.Json());
    if (!coordinator_http_ports.empty()) {
      absl::StrAppend(
          &json,
          ",\"coordinator_agent_stream_down_wait\":", coordinator_waits.coordinator_down.Json(),
          ",\"coordinator_agent_stream_down_write\":", coordinator_waits.coordinator_write.Json(),
          ",\"coordinator_decision_delivery\":", coordinator_waits.coordinator_delivery.Json());
    }
  }
  absl::StrAppend(&json, absl::StrFormat(",\"bench_cpu_s\":%.3f",
                                         self_end.cpu_seconds - self_start.cpu_seconds));
  if (floor.has_value()) {
    absl::StrAppend(&json, ",\"grpc_floor_rtt\":", floor->rtt.Json());
    if (floor->streams > 0) {
      absl::StrAppend(&json, ",\"grpc_floor_cpu\":", floor->CpuJson());
      // What one check-in costs the coordinator, in messages of the bare echo server.
      if (cpid > 0 && checkins > 0 && floor->cpu_us_per_message > 0) {
        absl::StrAppend(&json,
                        absl::StrFormat(",\"checkin_cost_in_floor_messages\":%.2f",
                                        coord_cpu / checkins * 1e6 / floor->cpu_us_per_message));
      }
    }
  }
  absl::StrAppend(&json,
                  absl::StrFormat(",\"load_avg\":[%.2f,%.2f,%.2f]}", load[0], load[1], load[2]));
  if (print_text) {
    std::cout << absl::StrFormat(
        "%s N=%u K=%u C=%u S=%u: release p50 %.0f us p99 %.0f us max %.0f us; %.0f check-ins/s; "
        "coordinator %.2f s CPU/1M check-ins, %.0f%% of a core, HWM %.1f MiB (%.0f B/rank); "
        "releases %u/%u%s\n",
        system, o.ranks, o.optimizers, o.chunks, o.steps, latency.p50_us, latency.p99_us,
        latency.max_us, measured > 0 ? checkins / measured : 0,
        checkins > 0 ? coord_cpu / checkins * 1e6 : 0,
        measured > 0 ? 100 * coord_cpu / measured : 0, Mib(end.hwm),
        static_cast<double>(end.hwm - idle.rss) / o.ranks, r->releases_complete,
        r->releases_expected, ok ? "" : " (CHECK FAILED)");
  }
  if (!ok) {
    std::cerr << "psync-bench: correctness check failed: " << json << "\n";
  }
  *ok_out = ok;
  return json;
}

int Main(const std::string& self) {
  if (absl::GetFlag(FLAGS_coordinator).empty() == absl::GetFlag(FLAGS_target).empty()) {
    std::cerr << "psync-bench: give exactly one of --coordinator and --target\n";
    return 2;
  }
  if (absl::Status s = CheckSimulatedNodeFlags(); !s.ok()) {
    std::cerr << "psync-bench: " << s.message() << "\n";
    return 2;
  }
  // Thousands of connections: raise the open-file limit to the hard limit.
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const absl::StatusOr<std::vector<uint32_t>> ranks =
      SweepValues("sweep_ranks", absl::GetFlag(FLAGS_sweep_ranks), absl::GetFlag(FLAGS_ranks));
  const absl::StatusOr<std::vector<uint32_t>> chunks =
      SweepValues("sweep_chunks", absl::GetFlag(FLAGS_sweep_chunks), absl::GetFlag(FLAGS_chunks));
  for (const absl::Status& s : {ranks.status(), chunks.status()}) {
    if (!s.ok()) {
      std::cerr << "psync-bench: " << s.message() << "\n";
      return 2;
    }
  }
  std::optional<Floor> floor;
  const bool json = absl::GetFlag(FLAGS_json);
  if (absl::GetFlag(FLAGS_floor)) {
    auto f = MeasureFloor(self);
    if (!f.ok()) {
      std::cerr << "psync-bench: gRPC floor: " << f.status() << "\n";
      return 1;
    }
    floor = *f;
    if (!json) {
      std::cout << absl::StrFormat("gRPC floor (echo round trip): p50 %.0f us p99 %.0f us\n",
                                   floor->rtt.p50_us, floor->rtt.p99_us);
      if (floor->streams > 0) {
        std::cout << absl::StrFormat(
            "gRPC floor (echo server, %d paced streams): %.0f round trips/s, %.2f us CPU per "
            "message, %.0f%% of a core\n",
            floor->streams, floor->round_trips_per_s, floor->cpu_us_per_message,
            100 * floor->cpu_fraction);
      }
    }
  }
  int failures = 0;
  int index = 0;
  for (uint32_t c : *chunks) {
    for (uint32_t n : *ranks) {
      bool ok = false;
      auto out = RunOnce(RunConfig{n, c}, index++, floor, !json, &ok);
      if (!out.ok()) {
        std::cerr << "psync-bench: N=" << n << " C=" << c << ": " << out.status() << "\n";
        ++failures;
        continue;
      }
      if (!ok) ++failures;
      if (json) std::cout << *out << std::endl;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace psync::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "psync-bench: release latency and cost of the psync coordinator (see bench/README.md)");
  absl::ParseCommandLine(argc, argv);
  // gRPC's pools in this process and in its node processes (--node_processes, started with this
  // command line) sized for --cpus, or for this process's affinity mask and CPU quota; the
  // coordinator and the relays it starts size their own (their --cpus in --coordinator_args,
  // --relay_args), so the count --cpus put in the environment is not handed down to them.
  const bool cpus_flag = absl::GetFlag(FLAGS_cpus) > 0;
  psync::serve::UseCpuBudget("psync-bench", argv);
  if (cpus_flag) unsetenv(psync::serve::kCpusEnvironmentVariable);
  psync::serve::UseReleaseMutexSettings();
  if (absl::GetFlag(FLAGS_serve_echo)) {
    return psync::bench::ServeEcho("127.0.0.1:0", absl::GetFlag(FLAGS_echo_port_file));
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::cerr << "psync-bench: cannot find its own binary\n";
    return 1;
  }
  self[n] = '\0';
  psync::bench::CommandLine().assign(argv, argv + argc);
  psync::bench::CommandLine()[0] = self;
  if (absl::GetFlag(FLAGS_node_worker) >= 0) return psync::bench::RunNodeWorker();
  return psync::bench::Main(self);
}
