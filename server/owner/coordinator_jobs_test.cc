// Coordinator: each job has its own lock. Messages of two jobs are decided at once (one job's
// decision in progress does not hold up another's), and jobs driven from several threads at once,
// with queries and job lifecycles alongside, still release every (step, chunk) exactly once, to
// every rank, in order, with one event log in decision order.
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/owner/coordinator.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;

// Serves every job at epoch 7. While armed, admitting a message of job "a" (which the coordinator
// does under a's lock, just before the tracker may release) waits until a message of job "b" has
// been admitted, or 10 s.
class HoldingGate final : public JobGate {
 public:
  absl::StatusOr<uint64_t> AdmitJoin(const std::string&) override { return 7; }
  absl::StatusOr<uint64_t> AdmitMessage(const std::string& job_id) override {
    if (job_id == "b") b_admitted.Notify();
    if (job_id == "a" && armed.load()) {
      a_inside.Notify();
      b_seen_while_a_inside = b_admitted.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
    return 7;
  }
  absl::StatusOr<uint64_t> AdmitQuery(const std::string&) override { return 7; }

  std::atomic<bool> armed{false};
  absl::Notification a_inside;
  absl::Notification b_admitted;
  bool b_seen_while_a_inside = false;  // written by a's thread before its call returns
};

TEST(CoordinatorJobsTest, AMessageOfOneJobIsDecidedWhileAnotherJobsDecisionIsInProgress) {
  serve::FakeClock clock;
  HoldingGate gate;
  CoordinatorOptions options;
  options.gate = &gate;
  Coordinator coordinator(options, &clock);
  for (const char* job : {"a", "b"}) {
    for (core::RankId r = 0; r < 2; ++r)
      ASSERT_TRUE(coordinator.Join(DensePlan(job, r, 2, 1)).ok());
  }
  gate.armed = true;
  absl::Status a_status;
  std::thread a([&] { a_status = coordinator.Stage("a", 0, 1, {Item(0, 0, "dense")}); });
  gate.a_inside.WaitForNotification();
  // a's check-in is being decided (its job's lock is held): b's is decided meanwhile.
  EXPECT_TRUE(coordinator.Stage("b", 0, 1, {Item(0, 0, "dense")}).ok());
  a.join();
  EXPECT_TRUE(a_status.ok()) << a_status;
  EXPECT_TRUE(gate.b_seen_while_a_inside) << "b waited for a's decision to finish";
  EXPECT_EQ(coordinator.GetJobStatus("a")->counters.checkins, 1u);
  EXPECT_EQ(coordinator.GetJobStatus("b")->counters.checkins, 1u);
  EXPECT_EQ(coordinator.load_times().lock_acquisitions, 4u + 2u);  // 4 joins, 2 check-ins
  // Each job's own lock was taken once, by its check-in (joins take the set of jobs).
  EXPECT_EQ(coordinator.GetJobStatus("a")->lock_acquisitions, 1u);
  EXPECT_EQ(coordinator.GetJobStatus("b")->lock_acquisitions, 1u);
}

// Records each rank's directives (step, chunk, sequence) as they arrive.
class RecordingSink final : public SessionSink {
 public:
  void Send(const core::Notice& notice) override {
    absl::MutexLock lock(&mu_);
    if (const auto* d = std::get_if<core::SyncDirective>(&notice)) {
      directives_.push_back({d->step, d->chunk, d->sequence});
    } else {
      ++others_;
    }
  }
  void Close(const absl::Status&) override {}

