#include "agent/agent.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/endpoints.h"
#include "client/reconnecting_stream.h"
#include "serve/cpu_budget.h"
#include "serve/health_status.h"
#include "serve/metrics/http_handler.h"
#include "serve/rank_server.h"
#include "wire/limits.h"

namespace psync::agent {
namespace {

bool IsUnix(const std::string& address) { return absl::StartsWith(address, "unix:"); }

// http_listen's host and port, or INVALID_ARGUMENT naming the field.
absl::StatusOr<std::pair<std::string, int>> HttpHostPort(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http_listen '", listen, "' must be host:port (port 0 to 65535)"));
  }
  return std::make_pair(listen.substr(0, colon), port);
}

}  // namespace

absl::Status ValidateAgentOptions(const AgentOptions& options) {
  if (options.channel == nullptr) {
    absl::StatusOr<std::vector<std::string>> targets = SplitTargets(options.target, "target");
    if (!targets.ok()) return targets.status();
  }
  if (options.listen.empty()) return absl::InvalidArgumentError("listen must not be empty");
  if (options.flush_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("flush_window must be >= 0");
  }
  if (options.relay_fanout_threads < -1 || options.relay_fanout_threads > 64) {
    return absl::InvalidArgumentError("relay_fanout_threads must be -1 (from the CPUs) or 0..64");
  }
  if (options.relay_flush_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("relay_flush_window must be >= 0");
  }
  if (options.flush_messages == 0) return absl::InvalidArgumentError("flush_messages must be >= 1");
  if (options.max_batch_messages == 0 ||
      options.max_batch_messages > wire::kMaxAgentBatchMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_messages must be in [1, ", wire::kMaxAgentBatchMessages, "]"));
  }
  if (options.max_batch_bytes == 0) {
    return absl::InvalidArgumentError("max_batch_bytes must be >= 1");
  }
  if (options.keepalive < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keepalive must be >= 0");
  }
  if (options.max_receive_message_bytes <= 0) {
    return absl::InvalidArgumentError("max_receive_message_bytes must be > 0");
  }
  if (!options.http_listen.empty()) {
    if (auto host_port = HttpHostPort(options.http_listen); !host_port.ok()) {
      return host_port.status();
    }
  }
  return ValidateBackoffOptions(options.backoff);
}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options) {
  if (absl::Status s = ValidateAgentOptions(options); !s.ok()) return s;
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  const AgentOptions& o = agent->options_;
  // Before anything runs: it points the counters' wait histograms at its families.
  auto metrics = AgentMetrics::Create(&agent->counters_);
  if (!metrics.ok()) return metrics.status();
  agent->metrics_ = std::move(*metrics);
  if (!o.http_listen.empty()) {
    const auto [host, port] = *HttpHostPort(o.http_listen);  // validated
    http::ServerOptions http_options;
    http_options.num_threads = 2;  // Prometheus, and someone's curl
    agent->http_ = std::make_unique<http::Server>(http_options);
    if (auto s =
            agent->http_->Handle("/metrics", metrics::MetricsHandler(agent->metrics_->registry()));
        !s.ok()) {
      return s;
    }
    if (auto s = agent->http_->Start(host, port); !s.ok()) return s;
  }

  RouterOptions router;
  if (o.channel != nullptr) {
    router.targets = {""};  // the one given channel
    router.channel_factory = [channel = o.channel](const std::string&) { return channel; };
    router.follow_redirects = false;
  } else {
    router.targets = *SplitTargets(o.target, "target");  // validated
    router.channel_factory = [backoff = o.backoff,
                              keepalive = o.keepalive](const std::string& target) {
      grpc::ChannelArguments args = ReconnectingChannelArguments(backoff, keepalive);
      // Answers to a whole node's ranks come as one message: no size limit on what comes down.
      args.SetMaxReceiveMessageSize(-1);
      return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    };
  }
  router.upstream.backoff = o.backoff;
  router.upstream.flush_window = o.flush_window;
  router.upstream.flush_messages = o.flush_messages;
  router.upstream.max_batch_messages = o.max_batch_messages;
  router.upstream.max_batch_bytes = o.max_batch_bytes;
  router.upstream.merge.merge_sync_dones = o.merge_sync_dones;
  router.relay.backoff = o.backoff;
  router.relay.max_batch_bytes = o.max_batch_bytes;
  router.relay.flush_window = o.relay_flush_window;
  router.relay.fanout_threads = static_cast<size_t>(
      o.relay_fanout_threads >= 0 ? o.relay_fanout_threads
                                  : RelayFanoutThreadsFor(serve::DetectCpuBudget(0).cpus));
  agent->router_ = std::make_unique<Router>(std::move(router), &agent->counters_);
  agent->service_ = std::make_unique<AgentService>(agent->router_.get(), &agent->counters_);

  auto server =
      serve::StartRankServer(o.listen, grpc::InsecureServerCredentials(),
                             o.max_receive_message_bytes, agent->service_.get(), &agent->port_);
  if (!server.ok()) return server.status();
  agent->server_ = std::move(*server);
  if (IsUnix(o.listen)) agent->port_ = 0;
  agent->router_->Start();
  return agent;
}

Agent::~Agent() { Shutdown(); }

std::string Agent::local_target() const {
  if (IsUnix(options_.listen)) return options_.listen;
  std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::" || host == "localhost") {
    host = "127.0.0.1";
  }
  return absl::StrCat(host, ":", port_);
}

void Agent::Shutdown() { Drain(absl::ZeroDuration()); }

void Agent::Drain(absl::Duration grace) {
  std::call_once(shutdown_once_, [this, grace] {
    // Local Sessions end first (their ranks are detached), then the streams to the coordinator.
    if (server_ != nullptr) {
      serve::SetServing(server_.get(), false);
      server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    }
    // Shutdown returned once every reactor's OnDone ran; the last of them lets go of the Router
    // only when it is destroyed (agent/calls_in_flight.h).
    if (service_ != nullptr) service_->AwaitCallsDone();
    if (router_ != nullptr) router_->Shutdown();  // its relay hubs too
    if (http_ != nullptr) http_->Shutdown();
  });
}

void Agent::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace psync::agent
