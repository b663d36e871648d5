// Effects: what one locked scope of the owner decided and delivers once its locks are released:
// notices for attached sessions, events for the log and the event sinks, and sessions to close.
//
// A scope fills one Effects under its locks, commits it to the OrderedDelivery before unlocking
// (which logs the events and gives it its place in the delivery order) and hands it over for
// delivery after unlocking. Thread-compatible: one thread fills it; OrderedDelivery moves it.
#ifndef PSYNC_SERVER_OWNER_EFFECTS_H_
#define PSYNC_SERVER_OWNER_EFFECTS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/core/types.h"
#include "server/owner/event_log.h"
#include "server/owner/session_sink.h"

namespace psync::server {

struct Effects {
  // Each addressed sink with its notice; the deliveries of one notice (a release's directive to
  // every member) share one copy.
  std::vector<std::pair<std::shared_ptr<SessionSink>, std::shared_ptr<const core::Notice>>> notices;
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
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_OWNER_EFFECTS_H_
