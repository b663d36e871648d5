// TakeAnswered: which of a stream's AgentUps one AgentDown answers, in request order: those with
// an AgentAck in it, and the batches sent with lazy_ack that its acked_through covers (accepted
// whole: no AgentAck of their own). Shared by a node agent's Upstream and a relay's RelayHub, the
// two ends that send AgentUps. Pure; the caller holds whatever lock guards `awaiting`.
#ifndef PSYNC_AGENT_ANSWERED_REQUESTS_H_
#define PSYNC_AGENT_ANSWERED_REQUESTS_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::agent {

// One request an AgentDown answered: what waited for it, and its AgentAck (null for a lazy batch
// that acked_through answered, accepted whole). `ack` points into the AgentDown.
template <typename Awaiting>
struct Answered {
  uint64_t request_id = 0;
  Awaiting what;
  const v1::AgentAck* ack = nullptr;
};

// `awaiting` maps request ids to what waits for their answer (a type with a `bool lazy`: sent with
// lazy_ack). Removes every request `down` answers and returns them in request order.
template <typename Awaiting>
std::vector<Answered<Awaiting>> TakeAnswered(const v1::AgentDown& down,
                                             std::map<uint64_t, Awaiting>* awaiting) {
  absl::flat_hash_map<uint64_t, const v1::AgentAck*> acks;
  uint64_t last_answered = down.acked_through();
  for (const v1::AgentAck& ack : down.acks()) {
    acks.emplace(ack.request_id(), &ack);
    last_answered = std::max(last_answered, ack.request_id());
  }
  std::vector<Answered<Awaiting>> answered;
  for (auto it = awaiting->begin(); it != awaiting->end() && it->first <= last_answered;) {
    auto found = acks.find(it->first);
    const v1::AgentAck* ack = found == acks.end() ? nullptr : found->second;
    if (ack == nullptr && !(it->second.lazy && it->first <= down.acked_through())) {
      ++it;
      continue;
    }
    answered.push_back({it->first, std::move(it->second), ack});
    it = awaiting->erase(it);
  }
  return answered;
}

}  // namespace psync::agent

#endif  // PSYNC_AGENT_ANSWERED_REQUESTS_H_
