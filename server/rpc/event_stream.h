// EventStream: the server side of one WatchEvents call. Registers as an EventSink of the
// Coordinator, filters by job and kinds, and writes the matching events one at a time, in index
// order, each once. What it holds for one watcher is bounded by `limits.watch_queue_bytes` (or
// WatchQueue::kMaxQueuedEvents events): the events it cannot hold stay in the coordinator's event
// log, and it reads them from there by index (Coordinator::EventsSince), a page at a time, as the
// watcher takes what is queued. So replay (the events held when the watch started) and any burst
// past the bound reach a watcher that reads, however many there are.
//
// A watcher that does not read is ended with RESOURCE_EXHAUSTED: once more matching events than
// the bound (bytes or count) are recorded while it takes none. A watcher that reads more slowly
// than the log turns over is ended with OUT_OF_RANGE when the next event it needs was dropped from
// the log (it keeps the last CoordinatorOptions::event_log_capacity); the status names the
// indices lost. Either way it watches again (with replay) and skips the indices it already saw.
//
// Owned by gRPC: deletes itself in OnDone.
#ifndef PSYNC_SERVER_RPC_EVENT_STREAM_H_
#define PSYNC_SERVER_RPC_EVENT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/stream_writer.h"
#include "server/owner/coordinator.h"

namespace psync::server {

grpc::ServerWriteReactor<v1::Event>* NewEventStream(Coordinator* coordinator,
                                                    const v1::WatchEventsRequest& request,
                                                    const serve::StreamLimits& limits);

// The events waiting to go down one watcher, in index order, each once, and where the next ones
// come from. Pure (the caller reads the log); thread-compatible (EventStream serializes access).
//
// The queue is a window on the event log: every event with index below next_index() has been
// queued (or did not match the filter); those from next_index() on are still to come, live or
// from the log. Live events (AddLive) are queued at once only while the queue has caught up with
// them and has room; otherwise they are left in the log, and NextPage() asks for them: the caller
// reads EventsSince(from, &next, limit, &end) and hands the answer to AddPage. NextPage asks only
// when the queue is under its low-water mark (fewer than `page_events` events and at most half of
// `max_bytes`), so a replay of any length holds about one page at a time.
//
// Registration races with delivery: live events delivered before Start() are held until then;
// events below AddEventSink's first live index (delivered late, and also in the log) are dropped.
//
// Ends (status() not OK; the queue is then empty and takes nothing more):
//  * RESOURCE_EXHAUSTED: more than `max_events` matching live events, or more than `max_bytes`
//    of them (EventBytes; 0: no byte bound), arrived since the watcher last took one (pop_front).
//  * OUT_OF_RANGE: a page shows that events the watcher had not reached were dropped from the
//    log; the message names their indices.
// What is queued never exceeds max_events events, nor max_bytes bytes unless one event alone does.
class WatchQueue {
 public:
  static constexpr size_t kMaxQueuedEvents = 65536;
  static constexpr size_t kPageEvents = 1024;

  // `job_id` empty: every job; `kinds` empty: every kind.
  WatchQueue(std::string job_id, absl::flat_hash_set<std::string> kinds, size_t max_bytes,
             size_t max_events = kMaxQueuedEvents, size_t page_events = kPageEvents);

  // Once, with AddEventSink's result (the index of the first live event). `replay`: start at the
  // oldest event the log holds; otherwise at first_live.
  void Start(uint64_t first_live, bool replay);
  // Live events, in index order, as delivered to the EventSink.
  void AddLive(const std::vector<core::Event>& events);

  // True when events must be read from the log: the caller reads up to *limit events from index
  // *from and calls AddPage with the answer. No other page is asked for until then.
  bool NextPage(uint64_t* from, size_t* limit);
  // The answer to the page NextPage asked for: Coordinator::EventsSince's events, `next` and `end`.
  void AddPage(const std::vector<core::Event>& events, uint64_t next, uint64_t end);
  // Whether a page was asked for and not yet added.
  bool paging() const { return paging_; }

  bool empty() const { return queue_.empty(); }
  const core::Event& front() const { return queue_.front(); }
  // The watcher takes the front event.
  void pop_front();
  // Drops what is queued; nothing is queued afterwards (the stream is finishing).
  void Stop();

  // OK, or why the watcher is to be ended (see the class comment).
  const absl::Status& status() const { return status_; }
  size_t bytes() const { return bytes_; }
  size_t size() const { return queue_.size(); }
  // The index of the first event not yet queued (or filtered out).
  uint64_t next_index() const { return next_; }

  // What one queued event counts for against max_bytes: its size and the text it holds.
  static size_t EventBytes(const core::Event& e);

 private:
  bool Matches(const core::Event& e) const;
  bool HasRoom(size_t bytes) const;
  void Queue(const core::Event& e, size_t bytes);
  void Live(const core::Event& e);
  void End(absl::Status status);
  std::string SkipHint() const;

  // Constant after construction.
  const std::string job_id_;
  const absl::flat_hash_set<std::string> kinds_;
  const size_t max_bytes_;
  const size_t max_events_;
  const size_t page_events_;

  bool started_ = false;
  std::vector<core::Event> early_;  // live events delivered before Start
  uint64_t first_live_ = 0;
  uint64_t next_ = 0;         // the first index not yet examined
  uint64_t end_ = 0;          // past the newest index known to exist (live, or in a page)
  bool replay_head_ = false;  // the next page is a replay's first: it starts at the oldest kept
  bool paging_ = false;
  std::deque<core::Event> queue_;
  size_t bytes_ = 0;
  // Matching live events since the watcher last took one.
  size_t unread_events_ = 0;
  size_t unread_bytes_ = 0;
  bool stopped_ = false;
  absl::Status status_;
  uint64_t last_index_ = 0;  // of the last event taken by pop_front
  bool took_any_ = false;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_EVENT_STREAM_H_
