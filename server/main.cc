// psync-coordinator: serves psync.v1.Coordinator until SIGINT or SIGTERM.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "serve/daemon.h"
#include "serve/daemon_cpus.h"
#include "serve/flag_help.h"
#include "serve/heap_releaser.h"
#include "server/coordinator_server.h"
#include "server/core/plan.h"
#include "server/dashboard/assets.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:7070",
          "host:port to serve gRPC on (port 0: any free port)");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file once serving");
ABSL_FLAG(std::string, http_listen, "0.0.0.0:7071",
          "host:port for /metrics, the JSON API and the dashboard (empty: off; port 0: any); "
          "HTTPS with --tls_cert/--tls_key (docs/reliability.md, 'The HTTP side: security')");
ABSL_FLAG(std::string, http_token_file, "",
          "file holding one bearer token; when set, /api/ requires 'Authorization: Bearer <it>'");
ABSL_FLAG(bool, metrics_require_token, false,
          "with --http_token_file, /metrics requires the token too (default: open for scraping)");
ABSL_FLAG(int, http_threads, 128,
          "HTTP threads; each open connection holds one until it closes or times out");
ABSL_FLAG(absl::Duration, http_idle_timeout, absl::Seconds(2),
          "an HTTP connection that sends no request for this long is closed (>= 1s)");
ABSL_FLAG(absl::Duration, http_io_timeout, absl::Seconds(5),
          "an HTTP request that stops arriving, or a response that stops being read, for this "
          "long (no byte) is dropped");
ABSL_FLAG(std::string, http_port_file, "", "if set, write the bound HTTP port to this file");
ABSL_FLAG(absl::Duration, inspect_interval, absl::Milliseconds(50),
          "how often to look for stalled chunks");
ABSL_FLAG(absl::Duration, rank_lease, absl::Seconds(10),
          "a joined rank without a session for this long is lost (job DEGRADED)");
ABSL_FLAG(absl::Duration, lost_rank_abort_after, absl::Seconds(30),
          "a rank lost this long aborts its generation (every rank gets Abort)");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(std::string, job_tokens_file, "",
          "file of 'job_id token' lines; when set, only those jobs may join, with their token");
ABSL_FLAG(uint32_t, max_world_size, 1 << 20, "largest world_size a job may declare");
ABSL_FLAG(uint32_t, max_chunks, 4096, "most chunks a job may declare");
ABSL_FLAG(uint64_t, max_sessions, 65536, "attached Session streams at once");
ABSL_FLAG(double, stall_multiplier, 3.0, "stall deadline = multiplier x p99 of the chunk's waits");
ABSL_FLAG(absl::Duration, stall_floor, absl::Milliseconds(100), "smallest stall deadline");
ABSL_FLAG(absl::Duration, stall_ceiling, absl::Seconds(30), "largest stall deadline");
ABSL_FLAG(absl::Duration, stall_initial, absl::Seconds(1),
          "stall deadline before a chunk has enough history");
ABSL_FLAG(int, max_receive_message_bytes, 1 << 20, "largest accepted client message");
ABSL_FLAG(absl::Duration, heap_release_interval, absl::Seconds(1),
          "how often freed heap pages go back to the system (0: never; see heap_releaser.h)");
ABSL_FLAG(uint32_t, history_steps, 16, "finished steps kept per job to answer late duplicates");
ABSL_FLAG(int, delivery_threads, -1,
          "threads, besides the one delivering, that start the writes of a release to many "
          "streams (16 or more per thread), so that they run on several cores; 0: one thread; "
          "-1: one fewer than the CPUs the pools are sized for (--cpus), at most 3");
ABSL_FLAG(int, apply_threads, 0,
          "threads, besides the one applying a node's or relay's batch, that apply a large run of "
          "its check-ins (256 or more) chunk by chunk at once; 0: one thread (the default); -1: "
          "one fewer than the CPUs the pools are sized for (--cpus), at most 3");
ABSL_FLAG(uint32_t, node_size, 8,
          "the status views (GetJobOverview, dashboard, psyncctl, per-node metrics) group ranks "
          "by the node each named when it joined; ranks that named none, in blocks of this many "
          "consecutive ranks");
ABSL_FLAG(uint32_t, metrics_node_series, 10,
          "per job, at most this many psync_node_missing_contributors series: the nodes with the "
          "most missing contributors (0: none)");