  struct Directive {
    core::Step step;
    core::ChunkId chunk;
    uint64_t sequence;
  };
  std::vector<Directive> directives() {
    absl::MutexLock lock(&mu_);
    return directives_;
  }
  int others() {
    absl::MutexLock lock(&mu_);
    return others_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Directive> directives_ ABSL_GUARDED_BY(mu_);
  int others_ ABSL_GUARDED_BY(mu_) = 0;
};

// Joins every rank of a DensePlan job of `ranks` ranks and attaches each to a RecordingSink of its
// own, appended to `sinks` in rank order.
void JoinAndAttach(Coordinator& coordinator, const std::string& job, uint32_t ranks,
                   uint32_t chunks, std::vector<std::shared_ptr<RecordingSink>>* sinks) {
  for (core::RankId r = 0; r < ranks; ++r) {
    absl::StatusOr<core::JoinResult> joined = coordinator.Join(DensePlan(job, r, ranks, chunks));
    ASSERT_TRUE(joined.ok()) << joined.status();
    sinks->push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(coordinator.Attach(job, r, 1, joined->session_id, sinks->back()).ok());
  }
}

// kJobs jobs of kRanks ranks and kChunks chunks, each driven by its own thread for kSteps steps
// (each rank's check-ins of a step as one node batch, its SyncDones one by one), while another
// thread queries and reads the event log, and another starts and ends short jobs.
TEST(CoordinatorJobsTest, JobsDrivenAtOnceReleaseEveryChunkOnceInOrder) {
  constexpr int kJobs = 4;
  constexpr uint32_t kRanks = 4;
  constexpr uint32_t kChunks = 3;
  constexpr core::Step kSteps = 40;
  serve::FakeClock clock;
  CoordinatorOptions options;
  options.delivery_threads = 2;
  Coordinator coordinator(options, &clock);
  std::vector<std::vector<std::shared_ptr<RecordingSink>>> sinks(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("job", j);
    ASSERT_NO_FATAL_FAILURE(JoinAndAttach(coordinator, job, kRanks, kChunks, &sinks[j]));
  }
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int j = 0; j < kJobs; ++j) {
    threads.emplace_back([&, j] {
      const std::string job = absl::StrCat("job", j);
      std::vector<core::StagedItem> items;
      std::vector<core::ChunkId> chunks;
      for (core::ChunkId c = 0; c < kChunks; ++c) chunks.push_back(c);
      for (core::Step step = 0; step < kSteps; ++step) {
        items.clear();
        for (core::ChunkId c = 0; c < kChunks; ++c) items.push_back(Item(step, c, "dense"));
        std::vector<RankMessage> batch(kRanks);
        for (core::RankId r = 0; r < kRanks; ++r) {
          batch[r].rank = r;
          batch[r].kind = RankMessage::Kind::kStaged;
          batch[r].staged = items;
        }
        for (const absl::Status& s : coordinator.ApplyBatch(job, 1, batch)) failures += !s.ok();
        for (core::RankId r = 0; r < kRanks; ++r) {
          failures += !coordinator.SyncDone(job, r, 1, DenseDone(step, chunks)).ok();
        }
      }
    });
  }
  std::thread reader([&] {
    uint64_t from = 0;
    while (!done.load()) {
      for (int j = 0; j < kJobs; ++j)
        failures += !coordinator.GetJobStatus(absl::StrCat("job", j)).ok();
      failures += coordinator.ListJobs().empty();
      uint64_t next = 0;
      std::vector<core::Event> events = coordinator.EventsSince(from, &next, 1000);
      for (size_t i = 0; i < events.size(); ++i) failures += events[i].index != from + i;
      from = next;
    }
  });
  std::thread lifecycle([&] {
    for (int i = 0; i < 20; ++i) {
      const std::string job = absl::StrCat("short", i);
      failures += !coordinator.Join(DensePlan(job, 0, 1, 1)).ok();
      failures += !coordinator.Stage(job, 0, 1, {Item(0, 0, "dense")}).ok();
      failures += !coordinator.EndJob(job, "done", "").ok();
    }
  });
  for (std::thread& t : threads) t.join();
  lifecycle.join();
  done = true;
  reader.join();
  EXPECT_EQ(failures.load(), 0);

