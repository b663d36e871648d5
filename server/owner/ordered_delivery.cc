#include "server/owner/ordered_delivery.h"

#include <algorithm>
#include <utility>

#include "server/owner/session_sink.h"
#include "server/owner/timed_lock.h"

namespace psync::server {

namespace {

// A delivery thread's least share of a decision's streams (fewer streams are written by the
// delivering thread alone: a hand-over costs about a wake-up, a few writes' worth).
constexpr size_t kStreamsPerDeliveryThread = 16;

}  // namespace

OrderedDelivery::OrderedDelivery(size_t event_log_capacity, int delivery_threads)
    : events_(event_log_capacity), fan_out_(delivery_threads) {}

void OrderedDelivery::Commit(Effects* effects) {
  // The log keeps the vector as it is: its unused capacity would be kept with it.
  std::vector<core::Event>& events = effects->events;
  if (events.capacity() > events.size() + events.size() / 2 + 8) events.shrink_to_fit();
  absl::MutexLock lock(&log_mu_);
  effects->committed = events_.Append(std::move(effects->events), &effects->dropped_events);
  effects->events.clear();
  if (effects->committed != nullptr || effects->has_notices() || !effects->closes.empty()) {
    effects->order = ++last_order_;
  }
  if (effects->has_notices()) effects->committed_ns = SteadyNanos();
}

void OrderedDelivery::Deliver(Effects& effects) {
  if (effects.order == 0) return;
  {
    absl::MutexLock lock(&deliver_mu_);
    const uint64_t order = effects.order;
    ready_.emplace(order, std::move(effects));
    if (delivering_) return;  // the thread delivering now delivers this one too, in turn
    delivering_ = true;
  }
  for (;;) {
    Effects next;
    {
      absl::MutexLock lock(&deliver_mu_);
      auto it = ready_.find(next_delivery_);
      if (it == ready_.end()) {  // its decider has not handed it over yet: the decider delivers it
        delivering_ = false;
        return;
      }
      next = std::move(it->second);
      ready_.erase(it);
      ++next_delivery_;
    }
    const int64_t start = SteadyNanos();
    DeliverNow(next);
    const int64_t done = SteadyNanos();
    delivering_ns_.fetch_add(done - start, std::memory_order_relaxed);
    if (next.has_notices()) {
      absl::MutexLock lock(&sinks_mu_);
      if (observe_delivered_) observe_delivered_(absl::Nanoseconds(done - next.committed_ns));
    }
  }
}

void OrderedDelivery::DeliverNow(Effects& effects) {
  // Sinks of their own get their notices in decision order. Each transport (a node agent's stream,
  // a relay's, a Session's) gets its runs of notices, each with its ranks, under one cork, so that
  // its notices leave as one message; the transports are shared out over the delivery threads,
  // each queueing its notices and starting its write (serializing it and handing it to the
  // kernel, about 15 us). A transport's notices are queued by one thread, in decision order,
  // before it is uncorked, so what each stream sends does not depend on which thread wrote it.
  for (const auto& [sink, notice] : effects.notices) sink->Send(*notice);
  const std::vector<TransportNotices>& transports = effects.transport_notices;
  fan_out_.Run(transports.size(), kStreamsPerDeliveryThread, [&](size_t first, size_t last) {
    for (size_t t = first; t < last; ++t) {
      NoticeBatcher* transport = transports[t].transport;
      transport->Cork();
      for (const TransportNotices::Run& run : transports[t].runs) {
        transport->SendToRanks(run.job_id, run.ranks, *run.notice);
      }
      transport->Uncork();
    }
  });
  for (auto& [sink, status] : effects.closes) sink->Close(status);
  if (effects.committed != nullptr) {
    absl::MutexLock lock(&sinks_mu_);
    for (EventSink* sink : event_sinks_) sink->OnEvents(*effects.committed);
  }
}

uint64_t OrderedDelivery::AddEventSink(EventSink* sink, std::vector<core::Event>* backlog) {
  absl::ReaderMutexLock lock(&log_mu_);
  absl::MutexLock sinks_lock(&sinks_mu_);
  event_sinks_.push_back(sink);
  if (backlog != nullptr) *backlog = events_.Since(events_.first_index());
  return events_.end_index();
}

void OrderedDelivery::RemoveEventSink(EventSink* sink) {
  absl::MutexLock lock(&sinks_mu_);
  event_sinks_.erase(std::remove(event_sinks_.begin(), event_sinks_.end(), sink),
                     event_sinks_.end());
}

std::vector<core::Event> OrderedDelivery::EventsSince(uint64_t from, uint64_t* next, size_t limit,
                                                      uint64_t* end) const {
  absl::ReaderMutexLock lock(&log_mu_);
  std::vector<core::Event> events = events_.Since(from, limit);
  *next = events.empty() ? events_.end_index() : events.back().index + 1;
  if (end != nullptr) *end = events_.end_index();
  return events;
}

std::vector<core::Event> OrderedDelivery::EventsOf(const std::string& job_id) const {
  std::vector<core::Event> events;
  absl::ReaderMutexLock lock(&log_mu_);
  events_.ForEach([&](const core::Event& e) {
    if (e.job_id == job_id) events.push_back(e);
  });
  return events;
}

}  // namespace psync::server