ABSL_FLAG(uint32_t, max_jobs, 1024, "live jobs held at once (ended and evicted jobs do not count)");
ABSL_FLAG(absl::Duration, job_idle_ttl, absl::Minutes(15),
          "a job with no attached session and no message for this long is evicted");
ABSL_FLAG(uint64_t, finished_jobs_kept, 256,
          "ended and evicted jobs kept with their final status and audit (oldest dropped)");
ABSL_FLAG(uint64_t, stream_queue_bytes, 1 << 20,
          "bytes queued to go down one Session or AgentSession stream (answers and notices, "
          "about: serialized size + 128 a message) past which the coordinator stops reading "
          "that stream until it drained (HTTP/2 flow control holds the client back); 0: no bound");
ABSL_FLAG(uint64_t, watch_queue_bytes, 16 << 20,
          "bytes of matching events recorded while a WatchEvents watcher takes none, past which "
          "it is ended with RESOURCE_EXHAUSTED (a replay is paged from the event log as the "
          "watcher reads, never held at once); 0: bounded by count only (65536)");
ABSL_FLAG(absl::Duration, lazy_ack_delay, absl::Milliseconds(50),
          "longest wait of an accepted lazy_ack report for a message to carry its answer "
          "(SessionDown.acked_through), or of an applied lazy_ack node-agent batch "
          "(AgentDown.acked_through); 0 acks every message at once");
ABSL_FLAG(absl::Duration, stream_overflow_deadline, absl::Seconds(10),
          "how long a Session or AgentSession stream's queue may stay over --stream_queue_bytes "
          "(its peer does not read) before the stream is ended with RESOURCE_EXHAUSTED; the "
          "client re-attaches and gets its pending directives again");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext gRPC server with only the health service (grpc.health.v1), "
          "for Kubernetes' gRPC probes when --tls_cert makes --listen TLS (empty: off)");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(5),
          "on SIGTERM or SIGINT: health turns NOT_SERVING, no new calls are accepted, and calls "
          "in flight (open Session streams included) get this long to end before they are "
          "cancelled; keep it below the container's stop grace period");
// Coordinator replicas (docs/design.md, "Replicas"; docs/reliability.md, "Replicas").
ABSL_FLAG(std::string, etcd, "",
          "etcd client endpoints HOST:PORT[,HOST:PORT...]: run as one of several coordinator "
          "replicas that share the jobs (empty: a single coordinator)");
ABSL_FLAG(std::string, advertise, "",
          "with --etcd: HOST:PORT at which clients reach this replica (sent in redirects)");
ABSL_FLAG(absl::Duration, etcd_lease_ttl, absl::Seconds(5),
          "with --etcd: TTL of this replica's etcd lease (whole seconds, >= 2s); a dead "
          "replica's jobs move after about this long");
ABSL_FLAG(absl::Duration, etcd_lease_margin, absl::Seconds(1),
          "with --etcd: a replica that cannot renew its lease stops serving this long before the "
          "lease can expire (< half the TTL)");
ABSL_FLAG(absl::Duration, etcd_poll_interval, absl::Milliseconds(200),
          "with --etcd: how often the replica set and job owners are read from etcd");
ABSL_FLAG(absl::Duration, etcd_audit_interval, absl::Seconds(1),
          "with --etcd: how often an owner writes its part of each job's audit to etcd (when it "
          "changed), so that the audit outlives a move; in [etcd_poll_interval, 1m]");

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

