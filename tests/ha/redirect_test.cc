// Two coordinator replicas over real gRPC sharing a fake etcd: a Join at the wrong replica is
// UNAVAILABLE with the owner in its message and in a psync.v1.OwnerRedirect (binary error
// details); a client given both addresses ends at the owner after one redirect; directives carry
// the owner's epoch (the job key's create_revision); ListReplicas shows the replicas and owners.
// A node agent given both replicas follows the redirect itself and never passes one on to a rank,
// and moves its rank to the other replica when the owner stops.
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "client/c_api/psync_c.h"
#include "client/client.h"
#include "client/endpoints.h"
#include "client/job_start.h"
#include "client/psyncctl.h"
#include "client/testing/wait_until.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "serve/http/testing/curl_client.h"
#include "server/coordinator_server.h"
#include "server/ha/fake_etcd_client.h"
#include "server/ha/ownership.h"
#include "server/owner/job_view.h"
#include "tests/ha/etcd_process.h"
#include "tests/service/raw_session.h"

namespace psync {
namespace {

v1::JoinRequest Plan(const std::string& job) {
  v1::JoinRequest plan;
  plan.set_job_id(job);
  plan.set_world_size(1);
  plan.set_rank(0);
  plan.set_num_chunks(1);
  plan.set_incarnation("i1");
  v1::ChunkPlan* chunk = plan.add_chunks();
  chunk->set_chunk(0);
  chunk->add_optimizers("dense");
  v1::SyncGroup* group = chunk->add_groups();
  group->set_name("dp");
  group->add_ranks(0);
  return plan;
}

class RedirectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      const std::string address = absl::StrCat("127.0.0.1:", testing::FreePort());
      server::ServerOptions options;
      options.listen = address;
      options.advertise = address;
      options.etcd_client = &etcd_;
      options.etcd_poll_interval = absl::Milliseconds(50);
      options.inspect_interval = absl::ZeroDuration();
      options.log_stalls = false;
      options.http_listen = "127.0.0.1:0";
      auto server = server::CoordinatorServer::Start(options);
      ASSERT_TRUE(server.ok()) << server.status();
      addresses_.push_back(address);
      servers_.push_back(std::move(*server));
    }
  }

  v1::ListReplicasResponse List(int i) {
    auto stub = v1::Coordinator::NewStub(
        grpc::CreateChannel(addresses_[i], grpc::InsecureChannelCredentials()));
    v1::ListReplicasResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(stub->ListReplicas(&context, v1::ListReplicasRequest(), &response).ok());
    return response;
  }

  // The first job id <prefix><n> that rendezvous hashing over both replicas gives to replica
  // `preferred` and that `also` (when set) accepts.
  std::string JobPreferredBy(int preferred, const std::string& prefix,
                             const std::function<bool(const std::string&)>& also = nullptr) {
    server::ha::Ownership view({addresses_[preferred], absl::Seconds(5), absl::Seconds(1)});
    view.SetReplicas(addresses_);
    for (int n = 0;; ++n) {
      const std::string id = absl::StrCat(prefix, n);
      if (view.Preferred(id) == addresses_[preferred] && (!also || also(id))) return id;
    }
  }

  // Rank 0 of `job` (Plan) connected through `target`, with a 20 s call timeout and, when given,
  // the reconnect backoff's first delay.
  static absl::StatusOr<std::unique_ptr<Client>> ConnectRank(
      const std::string& target, const std::string& job,
      std::optional<absl::Duration> first_backoff = std::nullopt) {
    ClientOptions options;
    options.target = target;
    options.plan = Plan(job);
    options.call_timeout = absl::Seconds(20);
    if (first_backoff.has_value()) options.backoff.initial = *first_backoff;
    return Client::Connect(options);
  }

  // Rank 0 of `job` joins at replica 0 (its owner then); true once replica 1 has learned the owner
  // from etcd (until then it refuses without naming one).
  bool JoinAtReplica0UntilReplica1NamesIt(const std::string& job, v1::JoinResponse* joined) {
    auto owner = v1::Coordinator::NewStub(
        grpc::CreateChannel(addresses_[0], grpc::InsecureChannelCredentials()));
    grpc::ClientContext join_context;
    if (!owner->Join(&join_context, Plan(job), joined).ok()) return false;
    auto other = v1::Coordinator::NewStub(
        grpc::CreateChannel(addresses_[1], grpc::InsecureChannelCredentials()));
    return testing::WaitUntil([&] {
      grpc::ClientContext context;
      v1::GetJobStatusRequest request;
      request.set_job_id(job);
      v1::JobStatus status;
      const std::optional<v1::OwnerRedirect> r =
          RedirectIn(other->GetJobStatus(&context, request, &status));
      return r.has_value() && r->owner() == addresses_[0];
    });
  }

  // A raw Session of rank 0 of `job` through `target`, attached with `joined`, read to its end:
  // how it ended.
  static grpc::Status AttachThrough(const std::string& target, const std::string& job,
                                    const v1::JoinResponse& joined) {
    auto through =
        v1::Coordinator::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext session_context;
    auto session = through->Session(&session_context);
    if (!session->Write(testing::AttachMessage(job, 0, joined))) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "the attach could not be written");
    }
    v1::SessionDown down;
    while (session->Read(&down)) {
    }
    return session->Finish();
  }

  // Waits until each replica's ListReplicas names both: each has read the other's key.
  bool BothReplicasListEachOther() {
    return testing::WaitUntil(
        [&] { return List(0).replicas_size() == 2 && List(1).replicas_size() == 2; });
  }

  serve::RealClock clock_;
  server::ha::FakeEtcd etcd_{&clock_};
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<server::CoordinatorServer>> servers_;
};

