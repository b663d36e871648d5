#include "server/owner/event_log.h"

#include <algorithm>
#include <utility>

namespace psync::server {

EventLog::Batch EventLog::Append(std::vector<core::Event> events, std::vector<Batch>* dropped) {
  if (events.empty()) return nullptr;
  uint64_t index = end_index();
  size_t weight = 0;
  for (core::Event& e : events) {
    e.index = index++;
    const bool merged = e.kind == core::EventKind::kCheckin || e.kind == core::EventKind::kSyncDone;
    weight += merged ? std::max<size_t>(core::RankCount(e), 1) : 1;
  }
  const size_t size = events.size();
  auto batch = std::make_shared<const std::vector<core::Event>>(std::move(events));
  batches_.push_back({batch, weight, size});
  size_ += size;
  weight_ += weight;
  while (weight_ > capacity_) {
    Kept& front = batches_.front();
    size_ -= front.size;
    dropped_ += front.size;
    weight_ -= front.weight;
    if (dropped != nullptr) dropped->push_back(std::move(front.batch));
    batches_.pop_front();
  }
  return batch;
}

std::vector<core::Event> EventLog::Since(uint64_t from, size_t limit) const {
  std::vector<core::Event> out;
  uint64_t index = dropped_;
  for (const Kept& k : batches_) {
    const Batch& b = k.batch;
    if (out.size() >= limit) break;
    if (index + b->size() <= from) {
      index += b->size();
      continue;
    }
    for (const core::Event& e : *b) {
      if (out.size() >= limit) break;
      if (index++ >= from) out.push_back(e);
    }
  }
  return out;
}

}  // namespace psync::server
