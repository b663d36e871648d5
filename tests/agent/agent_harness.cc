#include "tests/agent/agent_harness.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psync::testing {

std::vector<std::pair<uint32_t, std::string>> CheckinsOf(const v1::JoinRequest& plan) {
  std::vector<std::pair<uint32_t, std::string>> out;
  for (const v1::ChunkPlan& c : plan.chunks()) {
    for (const std::string& o : c.optimizers()) out.emplace_back(c.chunk(), o);
  }
  return out;
}

std::vector<v1::GroupChecksum> GroupChecksums(const v1::JoinRequest& plan, uint64_t step,
                                              uint32_t chunk) {
  std::vector<v1::GroupChecksum> out;
  for (const v1::ChunkPlan& c : plan.chunks()) {
    if (c.chunk() != chunk) continue;
    for (const v1::SyncGroup& g : c.groups()) {
      v1::GroupChecksum sum;
      sum.set_group(g.name());
      sum.set_checksum(std::hash<std::string>()(absl::StrCat(step, "/", chunk, "/", g.name())));
      out.push_back(sum);
    }
  }
  return out;
}

void OnThreads(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (std::thread& t : threads) t.join();
}

std::unique_ptr<agent::Agent> StartAgent(const std::string& target, agent::AgentOptions options) {
  options.target = target;
  options.backoff.initial = absl::Milliseconds(10);
  options.backoff.max = absl::Milliseconds(200);
  // Peers here end by closing their connections; a ping unanswered for 2 s (the default keepalive)
  // on a starved host would only break a healthy link and add a reconnect the tests count.
  options.keepalive = absl::Seconds(10);
  auto started = agent::Agent::Start(std::move(options));
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? std::move(*started) : nullptr;
}

std::unique_ptr<Client> ConnectRank(const std::string& agent_target, v1::JoinRequest plan) {
  ClientOptions options;
  options.target = agent_target;
  options.plan = std::move(plan);
  options.call_timeout = absl::Seconds(30);
  options.keepalive = absl::Seconds(10);  // as StartAgent's
  auto client = Client::Connect(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

void SyncStep(Client& client, const v1::JoinRequest& plan, uint64_t step) {
  for (const v1::ChunkPlan& c : plan.chunks()) {
    auto directive = client.WaitForDirective(step, c.chunk(), absl::Seconds(30));
    ASSERT_TRUE(directive.ok()) << "rank " << plan.rank() << " step " << step << " chunk "
                                << c.chunk() << ": " << directive.status();
    EXPECT_EQ(directive->step(), step);
    absl::Status s = client.ReportSyncDone(step, c.chunk(), GroupChecksums(plan, step, c.chunk()));
    ASSERT_TRUE(s.ok()) << "rank " << plan.rank() << " SyncDone " << step << "/" << c.chunk()
                        << ": " << s;
  }
}

void RunStep(Client& client, const v1::JoinRequest& plan, uint64_t step) {
  for (const auto& [chunk, optimizer] : CheckinsOf(plan)) {
    absl::Status s = client.ReportStaged(step, chunk, optimizer);
    ASSERT_TRUE(s.ok()) << "rank " << plan.rank() << " staged " << step << "/" << chunk << "/"
                        << optimizer << ": " << s;
  }
  SyncStep(client, plan, step);
}

v1::JobStatus JobStatus(v1::Coordinator::Stub& coordinator, const std::string& job) {
  grpc::ClientContext context;
  v1::GetJobStatusRequest request;
  request.set_job_id(job);
  v1::JobStatus status;
  grpc::Status s = coordinator.GetJobStatus(&context, request, &status);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return status;
}

}  // namespace psync::testing
