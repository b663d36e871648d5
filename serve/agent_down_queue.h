// AgentDownQueue: what waits to go down one AgentSession, merged into as few AgentDown messages as
// order allows. Pure; thread-compatible (its StreamWriter serializes access). Shared by
// the coordinator's AgentSession streams and a relaying node agent's (agent/relay_hub.h).
//
// Messages are filled in order; the last one is open. A notice whose content (job and SessionDown)
// equals a notice already in the open message gets the rank appended there instead of a new entry,
// unless that rank already has a later notice in the open message (each rank's notices keep the
// order they were produced in; a rank given the newest entry's notice again is listed in it again,
// which delivers it twice, as a second entry would). Which ranks have which notices is indexed only
// when a notice merges into an entry older than the newest: a release's thousands of ranks go into
// its new entry without a lookup each. A message holds about kMaxItems entries (acks, rejected
// statuses, notices, ranks of notices, closures); beyond that a new message opens.
//
// Lazy acks (AgentUp.lazy_ack): an applied lazy batch is answered by AgentDown.acked_through as
// lazy_acks.h says (FlushLazyAcks opens a message of its own for an answer held).
//
// bytes() is what the queued messages hold, about: each ack, closure and new notice entry counts
// its serialized size (and a message's kQueuedMessageOverhead, stream_writer.h), a rank merged
// into an entry 8 bytes. StreamWriter bounds a stream's queue by it.
#ifndef PSYNC_SERVE_AGENT_DOWN_QUEUE_H_
#define PSYNC_SERVE_AGENT_DOWN_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "serve/lazy_acks.h"

namespace psync::serve {

class AgentDownQueue {
 public:
  static constexpr size_t kMaxItems = 8192;

  void AddAck(v1::AgentAck ack);
  // `notice` is a directive, StepSkipped or Abort for (job_id, rank).
  void AddNotice(const std::string& job_id, uint32_t rank, const v1::SessionDown& notice) {
    AddNotice(job_id, rank, notice, NoticeKey(job_id, notice));
  }
  // The same, with `key` = NoticeKey(job_id, notice) computed by the caller (once for the many
  // ranks of one release).
  void AddNotice(const std::string& job_id, uint32_t rank, const v1::SessionDown& notice,
                 const std::string& key) {
    AddNotice(job_id, absl::MakeConstSpan(&rank, 1), notice, key);
  }
  // The same for each of `ranks` in order, with the lookups shared.
  void AddNotice(const std::string& job_id, absl::Span<const uint32_t> ranks,
                 const v1::SessionDown& notice, const std::string& key);
  // What makes two notices mergeable: the job and the notice's content.
  static std::string NoticeKey(const std::string& job_id, const v1::SessionDown& notice);
  void AddClosed(v1::AgentRankClosed closed);
  // The batch `request_id` (lazy_ack) was applied, every message accepted. Returns true when
  // nothing queued could carry it and no lazy ack was pending before: the caller arms a
  // FlushLazyAcks for later.
  bool AckLater(uint64_t request_id);
  // Opens a message of its own for the pending lazy acks, if any.
  void FlushLazyAcks();

  bool empty() const { return messages_.empty(); }
  // Messages ready, the open one included.
  size_t size() const { return messages_.size(); }
  // Removes and returns the oldest message. Requires !empty().
  v1::AgentDown Take();
  void Clear() {
    messages_.clear();
    bytes_ = 0;
    lazy_.Clear();
  }
  size_t bytes() const { return bytes_; }

 private:
  struct Message {
    v1::AgentDown down;
    size_t items = 0;
    size_t bytes = 0;  // this message's share of bytes_
    // Notice content (job, serialized SessionDown) -> index in down.notices.
    absl::flat_hash_map<std::string, int> notice_index;
    // job -> rank -> index of its last notice among down.notices [0, indexed) (IndexNotices).
    absl::flat_hash_map<std::string, absl::flat_hash_map<uint32_t, int>> last_notice;
    int indexed = 0;
  };

  // Brings m.last_notice up to every entry of m.down.notices.
  static void IndexNotices(Message& m);

  // The open message, with room for `items` more (a new one opens if needed).
  Message& Open(size_t items);
  void Count(Message& m, size_t bytes) {
    m.bytes += bytes;
    bytes_ += bytes;
  }

  std::deque<Message> messages_;
  size_t bytes_ = 0;
  LazyAcks lazy_;
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_AGENT_DOWN_QUEUE_H_
