// TwinTrackers: two JobTrackers fed the same inputs, `grouped` through a path that applies several
// ranks' messages at once (StageMerged, SyncDonesInSlots) and `single` message by message, compared
// after each input: the same statuses, the same output (events with their details, and
// deliveries) and the same observable state (StateText). Test-only; thread-compatible.
#ifndef PSYNC_SERVER_CORE_TWIN_TRACKERS_H_
#define PSYNC_SERVER_CORE_TWIN_TRACKERS_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/core/job_tracker.h"
#include "server/core/test_util.h"

namespace psync::core::testing {

// "OK: " or "FAILED_PRECONDITION: rank 9 has not joined generation 1".
inline std::string StatusText(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

class TwinTrackers {
 public:
  // How outputs compare: in order, or as multisets (where a group's release comes after the
  // group, and after each of its ranks one by one).
  enum class Order { kExact, kAnyOrder };

  TwinTrackers(Order order, absl::Time start)
      : order_(order),
        now_(start),
        grouped_("job", TrackerOptions()),
        single_("job", TrackerOptions()) {}

  // Any input, on both: the statuses, outputs and states must agree. Returns the status.
  template <typename Fn>
  std::string Both(Fn fn) {
    Decisions a, b;
    const std::string sa = StatusText(fn(grouped_, &a));
    const std::string sb = StatusText(fn(single_, &b));
    EXPECT_EQ(sa, sb);
    ExpectSameOutput(a, b);
    return sa;
  }
  // Every plan joins both, each join accepted on both.
  void JoinAll(const std::vector<RankPlan>& plans) {
    for (const RankPlan& plan : plans) {
      EXPECT_EQ(
          Both([&](JobTracker& t, Decisions* out) { return t.Join(plan, now_, out).status(); }),
          "OK: ");
    }
  }
  // The outputs of one input on each tracker agree, and so do the states after it.
  void ExpectSameOutput(const Decisions& grouped, const Decisions& single) {
    EXPECT_EQ(Output(grouped), Output(single));
    EXPECT_EQ(StateText(grouped_, now_), StateText(single_, now_));
  }
  std::vector<std::string> Output(const Decisions& out) const {
    std::vector<std::string> all;
    for (const Event& e : out.events) all.push_back(absl::StrCat(EventText(e), " | ", e.detail));
    for (const Delivery& d : out.deliveries) all.push_back(DeliveryText(d));
    if (order_ == Order::kAnyOrder) std::sort(all.begin(), all.end());
    return all;
  }

  JobTracker& grouped() { return grouped_; }
  JobTracker& single() { return single_; }
  absl::Time now() const { return now_; }
  void Tick() { now_ += absl::Milliseconds(1); }

 private:
  const Order order_;
  absl::Time now_;
  JobTracker grouped_;
  JobTracker single_;
};

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_TWIN_TRACKERS_H_
