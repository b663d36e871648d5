#include "serve/metrics/registry.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace psync::metrics {
namespace {

// Builds the small registry whose output the golden test pins down.
void Populate(Registry* registry) {
  CounterFamily* checkins =
      *registry->AddCounter("psync_checkins_total", "Check-ins received.", {"job", "optimizer"});
  GaugeFamily* missing =
      *registry->AddGauge("psync_missing_contributors", "Contributors not yet checked in.");
  HistogramFamily* wait = *registry->AddHistogram(
      "psync_release_wait_seconds", "Wait from a chunk's first check-in to its sync release.",
      {"job"}, {0.25, 1, 2.5});
  // Registered but without series: not rendered.
  ASSERT_TRUE(registry->AddGauge("psync_jobs_active", "Jobs with members.", {"job"}).ok());

  checkins->WithLabels({"job-b", "expert"})->Add(2);
  Counter* dense = checkins->WithLabels({"job-a", "dense"});
  for (int i = 0; i < 3; ++i) dense->Increment();
  missing->Get()->Set(4);
  for (double seconds : {0.125, 0.25, 0.5, 3.0}) {
    wait->WithLabels({"job-a"})->Observe(seconds);
  }
}

constexpr char kGolden[] =
    R"(# HELP psync_checkins_total Check-ins received.
# TYPE psync_checkins_total counter
psync_checkins_total{job="job-a",optimizer="dense"} 3
psync_checkins_total{job="job-b",optimizer="expert"} 2
# HELP psync_missing_contributors Contributors not yet checked in.
# TYPE psync_missing_contributors gauge
psync_missing_contributors 4
# HELP psync_release_wait_seconds Wait from a chunk's first check-in to its sync release.
# TYPE psync_release_wait_seconds histogram
psync_release_wait_seconds_bucket{job="job-a",le="0.25"} 2
psync_release_wait_seconds_bucket{job="job-a",le="1"} 3
psync_release_wait_seconds_bucket{job="job-a",le="2.5"} 3
psync_release_wait_seconds_bucket{job="job-a",le="+Inf"} 4
psync_release_wait_seconds_sum{job="job-a"} 3.875
psync_release_wait_seconds_count{job="job-a"} 4
)";

TEST(RegistryTest, RendersGoldenText) {
  Registry registry;
  Populate(&registry);
  EXPECT_EQ(registry.Render(), kGolden);
  // Rendering has no side effects on the output.
  EXPECT_EQ(registry.Render(), kGolden);
}

TEST(RegistryTest, OrderIsSortedRegardlessOfRegistrationAndCreation) {
  Registry registry;
  GaugeFamily* zeta = *registry.AddGauge("zeta", "Z.", {"k"});
  GaugeFamily* alpha = *registry.AddGauge("alpha", "A.", {"k"});
  for (const char* value : {"c", "a", "b"}) {
    zeta->WithLabels({value})->Set(1);
    alpha->WithLabels({value})->Set(1);
  }
  EXPECT_EQ(registry.Render(),
            "# HELP alpha A.\n# TYPE alpha gauge\n"
            "alpha{k=\"a\"} 1\nalpha{k=\"b\"} 1\nalpha{k=\"c\"} 1\n"
            "# HELP zeta Z.\n# TYPE zeta gauge\n"
            "zeta{k=\"a\"} 1\nzeta{k=\"b\"} 1\nzeta{k=\"c\"} 1\n");
}

TEST(RegistryTest, UnlabeledFamiliesRenderFromZero) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("psync_syncs_total", "Syncs.").ok());
  ASSERT_TRUE(registry.AddHistogram("psync_lag_seconds", "Lag.", {}, {1}).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP psync_lag_seconds Lag.\n"
            "# TYPE psync_lag_seconds histogram\n"
            "psync_lag_seconds_bucket{le=\"1\"} 0\n"
            "psync_lag_seconds_bucket{le=\"+Inf\"} 0\n"
            "psync_lag_seconds_sum 0\n"
            "psync_lag_seconds_count 0\n"
            "# HELP psync_syncs_total Syncs.\n"
            "# TYPE psync_syncs_total counter\n"
            "psync_syncs_total 0\n");
}

