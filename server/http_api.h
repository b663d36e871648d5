// The coordinator's HTTP surface, read-only: Prometheus metrics, a JSON API over the same data as
// the gRPC status calls, and (when given) the dashboard's static files.
//
//   /metrics                          Prometheus text exposition
//   /api/jobs?states=a,b              ListJobsResponse as JSON: as ListJobs, one line per job id,
//                                     only the states listed (any case) when `states` is given
//   /api/job?id=J&list_limit=N        JobStatus; with list_limit, at most N entries in each
//                                     chunk's lists (GetJobStatusRequest.list_limit)
//   /api/overview?id=J&node_offset=O&node_limit=L&missing_limit=M&expand=A,B
//                                     JobOverview, as GetJobOverview (expand: expand_nodes,
//                                     comma separated); fields at their default value (0, "",
//                                     false, empty lists) are left out, as proto3 JSON allows
//   /api/chunk?id=J&step=S&chunk=C    ChunkStatus
//   /api/audit?id=J                   GetAuditResponse
//   /api/events?job=J&since=N&kinds=a,b&limit=L
//                                     {"events": [Event, ...], "next": N, "end": E}: the events
//                                     held in memory with index in [since, next) that match `job`
//                                     and `kinds`. One answer looks at most `limit` events
//                                     (default and largest: kMaxEventsPerAnswer), so it may hold
//                                     fewer; continue from `next` until it equals `end`. A limit
//                                     outside 1..kMaxEventsPerAnswer is refused (400 "query
//                                     parameter 'limit' must be in 1..1000"), never clamped.
//   /api/trace?id=J&first=A&last=B    Chrome trace JSON
//   /api/replicas                     ListReplicasResponse: the coordinator replicas, each job's
//                                     owner and epoch ("self" empty: a single coordinator)
//
// JSON uses the proto field names (snake_case). Errors: 400 (bad parameter: the text names it and
// its allowed values, e.g. an unknown name in `states`), 404 (unknown job),
// 503 (coordinator replicas: another replica owns the job; the text names it).
//
// Auth: when HttpApiOptions::token is set, every /api/ request must carry
// "Authorization: Bearer <token>"; otherwise the answer is 401 with a "WWW-Authenticate: Bearer"
// header and a body naming what was wrong (missing header, not a Bearer token, wrong token).
// /metrics is open unless metrics_require_token; the dashboard's static files are always open
// (they hold no data; the page sends the token it is given in its URL fragment, #token=...).
//
// Routes must be registered before the server starts. Thread-safe; nothing is owned.
#ifndef PSYNC_SERVE_HTTP_API_H_
#define PSYNC_SERVE_HTTP_API_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "serve/http/server.h"
#include "serve/http/static_files.h"
#include "serve/metrics/registry.h"
#include "server/ha/replica.h"
#include "server/owner/coordinator.h"

namespace psync::server {

// Events one /api/events answer looks at, at most (and by default).
inline constexpr size_t kMaxEventsPerAnswer = 1000;

struct HttpApiOptions {
  // Bearer token /api/ requires; empty: no token needed.
  std::string token;
  // /metrics also requires the token (when one is set).
  bool metrics_require_token = false;
  // The replica this coordinator runs as (not owned; null: a single coordinator, no --etcd).
  const ha::Replica* replica = nullptr;
};

// Registers the routes above on `server`. Errors: those of http::Server::Handle (a route
// registered twice, or after Start); on error some routes may be registered.
absl::Status RegisterHttpApi(http::Server* server, Coordinator* coordinator,
                             metrics::Registry* registry,
                             absl::Span<const http::EmbeddedFile> dashboard,
                             const HttpApiOptions& options = {});

}  // namespace psync::server

#endif  // PSYNC_SERVE_HTTP_API_H_
