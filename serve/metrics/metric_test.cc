#include "serve/metrics/metric.h"

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace psync::metrics {
namespace {

TEST(CounterTest, OnlyGoesUp) {
  Counter counter;
  EXPECT_EQ(counter.Value(), 0);
  counter.Increment();
  counter.Add(2.5);
  EXPECT_EQ(counter.Value(), 3.5);
  counter.Add(-1);
  counter.Add(std::nan(""));
  EXPECT_EQ(counter.Value(), 3.5);
  counter.Add(0);
  EXPECT_EQ(counter.Value(), 3.5);
}

TEST(GaugeTest, SetAddSub) {
  Gauge gauge;
  gauge.Set(10);
  gauge.Add(2);
  gauge.Sub(5);
  gauge.Increment();
  gauge.Decrement();
  gauge.Decrement();
  EXPECT_EQ(gauge.Value(), 6);
  gauge.Set(-1.5);
  EXPECT_EQ(gauge.Value(), -1.5);
}

TEST(HistogramTest, BucketsAreCumulativeAndInclusive) {
  Histogram histogram({0.25, 1, 2.5});
  for (double value : {0.125, 0.25, 0.5, 1.0, 3.0, 100.0}) {
    histogram.Observe(value);
  }
  histogram.Observe(std::nan(""));  // Ignored.
  Histogram::Snapshot snapshot = histogram.Collect();
  EXPECT_EQ(snapshot.upper_bounds, (std::vector<double>{0.25, 1, 2.5}));
  // le=0.25 holds 0.125 and 0.25 (bounds are inclusive).
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{2, 4, 4, 6}));
  EXPECT_EQ(snapshot.count, 6u);
  EXPECT_EQ(snapshot.sum, 104.875);
}

// The same value observed many times at once counts as that many observations.
TEST(HistogramTest, AValueObservedManyTimesAtOnce) {
  Histogram histogram({0.25, 1, 2.5});
  histogram.Observe(0.5, 2048);
  histogram.Observe(3.0, 2);
  histogram.Observe(0.125, 0);            // nothing
  histogram.Observe(std::nan(""), 1000);  // ignored
  Histogram::Snapshot snapshot = histogram.Collect();
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{0, 2048, 2048, 2050}));
  EXPECT_EQ(snapshot.count, 2050u);
  EXPECT_EQ(snapshot.sum, 1030.0);
}

TEST(HistogramTest, CumulativeCountsNeverDecrease) {
  Histogram histogram({1, 2, 4, 8, 16});
  for (int i = 0; i < 1000; ++i) histogram.Observe((i * 7919) % 40 / 2.0);
  Histogram::Snapshot snapshot = histogram.Collect();
  for (size_t i = 1; i < snapshot.cumulative_counts.size(); ++i) {
    EXPECT_LE(snapshot.cumulative_counts[i - 1], snapshot.cumulative_counts[i]);
  }
  EXPECT_EQ(snapshot.cumulative_counts.back(), 1000u);
  EXPECT_EQ(snapshot.count, 1000u);
}

TEST(HistogramTest, NoBoundsMeansOnlyInf) {
  Histogram histogram({});
  histogram.Observe(-5);
  histogram.Observe(std::numeric_limits<double>::infinity());
  Histogram::Snapshot snapshot = histogram.Collect();
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{2}));
}

TEST(MetricConcurrencyTest, ConcurrentUpdatesAreExact) {
  Counter counter;
  Gauge gauge;
  Histogram histogram({0.5});
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.Increment();
        gauge.Add(2);
        gauge.Sub(1);
        histogram.Observe(i % 2);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter.Value(), kThreads * kPerThread);
  EXPECT_EQ(gauge.Value(), kThreads * kPerThread);
  Histogram::Snapshot snapshot = histogram.Collect();
  EXPECT_EQ(snapshot.cumulative_counts,
            (std::vector<uint64_t>{kThreads * kPerThread / 2, kThreads * kPerThread}));
  EXPECT_EQ(snapshot.sum, kThreads * kPerThread / 2);
}

TEST(SecondsObserverTest, ObservesDurationsInSecondsAndIsEmptyWithoutAHistogram) {
  EXPECT_FALSE(SecondsObserver(nullptr));
  Histogram histogram({0.001, 0.01});
  const std::function<void(absl::Duration)> observe = SecondsObserver(&histogram);
  ASSERT_TRUE(observe);
  observe(absl::Microseconds(500));
  observe(absl::Milliseconds(4));
  const Histogram::Snapshot snapshot = histogram.Collect();
  EXPECT_EQ(snapshot.cumulative_counts, (std::vector<uint64_t>{1, 2, 2}));
  EXPECT_DOUBLE_EQ(snapshot.sum, 0.0045);
}

}  // namespace
}  // namespace psync::metrics