TEST(RegistryTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  GaugeFamily* gauge = *registry.AddGauge(
      "psync_info", "Help with \\ backslash,\nnewline and \"quotes\".", {"path"});
  gauge->WithLabels({"C:\\dir \"x\"\nnext"})->Set(1);
  EXPECT_EQ(registry.Render(),
            "# HELP psync_info Help with \\\\ backslash,\\nnewline and "
            "\"quotes\".\n"
            "# TYPE psync_info gauge\n"
            "psync_info{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n");
}

TEST(RegistryTest, SpecialValues) {
  Registry registry;
  GaugeFamily* gauge = *registry.AddGauge("g", "G.", {"v"});
  gauge->WithLabels({"inf"})->Set(std::numeric_limits<double>::infinity());
  gauge->WithLabels({"nan"})->Set(std::numeric_limits<double>::quiet_NaN());
  gauge->WithLabels({"neg"})->Set(-0.5);
  EXPECT_EQ(registry.Render(),
            "# HELP g G.\n# TYPE g gauge\n"
            "g{v=\"inf\"} +Inf\ng{v=\"nan\"} NaN\ng{v=\"neg\"} -0.5\n");
}

TEST(RegistryTest, HistogramBucketsAreCumulativeInOutput) {
  Registry registry;
  HistogramFamily* family = *registry.AddHistogram("h_seconds", "H.", {}, {1, 2, 3});
  Histogram* histogram = family->Get();
  for (double value : {0.5, 1.5, 1.5, 2.5, 2.5, 2.5, 9.0}) {
    histogram->Observe(value);
  }
  std::string text = registry.Render();
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_bucket{le=\"1\"} 1\n"));
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_bucket{le=\"2\"} 3\n"));
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_bucket{le=\"3\"} 6\n"));
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_bucket{le=\"+Inf\"} 7\n"));
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_count 7\n"));
  EXPECT_TRUE(absl::StrContains(text, "h_seconds_sum 20\n"));
}

TEST(RegistryTest, WithLabelsReturnsStablePointers) {
  Registry registry;
  CounterFamily* family = *registry.AddCounter("c_total", "C.", {"a", "b"});
  Counter* first = family->WithLabels({"job-a", "3"});
  for (int i = 0; i < 100; ++i) {
    family->WithLabels({"job-a", absl::StrCat(i)});  // Grow the map.
  }
  EXPECT_EQ(family->WithLabels({"job-a", "3"}), first);
  EXPECT_NE(family->WithLabels({"job-a", "4"}), first);
}

TEST(RegistryTest, TryWithLabelsChecksArity) {
  Registry registry;
  CounterFamily* family = *registry.AddCounter("c_total", "C.", {"a", "b"});
  absl::StatusOr<Counter*> counter = family->TryWithLabels({"only-one"});
  EXPECT_TRUE(absl::IsInvalidArgument(counter.status()));
  EXPECT_TRUE(absl::StrContains(counter.status().message(), "c_total"));
  EXPECT_TRUE(family->TryWithLabels({"x", "y"}).ok());
}

TEST(RegistryDeathTest, WithLabelsWrongArityAborts) {
  Registry registry;
  CounterFamily* family = *registry.AddCounter("c_total", "C.", {"a", "b"});
  EXPECT_DEATH(family->WithLabels({"only-one"}), "\"c_total\" has 2 label names but got 1");
}

TEST(RegistryTest, RemoveHidesSeriesAndWithLabelsRestoresIt) {
  Registry registry;
  GaugeFamily* family = *registry.AddGauge("g", "G.", {"job"});
  Gauge* a = family->WithLabels({"a"});
  a->Set(1);
  family->WithLabels({"b"})->Set(2);
  family->Remove({"a"});
  family->Remove({"unknown"});
  EXPECT_EQ(registry.Render(), "# HELP g G.\n# TYPE g gauge\ng{job=\"b\"} 2\n");
  a->Set(5);  // Still valid, still not exported.
  EXPECT_EQ(family->WithLabels({"a"}), a);
  EXPECT_EQ(registry.Render(), "# HELP g G.\n# TYPE g gauge\ng{job=\"a\"} 5\ng{job=\"b\"} 2\n");
  family->RemoveAll();
  EXPECT_EQ(registry.Render(), "");
}

