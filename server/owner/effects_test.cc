#include "server/owner/effects.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::server::testing::NullSink;
using ::psync::server::testing::NullTransport;
using ::testing::ElementsAre;

std::shared_ptr<const core::Notice> Directive(core::ChunkId chunk) {
  core::SyncDirective d;
  d.chunk = chunk;
  return std::make_shared<const core::Notice>(d);
}

// A release addressed rank by rank: each transport gets one run of the notice with its ranks in
// the order they were addressed (the transports in the order each was first named); a sink
// without a transport gets the notice itself; the next notice starts new runs.
TEST(EffectsTest, GroupsARunOfOneNoticeByTransport) {
  NullTransport x;
  NullTransport y;
  std::vector<std::shared_ptr<SessionSink>> sinks = {
      std::make_shared<NullSink>(&x), std::make_shared<NullSink>(&y),
      std::make_shared<NullSink>(&x), std::make_shared<NullSink>()};
  Effects effects;
  EXPECT_FALSE(effects.has_notices());
  const auto c0 = Directive(0);
  const auto c1 = Directive(1);
  for (const auto& notice : {c0, c1}) {
    for (core::RankId r = 0; r < 4; ++r) {
      effects.AddNotice(sinks[r], sinks[r]->batcher(), "job", r, notice);
    }
  }
  EXPECT_TRUE(effects.has_notices());
  ASSERT_EQ(effects.transport_notices.size(), 2u);
  const TransportNotices& on_x = effects.transport_notices[0];
  EXPECT_EQ(on_x.transport, &x);
  EXPECT_EQ(on_x.holder, sinks[0]);  // the first sink named keeps x alive
  ASSERT_EQ(on_x.runs.size(), 2u);
  EXPECT_EQ(on_x.runs[0].notice, c0);
  EXPECT_EQ(on_x.runs[0].job_id, "job");
  EXPECT_THAT(on_x.runs[0].ranks, ElementsAre(0, 2));
  EXPECT_EQ(on_x.runs[1].notice, c1);
  EXPECT_THAT(on_x.runs[1].ranks, ElementsAre(0, 2));
  const TransportNotices& on_y = effects.transport_notices[1];
  EXPECT_EQ(on_y.transport, &y);
  ASSERT_EQ(on_y.runs.size(), 2u);
  EXPECT_THAT(on_y.runs[0].ranks, ElementsAre(1));
  EXPECT_THAT(on_y.runs[1].ranks, ElementsAre(1));
  ASSERT_EQ(effects.notices.size(), 2u);
  EXPECT_EQ(effects.notices[0].first, sinks[3]);
  EXPECT_EQ(effects.notices[0].second, c0);
  EXPECT_EQ(effects.notices[1].second, c1);
}

// Each rank keeps the order of its notices: a notice addressed again after another one (an equal
// copy of it, as a later decision makes) is a new run, not merged into the earlier run.
TEST(EffectsTest, ANoticeAfterAnotherStartsANewRun) {
  NullTransport x;
  auto sink = std::make_shared<NullSink>(&x);
  Effects effects;
  const auto c0 = Directive(0);
  const auto c1 = Directive(1);
  const auto c0_again = Directive(0);
  effects.AddNotice(sink, &x, "job", 5, c0);
  effects.AddNotice(sink, &x, "job", 5, c1);
  effects.AddNotice(sink, &x, "job", 5, c0_again);
  ASSERT_EQ(effects.transport_notices.size(), 1u);
  const auto& runs = effects.transport_notices[0].runs;
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].notice, c0);
  EXPECT_EQ(runs[1].notice, c1);
  EXPECT_EQ(runs[2].notice, c0_again);
}

}  // namespace
}  // namespace psync::server
