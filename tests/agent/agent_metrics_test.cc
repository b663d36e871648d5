// psync-agent's /metrics (agent/agent_metrics.h), scraped over HTTP as Prometheus would: the
// counters equal the agent's own, and each wait histogram counts exactly one observation per
// message it times, both ways, on a node agent and on a relay, as does the coordinator's
// AgentSession queue wait; a bad http_listen is refused naming the field.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/http/testing/curl_client.h"
#include "server/test_server.h"
#include "tests/agent/agent_harness.h"
#include "tests/service/raw_session.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;

// Every sample of GET /metrics on `http_port`: series (name and labels as rendered) -> value.
std::map<std::string, double> Scrape(int http_port) {
  std::map<std::string, double> samples;
  auto got = http::testing::CurlGet(absl::StrCat("http://127.0.0.1:", http_port, "/metrics"));
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return samples;
  EXPECT_EQ(got->status, 200);
  for (absl::string_view line : absl::StrSplit(got->body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(space + 1), &value)) << line;
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}
std::map<std::string, double> Scrape(const agent::Agent& agent) {
  return Scrape(agent.http_port());
}

std::unique_ptr<agent::Agent> StartWithMetrics(const std::string& target) {
  agent::AgentOptions options;
  options.http_listen = "127.0.0.1:0";
  auto started = StartAgent(target, options);
  if (started != nullptr) {
    EXPECT_NE(started->http_port(), 0);
  }
  return started;
}

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.http_listen = "127.0.0.1:0";
    auto server = server::TestServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  // `world` ranks of `job`, rank r behind agents[r * agents.size() / world], `steps` steps each;
  // they stay connected while the caller holds them.
  static std::vector<std::unique_ptr<Client>> RunRanks(const std::string& job,
                                                       const std::vector<agent::Agent*>& agents,
                                                       uint32_t world, uint32_t chunks,
                                                       uint64_t steps) {
    std::vector<v1::JoinRequest> plans;
    std::vector<std::unique_ptr<Client>> ranks;
    for (uint32_t r = 0; r < world; ++r) {
      plans.push_back(MakeJoin(job, world, r, chunks));
      ranks.push_back(ConnectRank(agents[r * agents.size() / world]->local_target(), plans[r]));
      if (ranks.back() == nullptr) return {};
    }
    for (uint64_t step = 0; step < steps; ++step) {
      OnThreads(world, [&](size_t r) { RunStep(*ranks[r], plans[r], step); });
    }
    return ranks;
  }

  std::unique_ptr<server::TestServer> server_;
};

TEST_F(AgentMetricsTest, ANodeAgentCountsEveryWaitOnceBothWays) {
  auto node = StartWithMetrics(server_->target());
  ASSERT_NE(node, nullptr);
  const auto ranks = RunRanks("metrics", {node.get()}, /*world=*/2, /*chunks=*/2, /*steps=*/3);
  ASSERT_EQ(ranks.size(), 2u);

  const agent::AgentStats s = node->stats();
  const std::map<std::string, double> m = Scrape(*node);
  EXPECT_EQ(m.at("psync_agent_local_checkins_total"), 2 * 2 * 3);
  EXPECT_EQ(m.at("psync_agent_local_messages_total"), s.local_messages);
  EXPECT_EQ(m.at("psync_agent_upstream_batches_total"), s.upstream_batches);
  EXPECT_EQ(m.at("psync_agent_notices_delivered_total"), 2 * 2 * 3);
  EXPECT_EQ(m.at("psync_agent_local_sessions"), 2);
  EXPECT_EQ(m.at("psync_agent_relayed_agents"), 0);
  // Up: one observation per batch written (no reconnect, so none written twice).
  EXPECT_EQ(s.batches_resent, 0u);
  EXPECT_EQ(m.at("psync_agent_upstream_wait_seconds_count{from=\"rank\"}"), s.upstream_batches);
  EXPECT_EQ(m.at("psync_agent_upstream_wait_seconds_count{from=\"agent\"}"), 0);
  // Down: one per message written to a rank. The ranks' calls wait for their answers (no lazy
  // acks), so those are each rank's attach answer, its Acks and its directives.
  EXPECT_EQ(s.local_lazy_acks, 0u);
  EXPECT_EQ(m.at("psync_agent_down_wait_seconds_count{to=\"rank\"}"),
            2 + s.local_acks + s.notices_delivered);
  EXPECT_EQ(m.at("psync_agent_down_wait_seconds_count{to=\"agent\"}"), 0);
  EXPECT_EQ(m.at("psync_agent_down_write_seconds_count{to=\"agent\"}"), 0);
  EXPECT_EQ(m.at("psync_agent_fanout_seconds_count{to=\"agent\"}"), 0);
  // Fan-out: one per message read from the coordinator, and the coordinator timed every message
  // it wrote down the agent's stream (the last may still be on its way when the ranks are done).
  EXPECT_TRUE(WaitUntil([&] {
    const double reads = node->stats().upstream_reads;
    return Scrape(*node).at("psync_agent_fanout_seconds_count{to=\"rank\"}") == reads &&
           Scrape(server_->http_port()).at("psync_agent_stream_down_wait_seconds_count") == reads;
  }));
  // Every write to a rank completes (its rank reads it) and is timed once; the agent may learn
  // of the last one's completion after its rank already read it.
  EXPECT_TRUE(WaitUntil([&] {
    return Scrape(*node).at("psync_agent_down_write_seconds_count{to=\"rank\"}") ==
           m.at("psync_agent_down_wait_seconds_count{to=\"rank\"}");
  }));
  // Every directive's age, once as read and once handed to the local Sessions (all of the
  // coordinator's notices here are directives; the fan-out's end is observed after its reads).
  EXPECT_GT(s.notices_received, 0u);
  EXPECT_TRUE(WaitUntil([&] {
    const std::map<std::string, double> now = Scrape(*node);
    const double notices = node->stats().notices_received;
    return now.at("psync_agent_directive_age_seconds_count{at=\"read\"}") == notices &&
           now.at("psync_agent_directive_age_seconds_count{at=\"queued_to_ranks\"}") == notices;
  }));
  EXPECT_EQ(m.at("psync_agent_directive_age_seconds_count{at=\"queued_to_agent\"}"), 0);
  // A wait is never negative, and every observation is in the +Inf bucket.
  EXPECT_GE(m.at("psync_agent_down_wait_seconds_sum{to=\"rank\"}"), 0);
  EXPECT_EQ(m.at("psync_agent_down_wait_seconds_bucket{to=\"rank\",le=\"+Inf\"}"),
            m.at("psync_agent_down_wait_seconds_count{to=\"rank\"}"));
}