// 'job_id token' per line; blank lines and lines starting with '#' are skipped.
absl::StatusOr<absl::flat_hash_map<std::string, std::string>> ReadJobTokens(
    const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return absl::NotFoundError("cannot read job_tokens_file " + path);
  absl::flat_hash_map<std::string, std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": expected 'job_id token'"));
    }
    tokens[fields[0]] = fields[1];
  }
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  // The groups of --help, as the README lists the flags.
  const std::vector<psync::serve::FlagGroup> groups = {
      {"Serving",
       {"listen", "port_file", "cpus", "health_listen", "drain_timeout",
        "max_receive_message_bytes", "heap_release_interval"}},
      {"HTTP side (metrics, JSON API, dashboard)",
       {"http_listen", "http_port_file", "http_token_file", "metrics_require_token", "http_threads",
        "http_idle_timeout", "http_io_timeout", "node_size", "metrics_node_series"}},
      {"Security", {"tls_cert", "tls_key", "tls_client_ca", "job_tokens_file"}},
      {"Jobs and their bounds",
       {"max_jobs", "max_world_size", "max_chunks", "max_sessions", "history_steps", "job_idle_ttl",
        "finished_jobs_kept"}},
      {"Liveness and stalls",
       {"inspect_interval", "rank_lease", "lost_rank_abort_after", "stall_multiplier",
        "stall_floor", "stall_ceiling", "stall_initial"}},
      {"Streams and delivery",
       {"delivery_threads", "apply_threads", "lazy_ack_delay", "stream_queue_bytes",
        "stream_overflow_deadline", "watch_queue_bytes"}},
      {"Replicas (etcd)",
       {"etcd", "advertise", "etcd_lease_ttl", "etcd_lease_margin", "etcd_poll_interval",
        "etcd_audit_interval"}},
  };
  psync::serve::ParseDaemonFlags(
      argc, argv, "psync-coordinator",
      "psync-coordinator: gates each chunk's param sync until every declared contributor staged, "
      "exactly once.",
      groups, "server/main.cc");
  psync::serve::UseReleaseMutexSettings();
  const psync::serve::CpuBudget cpu_budget = psync::serve::UseCpuBudget("psync-coordinator", argv);

  // Block the stop signals in every thread; one thread waits for them.
  const sigset_t stop_signals = psync::serve::BlockStopSignals();

  psync::server::ServerOptions options;
  for (auto [flag, out] :
       {std::pair{absl::GetFlag(FLAGS_tls_cert), &options.tls_cert_pem},
        std::pair{absl::GetFlag(FLAGS_tls_key), &options.tls_key_pem},
        std::pair{absl::GetFlag(FLAGS_tls_client_ca), &options.tls_client_ca_pem}}) {
    if (flag.empty()) continue;
    if (!ReadFile(flag, out)) {
      std::cerr << "psync-coordinator: cannot read " << flag << "\n";
      return 2;
    }
  }
  if (const std::string path = absl::GetFlag(FLAGS_job_tokens_file); !path.empty()) {
    auto tokens = ReadJobTokens(path);
    if (!tokens.ok()) {
      std::cerr << "psync-coordinator: " << tokens.status() << "\n";
      return 2;
    }
    options.coordinator.job_tokens = std::move(*tokens);
  }
  if (absl::GetFlag(FLAGS_max_world_size) < 1 ||
      absl::GetFlag(FLAGS_max_world_size) > psync::core::kMaxWorldSize ||
      absl::GetFlag(FLAGS_max_chunks) < 1 ||
      absl::GetFlag(FLAGS_max_chunks) > psync::core::kMaxChunks) {
    std::cerr << "psync-coordinator: --max_world_size must be in [1, " << psync::core::kMaxWorldSize
              << "] and --max_chunks in [1, " << psync::core::kMaxChunks
              << "] (the protocol's ranges)\n";
    return 2;
  }
  options.coordinator.tracker.limits.max_world_size = absl::GetFlag(FLAGS_max_world_size);
  options.coordinator.tracker.limits.max_chunks = absl::GetFlag(FLAGS_max_chunks);
  options.coordinator.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.listen = absl::GetFlag(FLAGS_listen);
  options.health_listen = absl::GetFlag(FLAGS_health_listen);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  options.coordinator.tracker.history_steps = absl::GetFlag(FLAGS_history_steps);
  options.coordinator.delivery_threads = absl::GetFlag(FLAGS_delivery_threads);
  options.coordinator.node_size = absl::GetFlag(FLAGS_node_size);
  options.metrics_node_series = absl::GetFlag(FLAGS_metrics_node_series);
  if (options.coordinator.delivery_threads < 0) {
    options.coordinator.delivery_threads = std::min(3, cpu_budget.cpus - 1);
  }
  options.coordinator.apply_threads = absl::GetFlag(FLAGS_apply_threads);
  if (options.coordinator.apply_threads < 0) {
    options.coordinator.apply_threads = std::min(3, cpu_budget.cpus - 1);
  }
  options.coordinator.max_jobs = absl::GetFlag(FLAGS_max_jobs);
  options.coordinator.job_idle_ttl = absl::GetFlag(FLAGS_job_idle_ttl);
  options.coordinator.finished_jobs_kept = absl::GetFlag(FLAGS_finished_jobs_kept);
  options.streams.queue_bytes = absl::GetFlag(FLAGS_stream_queue_bytes);
  options.streams.overflow_deadline = absl::GetFlag(FLAGS_stream_overflow_deadline);
  options.streams.watch_queue_bytes = absl::GetFlag(FLAGS_watch_queue_bytes);
  options.streams.lazy_ack_delay = absl::GetFlag(FLAGS_lazy_ack_delay);
  options.coordinator.observer.deadline.multiplier = absl::GetFlag(FLAGS_stall_multiplier);
  options.coordinator.observer.deadline.floor = absl::GetFlag(FLAGS_stall_floor);
  options.coordinator.observer.deadline.ceiling = absl::GetFlag(FLAGS_stall_ceiling);
  options.coordinator.observer.deadline.initial = absl::GetFlag(FLAGS_stall_initial);
  options.inspect_interval = absl::GetFlag(FLAGS_inspect_interval);
  options.coordinator.rank_lease = absl::GetFlag(FLAGS_rank_lease);
  options.coordinator.lost_rank_abort_after = absl::GetFlag(FLAGS_lost_rank_abort_after);
  options.http_listen = absl::GetFlag(FLAGS_http_listen);
  options.http.num_threads = absl::GetFlag(FLAGS_http_threads);
  options.http.idle_timeout = absl::GetFlag(FLAGS_http_idle_timeout);
  options.http.read_timeout = absl::GetFlag(FLAGS_http_io_timeout);
  options.http.write_timeout = absl::GetFlag(FLAGS_http_io_timeout);
  if (const std::string path = absl::GetFlag(FLAGS_http_token_file); !path.empty()) {
    std::string token;
    if (!ReadFile(path, &token)) {
      std::cerr << "psync-coordinator: cannot read http_token_file " << path << "\n";
      return 2;
    }
    token = std::string(absl::StripAsciiWhitespace(token));
    if (token.empty() || token.find_first_of(" \t\r\n") != std::string::npos) {
      std::cerr << "psync-coordinator: http_token_file " << path
                << " must hold one token (no spaces)\n";
      return 2;
    }
    options.http_api.token = std::move(token);
  }
  options.http_api.metrics_require_token = absl::GetFlag(FLAGS_metrics_require_token);
  if (const std::string& http = options.http_listen;
      !http.empty() && options.http_api.token.empty() && !absl::StartsWith(http, "127.") &&
      !absl::StartsWith(http, "localhost:") && !absl::StartsWith(http, "[::1]:")) {
    std::cerr << "psync-coordinator: warning: the HTTP side listens on " << http
              << " and /api/ needs no token (set --http_token_file, or --http_listen=127.0.0.1:"
                 "PORT; docs/reliability.md, 'The HTTP side: security')\n";
  }
  options.dashboard = psync::dashboard::Files();
  options.etcd = absl::GetFlag(FLAGS_etcd);
  options.advertise = absl::GetFlag(FLAGS_advertise);
  options.etcd_lease_ttl = absl::GetFlag(FLAGS_etcd_lease_ttl);
  options.etcd_lease_margin = absl::GetFlag(FLAGS_etcd_lease_margin);
  options.etcd_poll_interval = absl::GetFlag(FLAGS_etcd_poll_interval);
  options.etcd_audit_interval = absl::GetFlag(FLAGS_etcd_audit_interval);
  auto server = psync::server::CoordinatorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "psync-coordinator: " << server.status() << "\n";
    return 1;
  }
  std::cerr << "psync-coordinator: serving psync.v1 on port " << (*server)->port() << "\n";
  if ((*server)->http_port() != 0) {
    const std::string base = absl::StrCat((*server)->http_tls() ? "https" : "http",
                                          "://localhost:", (*server)->http_port());
    std::cerr << "psync-coordinator: metrics at " << base << "/metrics, dashboard at " << base
              << "/\n";
  }
  psync::serve::WritePortFile(absl::GetFlag(FLAGS_port_file), (*server)->port());
  psync::serve::WritePortFile(absl::GetFlag(FLAGS_http_port_file), (*server)->http_port());
  const psync::serve::HeapReleaser heap_releaser(absl::GetFlag(FLAGS_heap_release_interval));
  std::thread stopper([&] {
    const int signal = psync::serve::WaitForStopSignal(stop_signals);
    std::cerr << "psync-coordinator: draining on signal " << signal << " (at most "
              << absl::GetFlag(FLAGS_drain_timeout) << ")\n";
    (*server)->Drain(absl::GetFlag(FLAGS_drain_timeout));
    std::cerr << "psync-coordinator: stopped\n";
  });
  (*server)->Wait();
  stopper.join();
  return 0;
}
