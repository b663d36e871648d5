// The coordinator's HTTP surface, read-only: Prometheus metrics, a JSON API over the same data as
// the gRPC status calls, and (when given) the dashboard's static files.
//
//   /metrics                          Prometheus text exposition
//   /api/jobs                         ListJobsResponse as JSON
//   /api/job?id=J                     JobStatus
//   /api/chunk?id=J&step=S&chunk=C    ChunkStatus
//   /api/audit?id=J                   GetAuditResponse
//   /api/events?job=J&since=N&kinds=a,b  {"next": N, "events": [Event, ...]} from the events held
//                                     in memory, at most 5000 per answer (continue from `next`)
//   /api/trace?id=J&first=A&last=B    Chrome trace JSON
//
// JSON uses the proto field names (snake_case). Errors: 400 (bad parameter), 404 (unknown job).
// Routes must be registered before the server starts. Thread-safe; nothing is owned.
#ifndef PSYNC_SERVER_HTTP_API_H_
#define PSYNC_SERVER_HTTP_API_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/coordinator.h"
#include "server/http/server.h"
#include "server/http/static_files.h"
#include "server/metrics/registry.h"

namespace psync::server {

absl::Status RegisterHttpApi(http::Server* server, Coordinator* coordinator,
                             metrics::Registry* registry,
                             absl::Span<const http::EmbeddedFile> dashboard);

}  // namespace psync::server

#endif  // PSYNC_SERVER_HTTP_API_H_
