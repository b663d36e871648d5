#include "server/owner/attached_sessions.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::server::testing::NullSink;
using ::psync::server::testing::NullTransport;
using ::testing::ElementsAre;
using ::testing::Pair;

TEST(AttachedSessionsTest, AttachReplacesAndDetachForgetsOnlyTheSameSink) {
  NullTransport t;
  AttachedSessions sessions;
  EXPECT_TRUE(sessions.empty());
  EXPECT_EQ(sessions.Find(3), nullptr);
  auto a = std::make_shared<NullSink>(&t);
  auto b = std::make_shared<NullSink>();
  EXPECT_EQ(sessions.Attach(3, a), nullptr);
  ASSERT_NE(sessions.Find(3), nullptr);
  EXPECT_EQ(sessions.Find(3)->sink, a);
  EXPECT_EQ(sessions.Find(3)->transport, &t);  // the sink's batcher, read at the attach
  EXPECT_FALSE(sessions.contains(2));          // below the highest rank, never attached
  EXPECT_FALSE(sessions.contains(4));          // beyond it
  EXPECT_EQ(sessions.size(), 1u);
  // A newer session of rank 3 replaces a: returned, so the caller closes it.
  EXPECT_EQ(sessions.Attach(3, b), a);
  EXPECT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions.Find(3)->transport, nullptr);
  // a's late detach does not forget b.
  EXPECT_FALSE(sessions.Detach(3, a.get()));
  EXPECT_TRUE(sessions.contains(3));
  EXPECT_FALSE(sessions.Detach(7, b.get()));
  EXPECT_TRUE(sessions.Detach(3, b.get()));
  EXPECT_FALSE(sessions.contains(3));
  EXPECT_TRUE(sessions.empty());
}

TEST(AttachedSessionsTest, TakeAllHandsOverEverySessionInRankOrderAndForgetsThem) {
  AttachedSessions sessions;
  auto s5 = std::make_shared<NullSink>();
  auto s0 = std::make_shared<NullSink>();
  auto s2 = std::make_shared<NullSink>();
  sessions.Attach(5, s5);
  sessions.Attach(0, s0);
  sessions.Attach(2, s2);
  EXPECT_EQ(sessions.size(), 3u);
  EXPECT_THAT(sessions.TakeAll(), ElementsAre(Pair(0, s0), Pair(2, s2), Pair(5, s5)));
  EXPECT_TRUE(sessions.empty());
  EXPECT_FALSE(sessions.contains(5));
  EXPECT_TRUE(sessions.TakeAll().empty());
}

// A chunk's members grouped by transport: each transport once, in the order of its first member,
// with its ranks in member order; members without a transport by themselves; members without a
// session left out.
TEST(AttachedSessionsTest, RoutesGroupAChunksAttachedMembersByTransport) {
  NullTransport x;
  NullTransport y;
  AttachedSessions sessions;
  auto x0 = std::make_shared<NullSink>(&x);
  auto y1 = std::make_shared<NullSink>(&y);
  auto x2 = std::make_shared<NullSink>(&x);
  auto own3 = std::make_shared<NullSink>();
  auto y5 = std::make_shared<NullSink>(&y);
  sessions.Attach(0, x0);
  sessions.Attach(1, y1);
  sessions.Attach(2, x2);
  sessions.Attach(3, own3);
  sessions.Attach(5, y5);
  const std::vector<core::RankId> members = {0, 1, 2, 3, 4, 5};
  const MemberRoutes& routes = sessions.RoutesTo(7, members);
  ASSERT_EQ(routes.by_transport.size(), 2u);
  EXPECT_EQ(routes.by_transport[0].transport, &x);
  EXPECT_EQ(routes.by_transport[0].holder, x0);
  EXPECT_THAT(routes.by_transport[0].ranks, ElementsAre(0, 2));
  EXPECT_EQ(routes.by_transport[1].transport, &y);
  EXPECT_EQ(routes.by_transport[1].holder, y1);
  EXPECT_THAT(routes.by_transport[1].ranks, ElementsAre(1, 5));  // rank 4 has no session
  ASSERT_EQ(routes.own_sinks.size(), 1u);
  EXPECT_EQ(routes.own_sinks[0].first, 3u);
  EXPECT_EQ(routes.own_sinks[0].second, own3);
  // Another chunk's members are routed on their own.
  const std::vector<core::RankId> others = {3, 5};
  const MemberRoutes& other_routes = sessions.RoutesTo(8, others);
  ASSERT_EQ(other_routes.by_transport.size(), 1u);
  EXPECT_THAT(other_routes.by_transport[0].ranks, ElementsAre(5));
  EXPECT_EQ(other_routes.own_sinks.size(), 1u);
}

// Kept routes never name a sink that is no longer attached: an attach, a replacement or a detach
// rebuilds them at the next call, and so do different members of the same chunk.
TEST(AttachedSessionsTest, RoutesFollowEveryAttachAndDetachAndTheMembers) {
  NullTransport x;
  NullTransport y;
  AttachedSessions sessions;
  auto x0 = std::make_shared<NullSink>(&x);
  auto x1 = std::make_shared<NullSink>(&x);
  sessions.Attach(0, x0);
  sessions.Attach(1, x1);
  const std::vector<core::RankId> members = {0, 1};
  EXPECT_THAT(sessions.RoutesTo(0, members).by_transport[0].ranks, ElementsAre(0, 1));
  // Rank 1 attaches again through another transport.
  auto y1 = std::make_shared<NullSink>(&y);
  EXPECT_EQ(sessions.Attach(1, y1), x1);
  const MemberRoutes& moved = sessions.RoutesTo(0, members);
  ASSERT_EQ(moved.by_transport.size(), 2u);
  EXPECT_THAT(moved.by_transport[0].ranks, ElementsAre(0));
  EXPECT_EQ(moved.by_transport[1].holder, y1);
  EXPECT_THAT(moved.by_transport[1].ranks, ElementsAre(1));
  // Rank 0 detaches: its routes forget it, and no route keeps its sink.
  EXPECT_TRUE(sessions.Detach(0, x0.get()));
  const MemberRoutes& left = sessions.RoutesTo(0, members);
  ASSERT_EQ(left.by_transport.size(), 1u);
  EXPECT_EQ(left.by_transport[0].transport, &y);
  EXPECT_EQ(x0.use_count(), 1);
  // The chunk's members change (a new generation's plan): routed anew.
  const std::vector<core::RankId> fewer = {0};
  EXPECT_TRUE(sessions.RoutesTo(0, fewer).by_transport.empty());
  EXPECT_THAT(sessions.RoutesTo(0, members).by_transport[0].ranks, ElementsAre(1));
  // TakeAll hands every sink over: no route holds one.
  sessions.TakeAll();
  EXPECT_EQ(y1.use_count(), 1);
  EXPECT_TRUE(sessions.RoutesTo(0, members).by_transport.empty());
}

}  // namespace
}  // namespace psync::server
