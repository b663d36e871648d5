// The gRPC round-trip floor: a bare bidirectional-stream ping-pong on loopback.
//
// ServeEcho() runs a psync.bench.Echo server (callback API: every message read is written back)
// on `listen` until SIGINT or SIGTERM, writing the bound port to `port_file`; it returns the
// process exit code. psync-bench runs it in a child process (itself, with --serve_echo) so that
// the two ends are separate processes, like a rank and the coordinator.
// MeasureRoundTrips() opens one stream to `target` and, `count` times, writes one message and
// waits for its echo; it returns each round trip in nanoseconds (after `warmup` unrecorded ones).
// Errors: UNAVAILABLE when the stream cannot be used. Blocking; thread-compatible.
//
// RunEchoLoad() is the floor of the server's CPU per message: `streams` streams, each on its own
// TCP connection and its own thread, each doing one round trip every `interval` (paced, like
// ranks that check in at a steady rate) for `duration`. It returns the round trips completed
// (each is one message read and one written by the server); the caller samples the server's CPU
// around it. UNAVAILABLE when a stream breaks.
#ifndef PSYNC_BENCH_ECHO_FLOOR_H_
#define PSYNC_BENCH_ECHO_FLOOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace psync::bench {

int ServeEcho(const std::string& listen, const std::string& port_file);

absl::StatusOr<std::vector<int64_t>> MeasureRoundTrips(const std::string& target, int count,
                                                       int warmup, int payload_bytes);

absl::StatusOr<uint64_t> RunEchoLoad(const std::string& target, int streams,
                                     absl::Duration interval, absl::Duration duration,
                                     int payload_bytes);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_ECHO_FLOOR_H_
