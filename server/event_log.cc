#include "server/event_log.h"

#include <utility>

namespace psync::server {

EventLog::Batch EventLog::Append(std::vector<core::Event> events) {
  if (events.empty()) return nullptr;
  uint64_t index = end_index();
  for (core::Event& e : events) e.index = index++;
  auto batch = std::make_shared<const std::vector<core::Event>>(std::move(events));
  batches_.push_back(batch);
  size_ += batch->size();
  while (size_ > capacity_) {
    size_ -= batches_.front()->size();
    dropped_ += batches_.front()->size();
    batches_.pop_front();
  }
  return batch;
}

std::vector<core::Event> EventLog::Since(uint64_t from, size_t limit) const {
  std::vector<core::Event> out;
  uint64_t index = dropped_;
  for (const Batch& b : batches_) {
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