  for (int j = 0; j < kJobs; ++j) {
    const std::string job = absl::StrCat("job", j);
    absl::StatusOr<JobStatusView> view = coordinator.GetJobStatus(job);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->counters.releases, kSteps * kChunks) << job;
    EXPECT_EQ(view->counters.checkins, kSteps * kChunks * kRanks) << job;
    EXPECT_EQ(view->counters.rejected, 0u) << job;
    EXPECT_EQ(view->audit.released, kSteps * kChunks) << job;
    EXPECT_EQ(view->audit.double_releases, 0u) << job;
    // One batch and kRanks SyncDones a step took the job's lock.
    EXPECT_EQ(view->lock_acquisitions, kSteps * (1 + kRanks)) << job;
    for (core::RankId r = 0; r < kRanks; ++r) {
      // Every (step, chunk) once, in step order, the job's sequence numbers 1, 2, 3, ...
      const std::vector<RecordingSink::Directive> got = sinks[j][r]->directives();
      ASSERT_EQ(got.size(), kSteps * kChunks) << job << " rank " << r;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].step, i / kChunks) << job << " rank " << r << " directive " << i;
        EXPECT_EQ(got[i].sequence, i + 1) << job << " rank " << r << " directive " << i;
      }
      EXPECT_EQ(sinks[j][r]->others(), 0);
    }
  }
  // One log over every job, numbered without a gap.
  uint64_t next = 0;
  const std::vector<core::Event> all = coordinator.EventsSince(0, &next);
  ASSERT_FALSE(all.empty());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].index, all[0].index + i);
  EXPECT_EQ(coordinator.ListJobs({"ENDED"}).size(), 20u);
}

// Waits until `parties` threads called Arrive for the same round (reusable, one round at a time).
class StepBarrier {
 public:
  explicit StepBarrier(int parties) : parties_(parties) {}
  void Arrive() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const int round = round_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++round_;
      all_arrived_.SignalAll();
      return;
    }
    while (round_ == round) all_arrived_.Wait(&mu_);
  }

 private:
  absl::Mutex mu_;
  absl::CondVar all_arrived_;
  const int parties_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int round_ ABSL_GUARDED_BY(mu_) = 0;
};