TEST(RegistryTest, EraseSeriesFreesEveryFamilysSeriesOfOneLabelValue) {
  Registry registry;
  CounterFamily* checkins = *registry.AddCounter("c_total", "C.", {"job"});
  CounterFamily* violations = *registry.AddCounter("v_total", "V.", {"job", "kind"});
  GaugeFamily* by_kind = *registry.AddGauge("k", "K.", {"kind", "job"});
  checkins->WithLabels({"a"})->Add(3);
  checkins->WithLabels({"ab"})->Add(4);  // a longer value with the same first characters stays
  violations->WithLabels({"a", "early_sync"})->Increment();
  violations->WithLabels({"a", "repeated_sync"})->Increment();
  violations->WithLabels({"b", "early_sync"})->Increment();
  by_kind->WithLabels({"a", "a"})->Set(1);  // first label is not "job": untouched
  registry.EraseSeries("job", "a");
  EXPECT_EQ(
      registry.Render(),
      "# HELP c_total C.\n# TYPE c_total counter\nc_total{job=\"ab\"} 4\n"
      "# HELP k K.\n# TYPE k gauge\nk{kind=\"a\",job=\"a\"} 1\n"
      "# HELP v_total V.\n# TYPE v_total counter\nv_total{job=\"b\",kind=\"early_sync\"} 1\n");
  // Created afresh, from zero.
  checkins->WithLabels({"a"})->Increment();
  EXPECT_NE(registry.Render().find("c_total{job=\"a\"} 1\n"), std::string::npos);
}

TEST(RegistryTest, CollectorsRunBeforeEachRender) {
  Registry registry;
  GaugeFamily* missing = *registry.AddGauge("psync_missing", "Missing per job.", {"job"});
  // A stand-in for the tracker's snapshot.
  std::vector<std::pair<std::string, int>> snapshot = {{"a", 2}, {"b", 0}};
  int runs = 0;
  registry.AddCollector([&] {
    ++runs;
    missing->RemoveAll();
    for (const auto& [job, count] : snapshot) {
      missing->WithLabels({job})->Set(count);
    }
  });
  EXPECT_EQ(registry.Render(),
            "# HELP psync_missing Missing per job.\n"
            "# TYPE psync_missing gauge\n"
            "psync_missing{job=\"a\"} 2\npsync_missing{job=\"b\"} 0\n");
  snapshot = {{"b", 7}};
  EXPECT_EQ(registry.Render(),
            "# HELP psync_missing Missing per job.\n"
            "# TYPE psync_missing gauge\n"
            "psync_missing{job=\"b\"} 7\n");
  EXPECT_EQ(runs, 2);
}

