// StagedAdds: a drain is arranged by the first add staged since the last Take and by no other; a
// Take returns every add staged, oldest first; from two producers and a draining thread every add
// is taken exactly once, each producer's in order, by exactly as many drains as were arranged.
#include "agent/staged_adds.h"

#include <thread>
#include <utility>
#include <vector>

#include "agent/fanout_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using Log = std::vector<int>;

StagedAdds<Log>::Add Append(int value) {
  return {[value](Log& log) { log.push_back(value); }, nullptr};
}

Log Apply(std::vector<StagedAdds<Log>::Add> adds) {
  Log log;
  for (StagedAdds<Log>::Add& a : adds) a.add(log);
  return log;
}

TEST(StagedAddsTest, OnlyTheFirstAddSinceATakeArrangesADrain) {
  StagedAdds<Log> staged;
  EXPECT_TRUE(staged.Stage(Append(1)));
  EXPECT_FALSE(staged.Stage(Append(2)));
  EXPECT_FALSE(staged.Stage(Append(3)));
  EXPECT_THAT(Apply(staged.Take()), ElementsAre(1, 2, 3));
  EXPECT_TRUE(staged.Stage(Append(4)));
  EXPECT_THAT(Apply(staged.Take()), ElementsAre(4));
  EXPECT_THAT(staged.Take(), IsEmpty());
  EXPECT_TRUE(staged.Stage(Append(5)));  // an empty Take leaves no drain due
}

TEST(StagedAddsTest, TwoProducersAndADrainingThreadTakeEveryAddOnceInEachProducersOrder) {
  constexpr int kPerProducer = 20000;
  StagedAdds<Log> staged;
  Log taken;            // touched by the pool's one thread only
  int drains_run = 0;   // likewise
  int empty_takes = 0;  // likewise
  int arranged[2] = {0, 0};
  {
    FanoutPool pool(1);
    auto produce = [&](int producer) {
      for (int i = 0; i < kPerProducer; ++i) {
        if (!staged.Stage(Append(producer * kPerProducer + i))) continue;
        ++arranged[producer];
        pool.Run({{&staged, [&] {
                     ++drains_run;
                     Log part = Apply(staged.Take());
                     if (part.empty()) ++empty_takes;
                     taken.insert(taken.end(), part.begin(), part.end());
                   }}});
      }
    };
    std::thread a(produce, 0);
    std::thread b(produce, 1);
    a.join();
    b.join();
  }  // the pool runs every drain handed over, then joins
  EXPECT_EQ(drains_run, arranged[0] + arranged[1]);
  EXPECT_EQ(empty_takes, 0);
  ASSERT_EQ(taken.size(), 2u * kPerProducer);
  int next[2] = {0, 0};
  for (int v : taken) {
    const int producer = v / kPerProducer;
    ASSERT_EQ(v % kPerProducer, next[producer]) << "producer " << producer;
    ++next[producer];
  }
  EXPECT_THAT(staged.Take(), IsEmpty());
}

}  // namespace
}  // namespace psync::agent
