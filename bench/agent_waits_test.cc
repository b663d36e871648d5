#include "bench/agent_waits.h"

#include <cmath>

#include "gtest/gtest.h"

namespace psync::bench {
namespace {

// Two scrapes of one agent, as its /metrics renders them (other families and comments around).
constexpr char kBefore[] = R"(# HELP psync_agent_local_checkins_total Check-ins.
psync_agent_local_checkins_total 10
psync_agent_upstream_wait_seconds_bucket{from="rank",le="0.001"} 2
psync_agent_upstream_wait_seconds_bucket{from="rank",le="0.02"} 4
psync_agent_upstream_wait_seconds_bucket{from="rank",le="+Inf"} 4
psync_agent_upstream_wait_seconds_sum{from="rank"} 0.05
psync_agent_upstream_wait_seconds_count{from="rank"} 4
psync_agent_down_wait_seconds_bucket{to="agent",le="0.001"} 0
psync_agent_down_wait_seconds_bucket{to="agent",le="+Inf"} 0
psync_agent_down_wait_seconds_sum{to="agent"} 0
psync_agent_down_wait_seconds_count{to="agent"} 0
)";
constexpr char kAfter[] = R"(psync_agent_upstream_wait_seconds_bucket{from="rank",le="0.001"} 3
psync_agent_upstream_wait_seconds_bucket{from="rank",le="0.02"} 12
psync_agent_upstream_wait_seconds_bucket{from="rank",le="+Inf"} 14
psync_agent_upstream_wait_seconds_sum{from="rank"} 1.05
psync_agent_upstream_wait_seconds_count{from="rank"} 14
psync_agent_down_wait_seconds_bucket{to="agent",le="0.001"} 5
psync_agent_down_wait_seconds_bucket{to="agent",le="+Inf"} 5
psync_agent_down_wait_seconds_sum{to="agent"} 0.002
psync_agent_down_wait_seconds_count{to="agent"} 5
psync_agent_fanout_seconds_bucket{to="agent",le="0.0001"} 2
psync_agent_fanout_seconds_bucket{to="agent",le="+Inf"} 2
psync_agent_fanout_seconds_sum{to="agent"} 0.0001
psync_agent_fanout_seconds_count{to="agent"} 2
psync_agent_down_write_seconds_bucket{to="agent",le="0.01"} 4
psync_agent_down_write_seconds_bucket{to="agent",le="+Inf"} 5
psync_agent_down_write_seconds_sum{to="agent"} 0.03
psync_agent_down_write_seconds_count{to="agent"} 5
psync_agent_stream_down_wait_seconds_bucket{le="1e-05"} 7
psync_agent_stream_down_wait_seconds_bucket{le="+Inf"} 8
psync_agent_stream_down_wait_seconds_sum 0.004
psync_agent_stream_down_wait_seconds_count 8
psync_agent_stream_down_write_seconds_bucket{le="0.001"} 8
psync_agent_stream_down_write_seconds_bucket{le="+Inf"} 8
psync_agent_stream_down_write_seconds_sum 0.002
psync_agent_stream_down_write_seconds_count 8
psync_decision_delivery_seconds_bucket{le="0.1"} 3
psync_decision_delivery_seconds_bucket{le="+Inf"} 3
psync_decision_delivery_seconds_sum 0.15
psync_decision_delivery_seconds_count 3
psync_agent_directive_age_seconds_bucket{at="read",le="0.005"} 6
psync_agent_directive_age_seconds_bucket{at="read",le="+Inf"} 6
psync_agent_directive_age_seconds_sum{at="read"} 0.012
psync_agent_directive_age_seconds_count{at="read"} 6
psync_agent_directive_age_seconds_bucket{at="queued_to_agent",le="0.005"} 100
psync_agent_directive_age_seconds_bucket{at="queued_to_agent",le="0.01"} 700
psync_agent_directive_age_seconds_bucket{at="queued_to_agent",le="+Inf"} 768
psync_agent_directive_age_seconds_sum{at="queued_to_agent"} 6.5
psync_agent_directive_age_seconds_count{at="queued_to_agent"} 768
)";

