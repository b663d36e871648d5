// OrderedDelivery: the owner's one order over every decision of every job. It keeps the event log,
// numbers each committed Effects in decision order, and delivers them in that order after the
// deciding locks are released: notices to sessions (a decision naming many streams is fanned out
// over a few threads, fan_out.h), then session closes, then events to the event sinks.
//
// Commit is called at the end of the locked scope that decided (with the job's lock still held),
// so that the log's order and the delivery order are the order of decisions; Deliver after
// unlocking. One thread at a time delivers: a caller that finds another delivering leaves its
// Effects to it (a sink that calls back into the owner from Send does not wait for itself).
// An Effects with an order must be passed to Deliver, or later ones are held back.
//
// Thread-safe. Three locks, taken in this order: the log's, the ready queue's, the sinks'. Sinks
// are not owned and must not block.
#ifndef PSYNC_SERVER_OWNER_ORDERED_DELIVERY_H_
#define PSYNC_SERVER_OWNER_ORDERED_DELIVERY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/core/types.h"
#include "server/owner/effects.h"
#include "server/owner/event_log.h"
#include "server/owner/fan_out.h"

namespace psync::server {

// Receives events as they are recorded (after the owner's locks are released), in decision order
// over every job. Must not block.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnEvents(const std::vector<core::Event>& events) = 0;
};

class OrderedDelivery {
 public:
  // `event_log_capacity`: events kept in memory (oldest dropped first). `delivery_threads`:
  // threads, besides the delivering one, that write a decision's notices when it names many
  // streams.
  OrderedDelivery(size_t event_log_capacity, int delivery_threads);
  OrderedDelivery(const OrderedDelivery&) = delete;
  OrderedDelivery& operator=(const OrderedDelivery&) = delete;

  // Moves effects->events into the log as one batch (effects->committed) and gives `effects` its
  // order when it has anything to deliver. Once per Effects, before its deciding locks are let go.
  void Commit(Effects* effects) ABSL_LOCKS_EXCLUDED(log_mu_);
  // Hands `effects` (moved from) over for delivery in order; delivers every ready Effects in turn
  // unless another thread is delivering now. Call holding none of the owner's locks.
  void Deliver(Effects& effects) ABSL_LOCKS_EXCLUDED(deliver_mu_);

  // `sink` receives every event committed from now on until removed. If `backlog` is not null it
  // receives the events still held in memory. Returns the index of the first live event: the sink
  // may be handed a few events with smaller indices (also in the backlog) and should drop them.
  uint64_t AddEventSink(EventSink* sink, std::vector<core::Event>* backlog)
      ABSL_LOCKS_EXCLUDED(log_mu_, sinks_mu_);
  void RemoveEventSink(EventSink* sink) ABSL_LOCKS_EXCLUDED(sinks_mu_);

  // The first `limit` logged events with index >= `from`, oldest first; `next` receives the index
  // after the last one returned (or the next index to be given when none is), `end` (when not null)
  // the next index to be given.
  std::vector<core::Event> EventsSince(uint64_t from, uint64_t* next, size_t limit,
                                       uint64_t* end) const ABSL_LOCKS_EXCLUDED(log_mu_);
  // Every logged event of `job_id`, oldest first.
  std::vector<core::Event> EventsOf(const std::string& job_id) const ABSL_LOCKS_EXCLUDED(log_mu_);

  // Called on the delivering thread after each Effects with notices was delivered, with the time
  // since it was committed: how long its decisions' notices (one message's: a batch that completes
  // several chunks releases them together) took to reach their streams' queues (the wait for
  // earlier deliveries, and their own fan-out). Must be cheap (it runs under
  // the sinks' lock) and not call back into the owner. Empty: none.
  void SetDeliveredObserver(std::function<void(absl::Duration since_decision)> observe)
      ABSL_LOCKS_EXCLUDED(sinks_mu_) {
    absl::MutexLock lock(&sinks_mu_);
    observe_delivered_ = std::move(observe);
  }

  // Time spent delivering since construction (one thread at a time delivers).
  absl::Duration delivering() const {
    return absl::Nanoseconds(delivering_ns_.load(std::memory_order_relaxed));
  }

 private:
  void DeliverNow(Effects& effects) ABSL_LOCKS_EXCLUDED(deliver_mu_);

  mutable absl::Mutex log_mu_;
  EventLog events_ ABSL_GUARDED_BY(log_mu_);
  uint64_t last_order_ ABSL_GUARDED_BY(log_mu_) = 0;
  // Effects handed over and not yet delivered, by order; the next order to deliver; whether a
  // thread is delivering.
  absl::Mutex deliver_mu_ ABSL_ACQUIRED_AFTER(log_mu_);
  absl::flat_hash_map<uint64_t, Effects> ready_ ABSL_GUARDED_BY(deliver_mu_);
  uint64_t next_delivery_ ABSL_GUARDED_BY(deliver_mu_) = 1;
  bool delivering_ ABSL_GUARDED_BY(deliver_mu_) = false;
  FanOut fan_out_;  // used by the delivering thread only
  std::atomic<int64_t> delivering_ns_{0};
  absl::Mutex sinks_mu_ ABSL_ACQUIRED_AFTER(log_mu_, deliver_mu_);
  std::vector<EventSink*> event_sinks_ ABSL_GUARDED_BY(sinks_mu_);
  std::function<void(absl::Duration)> observe_delivered_ ABSL_GUARDED_BY(sinks_mu_);
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_ORDERED_DELIVERY_H_
