// ExportChromeTrace: renders a job's events of a step range as Chrome trace event JSON (the
// "JSON object format": {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}), which
// chrome://tracing and Perfetto (ui.perfetto.dev) open.
//
// Layout. One process (pid 1, named "job <job_id>") holds a "coordinator" track and one track per
// rank ("rank N"), sorted coordinator first, then by rank. Chunks of one rank overlap in time (a
// rank stages every chunk, then syncs them one by one), and a viewer only draws properly nested
// spans on one track, so a rank's spans that overlap go to extra lanes named "rank N #2",
// "rank N #3", ... (likewise "coordinator #2"); the spans of one (rank, step, chunk) share a lane.
// Thread ids are assigned 1, 2, 3, ... in that order; the names say which rank a track belongs to.
//
// For every (generation, step, chunk) of the range:
//   - on each rank that checked in: a complete span "stage c<chunk> s<step>" from the rank's first
//     check-in (a rank with two optimizers: the earlier one) to the release; args name the
//     optimizers and when each checked in;
//   - on the coordinator track: a span "release c<chunk> s<step>" from the release to the last
//     member's SyncDone (the sync_complete event);
//   - on each rank that reported SyncDone: a span "sync c<chunk> s<step>" from the release to that
//     rank's SyncDone (while the sync is not complete, also an open one on each rank that staged
//     the chunk or that a stall names sync-pending and has not reported);
//   - a flow (ph "s" / "f", category "psync", "bp": "e") from the last contributor's check-in
//     (inside its stage span) to the release (the start of the coordinator's release span).
// A span that has started but not ended by the last exported event (a chunk still waiting for a
// contributor, a sync some rank never reported done) ends at that last event and carries
// "open": true in its args, so a hang shows as a span running to the right edge.
// Instants ("ph": "i"): each violation on the rank's track when it names a rank, otherwise
// process-wide; each stall on the track of every rank it names as missing or sync-pending
// (process-wide when it names none); step_skipped and abort process-wide.
//
// Times ("ts", "dur") are integer microseconds relative to the earliest exported event;
// otherData.start_unix_micros holds that origin. Only events of `job_id` with a step in
// [first, last] are exported (violations and aborts without a step are kept too). The output is
// deterministic: metadata first, then events sorted by time; at equal times zero-length spans, flow
// starts, spans, flow ends, instants (so that each flow binds to the intended slice), then by track
// and name. Strings are JSON-escaped; bytes that are not valid UTF-8 become U+FFFD.
//
// Errors: INVALID_ARGUMENT when first > last. An empty selection is not an error: the trace then
// holds only the metadata events. Pure function; thread-safe.
#ifndef PSYNC_SERVER_OBSERVE_TRACE_EXPORT_H_
#define PSYNC_SERVER_OBSERVE_TRACE_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::observe {

absl::StatusOr<std::string> ExportChromeTrace(absl::Span<const core::Event> events,
                                              absl::string_view job_id, core::Step first,
                                              core::Step last);

// Appends `text` to `out` as a JSON string literal (with the quotes). Exposed for tests.
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace psync::observe

#endif  // PSYNC_SERVER_OBSERVE_TRACE_EXPORT_H_
