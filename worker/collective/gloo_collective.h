// The Gloo collective backend: groups of CPU ranks talking over Gloo's TCP
// transport, for the CPU worker and for tests. Buffers are host memory.
//
// Rendezvous: each rank opens its listening sockets on port 0 (the kernel
// picks free ports) on the configured address, publishes them in the
// KeyValueStore under "collective/gloo/<group>/", and connects to every peer
// (Gloo's connectFullMesh).
//
// Operations: AllGather is gloo::allgather (ring) over raw bytes.
// ReduceScatterSum is gloo::allreduce (fp32 sum) of the whole `send` buffer
// into a scratch buffer owned by the Collective, then a copy of this rank's
// slice: it moves about twice the bytes of a dedicated reduce-scatter, and
// keeps size() * count_per_rank floats of scratch, in exchange for using only
// Gloo's timeout-aware, well-exercised algorithms.
//
// Timeouts: the group's timeout is Gloo's context timeout (rendezvous, socket
// connect) and each operation's end-to-end timeout, so a rank whose peer is
// gone gets DEADLINE_EXCEEDED or UNAVAILABLE instead of hanging.
//
// Signals: Gloo writes to sockets with writev(), which raises SIGPIPE when a
// peer has gone. The first Create() therefore sets SIGPIPE to SIG_IGN for the
// whole process, unless the process already installed its own handler (or
// ignores it), so a departed peer is an UNAVAILABLE status, not a crash.
//
// Thread-safety, ownership and errors: see collective.h. The factory is
// thread-safe; each Collective owns its Gloo device (one event-loop thread)
// and its connections, closed when it is destroyed.
#ifndef PSYNC_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_
#define PSYNC_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_

#include <memory>
#include <string>

#include "worker/collective/collective.h"

namespace psync {
namespace worker {

struct GlooOptions {
  // Address (or host name) this rank listens on and tells its peers. Use an
  // address the peers can reach: the default only reaches one host.
  std::string hostname = "127.0.0.1";
  // Network interface to listen on (e.g. "eth0", "lo"); when set, its
  // address is used instead of `hostname`.
  std::string interface;
};

// Returns a factory for Gloo groups configured by `options`.
std::unique_ptr<CollectiveFactory> NewGlooCollectiveFactory(GlooOptions options = GlooOptions());

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_GLOO_COLLECTIVE_H_