TEST(RegistryTest, ConcurrentIncrementsAreExact) {
  Registry registry;
  CounterFamily* family = *registry.AddCounter("psync_checkins_total", "C.", {"job"});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::atomic<bool> done{false};
  // Renders all along, to exercise reading while writing.
  std::thread renderer([&] {
    while (!done.load()) registry.Render();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([family, t] {
      Counter* shared = family->WithLabels({"shared"});
      for (int i = 0; i < kPerThread; ++i) {
        shared->Increment();
        // Lookups and child creation race too.
        family->WithLabels({absl::StrCat("t", t % 4)})->Increment();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done.store(true);
  renderer.join();
  EXPECT_EQ(family->WithLabels({"shared"})->Value(), kThreads * kPerThread);
  double per_key = 0;
  for (int k = 0; k < 4; ++k) {
    per_key += family->WithLabels({absl::StrCat("t", k)})->Value();
  }
  EXPECT_EQ(per_key, kThreads * kPerThread);
  EXPECT_TRUE(absl::StrContains(
      registry.Render(),
      absl::StrCat("psync_checkins_total{job=\"shared\"} ", kThreads * kPerThread, "\n")));
}

TEST(RegistryTest, RejectsInvalidNames) {
  Registry registry;
  struct Case {
    absl::Status status;
    const char* named;  // The message must name this.
  };
  const std::vector<Case> cases = {
      {registry.AddGauge("9lives", "h").status(), "9lives"},
      {registry.AddGauge("has-dash", "h").status(), "has-dash"},
      {registry.AddGauge("", "h").status(), "\"\""},
      {registry.AddCounter("psync_checkins", "h").status(), "psync_checkins"},
      {registry.AddCounter("_total", "h").status(), "_total"},
      {registry.AddCounter("bad name_total", "h").status(), "bad name_total"},
      {registry.AddGauge("g", "h", {"job", "bad-label"}).status(), "bad-label"},
      {registry.AddGauge("g", "h", {"__name"}).status(), "__name"},
      {registry.AddGauge("g", "h", {"job", "job"}).status(), "job"},
      {registry.AddGauge("g", "h", {""}).status(), "\"\""},
      {registry.AddHistogram("h", "h", {"le"}, {1}).status(), "le"},
      {registry.AddHistogram("h", "h", {}, {2, 1}).status(), "h"},
      {registry.AddHistogram("h", "h", {}, {1, 1}).status(), "h"},
      {registry.AddHistogram("h", "h", {}, {1, std::numeric_limits<double>::quiet_NaN()}).status(),
       "NaN"},
      {registry.AddHistogram("h", "h", {}, {-std::numeric_limits<double>::infinity(), 1}).status(),
       "-Inf"},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(absl::IsInvalidArgument(c.status)) << c.status;
    EXPECT_TRUE(absl::StrContains(c.status.message(), c.named))
        << c.status << " should name " << c.named;
  }
  // Nothing was registered by the failures.
  EXPECT_EQ(registry.Render(), "");
  EXPECT_TRUE(registry.AddGauge("g", "h", {"job"}).ok());
  EXPECT_TRUE(registry.AddHistogram("h", "h", {}, {1, 1e300}).ok());
}

TEST(RegistryTest, RejectsCollidingNames) {
  Registry registry;
  ASSERT_TRUE(registry.AddHistogram("psync_wait_seconds", "h", {}, {1}).ok());
  ASSERT_TRUE(registry.AddGauge("g", "h").ok());
  for (const absl::Status& status :
       {registry.AddGauge("g", "again").status(),
        registry.AddCounter("g", "h").status(),  // Not _total: invalid.
        registry.AddGauge("psync_wait_seconds_count", "h").status(),
        registry.AddGauge("psync_wait_seconds_bucket", "h").status(),
        registry.AddHistogram("psync_wait_seconds", "h", {}, {}).status()}) {
    EXPECT_FALSE(status.ok());
  }
  absl::Status status = registry.AddGauge("psync_wait_seconds_sum", "h").status();
  EXPECT_TRUE(absl::IsAlreadyExists(status)) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "psync_wait_seconds_sum"));
  // A histogram whose series would collide with an existing gauge.
  ASSERT_TRUE(registry.AddGauge("lat_count", "h").ok());
  EXPECT_TRUE(absl::IsAlreadyExists(registry.AddHistogram("lat", "h", {}, {1}).status()));
}

TEST(RegistryTest, TrailingInfBoundIsImplicit) {
  Registry registry;
  HistogramFamily* family =
      *registry.AddHistogram("h", "H.", {}, {1, std::numeric_limits<double>::infinity()});
  family->Get()->Observe(5);
  EXPECT_EQ(registry.Render(),
            "# HELP h H.\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\n"
            "h_sum 5\nh_count 1\n");
}

// Prometheus' own parser and linter over a rendered registry.
TEST(RegistryPromtoolTest, PromtoolAcceptsTheOutput) {
  constexpr char kPromtool[] = "/usr/bin/promtool";
  if (access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPromtool
                 << " not found: install Debian's \"prometheus\" package "
                    "to run this check";
  }
  Registry registry;
  Populate(&registry);
  GaugeFamily* info = *registry.AddGauge(
      "psync_build_info", "Build \"information\", with \\ and\nnewline.", {"version", "note"});
  info->WithLabels({"1.0", "quote \" backslash \\ newline \n end"})->Set(1);
  HistogramFamily* empty_buckets =
      *registry.AddHistogram("psync_step_seconds", "Step time.", {"job"}, {});
  empty_buckets->WithLabels({"job-a"})->Observe(0.5);
  const std::string text = registry.Render();

  const char* tmpdir = std::getenv("TEST_TMPDIR");
  const std::string dir = tmpdir != nullptr ? tmpdir : "/tmp";
  const std::string input = dir + "/metrics.prom";
  const std::string output = dir + "/promtool.out";
  {
    std::ofstream file(input, std::ios::binary);
    file << text;
    ASSERT_TRUE(file.good());
  }
  const std::string command =
      absl::StrCat(kPromtool, " check metrics < '", input, "' > '", output, "' 2>&1");
  int rc = std::system(command.c_str());
  std::ifstream result(output);
  std::stringstream report;
  report << result.rdbuf();
  ASSERT_NE(rc, -1);
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "promtool said:\n" << report.str() << "\non input:\n" << text;
}

}  // namespace
}  // namespace psync::metrics
