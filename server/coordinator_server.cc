#include "server/coordinator_server.h"

#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "serve/health_status.h"
#include "serve/rank_server.h"
#include "server/ha/grpc_etcd_client.h"
#include "server/ha/owner_audit.h"
#include "server/http_api.h"
#include "wire/not_served.h"

namespace psync::server {

namespace {

absl::Status ValidateReplicaOptions(const ServerOptions& options) {
  const size_t colon = options.advertise.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.advertise.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "advertise: '", options.advertise,
        "' must be the HOST:PORT clients reach this replica at (required with --etcd)"));
  }
  if (options.etcd_lease_ttl < absl::Seconds(2) ||
      options.etcd_lease_ttl != absl::Seconds(absl::ToInt64Seconds(options.etcd_lease_ttl))) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_lease_ttl: ", absl::FormatDuration(options.etcd_lease_ttl),
                     " must be whole seconds, at least 2s"));
  }
  if (options.etcd_lease_margin <= absl::ZeroDuration() ||
      options.etcd_lease_margin >= options.etcd_lease_ttl / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_lease_margin: ", absl::FormatDuration(options.etcd_lease_margin),
                     " must be > 0 and under half of etcd_lease_ttl (",
                     absl::FormatDuration(options.etcd_lease_ttl), ")"));
  }
  if (options.etcd_poll_interval <= absl::ZeroDuration() ||
      options.etcd_poll_interval > options.etcd_lease_ttl / 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_poll_interval: ", absl::FormatDuration(options.etcd_poll_interval),
                     " must be > 0 and at most a quarter of etcd_lease_ttl"));
  }
  if (options.etcd_audit_interval < options.etcd_poll_interval ||
      options.etcd_audit_interval > absl::Minutes(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_audit_interval: ", absl::FormatDuration(options.etcd_audit_interval),
                     " must be in [etcd_poll_interval (",
                     absl::FormatDuration(options.etcd_poll_interval), "), 1m]"));
  }
  return absl::OkStatus();
}

// This replica's ownership figures, as gauges labelled with its address (read from a snapshot
// at every scrape): psync_replica_{jobs_owned,lease_held,claims,takeovers,jobs_lost,lease_lapses,
// etcd_errors}.
absl::Status RegisterReplicaMetrics(ha::Replica* replica, metrics::Registry* registry) {
  struct Figure {
    const char* name;
    const char* help;
    double (*read)(const ha::ReplicaSnapshot&);
  };
  static constexpr Figure kFigures[] = {
      {"psync_replica_jobs_owned", "Jobs this replica owns now.",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.jobs_owned); }},
      {"psync_replica_lease_held",
       "1 while this replica holds its etcd lease (before its deadline).",
       [](const ha::ReplicaSnapshot& s) { return s.holding ? 1.0 : 0.0; }},
      {"psync_replica_claims", "Jobs claimed by this replica since it started.",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.claims); }},
      {"psync_replica_takeovers", "Jobs taken over from another replica since it started.",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.takeovers); }},
      {"psync_replica_jobs_lost", "Jobs this replica stopped serving (lease lapsed, key gone).",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.jobs_lost); }},
      {"psync_replica_lease_lapses", "etcd leases this replica lost since it started.",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.lease_lapses); }},
      {"psync_replica_etcd_errors", "etcd calls of this replica that failed.",
       [](const ha::ReplicaSnapshot& s) { return static_cast<double>(s.etcd_errors); }},
  };
  std::vector<std::pair<metrics::GaugeFamily*, const Figure*>> gauges;
  for (const Figure& f : kFigures) {
    absl::StatusOr<metrics::GaugeFamily*> family = registry->AddGauge(f.name, f.help, {"replica"});
    if (!family.ok()) return family.status();
    gauges.emplace_back(*family, &f);
  }
  registry->AddCollector([replica, gauges] {
    const ha::ReplicaSnapshot s = replica->Describe();
    for (const auto& [family, figure] : gauges) family->WithLabels({s.self})->Set(figure->read(s));
  });
  return absl::OkStatus();
}

}  // namespace