TEST_F(AgentMetricsTest, ARelayCountsEachBatchItSendsUpAndEachMessageItWritesDown) {
  auto relay = StartWithMetrics(server_->target());
  ASSERT_NE(relay, nullptr);
  auto node_a = StartAgent(relay->local_target());
  auto node_b = StartAgent(relay->local_target());
  ASSERT_NE(node_a, nullptr);
  ASSERT_NE(node_b, nullptr);
  const auto ranks = RunRanks("relayed-metrics", {node_a.get(), node_b.get()}, /*world=*/4,
                              /*chunks=*/2, /*steps=*/2);
  ASSERT_EQ(ranks.size(), 4u);

  const agent::AgentStats s = relay->stats();
  ASSERT_GT(s.relayed_batches, 0u);
  // Every message the relay wrote down was read by one of the two agents (the last may still be
  // on its way when the ranks are done).
  ASSERT_TRUE(WaitUntil([&] {
    return Scrape(*relay).at("psync_agent_down_wait_seconds_count{to=\"agent\"}") ==
           node_a->stats().upstream_reads + node_b->stats().upstream_reads;
  }));
  // Every one of those writes completed (its agent read it), and was timed once.
  EXPECT_TRUE(WaitUntil([&] {
    return Scrape(*relay).at("psync_agent_down_write_seconds_count{to=\"agent\"}") ==
           node_a->stats().upstream_reads + node_b->stats().upstream_reads;
  }));
  const std::map<std::string, double> m = Scrape(*relay);
  EXPECT_EQ(m.at("psync_agent_relayed_agents"), 2);
  EXPECT_EQ(m.at("psync_agent_relayed_batches_total"), s.relayed_batches);
  // Batches merged into another's went up inside it: one observation per AgentBatch sent.
  EXPECT_EQ(m.at("psync_agent_upstream_wait_seconds_count{from=\"agent\"}"),
            s.relayed_batches - s.relay_merged_batches);
  EXPECT_EQ(m.at("psync_agent_upstream_wait_seconds_count{from=\"rank\"}"), 0);
  EXPECT_EQ(m.at("psync_agent_down_wait_seconds_count{to=\"rank\"}"), 0);
  EXPECT_GT(m.at("psync_agent_upstream_reads_total"), 0);
  EXPECT_EQ(m.at("psync_agent_fanout_seconds_count{to=\"rank\"}"), 0);
  // The relay's fan-out: one per message read from the coordinator, every one of which the
  // coordinator timed in its queue.
  EXPECT_TRUE(WaitUntil([&] {
    const double reads = relay->stats().upstream_reads;
    return Scrape(*relay).at("psync_agent_fanout_seconds_count{to=\"agent\"}") == reads &&
           Scrape(server_->http_port()).at("psync_agent_stream_down_wait_seconds_count") == reads;
  }));
  // A directive's age: once per entry read from the coordinator, once per share queued to a
  // downstream agent (each node agent's notices), and at each node agent once more as it reads
  // its share.
  EXPECT_TRUE(WaitUntil([&] {
    const std::map<std::string, double> now = Scrape(*relay);
    const agent::AgentStats r = relay->stats();
    return now.at("psync_agent_directive_age_seconds_count{at=\"read\"}") == r.notices_received &&
           now.at("psync_agent_directive_age_seconds_count{at=\"queued_to_agent\"}") ==
               r.relay_notices &&
           node_a->stats().notices_received + node_b->stats().notices_received == r.relay_notices;
  }));
  EXPECT_GT(relay->stats().relay_notices, relay->stats().notices_received);  // split by agent
  EXPECT_EQ(Scrape(*relay).at("psync_agent_directive_age_seconds_count{at=\"queued_to_ranks\"}"),
            0);
}

TEST(AgentMetricsOptionsTest, AnHttpListenThatIsNotHostPortIsRefusedNamingTheField) {
  for (const char* bad : {"metrics", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1"}) {
    agent::AgentOptions options;
    options.target = "127.0.0.1:1";
    options.http_listen = bad;
    const absl::Status s = agent::ValidateAgentOptions(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("http_listen '", bad, "'"))) << bad;
    EXPECT_EQ(agent::Agent::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace psync::testing
