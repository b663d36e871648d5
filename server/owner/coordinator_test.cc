// Coordinator, the thread-safe owner, with fake sinks: the order of deliveries to one sink and
// across sinks, fan-out after the lock is released (sinks that call back into the coordinator
// from inside Send: a query, a rank answering at once, a reconnect that supersedes the session
// being delivered to, a detach), corking of shared transports, and ranks on threads.
// Exact logs and counts; time is a FakeClock; nothing sleeps.
#include "server/owner/coordinator.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::core::testing::NoticeText;
using ::psync::server::testing::CallLog;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;
using ::psync::server::testing::FakeBatcher;
using ::psync::server::testing::FakeSink;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class CoordinatorTest : public ::testing::Test {
 protected:
  // Joins every rank of a DensePlan job "job".
  void JoinAll(uint32_t world, uint32_t chunks) {
    for (core::RankId r = 0; r < world; ++r) {
      absl::StatusOr<core::JoinResult> joined =
          coordinator_.Join(DensePlan("job", r, world, chunks));
      ASSERT_TRUE(joined.ok()) << joined.status();
      session_ids_.push_back(joined->session_id);
    }
  }

  absl::StatusOr<std::vector<core::Notice>> Attach(core::RankId rank,
                                                   std::shared_ptr<SessionSink> sink) {
    return coordinator_.Attach("job", rank, 1, session_ids_[rank], std::move(sink));
  }
  std::shared_ptr<FakeSink> Attached(core::RankId rank, const std::string& name,
                                     FakeBatcher* batcher = nullptr) {
    auto sink = std::make_shared<FakeSink>(name, &log_, batcher);
    if (batcher != nullptr) batcher->Add(rank, sink.get());
    absl::StatusOr<std::vector<core::Notice>> pending = Attach(rank, sink);
    EXPECT_TRUE(pending.ok()) << pending.status();
    return sink;
  }

  absl::Status Stage(core::RankId rank, core::Step step, std::vector<core::ChunkId> chunks) {
    std::vector<core::StagedItem> items;
    for (core::ChunkId c : chunks) items.push_back(Item(step, c, "dense"));
    return coordinator_.Stage("job", rank, 1, items);
  }
  absl::Status Done(core::RankId rank, core::Step step, std::vector<core::ChunkId> chunks) {
    return coordinator_.SyncDone("job", rank, 1, DenseDone(step, std::move(chunks)));
  }

  JobCounters Counters() { return coordinator_.GetJobStatus("job")->counters; }

  serve::FakeClock clock_;
  Coordinator coordinator_{CoordinatorOptions(), &clock_};
  std::vector<std::string> session_ids_;
  CallLog log_;
};

TEST_F(CoordinatorTest, DeliversInDecisionOrderToEveryMember) {
  JoinAll(2, 3);
  auto a = Attached(0, "a");
  auto b = Attached(1, "b");
  ASSERT_TRUE(Stage(1, 0, {2, 0, 1}).ok());
  EXPECT_THAT(log_.Take(), IsEmpty());  // rank 0 has not staged: nothing released
  // Rank 0's batch completes all three chunks: the tracker releases them in chunk order, and
  // the sinks get the releases in that order, each to every member before the next.
  ASSERT_TRUE(Stage(0, 0, {1, 2, 0}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1", "b directive g1 s0 c0 seq1",
                                       "a directive g1 s0 c1 seq2", "b directive g1 s0 c1 seq2",
                                       "a directive g1 s0 c2 seq3", "b directive g1 s0 c2 seq3"));
  // A repeated check-in is answered with the decision already made: nothing is sent again.
  ASSERT_TRUE(Stage(0, 0, {1}).ok());
  EXPECT_THAT(log_.Take(), IsEmpty());
  EXPECT_EQ(Counters().releases, 3u);
  EXPECT_EQ(Counters().duplicate_checkins, 1u);
}