// More delivery threads than this would only wait on each other for the cores.
constexpr int kMaxHelperThreads = 64;

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(ServerOptions options) {
  if (options.streams.lazy_ack_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lazy_ack_delay: ", absl::FormatDuration(options.streams.lazy_ack_delay),
                     " must not be negative (0 acks every message at once)"));
  }
  if (options.coordinator.node_size < 1) {
    return absl::InvalidArgumentError("node_size must be at least 1 (got 0)");
  }
  if (options.coordinator.delivery_threads < 0 ||
      options.coordinator.delivery_threads > kMaxHelperThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("delivery_threads: ", options.coordinator.delivery_threads,
                     " is out of range [0, ", kMaxHelperThreads, "]"));
  }
  if (options.coordinator.apply_threads < 0 ||
      options.coordinator.apply_threads > kMaxHelperThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("apply_threads: ", options.coordinator.apply_threads, " is out of range [0, ",
                     kMaxHelperThreads, "]"));
  }
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  serve::Clock* clock = options.clock != nullptr ? options.clock : &s->real_clock_;
  if (!options.etcd.empty() || options.etcd_client != nullptr) {
    if (auto st = ValidateReplicaOptions(options); !st.ok()) return st;
    ha::EtcdClient* etcd_client = options.etcd_client;
    if (etcd_client == nullptr) {
      // An etcd answer later than this cannot keep the lease (ownership.h): waiting longer for
      // one only delays the next try.
      auto etcd = ha::GrpcEtcdClient::Create(
          options.etcd, ha::ToleratedEtcdLatency({options.advertise, options.etcd_lease_ttl,
                                                  options.etcd_lease_margin}));
      if (!etcd.ok()) return etcd.status();
      s->etcd_ = std::move(*etcd);
      etcd_client = s->etcd_.get();
    }
    ha::ReplicaOptions replica;
    replica.ownership = {options.advertise, options.etcd_lease_ttl, options.etcd_lease_margin};
    replica.poll_interval = options.etcd_poll_interval;
    replica.audit.publish_interval = options.etcd_audit_interval;
    replica.log = options.log_stalls;
    s->replica_ = std::make_unique<ha::Replica>(replica, etcd_client, clock);
    options.coordinator.gate = s->replica_.get();
  }
  s->coordinator_ = std::make_unique<Coordinator>(options.coordinator, clock);
  Coordinator* coordinator = s->coordinator_.get();
  if (s->replica_ != nullptr) {
    s->replica_->SetOnLost([coordinator](const std::vector<std::string>& jobs) {
      coordinator->DropJobs(jobs, wire::NotServedHere(ha::kLostReason, "", 0));
    });
    const std::string self = options.advertise;
    s->replica_->SetAuditSource(
        [coordinator, self](const std::string& job, uint64_t epoch) -> std::optional<std::string> {
          std::optional<observe::AuditTotals> totals = coordinator->AuditTotalsAt(job, epoch);
          if (!totals.has_value()) return std::nullopt;
          return EncodeOwnerAudit(self, epoch, *totals);
        },
        [self](const std::string&, uint64_t epoch) {
          return EncodeOwnerAudit(self, epoch, observe::AuditTotals());
        });
    // The first lease and view before serving, so that the first Joins can be claimed here.
    s->replica_->Tick();
    s->replica_->Start();
  }
  s->rendezvous_ = std::make_unique<RendezvousStore>(
      options.rendezvous, [coordinator](const std::string& job, uint64_t generation,
                                        const RendezvousStore::Caller& caller) {
        absl::Status checked =
            coordinator->CheckGeneration(job, generation, caller.rank, caller.session_id);
        // Refused like any other message: counted (the job's, or job="" for one not live).
        if (!checked.ok()) coordinator->RecordRejected(job, checked);
        return checked;
      });
  s->rendezvous_cleanup_ = std::make_unique<RendezvousCleanup>(coordinator, s->rendezvous_.get());
  serve::StreamLimits streams = options.streams;
  streams.counters = &s->stream_counters_;
  // What goes down to node agents and relays: how long it waits in their streams' queues.
  auto agent_down_wait = s->registry_.AddHistogram(
      "psync_agent_stream_down_wait_seconds",
      "Per message written down an AgentSession (to a node agent or a relay): how long its oldest "
      "content (a directive, an answer) waited in the stream's queue before the write started.",
      {}, metrics::QueueWaitBuckets());
  if (!agent_down_wait.ok()) return agent_down_wait.status();
  streams.agent_down_wait = metrics::SecondsObserver((*agent_down_wait)->WithLabels({}));
  auto agent_down_write = s->registry_.AddHistogram(
      "psync_agent_stream_down_write_seconds",
      "Per message written down an AgentSession: how long its write took, from its start until "
      "the stream took it (it waits while the agent's flow-control window is full).",
      {}, metrics::QueueWaitBuckets());
  if (!agent_down_write.ok()) return agent_down_write.status();
  streams.agent_down_write = metrics::SecondsObserver((*agent_down_write)->WithLabels({}));
  s->service_ = std::make_unique<CoordinatorService>(coordinator, s->rendezvous_.get(), streams,
                                                     s->replica_.get());

  auto metrics =
      CoordinatorMetrics::Create(coordinator, &s->registry_, options.metrics_node_series);
  if (!metrics.ok()) return metrics.status();
  s->metrics_ = std::move(*metrics);
  // The conventional start time: alerts see a restart as a change of it (deploy/prometheus).
  auto start_time = s->registry_.AddGauge("process_start_time_seconds",
                                          "Start time of the process, in seconds since the epoch.");
  if (!start_time.ok()) return start_time.status();
  (*start_time)->Get()->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  if (s->replica_ != nullptr) {
    if (auto st = RegisterReplicaMetrics(s->replica_.get(), &s->registry_); !st.ok()) return st;
  }
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
    HttpApiOptions http_api = options.http_api;
    http_api.replica = s->replica_.get();
    if (auto st = RegisterHttpApi(s->http_.get(), coordinator, &s->registry_, options.dashboard,
                                  http_api);
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
  auto server = serve::StartRankServer(
      options.listen, credentials, options.max_receive_message_bytes, s->service_.get(), &s->port_);
  if (!server.ok()) return server.status();
  s->server_ = std::move(*server);
  if (!options.health_listen.empty()) {
    auto health = serve::StartHealthServer(options.health_listen, &s->health_port_);
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
    if (health_server_ != nullptr) serve::SetServing(health_server_.get(), false);
    // A replica gives its jobs up (revokes its lease) before the drain: it releases nothing more,
    // and the other replicas take the jobs at once instead of after the lease's TTL.
    if (replica_ != nullptr) replica_->Stop();
    if (server_ != nullptr) {
      serve::SetServing(server_.get(), false);
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
