// WatchQueue: a watcher's events in index order, each once: replay and live events past the bound
// are read from the log a page at a time as the watcher takes what is queued (FakeLog stands for
// the coordinator's log); a watcher that takes nothing while more than the bound is recorded is
// ended with RESOURCE_EXHAUSTED, one whose next events were dropped from the log with
// OUT_OF_RANGE. Then the same over real gRPC (WatchEventsTest). Exact indices and counts; nothing
// sleeps.
#include "server/rpc/event_stream.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "serve/stream_writer.h"
#include "server/kv/rendezvous_store.h"
#include "server/owner/coordinator.h"
#include "server/owner/event_log.h"
#include "server/rpc/service.h"

namespace psync::server {
namespace {

using ::testing::ElementsAre;

// A release event of job `job`; the log it is appended to numbers it.
core::Event Ev(std::string job = "j", std::string detail = "") {
  core::Event e;
  e.kind = core::EventKind::kRelease;
  e.job_id = std::move(job);
  e.detail = std::move(detail);
  return e;
}

// A log and its coordinator, as far as a WatchQueue sees them: Record appends a batch to the
// log and delivers it live (AddLive), as OrderedDelivery::Commit and Deliver do; Pages answers
// the queue's page requests from the log, as EventStream::Pump does with Coordinator::EventsSince.
struct FakeLog {
  explicit FakeLog(size_t capacity = 1000000) : log(capacity) {}

  // Appends one batch; returns it (as delivered to the sinks).
  std::vector<core::Event> Append(std::vector<core::Event> events) {
    EventLog::Batch batch = log.Append(std::move(events));
    return batch == nullptr ? std::vector<core::Event>() : *batch;
  }
  void Record(WatchQueue& q, std::vector<core::Event> events) {
    q.AddLive(Append(std::move(events)));
  }
  // Answers one page request; false when the queue asks for none.
  bool Page(WatchQueue& q) {
    uint64_t from = 0;
    size_t limit = 0;
    if (!q.NextPage(&from, &limit)) return false;
    ++pages;
    std::vector<core::Event> page = log.Since(from, limit);
    const uint64_t next = page.empty() ? log.end_index() : page.back().index + 1;
    q.AddPage(page, next, log.end_index());
    return true;
  }
  void Pages(WatchQueue& q) {
    while (Page(q)) {
    }
  }
  // The watcher takes the front event, and the stream reads the log if the queue asks.
  uint64_t Take(WatchQueue& q) {
    const uint64_t index = q.front().index;
    q.pop_front();
    Pages(q);
    return index;
  }
  std::vector<uint64_t> Drain(WatchQueue& q) {
    std::vector<uint64_t> out;
    Pages(q);
    while (!q.empty()) out.push_back(Take(q));
    return out;
  }