// Every call that changes state takes the state machine's lock once, and is counted; queries,
// which take it shared, are not. Deliveries of decisions are timed.
TEST_F(CoordinatorTest, LoadTimesCountEveryCallThatChangesState) {
  const LoadTimes start = coordinator_.load_times();
  EXPECT_EQ(start.lock_acquisitions, 0u);
  EXPECT_EQ(start.lock_held, absl::ZeroDuration());
  EXPECT_EQ(start.delivering, absl::ZeroDuration());
  JoinAll(2, 1);                                                           // 2
  auto a = Attached(0, "a");                                               // 3
  ASSERT_TRUE(Stage(0, 0, {0}).ok());                                      // 4
  ASSERT_TRUE(Stage(1, 0, {0}).ok());                                      // 5: released to rank 0
  EXPECT_EQ(Stage(1, 0, {7}).code(), absl::StatusCode::kInvalidArgument);  // 6: rejected
  ASSERT_TRUE(coordinator_.GetJobStatus("job").ok());                      // shared: not counted
  ASSERT_EQ(coordinator_.ListJobs().size(), 1u);                           // shared: not counted
  const LoadTimes after = coordinator_.load_times();
  EXPECT_EQ(after.lock_acquisitions, 6u);
  EXPECT_GE(after.lock_held, absl::ZeroDuration());
  EXPECT_GE(after.lock_wait, absl::ZeroDuration());
  EXPECT_GT(after.delivering, absl::ZeroDuration()) << "the release was delivered";
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1"));
}

