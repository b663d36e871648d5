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

// Ranks added to a transport at once join its run exactly as the same ranks added one by one: the
// same runs, holders and rank order, whichever way each notice was addressed.
TEST(EffectsTest, RanksAddedAtOnceMatchRanksAddedOneByOne) {
  NullTransport x;
  NullTransport y;
  auto on_x = std::make_shared<NullSink>(&x);
  auto on_y = std::make_shared<NullSink>(&y);
  const auto c0 = Directive(0);
  const auto c1 = Directive(1);
  Effects one_by_one;
  Effects at_once;
  for (core::RankId r : {4, 6}) one_by_one.AddNotice(on_x, &x, "job", r, c0);
  one_by_one.AddNotice(on_y, &y, "job", 1, c0);
  for (core::RankId r : {8, 9}) one_by_one.AddNotice(on_x, &x, "job", r, c0);
  one_by_one.AddNotice(on_x, &x, "job", 4, c1);
  const std::vector<core::RankId> first = {4, 6};
  const std::vector<core::RankId> second = {8, 9};
  const std::vector<core::RankId> none;
  at_once.AddNoticeToRanks(on_x, &x, "job", first, c0);
  at_once.AddNoticeToRanks(on_y, &y, "job", none, c1);  // nothing addressed: no run, no transport
  at_once.AddNotice(on_y, &y, "job", 1, c0);
  at_once.AddNoticeToRanks(on_x, &x, "job", second, c0);
  at_once.AddNotice(on_x, &x, "job", 4, c1);
  ASSERT_EQ(at_once.transport_notices.size(), one_by_one.transport_notices.size());
  for (size_t t = 0; t < at_once.transport_notices.size(); ++t) {
    const TransportNotices& a = at_once.transport_notices[t];
    const TransportNotices& b = one_by_one.transport_notices[t];
    EXPECT_EQ(a.transport, b.transport);
    EXPECT_EQ(a.holder, b.holder);
    ASSERT_EQ(a.runs.size(), b.runs.size());
    for (size_t r = 0; r < a.runs.size(); ++r) {
      EXPECT_EQ(a.runs[r].notice, b.runs[r].notice);
      EXPECT_EQ(a.runs[r].ranks, b.runs[r].ranks);
    }
  }
  EXPECT_THAT(at_once.transport_notices[0].runs[0].ranks, ElementsAre(4, 6, 8, 9));
}

}  // namespace
}  // namespace psync::server
