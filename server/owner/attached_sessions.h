// AttachedSessions: the attached Session of each rank of one job, with the transport its notices
// go through. Held by rank in a dense table (ranks run from 0 to the world size), so that a
// release's lookups of its members' sessions walk memory in rank order instead of hashing: at
// 16,384 ranks a hashed lookup was most of the cost of addressing a release.
//
// It also keeps, for each chunk a release went to as a whole, its members grouped by transport
// (RoutesTo): the next release of the chunk is addressed transport by transport, a run of ranks
// copied, instead of member by member. Any attach or detach forgets them (they are rebuilt at the
// chunk's next release), so a route never names a sink that is no longer attached.
//
// Thread-compatible: the Job's lock guards it.
#ifndef PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_
#define PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "server/core/types.h"
#include "server/owner/session_sink.h"

namespace psync::server {

// An attached rank's sink, and the transport its notices go through (the sink's batcher(), read
// once when it attached).
struct AttachedSession {
  std::shared_ptr<SessionSink> sink;
  NoticeBatcher* transport = nullptr;
};

// The attached members of one chunk, grouped by where their notices go.
struct MemberRoutes {
  // Members attached through one transport, in member order.
  struct Route {
    NoticeBatcher* transport = nullptr;
    std::shared_ptr<SessionSink> holder;  // the first of them: keeps the transport alive
    std::vector<core::RankId> ranks;
  };
  std::vector<Route> by_transport;  // in the order of each transport's first member
  // Members whose sinks have no transport, in member order.
  std::vector<std::pair<core::RankId, std::shared_ptr<SessionSink>>> own_sinks;
};

class AttachedSessions {
 public:
  // The session of `rank`, or null when it has none.
  const AttachedSession* Find(core::RankId rank) const {
    return rank < by_rank_.size() && by_rank_[rank].sink != nullptr ? &by_rank_[rank] : nullptr;
  }
  bool contains(core::RankId rank) const { return Find(rank) != nullptr; }

  // The attached ones of `members` (chunk `chunk`'s) grouped by transport: built on the first
  // call after any attach or detach, or when the chunk's members differ from the last call's (a
  // new generation's plan), and kept until then. Valid until the next call or change.
  const MemberRoutes& RoutesTo(core::ChunkId chunk, absl::Span<const core::RankId> members);

  // `sink` (not null) becomes `rank`'s session; returns the sink it replaced, or null.
  std::shared_ptr<SessionSink> Attach(core::RankId rank, std::shared_ptr<SessionSink> sink) {
    ForgetRoutes();
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
    ForgetRoutes();
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
    ForgetRoutes();
    by_rank_.clear();
    by_rank_.shrink_to_fit();
    size_ = 0;
  }

 private:
  // What RoutesTo built for one chunk, and for which members.
  struct ChunkRoutes {
    std::vector<core::RankId> members;  // compared whole: a memory compare, not a lookup a rank
    MemberRoutes routes;
  };
  void ForgetRoutes() {
    if (!routes_.empty()) routes_.clear();
  }

  std::vector<AttachedSession> by_rank_;
  size_t size_ = 0;
  absl::flat_hash_map<core::ChunkId, ChunkRoutes> routes_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_ATTACHED_SESSIONS_H_
