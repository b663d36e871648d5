#include "agent/agent.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/agent_batch.h"
#include "server/health_status.h"
#include "server/rank_server.h"

namespace psync::agent {
namespace {

bool IsUnix(const std::string& address) { return absl::StartsWith(address, "unix:"); }

}  // namespace

absl::Status ValidateAgentOptions(const AgentOptions& options) {
  if (options.channel == nullptr && options.target.empty()) {
    return absl::InvalidArgumentError("target must not be empty (the coordinator's address)");
  }
  if (options.listen.empty()) return absl::InvalidArgumentError("listen must not be empty");
  if (options.flush_window < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("flush_window must be >= 0");
  }
  if (options.flush_messages == 0) return absl::InvalidArgumentError("flush_messages must be >= 1");
  if (options.max_batch_messages == 0 ||
      options.max_batch_messages > server::kMaxAgentBatchMessages) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_messages must be in [1, ", server::kMaxAgentBatchMessages, "]"));
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
  return ValidateBackoffOptions(options.backoff);
}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options) {
  if (absl::Status s = ValidateAgentOptions(options); !s.ok()) return s;
  std::unique_ptr<Agent> agent(new Agent(std::move(options)));
  const AgentOptions& o = agent->options_;

  agent->channel_ = o.channel;
  if (agent->channel_ == nullptr) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(o.backoff.initial)));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(o.backoff.initial)));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(o.backoff.max)));
    if (o.keepalive > absl::ZeroDuration()) {
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(o.keepalive));
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
      args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    }
    // Answers to a whole node's ranks come as one message: no size limit on what comes down.
    args.SetMaxReceiveMessageSize(-1);
    agent->channel_ = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
  }
  agent->stub_ = v1::Coordinator::NewStub(agent->channel_);

  UpstreamOptions upstream;
  upstream.channel = agent->channel_;
  upstream.backoff = o.backoff;
  upstream.flush_window = o.flush_window;
  upstream.flush_messages = o.flush_messages;
  upstream.max_batch_messages = o.max_batch_messages;
  upstream.max_batch_bytes = o.max_batch_bytes;
  agent->upstream_ = std::make_unique<Upstream>(std::move(upstream), &agent->counters_);
  agent->service_ =
      std::make_unique<AgentService>(agent->upstream_.get(), agent->stub_.get(), &agent->counters_);

  auto server =
      server::StartRankServer(o.listen, grpc::InsecureServerCredentials(),
                              o.max_receive_message_bytes, agent->service_.get(), &agent->port_);
  if (!server.ok()) return server.status();
  agent->server_ = std::move(*server);
  if (IsUnix(o.listen)) agent->port_ = 0;
  agent->upstream_->Start();
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
    // Local Sessions end first (their ranks are detached), then the stream to the coordinator.
    if (server_ != nullptr) {
      server::SetServing(server_.get(), false);
      server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    }
    if (upstream_ != nullptr) upstream_->Shutdown();
  });
}

void Agent::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace psync::agent