  EventLog log;
  size_t pages = 0;
};

std::vector<uint64_t> Range(uint64_t first, uint64_t end) {
  std::vector<uint64_t> out;
  for (uint64_t i = first; i < end; ++i) out.push_back(i);
  return out;
}

TEST(WatchQueueTest, AReplayLargerThanTheBoundIsReadFromTheLogAPageAtATime) {
  // The contract test's case: 20,003 events held, ~1.2 KiB each, against the default 16 MiB.
  const std::string detail(1000, 'x');
  constexpr size_t kBound = 16 << 20;
  FakeLog log;
  size_t held_bytes = 0;
  for (int i = 0; i < 20003; ++i) {
    held_bytes += WatchQueue::EventBytes(log.Append({Ev("j", detail)})[0]);
  }
  ASSERT_GT(held_bytes, kBound);
  WatchQueue q("", {}, kBound);
  q.Start(/*first_live=*/20003, /*replay=*/true);
  log.Pages(q);
  // One page is queued, not the backlog.
  EXPECT_EQ(q.size(), WatchQueue::kPageEvents);
  EXPECT_EQ(q.next_index(), WatchQueue::kPageEvents);
  EXPECT_EQ(log.pages, 1u);
  // The watcher reads; 5,000 live events arrive halfway (left in the log: the queue is behind),
  // then 3 more once it has caught up (queued at once).
  std::vector<uint64_t> got;
  size_t most_bytes = 0;
  size_t most_events = 0;
  while (!q.empty()) {
    most_bytes = std::max(most_bytes, q.bytes());
    most_events = std::max(most_events, q.size());
    got.push_back(log.Take(q));
    if (got.size() == 10000) {
      const uint64_t next = q.next_index();
      for (int i = 0; i < 5000; ++i) log.Record(q, {Ev("j", detail)});
      EXPECT_EQ(q.next_index(), next);  // behind the log: none of them queued
    }
  }
  EXPECT_EQ(q.next_index(), 25003u);
  log.Record(q, {Ev(), Ev(), Ev()});
  EXPECT_EQ(q.size(), 3u);
  while (!q.empty()) got.push_back(log.Take(q));
  EXPECT_EQ(got, Range(0, 25006));
  EXPECT_TRUE(q.status().ok()) << q.status();
  EXPECT_LT(most_events, 2 * WatchQueue::kPageEvents);
  EXPECT_LE(most_bytes, kBound / 2);
  EXPECT_EQ(log.pages, 25003 / WatchQueue::kPageEvents + 1);
}

TEST(WatchQueueTest, AWatcherThatTakesNothingIsEndedWithResourceExhausted) {
  // Replaying 100 events with room for 4: a page of 2 is queued; it never takes one. 4 live
  // events recorded while it takes none are allowed, the 5th ends it.
  FakeLog log;
  for (int i = 0; i < 100; ++i) log.Append({Ev()});
  WatchQueue q("", {}, 0, /*max_events=*/4, /*page_events=*/2);
  q.Start(100, /*replay=*/true);
  log.Pages(q);
  EXPECT_EQ(q.size(), 2u);
  for (int i = 0; i < 4; ++i) log.Record(q, {Ev()});
  EXPECT_TRUE(q.status().ok()) << q.status();
  EXPECT_EQ(q.size(), 2u);  // the live ones stay in the log
  log.Record(q, {Ev()});
  EXPECT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(q.status().message(), "watch again with replay")) << q.status();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_FALSE(log.Page(q));
  log.Record(q, {Ev()});
  EXPECT_TRUE(q.empty());
}

TEST(WatchQueueTest, OverTheByteBoundSinceTheLastTakeItEnds) {
  const std::string detail(1000, 'x');
  const size_t one = WatchQueue::EventBytes(Ev("j", detail));
  FakeLog log;
  WatchQueue q("", {}, 3 * one);
  q.Start(0, false);
  log.Record(q, {Ev("j", detail), Ev("j", detail)});
  EXPECT_EQ(log.Take(q), 0u);  // the watcher took event 0
  log.Record(q, {Ev("j", detail), Ev("j", detail)});
  EXPECT_TRUE(q.status().ok());
  EXPECT_EQ(q.bytes(), 3 * one);
  log.Record(q, {Ev("j", detail)});  // the 3rd since the take: still at the bound, left in the log
  EXPECT_TRUE(q.status().ok());
  EXPECT_EQ(q.bytes(), 3 * one);
  log.Record(q, {Ev("j", detail)});  // the 4th: over it
  EXPECT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(q.status().message(), "skip events up to index 0")) << q.status();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.bytes(), 0u);
}

TEST(WatchQueueTest, ALiveBurstPastTheBoundStaysInTheLogAndReachesAReader) {
  FakeLog log;
  WatchQueue q("", {}, 0, /*max_events=*/4, /*page_events=*/2);
  q.Start(0, false);
  log.Record(q, {Ev(), Ev(), Ev()});
  EXPECT_EQ(log.Take(q), 0u);
  log.Record(q, {Ev(), Ev(), Ev(), Ev()});  // 3 and 4 fit; 5 and 6 stay in the log
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.next_index(), 5u);
  EXPECT_TRUE(q.status().ok()) << q.status();
  EXPECT_EQ(log.Drain(q), Range(1, 7));
  EXPECT_EQ(log.pages, 1u);
  log.Record(q, {Ev()});  // caught up again: queued at once
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(log.Drain(q), Range(7, 8));
}