TEST_F(RedirectTest, JoinAtTheWrongReplicaNamesTheOwnerAndClientsGoThere) {
  ASSERT_TRUE(BothReplicasListEachOther());
  EXPECT_EQ(List(0).self(), addresses_[0]);
  // A job replica 0 is preferred for.
  const std::string job = JobPreferredBy(0, "job");

  // Join at replica 1: redirected to replica 0 (nobody owns the job yet: epoch 0).
  auto wrong = v1::Coordinator::NewStub(
      grpc::CreateChannel(addresses_[1], grpc::InsecureChannelCredentials()));
  v1::JoinResponse response;
  grpc::ClientContext context;
  const grpc::Status refused = wrong->Join(&context, Plan(job), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(refused.error_message(), absl::StrCat("job '", job, "' is not owned yet; replica '",
                                                  addresses_[0], "' is to own it: join there"));
  ASSERT_TRUE(RedirectIn(refused).has_value());
  EXPECT_EQ(RedirectIn(refused)->owner(), addresses_[0]);
  EXPECT_EQ(RedirectIn(refused)->epoch(), 0u);

  // A client given only replica 1 ends at replica 0 after one redirect (the owner need not be on
  // its list: a list's first entry is chosen by a hash of the job id, so a list of both could start
  // at the owner).
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectRank(addresses_[1], job, absl::Milliseconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(), addresses_[0]);
  EXPECT_GE((*client)->stats().redirects, 1u);

  // The owner's epoch is its job key's create_revision; its directives carry it.
  const absl::StatusOr<std::optional<server::ha::KeyValue>> key =
      etcd_.Get(absl::StrCat("/psync/jobs/", job));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->value, addresses_[0]);
  const uint64_t epoch = static_cast<uint64_t>((*key)->create_revision);
  EXPECT_GT(epoch, 0u);
  ASSERT_TRUE((*client)->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<v1::SyncDirective> directive =
      (*client)->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(directive.ok()) << directive.status();
  EXPECT_EQ(directive->epoch(), epoch);

  // Replica 1, once it has read the key, redirects at the owner's epoch and lists the owner.
  ASSERT_TRUE(testing::WaitUntil([&] { return List(1).owners_size() == 1; }));
  const v1::ListReplicasResponse listed = List(1);
  EXPECT_EQ(listed.owners(0).job_id(), job);
  EXPECT_EQ(listed.owners(0).owner(), addresses_[0]);
  EXPECT_EQ(listed.owners(0).epoch(), epoch);
  EXPECT_EQ(listed.replicas(0).jobs_owned() + listed.replicas(1).jobs_owned(), 1u);
  // The dashboard's /api/replicas answers the same, as JSON.
  absl::StatusOr<http::Response> http = http::testing::CurlGet(
      absl::StrCat("http://127.0.0.1:", servers_[1]->http_port(), "/api/replicas"));
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->status, 200);
  v1::ListReplicasResponse from_http;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(http->body, &from_http).ok())
      << http->body;
  EXPECT_EQ(from_http.self(), addresses_[1]);
  ASSERT_EQ(from_http.owners_size(), 1);
  EXPECT_EQ(from_http.owners(0).job_id(), job);
  EXPECT_EQ(from_http.owners(0).owner(), addresses_[0]);
  EXPECT_EQ(from_http.owners(0).epoch(), epoch);
  EXPECT_EQ(from_http.replicas_size(), 2);
  grpc::ClientContext again;
  const grpc::Status redirected = wrong->Join(&again, Plan(job), &response);
  ASSERT_TRUE(RedirectIn(redirected).has_value());
  EXPECT_EQ(RedirectIn(redirected)->epoch(), epoch);

  // Questions about the job at the wrong replica name the owner too, instead of NOT_FOUND.
  const std::string owned_there =
      absl::StrCat("job '", job, "' is owned by replica '", addresses_[0], "' (epoch ", epoch,
                   "): connect there");
  grpc::ClientContext status_context;
  v1::GetJobStatusRequest status_request;
  status_request.set_job_id(job);
  v1::JobStatus status;
  const grpc::Status status_refused = wrong->GetJobStatus(&status_context, status_request, &status);
  EXPECT_EQ(status_refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status_refused.error_message(), owned_there);
  ASSERT_TRUE(RedirectIn(status_refused).has_value());
  EXPECT_EQ(RedirectIn(status_refused)->owner(), addresses_[0]);
  grpc::ClientContext end_context;
  v1::EndJobRequest end_request;
  end_request.set_job_id(job);
  v1::EndJobResponse ended;
  const grpc::Status end_refused = wrong->EndJob(&end_context, end_request, &ended);
  EXPECT_EQ(end_refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(end_refused.error_message(), owned_there);
  // ... and changed nothing: the job still runs at its owner. An unknown job is still NOT_FOUND.
  EXPECT_EQ(server::JobStateText(*servers_[0]->coordinator().GetJobStatus(job)), "RUNNING");
  grpc::ClientContext unknown_context;
  status_request.set_job_id("never-joined");
  EXPECT_EQ(wrong->GetJobStatus(&unknown_context, status_request, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
  absl::StatusOr<http::Response> http_job = http::testing::CurlGet(
      absl::StrCat("http://127.0.0.1:", servers_[1]->http_port(), "/api/job?id=", job));
  ASSERT_TRUE(http_job.ok()) << http_job.status();
  EXPECT_EQ(http_job->status, 503);
  EXPECT_EQ(http_job->body, owned_there + "\n");

  // The C ABI's one-shot queries (the Python binding's get_job_status and get_audit) follow it
  // too: given the wrong replica, or a list whose entry for the job is unreachable (the query
  // moves to the next entry, the wrong replica, then to the owner).
  const std::string dead = absl::StrCat("127.0.0.1:", testing::FreePort());
  std::vector<std::string> list = {addresses_[1]};
  list.insert(list.begin() + static_cast<ptrdiff_t>(JobStartIndex(job, 2)), dead);
  for (const std::string& target : {addresses_[1], absl::StrJoin(list, ",")}) {
    char* json = nullptr;
    psync_status answer{};
    ASSERT_EQ(psync_get_job_status(target.c_str(), nullptr, job.c_str(), 10.0, &json, &answer), 0)
        << target << ": " << answer.message;
    EXPECT_TRUE(absl::StrContains(json, absl::StrCat("\"jobId\":\"", job, "\""))) << json;
    psync_string_free(json);
    ASSERT_EQ(psync_get_audit(target.c_str(), nullptr, job.c_str(), 10.0, &json, &answer), 0)
        << target << ": " << answer.message;
    psync_string_free(json);
  }
  // A list of replicas that are all unreachable answers UNAVAILABLE after trying each.
  char* none = nullptr;
  psync_status unreachable{};
  EXPECT_EQ(psync_get_job_status(dead.c_str(), nullptr, job.c_str(), 10.0, &none, &unreachable),
            static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_EQ(none, nullptr);

  // psyncctl pointed at the wrong replica follows the redirect, says so, and answers.
  std::ostringstream out, err;
  EXPECT_EQ(ctl::RunPsyncctl({"--target", addresses_[1], "audit", job}, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), absl::StrCat("psyncctl: ", addresses_[1],
                                    " does not serve the job; its owner is replica ", addresses_[0],
                                    " (epoch ", epoch, "): asking there\n"));
  std::ostringstream end_out, end_err;
  EXPECT_EQ(ctl::RunPsyncctl({"--target", addresses_[1], "end-job", job, "--reason", "done"},
                             end_out, end_err),
            0)
      << end_err.str();
  EXPECT_EQ(end_out.str(), absl::StrCat("job ", job, " ended: done\n"));
  EXPECT_EQ(server::JobStateText(*servers_[0]->coordinator().GetJobStatus(job)), "ENDED");
  (*client)->Close();
}

// A node agent given both replicas follows the redirect for its rank: the rank only ever talks to
// the agent, sees no redirect, and gets the owner's directives with the owner's epoch; an agent
// given one address (a Kubernetes Service in front of the replicas) follows it too.
TEST_F(RedirectTest, AnAgentFollowsRedirectsAndNeverPassesThemOn) {
  ASSERT_TRUE(BothReplicasListEachOther());
  // A job replica 0 is preferred for, whose list entry (as the agent and the client pick it) is
  // replica 1.
  const std::string job = JobPreferredBy(
      0, "agent-job", [](const std::string& id) { return JobStartIndex(id, 2) == 1; });

  // One address, the wrong replica: the forwarded Join follows the redirect to the owner, and the
  // rank's Join succeeds there without seeing it.
  agent::AgentOptions single;
  single.target = addresses_[1];
  auto lone = agent::Agent::Start(single);
  ASSERT_TRUE(lone.ok()) << lone.status();
  auto through_lone = v1::Coordinator::NewStub(
      grpc::CreateChannel((*lone)->local_target(), grpc::InsecureChannelCredentials()));
  v1::JoinResponse response;
  grpc::ClientContext context;
  const grpc::Status lone_join = through_lone->Join(&context, Plan(job), &response);
  EXPECT_TRUE(lone_join.ok()) << lone_join.error_message();
  EXPECT_TRUE(lone_join.error_details().empty());
  EXPECT_EQ((*lone)->stats().redirects, 1u);
  EXPECT_EQ((*lone)->stats().rotations, 0u);
  (*lone)->Shutdown();

  // Both replicas: the agent starts at replica 1, is redirected to replica 0 and joins there.
  agent::AgentOptions both;
  both.target = absl::StrCat(addresses_[0], ",", addresses_[1]);
  auto node = agent::Agent::Start(both);
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRank((*node)->local_target(), job);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(), (*node)->local_target());
  EXPECT_EQ((*client)->stats().redirects, 0u);
  EXPECT_EQ((*node)->stats().redirects, 1u);
  EXPECT_EQ((*node)->stats().rotations, 0u);

  // The owner is replica 0; its directive reaches the rank through the agent with its epoch.
  const absl::StatusOr<std::optional<server::ha::KeyValue>> key =
      etcd_.Get(absl::StrCat("/psync/jobs/", job));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->value, addresses_[0]);
  ASSERT_TRUE((*client)->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<v1::SyncDirective> directive =
      (*client)->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(directive.ok()) << directive.status();
  EXPECT_EQ(directive->epoch(), static_cast<uint64_t>((*key)->create_revision));
  EXPECT_GT(directive->epoch(), 0u);
  (*client)->Close();
  (*node)->Shutdown();
}

// An attach that reaches a replica not serving the job (the rank joined at the owner directly, the
// agent's route starts at the other replica) is refused with the owner named: the agent moves the
// job straight there (a redirect, not a rotation through its list), and the rank, whose local
// Session ends with UNAVAILABLE, joins again through the agent at the owner.
TEST_F(RedirectTest, AnAgentAttachRefusedByANonOwnerMovesTheJobToTheOwner) {
  ASSERT_TRUE(BothReplicasListEachOther());
  const std::string job = JobPreferredBy(
      0, "attach-job", [](const std::string& id) { return JobStartIndex(id, 2) == 1; });
  v1::JoinResponse joined;
  ASSERT_TRUE(JoinAtReplica0UntilReplica1NamesIt(job, &joined));

  agent::AgentOptions both;
  both.target = absl::StrCat(addresses_[0], ",", addresses_[1]);
  auto node = agent::Agent::Start(both);
  ASSERT_TRUE(node.ok()) << node.status();
  const grpc::Status ended = AttachThrough((*node)->local_target(), job, joined);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE) << ended.error_message();
  EXPECT_EQ((*node)->stats().redirects, 1u);
  EXPECT_EQ((*node)->stats().rotations, 0u);

  // Joining again through the agent goes to the owner at once.
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRank((*node)->local_target(), job);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*node)->stats().redirects, 1u);
  EXPECT_EQ((*node)->stats().rotations, 0u);
  (*client)->Close();
  (*node)->Shutdown();
}

