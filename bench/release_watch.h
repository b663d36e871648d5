// ReleaseWatch: when the coordinator decided each release of one job, read from its event stream
// (WatchEvents, kind "release"), so that a run's release latency splits at the coordinator: the
// way up (the last check-in sent -> the release decided: the rank's or node's stream, a node
// agent, the coordinator's queue and decision) and the way down (the release decided -> the first
// and the last rank or node holding the directive: the coordinator's writes, a node agent's
// fan-out, the ranks' streams). Every process of a run is on one host, so the coordinator's
// wall-clock event times are put on NowNs()'s clock by the offset between the two clocks.
//
// Thread-safety: Start and Stop from one thread; the watch reads on a thread of its own.
// Ownership: owns its stream, its thread and the times it read.
#ifndef PSYNC_BENCH_RELEASE_WATCH_H_
#define PSYNC_BENCH_RELEASE_WATCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/latency_summary.h"
#include "bench/release_records.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::bench {

// The split of a run's measured releases.
struct HopSplit {
  size_t matched = 0;         // releases with a decision time read from the coordinator
  LatencySummary up;          // last check-in sent -> release decided
  LatencySummary down_first;  // release decided -> first rank (or node) has it
  LatencySummary down_last;   // release decided -> last rank (or node) has it
  std::string Json() const;
};

class ReleaseWatch {
 public:
  // Watches `job_id`'s releases at `target` (a coordinator, not a node agent: agents do not
  // forward WatchEvents) from now on.
  static absl::StatusOr<std::unique_ptr<ReleaseWatch>> Start(const std::string& target,
                                                             const std::string& job_id);
  ~ReleaseWatch();
  ReleaseWatch(const ReleaseWatch&) = delete;
  ReleaseWatch& operator=(const ReleaseWatch&) = delete;

  // Ends the watch once `releases` decisions were read or `patience` passed (a release event
  // reaches the watch on its own stream, possibly after the directives reached the ranks).
  // Idempotent; the times read stay.
  void Stop(size_t releases, absl::Duration patience) ABSL_LOCKS_EXCLUDED(mu_);
  // Splits `times` (a finished run's) at the release decisions read.
  HopSplit Split(const std::vector<ReleaseTimes>& times) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ReleaseWatch() = default;
  void Read();

  std::unique_ptr<v1::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::Event>> stream_;
  std::thread reader_;
  int64_t unix_minus_mono_ns_ = 0;  // wall clock - NowNs(), read at Start
  absl::Mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, int64_t> decided_ns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::bench

#endif  // PSYNC_BENCH_RELEASE_WATCH_H_
