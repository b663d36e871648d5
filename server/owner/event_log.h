// EventLog: the coordinator's in-memory log of recent events, kept in the batches they were
// decided in, so that one decision's events are stored once and shared with the event sinks
// instead of copied per event.
//
// Events are numbered from 0 in the order appended (Event::index). The log keeps at most
// `capacity` events, dropping the oldest whole batches first; a merged check-in or SyncDone
// (core::Event, several ranks) counts as its ranks there, so that the capacity bounds memory as
// it did with one event per rank, while the merged event takes one index.
//
// Thread-safety: none; the owner serializes access (the coordinator's mutex). Batches returned
// by Append are immutable and may be read from any thread.
#ifndef PSYNC_SERVER_OWNER_EVENT_LOG_H_
#define PSYNC_SERVER_OWNER_EVENT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "server/core/types.h"

namespace psync::server {

class EventLog {
 public:
  using Batch = std::shared_ptr<const std::vector<core::Event>>;

  explicit EventLog(size_t capacity) : capacity_(capacity) {}

  // Numbers `events` in order, keeps them and returns them as one shared batch (null when empty).
  // The oldest batches it drops to stay within capacity are appended to `dropped` when given, so
  // that the caller destroys them after letting its locks go (a dropped batch is a few thousand
  // events that left the cache long ago); else they are destroyed here.
  Batch Append(std::vector<core::Event> events, std::vector<Batch>* dropped = nullptr);

  // Index of the oldest event kept, and the index the next event will get.
  uint64_t first_index() const { return dropped_; }
  uint64_t end_index() const { return dropped_ + size_; }

  // Copies of the first `limit` kept events with index >= from, oldest first.
  std::vector<core::Event> Since(uint64_t from, size_t limit = SIZE_MAX) const;

  // Calls fn(const core::Event&) for every kept event, oldest first.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Kept& k : batches_) {
      for (const core::Event& e : *k.batch) fn(e);
    }
  }

 private:
  struct Kept {
    Batch batch;
    size_t weight;  // its events, a merged one counting as its ranks
    size_t size;    // batch->size(), kept here: a batch dropped has long left the cache
  };
  const size_t capacity_;
  std::deque<Kept> batches_;
  size_t size_ = 0;       // events in batches_
  size_t weight_ = 0;     // their weight
  uint64_t dropped_ = 0;  // events dropped from the front
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_EVENT_LOG_H_