// A relay given one address, a replica that does not own the job (as a Service in front of
// replicas may pick): the node agent's forwarded Join follows the redirect at the relay, and the
// rank's attach, relayed, goes to the owner too. The node agent behind the relay never sees a
// redirect; the rank's directive comes with the owner's epoch.
TEST_F(RedirectTest, ARelayInFrontOfANonOwnerCarriesTheJobToItsOwner) {
  ASSERT_TRUE(BothReplicasListEachOther());
  const std::string job = JobPreferredBy(0, "relayed-job");
  agent::AgentOptions at_other;
  at_other.target = addresses_[1];
  auto relay = agent::Agent::Start(at_other);
  ASSERT_TRUE(relay.ok()) << relay.status();
  agent::AgentOptions behind;
  behind.target = (*relay)->local_target();
  auto node = agent::Agent::Start(behind);
  ASSERT_TRUE(node.ok()) << node.status();

  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRank((*node)->local_target(), job);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<v1::SyncDirective> directive =
      (*client)->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(directive.ok()) << directive.status();
  const absl::StatusOr<std::optional<server::ha::KeyValue>> key =
      etcd_.Get(absl::StrCat("/psync/jobs/", job));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->value, addresses_[0]);
  EXPECT_EQ(directive->epoch(), static_cast<uint64_t>((*key)->create_revision));

  EXPECT_EQ((*relay)->stats().redirects, 1u);  // the Join's; the attach went to the owner at once
  EXPECT_EQ((*relay)->stats().relayed_attaches, 1u);
  // Its one listed target's stream opens at start, as a node agent's; none at the owner, where it
  // only relays.
  EXPECT_EQ((*relay)->stats().upstreams_started, 1u);
  EXPECT_EQ((*node)->stats().redirects, 0u);
  EXPECT_EQ((*node)->stats().reconnects, 0u);
  EXPECT_EQ((*client)->stats().redirects, 0u);
  (*client)->Close();
  (*node)->Shutdown();
  (*relay)->Shutdown();
}

