// Serves a metrics Registry over psync::http: the GET /metrics endpoint that
// Prometheus scrapes.
//
//   server.Handle("/metrics", psync::metrics::MetricsHandler(&registry));
//
// The handler renders the registry on every request (running its
// collectors) and answers 200 with Content-Type
// "text/plain; version=0.0.4; charset=utf-8". It is thread-safe, never fails,
// and does not own the registry, which must outlive it.

#ifndef PSYNC_SERVE_METRICS_HTTP_HANDLER_H_
#define PSYNC_SERVE_METRICS_HTTP_HANDLER_H_

#include "serve/http/message.h"
#include "serve/metrics/registry.h"

namespace psync::metrics {

http::Handler MetricsHandler(Registry* registry);

}  // namespace psync::metrics

#endif  // PSYNC_SERVE_METRICS_HTTP_HANDLER_H_
