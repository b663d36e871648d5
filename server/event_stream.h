// EventStream: the server side of one WatchEvents call. Registers as an EventSink of the
// Coordinator, filters by job and kinds, queues matching events (WatchQueue) and writes them one at
// a time. A watcher has nothing to read that could be paused, so one whose queue holds more than
// `limits.watch_queue_bytes` (or WatchQueue::kMaxQueuedEvents events) is ended at once with
// RESOURCE_EXHAUSTED, its queue dropped: a slow client never holds memory without bound. It watches
// again (with replay) and skips the events whose index it already saw. Owned by gRPC: deletes
// itself in OnDone.
#ifndef PSYNC_SERVER_EVENT_STREAM_H_
#define PSYNC_SERVER_EVENT_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/coordinator.h"
#include "server/stream_writer.h"

namespace psync::server {

grpc::ServerWriteReactor<v1::Event>* NewEventStream(Coordinator* coordinator,
                                                    const v1::WatchEventsRequest& request,
                                                    const StreamLimits& limits);

// The events waiting to go down one watcher, in index order, each once. Pure; thread-compatible
// (EventStream serializes access).
//
// Registration races with delivery: the coordinator may hand the sink live events before
// AddEventSink returned the index of the first live one, and some of those (index below it) are
// also in the backlog. So live events delivered before Start() are held, and Start() queues the
// backlog, then those held events at or after first_live; after Start, live events below
// first_live are dropped. Every event is queued once.
//
// Bounded: past max_events events or max_bytes bytes (EventBytes) the queue overflows: it is
// emptied, overflowed() turns true and nothing is queued any more.
class WatchQueue {
 public:
  static constexpr size_t kMaxQueuedEvents = 65536;

  // `job_id` empty: every job; `kinds` empty: every kind. max_bytes 0: bounded by count only.
  WatchQueue(std::string job_id, absl::flat_hash_set<std::string> kinds, size_t max_bytes,
             size_t max_events = kMaxQueuedEvents);

  // Once, with AddEventSink's result: the backlog (replay) and the index of the first live event.
  void Start(uint64_t first_live, const std::vector<core::Event>& backlog);
  // Live events, as delivered to the EventSink.
  void AddLive(const std::vector<core::Event>& events);

  bool empty() const { return queue_.empty(); }
  const core::Event& front() const { return queue_.front(); }
  void pop_front();
  // Drops what is queued; nothing is queued afterwards (the stream is finishing).
  void Stop();

  bool overflowed() const { return overflowed_; }
  // Why the queue overflowed, for the RESOURCE_EXHAUSTED status.
  std::string OverflowMessage() const;
  size_t bytes() const { return bytes_; }

  // What one queued event counts for against max_bytes: its size and the text it holds.
  static size_t EventBytes(const core::Event& e);

 private:
  bool Matches(const core::Event& e) const;
  void Queue(const core::Event& e);

  const std::string job_id_;
  const absl::flat_hash_set<std::string> kinds_;
  const size_t max_bytes_;
  const size_t max_events_;
  bool started_ = false;
  uint64_t first_live_ = 0;
  std::vector<core::Event> early_;  // live events delivered before Start
  std::deque<core::Event> queue_;
  size_t bytes_ = 0;
  bool stopped_ = false;
  bool overflowed_ = false;
  uint64_t last_index_ = 0;  // of the last event taken by pop_front
  bool took_any_ = false;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_EVENT_STREAM_H_