// A relayed attach that reaches a replica not serving the job is refused with the owner named: the
// relay moves the job to the owner and passes the refusal down without the redirect, so the node
// agent stays behind the relay; its rank, whose local Session ends with UNAVAILABLE, joins again
// through both agents and lands on the owner.
TEST_F(RedirectTest, ARelayedAttachRefusedByANonOwnerMovesTheJobAtTheRelayOnly) {
  ASSERT_TRUE(BothReplicasListEachOther());
  const std::string job = JobPreferredBy(
      0, "relayed-attach-job", [](const std::string& id) { return JobStartIndex(id, 2) == 1; });
  v1::JoinResponse joined;
  ASSERT_TRUE(JoinAtReplica0UntilReplica1NamesIt(job, &joined));

  agent::AgentOptions both;
  both.target = absl::StrCat(addresses_[0], ",", addresses_[1]);
  auto relay = agent::Agent::Start(both);
  ASSERT_TRUE(relay.ok()) << relay.status();
  agent::AgentOptions behind;
  behind.target = (*relay)->local_target();
  auto node = agent::Agent::Start(behind);
  ASSERT_TRUE(node.ok()) << node.status();
  const grpc::Status ended = AttachThrough((*node)->local_target(), job, joined);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE) << ended.error_message();
  EXPECT_TRUE(ended.error_details().empty());
  EXPECT_EQ((*relay)->stats().redirects, 1u);
  EXPECT_EQ((*relay)->stats().rotations, 0u);
  EXPECT_EQ((*node)->stats().redirects, 0u);

  // Joining again through the node agent goes to the owner at once, through the relay.
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectRank((*node)->local_target(), job);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->ReportStaged(0, 0, "dense").ok());
  ASSERT_TRUE((*client)->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  EXPECT_EQ((*relay)->stats().redirects, 1u);
  EXPECT_EQ((*relay)->stats().rotations, 0u);
  EXPECT_EQ((*relay)->stats().relayed_attaches, 2u);
  EXPECT_EQ((*node)->stats().redirects, 0u);
  EXPECT_EQ((*node)->stats().reconnects, 0u);
  // The relay carries no local Session: it opened no stream of its own at either replica, only
  // its hubs' (the node agent opened its one to the relay).
  EXPECT_EQ((*relay)->stats().upstreams_started, 0u);
  EXPECT_EQ((*node)->stats().upstreams_started, 1u);
  (*client)->Close();
  (*node)->Shutdown();
  (*relay)->Shutdown();
}