TEST(AgentWaitsTest, ParsesTheWaitFamiliesAndIgnoresTheRest) {
  const AgentWaits w = ParseAgentWaits(kBefore);
  EXPECT_EQ(w.up_from_rank.count, 4u);
  EXPECT_DOUBLE_EQ(w.up_from_rank.sum_s, 0.05);
  EXPECT_EQ(w.up_from_rank.cumulative.size(), 3u);
  EXPECT_EQ(w.up_from_rank.cumulative.at(0.001), 2u);
  EXPECT_EQ(w.down_to_agent.count, 0u);
  EXPECT_EQ(w.up_from_agent.count, 0u);
  EXPECT_TRUE(w.up_from_agent.cumulative.empty());
}

TEST(AgentWaitsTest, ReadsTheFanOutAndTheCoordinatorsUnlabelledFamilies) {
  const AgentWaits w = ParseAgentWaits(kAfter);
  EXPECT_EQ(w.fanout_to_agent.count, 2u);
  EXPECT_EQ(w.fanout_to_rank.count, 0u);
  EXPECT_EQ(w.write_to_agent.count, 5u);
  EXPECT_DOUBLE_EQ(w.write_to_agent.sum_s, 0.03);
  EXPECT_DOUBLE_EQ(w.write_to_agent.QuantileBound(0.5), 0.01);
  EXPECT_EQ(w.write_to_rank.count, 0u);
  EXPECT_EQ(w.coordinator_down.count, 8u);
  EXPECT_DOUBLE_EQ(w.coordinator_down.sum_s, 0.004);
  EXPECT_DOUBLE_EQ(w.coordinator_down.QuantileBound(0.5), 1e-5);
  EXPECT_TRUE(std::isinf(w.coordinator_down.QuantileBound(0.99)));
  EXPECT_EQ(w.coordinator_write.count, 8u);
  EXPECT_DOUBLE_EQ(w.coordinator_write.QuantileBound(0.99), 0.001);
  EXPECT_EQ(w.coordinator_delivery.count, 3u);
  EXPECT_DOUBLE_EQ(w.coordinator_delivery.QuantileBound(0.5), 0.1);
}

TEST(AgentWaitsTest, ReadsTheDirectiveAgesByHop) {
  const AgentWaits w = ParseAgentWaits(kAfter);
  EXPECT_EQ(w.age_read.count, 6u);
  EXPECT_DOUBLE_EQ(w.age_read.sum_s, 0.012);
  EXPECT_EQ(w.age_queued_to_agent.count, 768u);
  EXPECT_DOUBLE_EQ(w.age_queued_to_agent.QuantileBound(0.5), 0.01);
  EXPECT_TRUE(std::isinf(w.age_queued_to_agent.QuantileBound(0.99)));
  EXPECT_EQ(w.age_queued_to_ranks.count, 0u);
  EXPECT_NE(w.Json().find("\"directive_age_queued_to_agent\":{\"count\":768,"), std::string::npos);
}

TEST(AgentWaitsTest, AWindowIsTheDifferenceAndItsPercentilesAreBucketBounds) {
  AgentWaits window = ParseAgentWaits(kAfter);
  window.Add(ParseAgentWaits(kBefore), -1);
  // 10 observations in the window: 1 at or under 1 ms, 8 more under 20 ms, 1 above.
  EXPECT_EQ(window.up_from_rank.count, 10u);
  EXPECT_DOUBLE_EQ(window.up_from_rank.QuantileBound(0.1), 0.001);
  EXPECT_DOUBLE_EQ(window.up_from_rank.QuantileBound(0.5), 0.02);
  EXPECT_TRUE(std::isinf(window.up_from_rank.QuantileBound(0.99)));
  EXPECT_EQ(window.up_from_rank.Json(),
            "{\"count\":10,\"mean_us\":100000.0,\"p50_le_us\":20000,\"p99_le_us\":-1}");
  EXPECT_EQ(window.down_to_agent.Json(),
            "{\"count\":5,\"mean_us\":400.0,\"p50_le_us\":1000,\"p99_le_us\":1000}");
  EXPECT_EQ(window.down_to_rank.Json(),
            "{\"count\":0,\"mean_us\":0.0,\"p50_le_us\":0,\"p99_le_us\":0}");
}

}  // namespace
}  // namespace psync::bench
