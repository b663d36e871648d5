#include "serve/metrics/http_handler.h"

#include <string>

namespace psync::metrics {

http::Handler MetricsHandler(Registry* registry) {
  return [registry](const http::Request&) {
    http::Response response;
    response.status = 200;
    response.content_type = std::string(Registry::kContentType);
    response.body = registry->Render();
    return response;
  };
}

}  // namespace psync::metrics