TEST_F(CoordinatorTest, RejectedInputDeliversNothing) {
  JoinAll(2, 1);
  auto a = Attached(0, "a");
  auto b = Attached(1, "b");
  EXPECT_EQ(Stage(0, 5, {0}).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(coordinator_.Stage("job", 0, 7, {Item(0, 0, "dense")}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_.Stage("other", 0, 1, {Item(0, 0, "dense")}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(log_.Take(), IsEmpty());
  EXPECT_EQ(Counters().rejected, 2u);  // the unknown job has no counters
}

// A sink that queries the coordinator from inside Send: this would deadlock if the coordinator
// still held its lock while handing out notices. The query sees the decision already recorded.
TEST_F(CoordinatorTest, SendRunsAfterTheLockIsReleased) {
  JoinAll(2, 1);
  auto a = std::make_shared<FakeSink>("a", &log_);
  std::vector<uint64_t> releases_seen;
  a->on_send = [&](const core::Notice&) {
    absl::StatusOr<JobStatusView> view = coordinator_.GetJobStatus("job");
    ASSERT_TRUE(view.ok());
    releases_seen.push_back(view->counters.releases);
  };
  ASSERT_TRUE(Attach(0, a).ok());
  auto b = Attached(1, "b");
  ASSERT_TRUE(Stage(0, 0, {0}).ok());
  ASSERT_TRUE(Stage(1, 0, {0}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1", "b directive g1 s0 c0 seq1"));
  EXPECT_THAT(releases_seen, ElementsAre(1));
}

// A rank that answers from inside Send (SyncDone, then its next step's check-in): each answer is
// decided and delivered before the outer Send returns, so the notices nest in step order.
TEST_F(CoordinatorTest, SinksMayFeedTheCoordinatorFromInsideSend) {
  JoinAll(1, 1);
  constexpr core::Step kSteps = 4;
  auto a = std::make_shared<FakeSink>("a", &log_);
  std::vector<std::string> answers;
  a->on_send = [&](const core::Notice& notice) {
    const auto& d = std::get<core::SyncDirective>(notice);
    answers.push_back(Done(0, d.step, {d.chunk}).ToString());
    if (d.step + 1 < kSteps) answers.push_back(Stage(0, d.step + 1, {d.chunk}).ToString());
  };
  ASSERT_TRUE(Attach(0, a).ok());
  ASSERT_TRUE(Stage(0, 0, {0}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1", "a directive g1 s1 c0 seq2",
                                       "a directive g1 s2 c0 seq3", "a directive g1 s3 c0 seq4"));
  EXPECT_THAT(answers, ElementsAre("OK", "OK", "OK", "OK", "OK", "OK", "OK"));
  EXPECT_EQ(Counters().releases, kSteps);
  EXPECT_EQ(Counters().syncs_done, kSteps);
}

// The rank reconnects while its old session is being handed a release: the reconnect (decided
// after the release) closes the old session (ABORTED) once the release has reached every member,
// the new one gets the release as a pending notice, and later notices go to the new session only.
TEST_F(CoordinatorTest, SupersedingTheSessionBeingDeliveredTo) {
  JoinAll(2, 1);
  auto a = std::make_shared<FakeSink>("a", &log_);
  auto a2 = std::make_shared<FakeSink>("a2", &log_);
  std::vector<std::string> pending_of_a2;
  a->on_send = [&](const core::Notice&) {
    if (!pending_of_a2.empty()) return;
    absl::StatusOr<std::vector<core::Notice>> pending = Attach(0, a2);
    ASSERT_TRUE(pending.ok()) << pending.status();
    for (const core::Notice& n : *pending) pending_of_a2.push_back(NoticeText(n));
  };
  ASSERT_TRUE(Attach(0, a).ok());
  auto b = Attached(1, "b");
  ASSERT_TRUE(Stage(0, 0, {0}).ok());
  ASSERT_TRUE(Stage(1, 0, {0}).ok());
  EXPECT_THAT(log_.Take(),
              ElementsAre("a directive g1 s0 c0 seq1", "b directive g1 s0 c0 seq1",
                          "a close ABORTED: session of rank 0 superseded by a newer session"));
  EXPECT_THAT(pending_of_a2, ElementsAre("directive g1 s0 c0 seq1"));
  EXPECT_EQ(coordinator_.GetJobStatus("job")->sessions_connected, 2u);

  // The old session's late Detach (its stream ending) does not remove the new one.
  coordinator_.Detach("job", 0, a.get());
  EXPECT_EQ(coordinator_.GetJobStatus("job")->sessions_connected, 2u);

  ASSERT_TRUE(Done(0, 0, {0}).ok());
  ASSERT_TRUE(Done(1, 0, {0}).ok());
  ASSERT_TRUE(Stage(0, 1, {0}).ok());
  ASSERT_TRUE(Stage(1, 1, {0}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a2 directive g1 s1 c0 seq2", "b directive g1 s1 c0 seq2"));
}

// A session that detaches from inside Send (its stream ended) still receives the rest of the
// notices decided before its Detach (the sink drops them itself); the next decision skips it, and
// a new session gets what it missed as pending notices.
TEST_F(CoordinatorTest, DetachFromInsideSend) {
  JoinAll(1, 2);
  auto a = std::make_shared<FakeSink>("a", &log_);
  int sends = 0;
  a->on_send = [&](const core::Notice&) {
    if (++sends == 1) coordinator_.Detach("job", 0, a.get());
  };
  ASSERT_TRUE(Attach(0, a).ok());
  ASSERT_TRUE(Stage(0, 0, {0, 1}).ok());
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1", "a directive g1 s0 c1 seq2"));
  EXPECT_EQ(coordinator_.GetJobStatus("job")->sessions_connected, 0u);

  ASSERT_TRUE(Done(0, 0, {0, 1}).ok());
  ASSERT_TRUE(Stage(0, 1, {0, 1}).ok());
  EXPECT_THAT(log_.Take(), IsEmpty());
  absl::StatusOr<std::vector<core::Notice>> pending =
      Attach(0, std::make_shared<FakeSink>("c", &log_));
  ASSERT_TRUE(pending.ok());
  std::vector<std::string> texts;
  for (const core::Notice& n : *pending) texts.push_back(NoticeText(n));
  EXPECT_THAT(texts, ElementsAre("directive g1 s1 c0 seq3", "directive g1 s1 c1 seq4"));
}

// Sinks sharing a transport (a node agent's stream): the transport is corked once, gets each
// notice of the decision once with the ranks it is for, in decision order, and is uncorked after
// the last one; sinks without a transport are sent to first, in decision order.
TEST_F(CoordinatorTest, SharedTransportsAreCorkedAroundOneDecision) {
  JoinAll(4, 2);
  FakeBatcher x("x", &log_);
  auto r0 = Attached(0, "r0", &x);
  auto r1 = Attached(1, "r1", &x);
  auto r2 = Attached(2, "r2");
  auto r3 = Attached(3, "r3", &x);
  for (core::RankId r = 1; r < 4; ++r) ASSERT_TRUE(Stage(r, 0, {0, 1}).ok());
  ASSERT_TRUE(Stage(0, 0, {0, 1}).ok());
  // r2, without a transport, gets both notices first; then the shared transport x gets each
  // notice once with its three ranks, in decision order, between one cork and one uncork.
  EXPECT_THAT(log_.Take(),
              ElementsAre("r2 directive g1 s0 c0 seq1", "r2 directive g1 s0 c1 seq2", "x cork",
                          "x each r0 r1 r3: directive g1 s0 c0 seq1", "r0 directive g1 s0 c0 seq1",
                          "r1 directive g1 s0 c0 seq1", "r3 directive g1 s0 c0 seq1",
                          "x each r0 r1 r3: directive g1 s0 c1 seq2", "r0 directive g1 s0 c1 seq2",
                          "r1 directive g1 s0 c1 seq2", "r3 directive g1 s0 c1 seq2", "x uncork"));
}

// With delivery threads, a release to many transports shares the transports out over the threads:
// each transport is corked, gets its notice and is uncorked (which starts its write) by one
// thread; the call returns once every transport was uncorked, each once and after its notice.
TEST(CoordinatorDeliveryThreadsTest, ReleaseToManyTransportsUncorksThemOnSeveralThreads) {
  constexpr uint32_t kRanks = 64;
  serve::FakeClock clock;
  CoordinatorOptions options;
  options.delivery_threads = 3;
  Coordinator coordinator(options, &clock);
  CallLog log;
  std::vector<std::unique_ptr<FakeBatcher>> batchers;
  std::vector<std::shared_ptr<FakeSink>> sinks;
  absl::Mutex mu;
  absl::flat_hash_set<std::thread::id> uncork_threads;
  for (core::RankId r = 0; r < kRanks; ++r) {
    absl::StatusOr<core::JoinResult> joined = coordinator.Join(DensePlan("job", r, kRanks, 1));
    ASSERT_TRUE(joined.ok()) << joined.status();
    batchers.push_back(std::make_unique<FakeBatcher>(absl::StrCat("x", r), &log));
    batchers.back()->on_uncork = [&] {
      absl::MutexLock lock(&mu);
      uncork_threads.insert(std::this_thread::get_id());
    };
    sinks.push_back(std::make_shared<FakeSink>(absl::StrCat("r", r), &log, batchers.back().get()));
    batchers.back()->Add(r, sinks.back().get());
    ASSERT_TRUE(coordinator.Attach("job", r, 1, joined->session_id, sinks.back()).ok());
  }
  for (core::RankId r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(coordinator.Stage("job", r, 1, {core::testing::Item(0, 0, "dense")}).ok());
  }
  const std::vector<std::string> entries = log.Take();
  // Per transport: cork, its notice, uncork (in that order), and nothing else.
  for (core::RankId r = 0; r < kRanks; ++r) {
    std::vector<std::string> mine;
    for (const std::string& e : entries) {
      if (absl::StartsWith(e, absl::StrCat("x", r, " ")) ||
          absl::StartsWith(e, absl::StrCat("r", r, " "))) {
        mine.push_back(e);
      }
    }
    EXPECT_THAT(mine, ElementsAre(absl::StrCat("x", r, " cork"),
                                  absl::StrCat("x", r, " each r", r, ": directive g1 s0 c0 seq1"),
                                  absl::StrCat("r", r, " directive g1 s0 c0 seq1"),
                                  absl::StrCat("x", r, " uncork")));
  }
  // 64 transports in slices of at least 16: the calling thread's slice and the helpers' slices.
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(uncork_threads.contains(std::this_thread::get_id()));
  EXPECT_GE(uncork_threads.size(), 2u);
}

// The directives one rank received: their sequence numbers in arrival order.
struct Inbox {
  bool Enough() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return sequences.size() >= want; }

  absl::Mutex mu;
  std::vector<uint64_t> sequences ABSL_GUARDED_BY(mu);
  size_t want ABSL_GUARDED_BY(mu) = 0;
};

// Two decisions on two threads: the first one's delivery is held up inside a sink while the second
// is decided and handed over. Every sink still sees the first decision's notices before the
// second's: the second waits for its turn (delivered by the thread delivering the first) instead
// of overtaking it, and the call that decided it does not wait for it.
TEST_F(CoordinatorTest, AHeldUpDeliveryIsNotOvertakenByALaterDecision) {
  JoinAll(2, 2);
  auto a = std::make_shared<FakeSink>("a", &log_);
  auto b = Attached(1, "b");
  absl::Notification in_send;
  absl::Notification go_on;
  a->on_send = [&](const core::Notice&) {
    if (in_send.HasBeenNotified()) return;
    in_send.Notify();
    go_on.WaitForNotification();
  };
  ASSERT_TRUE(Attach(0, a).ok());
  ASSERT_TRUE(Stage(1, 0, {0, 1}).ok());
  std::thread first([&] { ASSERT_TRUE(Stage(0, 0, {0}).ok()); });  // releases chunk 0
  in_send.WaitForNotification();       // a holds chunk 0's directive; b has not had it yet
  ASSERT_TRUE(Stage(0, 0, {1}).ok());  // releases chunk 1; returns without delivering it
  EXPECT_EQ(Counters().releases, 2u);
  EXPECT_THAT(log_.Take(), ElementsAre("a directive g1 s0 c0 seq1"));
  go_on.Notify();
  first.join();
  EXPECT_THAT(log_.Take(), ElementsAre("b directive g1 s0 c0 seq1", "a directive g1 s0 c1 seq2",
                                       "b directive g1 s0 c1 seq2"));
}

// Records the index of every event it is handed.
class IndexRecorder final : public EventSink {
 public:
  void OnEvents(const std::vector<core::Event>& events) override {
    absl::MutexLock lock(&mu);
    for (const core::Event& e : events) indices.push_back(e.index);
  }
  absl::Mutex mu;
  std::vector<uint64_t> indices ABSL_GUARDED_BY(mu);
};

// Many jobs decided on many threads at once: each event sink gets every event exactly once, in
// the order of the log (indices 0, 1, 2, ... without a gap), and each session gets its job's
// releases in sequence order.
TEST_F(CoordinatorTest, ConcurrentDecisionsReachEverySinkInDecisionOrder) {
  constexpr int kJobs = 4;
  constexpr core::Step kSteps = 200;
  IndexRecorder events;
  const uint64_t first_index = coordinator_.AddEventSink(&events, nullptr);
  struct Seen {
    absl::Mutex mu;
    std::vector<uint64_t> sequences ABSL_GUARDED_BY(mu);
  };
  std::vector<Seen> seen(kJobs * 2);
  std::vector<std::shared_ptr<FakeSink>> sinks;
  CallLog unused;
  std::vector<std::vector<std::string>> ids(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("job", j);
    for (core::RankId r = 0; r < 2; ++r) {
      absl::StatusOr<core::JoinResult> joined = coordinator_.Join(DensePlan(job, r, 2, 1));
      ASSERT_TRUE(joined.ok());
      auto sink = std::make_shared<FakeSink>(absl::StrCat(job, "/", r), &unused);
      Seen* mine = &seen[2 * j + r];
      sink->on_send = [mine](const core::Notice& notice) {
        absl::MutexLock lock(&mine->mu);
        mine->sequences.push_back(std::get<core::SyncDirective>(notice).sequence);
      };
      ASSERT_TRUE(coordinator_.Attach(job, r, 1, joined->session_id, sink).ok());
      sinks.push_back(std::move(sink));
    }
  }
  std::vector<std::thread> threads;
  for (int j = 0; j < kJobs; ++j) {
    for (core::RankId r = 0; r < 2; ++r) {
      threads.emplace_back([&, j, r] {
        const std::string job = absl::StrCat("job", j);
        Seen& mine = seen[2 * j + r];
        for (core::Step s = 0; s < kSteps; ++s) {
          // The job's releases interleave with the other jobs' decisions on the other threads.
          EXPECT_TRUE(coordinator_.Stage(job, r, 1, {Item(s, 0, "dense")}).ok());
          {
            absl::MutexLock lock(&mine.mu);
            auto released = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return mine.sequences.size() > s;
            };
            mine.mu.Await(absl::Condition(&released));
          }
          EXPECT_TRUE(coordinator_.SyncDone(job, r, 1, DenseDone(s, {0})).ok());
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  coordinator_.RemoveEventSink(&events);

  uint64_t next = 0;
  coordinator_.EventsSince(0, &next);
  absl::MutexLock lock(&events.mu);
  ASSERT_EQ(events.indices.size(), next - first_index);
  for (size_t i = 0; i < events.indices.size(); ++i) {
    ASSERT_EQ(events.indices[i], first_index + i) << "event " << i;
  }
  for (Seen& s : seen) {
    absl::MutexLock seen_lock(&s.mu);
    ASSERT_EQ(s.sequences.size(), kSteps);
    for (size_t i = 0; i < s.sequences.size(); ++i) ASSERT_EQ(s.sequences[i], i + 1);
  }
}

// Ranks on threads, each staging its step, waiting for its directives, reporting SyncDone: every
// rank receives every release exactly once, in sequence order (a step's releases are one decision,
// and the next step is released only once every rank has received them), and the counters add up.
TEST_F(CoordinatorTest, RanksOnThreads) {
  constexpr uint32_t kWorld = 4;
  constexpr uint32_t kChunks = 2;
  constexpr core::Step kSteps = 50;
  JoinAll(kWorld, kChunks);

  std::vector<Inbox> inboxes(kWorld);
  std::vector<std::shared_ptr<FakeSink>> sinks;
  CallLog unused;
  for (core::RankId r = 0; r < kWorld; ++r) {
    auto sink = std::make_shared<FakeSink>(absl::StrCat("r", r), &unused);
    Inbox* inbox = &inboxes[r];
    sink->on_send = [inbox](const core::Notice& notice) {
      absl::MutexLock lock(&inbox->mu);
      inbox->sequences.push_back(std::get<core::SyncDirective>(notice).sequence);
    };
    ASSERT_TRUE(Attach(r, sink).ok());
    sinks.push_back(std::move(sink));
  }

  std::vector<std::thread> ranks;
  std::vector<absl::Status> failures(kWorld);
  for (core::RankId r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      Inbox& inbox = inboxes[r];
      for (core::Step s = 0; s < kSteps; ++s) {
        if (absl::Status st = Stage(r, s, {0, 1}); !st.ok()) {
          failures[r] = st;
          return;
        }
        {
          absl::MutexLock lock(&inbox.mu);
          inbox.want = kChunks * (s + 1);
          inbox.mu.Await(absl::Condition(&inbox, &Inbox::Enough));
        }
        if (absl::Status st = Done(r, s, {0, 1}); !st.ok()) {
          failures[r] = st;
          return;
        }
      }
    });
  }
  for (std::thread& t : ranks) t.join();

  std::vector<uint64_t> expected;
  for (uint64_t seq = 1; seq <= kChunks * kSteps; ++seq) expected.push_back(seq);
  for (core::RankId r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(failures[r].ok()) << "rank " << r << ": " << failures[r];
    absl::MutexLock lock(&inboxes[r].mu);
    EXPECT_EQ(inboxes[r].sequences, expected) << "rank " << r;
  }
  const JobCounters c = Counters();
  EXPECT_EQ(c.releases, kChunks * kSteps);
  EXPECT_EQ(c.checkins, kWorld * kChunks * kSteps);
  EXPECT_EQ(c.syncs_done, kWorld * kChunks * kSteps);
  EXPECT_EQ(c.rejected, 0u);
}

}  // namespace
}  // namespace psync::server
