#include "serve/metrics/http_handler.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "serve/http/server.h"
#include "serve/http/testing/curl_client.h"
#include "serve/metrics/registry.h"

namespace psync::metrics {
namespace {

TEST(MetricsHandlerTest, ServesTheRenderedRegistry) {
  Registry registry;
  CounterFamily* scrapes = *registry.AddCounter("psync_scrapes_total", "Scrapes served.");
  int collected = 0;
  registry.AddCollector([&] {
    ++collected;
    scrapes->Get()->Increment();
  });

  http::Server server;
  ASSERT_TRUE(server.Handle("/metrics", MetricsHandler(&registry)).ok());
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());

  absl::StatusOr<http::Response> response =
      http::testing::CurlGet(absl::StrCat("http://127.0.0.1:", server.port(), "/metrics"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response->body,
            "# HELP psync_scrapes_total Scrapes served.\n"
            "# TYPE psync_scrapes_total counter\n"
            "psync_scrapes_total 1\n");

  response = http::testing::CurlGet(absl::StrCat("http://127.0.0.1:", server.port(), "/metrics"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_NE(response->body.find("psync_scrapes_total 2\n"), std::string::npos);
  EXPECT_EQ(collected, 2);
}

}  // namespace
}  // namespace psync::metrics
