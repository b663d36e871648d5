#include "serve/agent_down_queue.h"

#include <algorithm>
#include <utility>

#include "serve/stream_writer.h"

namespace psync::serve {

AgentDownQueue::Message& AgentDownQueue::Open(size_t items) {
  if (messages_.empty() ||
      (messages_.back().items > 0 && messages_.back().items + items > kMaxItems)) {
    messages_.emplace_back();
    Count(messages_.back(), kQueuedMessageOverhead);
    lazy_.CarryHeld(&messages_.back().down);
  }
  Message& m = messages_.back();
  m.items += items;
  return m;
}

void AgentDownQueue::AddAck(v1::AgentAck ack) {
  Message& m = Open(1 + static_cast<size_t>(ack.rejected_size()));
  Count(m, ack.ByteSizeLong());
  *m.down.add_acks() = std::move(ack);
}

std::string AgentDownQueue::NoticeKey(const std::string& job_id, const v1::SessionDown& notice) {
  std::string key = job_id;
  key.push_back('\0');
  key += notice.SerializeAsString();
  return key;
}

void AgentDownQueue::IndexNotices(Message& m) {
  for (; m.indexed < m.down.notices_size(); ++m.indexed) {
    const v1::AgentNotice& n = m.down.notices(m.indexed);
    absl::flat_hash_map<uint32_t, int>& last_of_job = m.last_notice[n.job_id()];
    for (uint32_t rank : n.ranks()) last_of_job[rank] = m.indexed;
  }
}

void AgentDownQueue::AddNotice(const std::string& job_id, absl::Span<const uint32_t> ranks,
                               const v1::SessionDown& notice, const std::string& key) {
  // Looked up once per message the ranks go into (a new one opens past kMaxItems).
  Message* looked_up = nullptr;
  absl::flat_hash_map<uint32_t, int>* last_of_job = nullptr;  // once indexed, for this job
  int same = -1;  // index of the entry equal notices merge into, -1 if none
  for (size_t i = 0; i < ranks.size(); ++i) {
    const uint32_t rank = ranks[i];
    Message& m = Open(1);
    if (&m != looked_up) {
      looked_up = &m;
      last_of_job = nullptr;
      auto found = m.notice_index.find(key);
      same = found == m.notice_index.end() ? -1 : found->second;
    }
    if (same >= 0) {
      // The newest entry has no later one: every rank may join it, as many at once as the open
      // message has room for (Open's bound, counted once). An older one takes a rank that has no
      // notice after it. The index, once built, stays up to date with both.
      const bool newest = same + 1 == m.down.notices_size();
      if (newest && same >= m.indexed) {
        const size_t room = m.items < kMaxItems ? kMaxItems - m.items : 0;
        const size_t count = 1 + std::min(ranks.size() - i - 1, room);
        m.items += count - 1;
        m.down.mutable_notices(same)->mutable_ranks()->Add(ranks.begin() + i,
                                                           ranks.begin() + i + count);
        Count(m, 8 * count);
        i += count - 1;
        continue;
      }
      bool joins = true;
      if (!newest || same < m.indexed) {
        if (last_of_job == nullptr) {
          IndexNotices(m);
          last_of_job = &m.last_notice[job_id];
        }
        int& last = last_of_job->try_emplace(rank, -1).first->second;  // -1: none yet
        joins = newest || last < same;
        if (joins) last = same;
      }
      if (joins) {
        m.down.mutable_notices(same)->add_ranks(rank);
        Count(m, 8);
        continue;
      }
    }
    const int index = m.down.notices_size();
    v1::AgentNotice* n = m.down.add_notices();
    n->set_job_id(job_id);
    n->add_ranks(rank);
    *n->mutable_notice() = notice;
    Count(m, n->ByteSizeLong());
    m.items += 1;                 // the entry itself, besides its first rank
    m.notice_index[key] = index;  // later equal notices merge into the newest entry
    same = index;
  }
}

void AgentDownQueue::AddClosed(v1::AgentRankClosed closed) {
  Message& m = Open(1);
  Count(m, closed.ByteSizeLong());
  *m.down.add_closed() = std::move(closed);
}

bool AgentDownQueue::AckLater(uint64_t request_id) {
  return lazy_.Accept(request_id, messages_.empty() ? nullptr : &messages_.back().down);
}

void AgentDownQueue::FlushLazyAcks() {
  if (lazy_.held()) Open(0);
}

v1::AgentDown AgentDownQueue::Take() {
  v1::AgentDown down = std::move(messages_.front().down);
  bytes_ -= messages_.front().bytes;
  messages_.pop_front();
  return down;
}

}  // namespace psync::serve
