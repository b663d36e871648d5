#include "server/coordinator_server.h"

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "server/health_status.h"
#include "server/http_api.h"
#include "server/rank_server.h"

namespace psync::server {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(ServerOptions options) {
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  Clock* clock = options.clock != nullptr ? options.clock : &s->real_clock_;
  s->coordinator_ = std::make_unique<Coordinator>(options.coordinator, clock);
  Coordinator* coordinator = s->coordinator_.get();
  s->rendezvous_ = std::make_unique<RendezvousStore>(
      options.rendezvous, [coordinator](const std::string& job, uint64_t generation,
                                        const RendezvousStore::Caller& caller) {
        return coordinator->CheckGeneration(job, generation, caller.rank, caller.session_id);
      });
  s->rendezvous_cleanup_ = std::make_unique<RendezvousCleanup>(coordinator, s->rendezvous_.get());
  StreamLimits streams = options.streams;
  streams.counters = &s->stream_counters_;
  s->service_ = std::make_unique<CoordinatorService>(coordinator, s->rendezvous_.get(), streams);

  auto metrics = CoordinatorMetrics::Create(coordinator, &s->registry_);
  if (!metrics.ok()) return metrics.status();
  s->metrics_ = std::move(*metrics);
  // The conventional start time: alerts see a restart as a change of it (deploy/prometheus).
  auto start_time = s->registry_.AddGauge("process_start_time_seconds",
                                          "Start time of the process, in seconds since the epoch.");
  if (!start_time.ok()) return start_time.status();
  (*start_time)->Get()->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  if (!options.http_listen.empty()) {
    const size_t colon = options.http_listen.rfind(':');
    int http_port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(options.http_listen.substr(colon + 1), &http_port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("http_listen '", options.http_listen, "' must be host:port"));
    }
    http::ServerOptions http_options = options.http;
    http_options.tls_cert_pem = options.tls_cert_pem;
    http_options.tls_key_pem = options.tls_key_pem;
    s->http_ = std::make_unique<http::Server>(std::move(http_options));
    if (auto st = RegisterHttpApi(s->http_.get(), coordinator, &s->registry_, options.dashboard,
                                  options.http_api);
        !st.ok()) {
      return st;
    }
    if (auto st = s->http_->Start(options.http_listen.substr(0, colon), http_port); !st.ok()) {
      return st;
    }
  }

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls_cert_pem.empty() != options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("tls: the certificate and the key go together");
  }
  if (!options.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
    if (!options.tls_client_ca_pem.empty()) {
      ssl.pem_root_certs = options.tls_client_ca_pem;
      ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
  } else if (!options.tls_client_ca_pem.empty()) {
    return absl::InvalidArgumentError("tls: a client CA needs a server certificate and key");
  }
  auto server = StartRankServer(options.listen, credentials, options.max_receive_message_bytes,
                                s->service_.get(), &s->port_);
  if (!server.ok()) return server.status();
  s->server_ = std::move(*server);
  if (!options.health_listen.empty()) {
    auto health = StartHealthServer(options.health_listen, &s->health_port_);
    if (!health.ok()) return health.status();
    s->health_server_ = std::move(*health);
  }
  if (options.inspect_interval > absl::ZeroDuration()) {
    CoordinatorServer* self = s.get();
    s->inspector_ =
        std::thread([self, interval = options.inspect_interval, log = options.log_stalls] {
          while (!self->stop_inspector_.WaitForNotificationWithTimeout(interval)) {
            for (const core::Event& found : self->coordinator_->EnforceLiveness()) {
              if (log) {
                std::cerr << "psync: " << core::EventKindName(found.kind) << ": job '"
                          << found.job_id << "' " << found.detail << "\n";
              }
            }
          }
        });
  }
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

std::string CoordinatorServer::local_target() const { return absl::StrCat("127.0.0.1:", port_); }

void CoordinatorServer::Shutdown() { Drain(absl::ZeroDuration()); }

void CoordinatorServer::Drain(absl::Duration grace) {
  std::call_once(shutdown_once_, [this, grace] {
    if (health_server_ != nullptr) SetServing(health_server_.get(), false);
    if (server_ != nullptr) {
      SetServing(server_.get(), false);
      // Blocks until every call ended, or cancels those still open at the deadline.
      server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    }
    if (health_server_ != nullptr) health_server_->Shutdown(std::chrono::system_clock::now());
    stop_inspector_.Notify();
    if (inspector_.joinable()) inspector_.join();
    if (http_ != nullptr) http_->Shutdown();
  });
}

void CoordinatorServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace psync::server
