// Effects: what one locked scope of the owner decided and delivers once its locks are released:
// notices for attached sessions (grouped by the transport they go through), events for the log and
// the event sinks, and sessions to close.
//
// A scope fills one Effects under its locks, commits it to the OrderedDelivery before unlocking
// (which logs the events and gives it its place in the delivery order) and hands it over for
// delivery after unlocking. Thread-compatible: one thread fills it; OrderedDelivery moves it.
#ifndef PSYNC_SERVER_OWNER_EFFECTS_H_
#define PSYNC_SERVER_OWNER_EFFECTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/core/types.h"
#include "server/owner/event_log.h"
#include "server/owner/session_sink.h"

namespace psync::server {

// The notices of one Effects for the ranks attached through one transport, in decision order: runs
// of one notice with the ranks it is for.
struct TransportNotices {
  struct Run {
    std::string job_id;
    std::shared_ptr<const core::Notice> notice;
    std::vector<core::RankId> ranks;
  };
  NoticeBatcher* transport = nullptr;
  // A sink attached through `transport` (the first one addressed): it keeps the transport alive
  // until the notices are delivered.
  std::shared_ptr<SessionSink> holder;
  std::vector<Run> runs;
};

struct Effects {
  // Addresses `notice` to `rank` of `job_id`, attached through `sink` whose batcher() is
  // `transport` (null: a sink without one, sent to rank by rank). The deliveries of one notice
  // (a release's directive to every member) share one copy, which is addressed for one job only;
  // through a transport, consecutive ones are one run. Costs a lookup of the transport and a rank
  // appended, not a reference to the sink.
  void AddNotice(const std::shared_ptr<SessionSink>& sink, NoticeBatcher* transport,
                 const std::string& job_id, core::RankId rank,
                 const std::shared_ptr<const core::Notice>& notice);
  // AddNotice for each of `ranks` in order, all attached through `transport` (not null), one of
  // whose sinks is `holder`: their transport's run grows by the ranks at once.
  void AddNoticeToRanks(const std::shared_ptr<SessionSink>& holder, NoticeBatcher* transport,
                        const std::string& job_id, absl::Span<const core::RankId> ranks,
                        const std::shared_ptr<const core::Notice>& notice);
  bool has_notices() const { return !notices.empty() || !transport_notices.empty(); }

  // Sinks without a transport, each with its notice.
  std::vector<std::pair<std::shared_ptr<SessionSink>, std::shared_ptr<const core::Notice>>> notices;
  // The notices for sinks with a transport, by transport in the order each was first addressed.
  std::vector<TransportNotices> transport_notices;
  std::vector<core::Event> events;  // decided, not yet in the log (OrderedDelivery::Commit)
  EventLog::Batch committed;        // the same events, numbered and logged: for the event sinks
  // The log's oldest batches, dropped by Commit: destroyed with the Effects, after the locks.
  std::vector<EventLog::Batch> dropped_events;
  // Sessions to close after the notices (a job that ended closes its ranks' sessions).
  std::vector<std::pair<std::shared_ptr<SessionSink>, absl::Status>> closes;
  // Position in the delivery order (OrderedDelivery::Commit gives it); 0: nothing to deliver.
  uint64_t order = 0;
  // When it was committed (steady clock, ns), for the delivery time of its notices.
  int64_t committed_ns = 0;

  void AddEvent(core::Event event) { events.push_back(std::move(event)); }

 private:
  // The run of `notice` (of `job_id`) at the end of `transport`'s notices, made if needed.
  TransportNotices::Run& RunFor(const std::shared_ptr<SessionSink>& sink, NoticeBatcher* transport,
                                const std::string& job_id,
                                const std::shared_ptr<const core::Notice>& notice);

  // Index in transport_notices of each transport addressed, and of the last one (a release names
  // a node's ranks one after the other).
  absl::flat_hash_map<const NoticeBatcher*, size_t> transport_index_;
  size_t last_transport_ = 0;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_EFFECTS_H_