// One job's nodes, each on its own thread, send their batches at once (check-ins, then, once every
// chunk is released, SyncDones): every chunk of every step is released once, after all of its
// check-ins, to every rank, with one sequence number. Sets *by_chunk to how many check-ins went
// chunk by chunk (CoordinatorOptions::apply_threads).
void ExpectNodesReleaseEveryChunkOnce(CoordinatorOptions options, uint64_t* by_chunk) {
  constexpr int kNodes = 8;
  constexpr uint32_t kRanksPerNode = 4;
  constexpr uint32_t kRanks = kNodes * kRanksPerNode;
  constexpr uint32_t kChunks = 3;
  constexpr core::Step kSteps = 30;
  serve::FakeClock clock;
  options.delivery_threads = 2;
  Coordinator coordinator(options, &clock);
  const std::string job = "nodes";
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  ASSERT_NO_FATAL_FAILURE(JoinAndAttach(coordinator, job, kRanks, kChunks, &sinks));
  std::vector<core::ChunkId> chunks;
  for (core::ChunkId c = 0; c < kChunks; ++c) chunks.push_back(c);
  StepBarrier barrier(kNodes);
  std::atomic<int> failures{0};
  std::vector<std::thread> nodes;
  for (int n = 0; n < kNodes; ++n) {
    nodes.emplace_back([&, n] {
      const core::RankId first = n * kRanksPerNode;
      for (core::Step step = 0; step < kSteps; ++step) {
        // Every rank's check-ins, one item a message, as a node agent merges them.
        std::vector<core::StagedItem> items;
        for (core::ChunkId c = 0; c < kChunks; ++c) items.push_back(Item(step, c, "dense"));
        std::vector<RankMessage> checkins;
        for (core::ChunkId c = 0; c < kChunks; ++c) {
          for (core::RankId r = first; r < first + kRanksPerNode; ++r) {
            RankMessage m;
            m.rank = r;
            m.kind = RankMessage::Kind::kStaged;
            m.staged = absl::MakeConstSpan(&items[c], 1);
            checkins.push_back(m);
          }
        }
        for (const absl::Status& s : coordinator.ApplyBatch(job, 1, checkins)) failures += !s.ok();
        barrier.Arrive();  // every chunk of the step is released now
        const std::vector<core::SyncDoneItem> done = DenseDone(step, chunks);
        std::vector<RankMessage> sync_dones;
        for (core::RankId r = first; r < first + kRanksPerNode; ++r) {
          RankMessage m;
          m.rank = r;
          m.kind = RankMessage::Kind::kSyncDone;
          m.sync_done = done;
          sync_dones.push_back(m);
        }
        for (const absl::Status& s : coordinator.ApplyBatch(job, 1, sync_dones)) {
          failures += !s.ok();
        }
        barrier.Arrive();  // every rank is at the next step
      }
    });
  }
  for (std::thread& t : nodes) t.join();
  EXPECT_EQ(failures.load(), 0);

  absl::StatusOr<JobStatusView> view = coordinator.GetJobStatus(job);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->counters.releases, kSteps * kChunks);
  EXPECT_EQ(view->counters.checkins, kSteps * kChunks * kRanks);
  EXPECT_EQ(view->counters.syncs_done, kSteps * kChunks * kRanks);
  EXPECT_EQ(view->counters.rejected, 0u);
  EXPECT_EQ(view->audit.released, kSteps * kChunks);
  EXPECT_EQ(view->audit.double_releases, 0u);
  // The job's lock was taken once per round of its combiner, and each batch was applied in one
  // round: at most once per batch (fewer when batches arriving together shared a round).
  EXPECT_GE(view->lock_acquisitions, 2 * kSteps);
  EXPECT_LE(view->lock_acquisitions, 2 * kSteps * kNodes);
  // Every rank gets each (step, chunk) once, steps in order, with the sequence every other rank
  // got.
  std::map<std::pair<core::Step, core::ChunkId>, uint64_t> sequence_of;
  for (core::RankId r = 0; r < kRanks; ++r) {
    const std::vector<RecordingSink::Directive> got = sinks[r]->directives();
    ASSERT_EQ(got.size(), kSteps * kChunks) << "rank " << r;
    std::set<std::pair<core::Step, core::ChunkId>> seen;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].step, i / kChunks) << "rank " << r << " directive " << i;
      EXPECT_TRUE(seen.insert({got[i].step, got[i].chunk}).second) << "rank " << r;
      auto [it, inserted] = sequence_of.try_emplace({got[i].step, got[i].chunk}, got[i].sequence);
      EXPECT_EQ(it->second, got[i].sequence) << "rank " << r << " directive " << i;
    }
    EXPECT_EQ(sinks[r]->others(), 0);
  }
  // In the event log, each (step, chunk)'s release follows every one of its check-ins.
  uint64_t next = 0;
  std::map<std::pair<core::Step, core::ChunkId>, uint32_t> checked_in;
  std::map<std::pair<core::Step, core::ChunkId>, int> released;
  for (const core::Event& e : coordinator.EventsSince(0, &next)) {
    if (e.kind == core::EventKind::kCheckin) {
      const auto key = std::make_pair(*e.step, *e.chunk);
      EXPECT_EQ(released[key], 0) << "a check-in of step " << *e.step << " chunk " << *e.chunk
                                  << " after its release";
      checked_in[key] += core::RankCount(e);
    } else if (e.kind == core::EventKind::kRelease) {
      const auto key = std::make_pair(*e.step, *e.chunk);
      EXPECT_EQ(checked_in[key], kRanks) << "step " << *e.step << " chunk " << *e.chunk;
      ++released[key];
    }
  }
  EXPECT_EQ(released.size(), kSteps * kChunks);
  for (const auto& [key, count] : released) EXPECT_EQ(count, 1);
  *by_chunk = coordinator.load_times().checkins_by_chunk;
}

TEST(CoordinatorJobsTest, NodesOfOneJobAtOnceReleaseEveryChunkOnceAfterItsCheckins) {
  uint64_t by_chunk = 1;
  ExpectNodesReleaseEveryChunkOnce(CoordinatorOptions(), &by_chunk);
  EXPECT_EQ(by_chunk, 0u);
}

// The same with every check-in batch (12 messages over 3 chunks) applied chunk by chunk on helper
// threads, alone or with the others of its combiner round.
TEST(CoordinatorJobsTest, NodesOfOneJobAtOnceWithCheckinsAppliedChunkByChunk) {
  CoordinatorOptions options;
  options.apply_threads = 2;
  options.apply_by_chunk_min_messages = 2;
  uint64_t by_chunk = 0;
  ExpectNodesReleaseEveryChunkOnce(options, &by_chunk);
  EXPECT_EQ(by_chunk, 30u * 3u * 32u);  // steps x chunks x ranks
}

}  // namespace
}  // namespace psync::server
