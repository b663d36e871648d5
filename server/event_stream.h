// EventStream: the server side of one WatchEvents call. Registers as an EventSink of the
// Coordinator, filters by job and kinds, queues matching events and writes them one at a time.
// A watcher more than `kMaxQueued` events behind is ended with RESOURCE_EXHAUSTED so that a slow
// client never holds memory without bound. Owned by gRPC: deletes itself in OnDone.
#ifndef PSYNC_SERVER_EVENT_STREAM_H_
#define PSYNC_SERVER_EVENT_STREAM_H_

#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "server/coordinator.h"

namespace psync::server {

grpc::ServerWriteReactor<v1::Event>* NewEventStream(Coordinator* coordinator,
                                                    const v1::WatchEventsRequest& request);

}  // namespace psync::server

#endif  // PSYNC_SERVER_EVENT_STREAM_H_
