#include "server/agent_down_queue.h"

#include <utility>

namespace psync::server {

AgentDownQueue::Message& AgentDownQueue::Open(size_t items) {
  if (messages_.empty() ||
      (messages_.back().items > 0 && messages_.back().items + items > kMaxItems)) {
    messages_.emplace_back();
  }
  Message& m = messages_.back();
  m.items += items;
  return m;
}

void AgentDownQueue::AddAck(v1::AgentAck ack) {
  Message& m = Open(1 + static_cast<size_t>(ack.rejected_size()));
  *m.down.add_acks() = std::move(ack);
}

std::string AgentDownQueue::NoticeKey(const std::string& job_id, const v1::SessionDown& notice) {
  std::string key = job_id;
  key.push_back('\0');
  key += notice.SerializeAsString();
  return key;
}

void AgentDownQueue::AddNotice(const std::string& job_id, core::RankId rank,
                               const v1::SessionDown& notice, const std::string& key) {
  Message& m = Open(1);
  auto job = m.last_notice.find(job_id);
  if (job == m.last_notice.end()) job = m.last_notice.try_emplace(job_id).first;
  auto last = job->second.try_emplace(rank, -1).first;  // -1: no notice of this rank yet
  auto same = m.notice_index.find(key);
  if (same != m.notice_index.end() && last->second < same->second) {
    m.down.mutable_notices(same->second)->add_ranks(rank);
    last->second = same->second;
    return;
  }
  const int index = m.down.notices_size();
  v1::AgentNotice* n = m.down.add_notices();
  n->set_job_id(job_id);
  n->add_ranks(rank);
  *n->mutable_notice() = notice;
  m.items += 1;  // the entry itself, besides its first rank
  m.notice_index[key] = index;  // later equal notices merge into the newest entry
  last->second = index;
}

void AgentDownQueue::AddClosed(v1::AgentRankClosed closed) {
  *Open(1).down.add_closed() = std::move(closed);
}

v1::AgentDown AgentDownQueue::Take() {
  v1::AgentDown down = std::move(messages_.front().down);
  messages_.pop_front();
  return down;
}

}  // namespace psync::server