// A replica that stops under a node agent: the agent ends its rank's local Session, moves the job
// to the other replica of its list, and the rank, joining again through the agent, resumes at the
// new owner (a higher epoch) without ever seeing a redirect.
TEST_F(RedirectTest, AnAgentMovesItsRanksOffAStoppedReplica) {
  ASSERT_TRUE(BothReplicasListEachOther());
  // A job replica 0 is preferred for and that the agent starts on replica 0.
  const std::string job = JobPreferredBy(
      0, "moving-job", [](const std::string& id) { return JobStartIndex(id, 2) == 0; });
  agent::AgentOptions both;
  both.target = absl::StrCat(addresses_[0], ",", addresses_[1]);
  both.backoff.initial = absl::Milliseconds(10);
  auto node = agent::Agent::Start(both);
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<std::unique_ptr<Client>> client =
      ConnectRank((*node)->local_target(), job, absl::Milliseconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*node)->stats().redirects, 0u);

  v1::GroupChecksum checksum;
  checksum.set_group("dp");
  checksum.set_checksum(7);
  ASSERT_TRUE((*client)->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<v1::SyncDirective> first = (*client)->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*client)->ReportSyncDone(0, 0, {checksum}).ok());

  servers_[0]->Shutdown();  // its etcd lease is revoked: the job is free

  // The check-in waits through the move (re-sent after the rank joined again) and is released by
  // replica 1, the new owner, at a higher epoch.
  ASSERT_TRUE((*client)->ReportStaged(1, 0, "dense").ok());
  absl::StatusOr<v1::SyncDirective> second = (*client)->WaitForDirective(1, 0, absl::Seconds(20));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->epoch(), first->epoch());
  const absl::StatusOr<std::optional<server::ha::KeyValue>> key =
      etcd_.Get(absl::StrCat("/psync/jobs/", job));
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->value, addresses_[1]);
  EXPECT_EQ(second->epoch(), static_cast<uint64_t>((*key)->create_revision));

  // The rank only ever talked to the agent; the agent moved the job off replica 0.
  EXPECT_EQ((*client)->target(), (*node)->local_target());
  EXPECT_EQ((*client)->stats().redirects, 0u);
  EXPECT_GE((*node)->stats().rotations, 1u);
  (*client)->Close();
  (*node)->Shutdown();
}