TEST(WatchQueueTest, EventsDroppedFromTheLogBeforeTheWatcherReachedThemEndItWithOutOfRange) {
  FakeLog log(/*capacity=*/4);
  WatchQueue q("a", {}, 0, /*max_events=*/2, /*page_events=*/2);
  q.Start(0, false);
  log.Record(q, {Ev("a"), Ev("a")});
  EXPECT_EQ(log.Take(q), 0u);
  log.Record(q, {Ev("a")});                              // queued: [1, 2]
  log.Record(q, {Ev("a")});                              // 3: no room, left in the log
  for (int i = 0; i < 6; ++i) log.Record(q, {Ev("b")});  // 4..9, another job's
  EXPECT_EQ(log.log.first_index(), 6u);                  // 3, 4 and 5 are gone
  EXPECT_EQ(q.front().index, 1u);
  q.pop_front();
  EXPECT_EQ(q.front().index, 2u);
  q.pop_front();
  log.Pages(q);
  EXPECT_EQ(q.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(q.status().message(),
            "events 3 to 5 (3 events) were dropped from the coordinator's event log before this "
            "watcher reached them; watch again with replay and skip events up to index 2");
  EXPECT_TRUE(q.empty());
}

TEST(WatchQueueTest, ReplayStartsAtTheOldestEventHeld) {
  FakeLog log(/*capacity=*/4);
  for (int i = 0; i < 10; ++i) log.Append({Ev()});
  WatchQueue q("", {}, 0);
  q.Start(10, /*replay=*/true);
  EXPECT_EQ(log.Drain(q), Range(6, 10));
  EXPECT_TRUE(q.status().ok()) << q.status();
}

TEST(WatchQueueTest, EventsDeliveredBeforeRegistrationReturnedAreQueuedOnce) {
  FakeLog log;
  for (int i = 0; i < 5; ++i) log.Append({Ev()});
  WatchQueue q("", {}, 0);
  // Events 3 and 4 were recorded before the watcher registered, so they are in the log, but
  // their fan-out reached the new sink too, before AddEventSink returned first_live = 5; event 5
  // is the first live one.
  std::vector<core::Event> late = log.log.Since(3);
  q.AddLive(late);
  log.Record(q, {Ev()});
  EXPECT_TRUE(q.empty());  // held until Start
  q.Start(5, /*replay=*/true);
  q.AddLive({late[1]});  // a late fan-out of 4 again: dropped
  log.Record(q, {Ev()});
  EXPECT_EQ(log.Drain(q), Range(0, 7));
}

TEST(WatchQueueTest, LiveEventsDeliveredWhileAPageIsReadComeOnce) {
  FakeLog log;
  for (int i = 0; i < 5; ++i) log.Append({Ev()});
  WatchQueue q("", {}, 0, WatchQueue::kMaxQueuedEvents, /*page_events=*/2);
  q.Start(5, /*replay=*/true);
  // A page is read (0, 1; the log ends at 5), and 5 and 6 are delivered before it is added.
  uint64_t from = 0;
  size_t limit = 0;
  ASSERT_TRUE(q.NextPage(&from, &limit));
  EXPECT_EQ(from, 0u);
  EXPECT_EQ(limit, 2u);
  EXPECT_FALSE(q.NextPage(&from, &limit));  // one page at a time
  const std::vector<core::Event> page = log.log.Since(0, 2);
  log.Record(q, {Ev(), Ev()});
  q.AddPage(page, 2, 5);
  // A page that reads 7 before its delivery: the delivery is dropped.
  std::vector<core::Event> undelivered = log.Append({Ev()});
  EXPECT_EQ(log.Drain(q), Range(0, 8));
  q.AddLive(undelivered);
  EXPECT_TRUE(q.empty());
  log.Record(q, {Ev()});
  EXPECT_EQ(log.Drain(q), Range(8, 9));
}

TEST(WatchQueueTest, WithoutReplayOnlyLiveEvents) {
  FakeLog log;
  for (int i = 0; i < 4; ++i) log.Append({Ev()});
  WatchQueue q("", {}, 0);
  q.AddLive(log.log.Since(3));
  q.Start(4, /*replay=*/false);
  log.Record(q, {Ev()});
  EXPECT_EQ(log.Drain(q), Range(4, 5));
  EXPECT_EQ(log.pages, 0u);
}

TEST(WatchQueueTest, FiltersByJobAndKind) {
  FakeLog log;
  core::Event other_kind = Ev("a");
  other_kind.kind = core::EventKind::kCheckin;
  log.Append({Ev("a"), other_kind, Ev("b")});
  WatchQueue q("a", {"release"}, 0, /*max_events=*/2, /*page_events=*/1);
  q.Start(3, /*replay=*/true);
  log.Record(q, {Ev("b"), Ev("a")});
  EXPECT_THAT(log.Drain(q), ElementsAre(0, 4));
  // Events the filter drops never count against the bound.
  for (int i = 0; i < 10; ++i) log.Record(q, {Ev("b"), other_kind});
  EXPECT_TRUE(q.status().ok()) << q.status();
  EXPECT_TRUE(q.empty());
}

// WatchEvents over real gRPC (127.0.0.1, port 0): a coordinator holding more events than a
// watcher's bound replays every one of them to a watcher that reads; one that never reads is
// ended with RESOURCE_EXHAUSTED. Events are kRejected ones (RecordRejected), ~1.2 KiB each.
class WatchEventsTest : public ::testing::Test {
 protected:
  static constexpr size_t kBound = 16 << 20;  // --watch_queue_bytes' default
  static constexpr uint64_t kHeld = 20003;    // the contract test's backlog

  void SetUp() override {
    serve::StreamLimits limits;
    limits.watch_queue_bytes = kBound;
    limits.counters = &counters_;
    service_ = std::make_unique<CoordinatorService>(&coordinator_, &rendezvous_, limits);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    // Without BDP probing the client's receive window stays at HTTP/2's 64 KiB, so a watcher
    // that does not read stalls the server's writes after that much.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    stub_ = v1::Coordinator::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Records `n` events of job "w", each with a ~1 KiB detail.
  void Record(uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
      coordinator_.RecordRejected("w", absl::InvalidArgumentError(std::string(1000, 'x')));
    }
  }
  // What the events held now count for against the bound.
  size_t HeldBytes() {
    uint64_t next = 0;
    size_t bytes = 0;
    for (const core::Event& e : coordinator_.EventsSince(0, &next)) {
      bytes += WatchQueue::EventBytes(e);
    }
    return bytes;
  }

  serve::FakeClock clock_;
  Coordinator coordinator_{CoordinatorOptions(), &clock_};
  RendezvousStore rendezvous_{RendezvousLimits(),
                              [](const std::string&, uint64_t, const RendezvousStore::Caller&) {
                                return absl::OkStatus();
                              }};
  serve::StreamCounters counters_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

TEST_F(WatchEventsTest, AReaderGetsAReplayLargerThanItsBoundInOrderExactlyOnce) {
  Record(kHeld);
  ASSERT_GT(HeldBytes(), kBound);  // the backlog alone is over the bound
  grpc::ClientContext context;
  v1::WatchEventsRequest request;
  request.set_job_id("w");
  request.set_replay(true);
  std::unique_ptr<grpc::ClientReader<v1::Event>> watcher = stub_->WatchEvents(&context, request);
  uint64_t expected = 0;
  v1::Event event;
  // Half the backlog, then 5,000 live events recorded while the watcher reads nothing, then the
  // rest of the backlog and the live events, then 3 more live ones: indices 0..25005, each once.
  for (; expected < kHeld / 2; ++expected) {
    ASSERT_TRUE(watcher->Read(&event))
        << "after " << expected << " events: " << watcher->Finish().error_message();
    ASSERT_EQ(event.index(), expected);
  }
  Record(5000);
  for (; expected < kHeld + 5000; ++expected) {
    ASSERT_TRUE(watcher->Read(&event))
        << "after " << expected << " events: " << watcher->Finish().error_message();
    ASSERT_EQ(event.index(), expected);
    ASSERT_EQ(event.kind(), "rejected");
  }
  Record(3);
  for (; expected < kHeld + 5003; ++expected) {
    ASSERT_TRUE(watcher->Read(&event))
        << "after " << expected << " events: " << watcher->Finish().error_message();
    ASSERT_EQ(event.index(), expected);
  }
  EXPECT_EQ(expected, 25006u);
  EXPECT_EQ(counters_.overflows.load(), 0u);
  context.TryCancel();
  EXPECT_FALSE(watcher->Read(&event));  // nothing more, and nothing twice
  EXPECT_EQ(watcher->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(WatchEventsTest, AWatcherThatNeverReadsIsEndedWithResourceExhausted) {
  Record(kHeld);
  grpc::ClientContext context;
  v1::WatchEventsRequest request;
  request.set_job_id("w");
  request.set_replay(true);
  std::unique_ptr<grpc::ClientReader<v1::Event>> watcher = stub_->WatchEvents(&context, request);
  // Live events until the watcher, which reads nothing, is ended: it takes no more than its
  // 64 KiB window and what the sockets hold, then more than 16 MiB of events go by it.
  uint64_t recorded = 0;
  while (counters_.overflows.load() == 0) {
    ASSERT_LT(recorded, 200000u) << "the watcher was never ended";
    Record(1);
    ++recorded;
  }
  EXPECT_EQ(counters_.overflows.load(), 1u);
  // Ended by the first event past 16 MiB of them recorded since it last took one, not before.
  uint64_t next = 0;
  const size_t one = WatchQueue::EventBytes(coordinator_.EventsSince(0, &next, 1).at(0));
  EXPECT_GE(recorded, kBound / one + 1);
  // What reached the transport before the end comes in order from index 0, each once.
  uint64_t expected = 0;
  v1::Event event;
  while (watcher->Read(&event)) {
    ASSERT_EQ(event.index(), expected);
    ++expected;
  }
  EXPECT_LT(expected, kHeld);
  const grpc::Status end = watcher->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_TRUE(absl::StrContains(end.error_message(),
                                "watch again with replay and skip events up to index "))
      << end.error_message();
}

}  // namespace
}  // namespace psync::server
