// ObserveDirectiveAge: how old a release is when it reaches a hop of the agent, from the time the
// coordinator decided it (SyncDirective.released_unix_micros) to `now` by this host's clock, into
// one of the psync_agent_directive_age_seconds histograms (agent/agent_metrics.h). A notice that
// is not a directive, or a directive without the time (a coordinator older than the field), is
// not observed; an age below zero (this clock behind the coordinator's) counts as zero.
//
// Thread-safe (the histogram is); `histogram` may be null (nothing observed).
#ifndef PSYNC_AGENT_DIRECTIVE_AGE_H_
#define PSYNC_AGENT_DIRECTIVE_AGE_H_

#include <algorithm>

#include "absl/time/time.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "serve/metrics/metric.h"

namespace psync::agent {

inline void ObserveDirectiveAge(metrics::Histogram* histogram, const v1::SessionDown& notice,
                                absl::Time now) {
  if (histogram == nullptr || !notice.has_directive()) return;
  const int64_t released = notice.directive().released_unix_micros();
  if (released == 0) return;
  const absl::Duration age = now - absl::FromUnixMicros(released);
  histogram->Observe(std::max(0.0, absl::ToDoubleSeconds(age)));
}

}  // namespace psync::agent

#endif  // PSYNC_AGENT_DIRECTIVE_AGE_H_