TEST(AgentOptionsTest, AnEmptyReplicaListIsInvalidArgumentNamingTarget) {
  agent::AgentOptions options;
  options.target = " , ";
  const absl::Status status = agent::ValidateAgentOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "target must name at least one target (host:port[,host:port...])");
  options.target = "a:1, b:2,c:3";
  EXPECT_TRUE(agent::ValidateAgentOptions(options).ok());
}

// Claiming a job waits for etcd (a create-if-absent transaction). Joins whose claims wait must not
// hold up the replica's other calls: with etcd slow for claims, 32 first Joins of new jobs are in
// flight and ListJobs is still answered; once etcd answers, every Join succeeds.
TEST_F(RedirectTest, JoinsWaitingForTheirClaimsDoNotHoldUpOtherCalls) {
  ASSERT_TRUE(BothReplicasListEachOther());
  constexpr int kJoins = 32;
  std::vector<std::string> jobs;
  for (int n = 0; jobs.size() < kJoins; ++n) {
    jobs.push_back(JobPreferredBy(0, absl::StrCat("slow-claim-", n, "-")));
  }
  etcd_.HoldClaims(true);
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel(addresses_[0], grpc::InsecureChannelCredentials()));
  std::vector<grpc::Status> joined(kJoins);
  std::vector<std::thread> joins;
  for (int i = 0; i < kJoins; ++i) {
    joins.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      v1::JoinResponse response;
      joined[i] = stub->Join(&context, Plan(jobs[i]), &response);
    });
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return etcd_.claims_held() > 0; }));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListJobsResponse listed;
  const grpc::Status answered = stub->ListJobs(&context, v1::ListJobsRequest(), &listed);
  EXPECT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_GT(etcd_.claims_held(), 0);  // the claims were still waiting when it was answered
  etcd_.HoldClaims(false);
  for (std::thread& t : joins) t.join();
  for (int i = 0; i < kJoins; ++i)
    EXPECT_TRUE(joined[i].ok()) << jobs[i] << ": " << joined[i].error_message();
}

TEST(ReplicaOptionsTest, BadReplicaFlagsAreInvalidArgumentNamingTheFlag) {
  serve::RealClock clock;
  server::ha::FakeEtcd etcd(&clock);
  struct Case {
    std::string advertise;
    absl::Duration ttl, margin;
    std::string message_start;
  };
  for (const Case& c : std::vector<Case>{
           {"", absl::Seconds(5), absl::Seconds(1), "advertise: '' must be"},
           {"127.0.0.1:7070", absl::Milliseconds(1500), absl::Milliseconds(100),
            "etcd_lease_ttl: 1.5s must be whole seconds"},
           {"127.0.0.1:7070", absl::Seconds(4), absl::Seconds(2), "etcd_lease_margin: 2s must be"},
       }) {
    server::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.advertise = c.advertise;
    options.etcd_client = &etcd;
    options.etcd_lease_ttl = c.ttl;
    options.etcd_lease_margin = c.margin;
    auto server = server::CoordinatorServer::Start(options);
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(server.status().message().substr(0, c.message_start.size()), c.message_start)
        << server.status();
  }
  EXPECT_EQ(etcd.calls(), 0);  // refused before anything reached etcd
}

}  // namespace
}  // namespace psync
