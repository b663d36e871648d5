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

}  // namespace
}  // namespace psync::server
