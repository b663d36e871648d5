// The chaos verdict on logs written by hand: a correct run is judged clean however its
// generations were numbered (a resume into the next generation, a rank that joined that one
// fresh, a job started again from nothing under reused numbers), and a real early or repeated
// sync is always caught.
#include "tests/chaos/verdict.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/worker/processes.h"

namespace psync::chaos {
namespace {

constexpr uint32_t kRanks = 2;
constexpr uint32_t kChunks = 1;

// One rank's log, line by line (chaos_rank.cc's format).
class RankLog {
 public:
  explicit RankLog(uint32_t rank) : rank_(rank) {}
  RankLog& Seg(uint64_t generation, uint64_t step) {
    return Add(absl::StrCat("seg ", generation, " ", step));
  }
  RankLog& Gen(uint64_t generation) { return Add(absl::StrCat("gen ", generation, " 1")); }
  RankLog& Abort(uint64_t generation) { return Add(absl::StrCat("abort ", generation, " why")); }
  // Steps [first, last] of chunk 0: staged at step*100+rank (both optimizers), the directive at
  // step*100+50 (after every rank staged), synced, completed.
  RankLog& Steps(uint64_t generation, uint64_t first, uint64_t last) {
    for (uint64_t s = first; s <= last; ++s) {
      for (const char* optimizer : {"dense", "expert"}) {
        Add(absl::StrCat("staged ", generation, " ", s * 100 + rank_, " ", s, " 0 ", optimizer));
      }
      Add(absl::StrCat("directive ", generation, " ", s * 100 + 50, " ", s, " 0 7"));
      Add(absl::StrCat("sync ", generation, " ", s, " 0"));
      Add(absl::StrCat("complete ", generation, " ", s));
    }
    return *this;
  }
  RankLog& Add(const std::string& line) {
    lines_.push_back(line);
    return *this;
  }
  ProcessLog Write(const std::string& name) const {
    const std::string path = testing::TempPath(name);
    std::ofstream out(path, std::ios::trunc);
    for (const std::string& line : lines_) out << line << "\n";
    return ProcessLog{rank_, false, path};
  }

 private:
  uint32_t rank_;
  std::vector<std::string> lines_;
};

TEST(VerdictTest, AResumeIntoTheNextGenerationAndALateFreshJoinerAreOneSegment) {
  // Rank 0 ran steps 0-1 in generation 1, its client resumed into 2 (a new owner rebuilt the
  // job) and went on; rank 1 started late and joined generation 2 fresh at step 0.
  const ProcessLog r0 = RankLog(0).Seg(1, 0).Steps(1, 0, 1).Gen(2).Steps(2, 2, 3).Write("a0");
  const ProcessLog r1 = RankLog(1).Seg(2, 0).Steps(2, 0, 3).Write("a1");
  // Rank 1's check-ins of steps 0-1 are in generation 2, rank 0's in 1: one segment.
  const Verdict v = Judge({r0, r1}, kRanks, kChunks, 4);
  EXPECT_EQ(v.early_syncs, 0u) << Summary(v, kRanks);
  EXPECT_EQ(v.double_syncs, 0u);
  EXPECT_EQ(v.segments, 1u);
  EXPECT_EQ(v.finished.size(), 2u);
}

TEST(VerdictTest, AJobStartedAgainUnderReusedNumbersIsANewSegmentNotDoubleSyncs) {
  // Both ranks ran steps 0-2 in generation 1; every holder lost the job, both aborted and joined
  // afresh, the new holder numbered the generation 1 again, and the job ran from step 0.
  const ProcessLog r0 =
      RankLog(0).Seg(1, 0).Steps(1, 0, 2).Abort(1).Seg(1, 0).Steps(1, 0, 4).Write("b0");
  const ProcessLog r1 =
      RankLog(1).Seg(1, 0).Steps(1, 0, 2).Abort(1).Seg(1, 0).Steps(1, 0, 4).Write("b1");
  const Verdict v = Judge({r0, r1}, kRanks, kChunks, 5);
  EXPECT_EQ(v.double_syncs, 0u) << Summary(v, kRanks);
  EXPECT_EQ(v.early_syncs, 0u);
  EXPECT_EQ(v.segments, 2u);
  EXPECT_EQ(v.syncs, 16u);
  EXPECT_EQ(v.finished.size(), 2u);
}

TEST(VerdictTest, ADirectiveBeforeAContributorStagedIsEarly) {
  RankLog r0(0);
  r0.Seg(1, 0).Steps(1, 0, 0);
  RankLog r1(1);
  r1.Seg(1, 0);
  // Rank 1's expert check-in comes after the directive rank 0 got at t=50.
  r1.Add("staged 1 1 0 0 dense").Add("directive 1 50 0 0 7").Add("staged 1 60 0 0 expert");
  r1.Add("sync 1 0 0").Add("complete 1 0");
  const Verdict v = Judge({r0.Write("c0"), r1.Write("c1")}, kRanks, kChunks, 1);
  EXPECT_EQ(v.early_syncs, 2u) << Summary(v, kRanks);  // both ranks' directives
}

TEST(VerdictTest, ASyncRepeatedByOneClientIsDouble) {
  RankLog r0(0);
  r0.Seg(1, 0).Steps(1, 0, 0).Add("sync 1 0 0");
  const ProcessLog r1 = RankLog(1).Seg(1, 0).Steps(1, 0, 0).Write("d1");
  const Verdict v = Judge({r0.Write("d0"), r1}, kRanks, kChunks, 1);
  EXPECT_EQ(v.double_syncs, 1u) << Summary(v, kRanks);
}

TEST(VerdictTest, ARankThatRejoinsItsGenerationAtItsNextStepStaysInItsSegment) {
  // A client failed and the rank joined again in the same live generation, at its next step:
  // not a new run of the job, and a repeated sync there would still be double.
  const ProcessLog r0 = RankLog(0)
                            .Seg(1, 0)
                            .Steps(1, 0, 1)
                            .Abort(1)
                            .Seg(1, 2)
                            .Steps(1, 2, 3)
                            .Add("sync 1 1 0")
                            .Write("e0");
  const ProcessLog r1 = RankLog(1).Seg(1, 0).Steps(1, 0, 3).Write("e1");
  const Verdict v = Judge({r0, r1}, kRanks, kChunks, 4);
  EXPECT_EQ(v.segments, 1u) << Summary(v, kRanks);
  EXPECT_EQ(v.double_syncs, 1u);
}

}  // namespace
}  // namespace psync::chaos
