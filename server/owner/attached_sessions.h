// AttachedSessions: the attached Session of each rank of one job, with the transport its notices
// go through. Held by rank in a dense table (ranks run from 0 to the world size), so that a
// release's lookups of its members' sessions walk memory in rank order instead of hashing: at
// 16,384 ranks a hashed lookup was most of the cost of addressing a release.
//
// Thread-compatible: the Job's lock guards it.
#ifndef PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_
#define PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "server/core/types.h"
#include "server/owner/session_sink.h"

namespace psync::server {

// An attached rank's sink, and the transport its notices go through (the sink's batcher(), read
// once when it attached).
struct AttachedSession {
  std::shared_ptr<SessionSink> sink;
  NoticeBatcher* transport = nullptr;
};

class AttachedSessions {
 public:
  // The session of `rank`, or null when it has none.
  const AttachedSession* Find(core::RankId rank) const {
    return rank < by_rank_.size() && by_rank_[rank].sink != nullptr ? &by_rank_[rank] : nullptr;
  }
  bool contains(core::RankId rank) const { return Find(rank) != nullptr; }

  // `sink` (not null) becomes `rank`'s session; returns the sink it replaced, or null.
  std::shared_ptr<SessionSink> Attach(core::RankId rank, std::shared_ptr<SessionSink> sink) {
    if (rank >= by_rank_.size()) by_rank_.resize(static_cast<size_t>(rank) + 1);
    AttachedSession& slot = by_rank_[rank];
    if (slot.sink == nullptr) ++size_;
    std::shared_ptr<SessionSink> replaced = std::move(slot.sink);
    slot.transport = sink->batcher();
    slot.sink = std::move(sink);
    return replaced;
  }
  // Forgets `rank`'s session if it is `sink`; returns whether it was.
  bool Detach(core::RankId rank, const SessionSink* sink) {
    if (rank >= by_rank_.size() || by_rank_[rank].sink == nullptr ||
        by_rank_[rank].sink.get() != sink) {
      return false;
    }
    by_rank_[rank] = AttachedSession();
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Every session's rank and sink, in rank order; forgets them all.
  std::vector<std::pair<core::RankId, std::shared_ptr<SessionSink>>> TakeAll() {
    std::vector<std::pair<core::RankId, std::shared_ptr<SessionSink>>> all;
    all.reserve(size_);
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      if (by_rank_[r].sink != nullptr) {
        all.emplace_back(static_cast<core::RankId>(r), std::move(by_rank_[r].sink));
      }
    }
    Clear();
    return all;
  }
  void Clear() {
    by_rank_.clear();
    by_rank_.shrink_to_fit();
    size_ = 0;
  }

 private:
  std::vector<AttachedSession> by_rank_;
  size_t size_ = 0;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_
