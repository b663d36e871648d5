#include "sim/recorder.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::sim {
namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Where(uint64_t step, uint32_t chunk) {
  return absl::StrCat("step ", step, " chunk ", chunk, ": ");
}

}  // namespace

Recorder::Recorder(std::function<int64_t()> now_nanos)
    : now_nanos_(now_nanos ? std::move(now_nanos) : SteadyNanos) {}

void Recorder::CheckinSent(uint64_t step, uint32_t chunk, uint32_t rank,
                           const std::string& optimizer, bool duplicate) {
  const int64_t now = now_nanos_();
  absl::MutexLock lock(&mu_);
  if (duplicate) {
    ++duplicates_sent_;
    return;
  }
  if (chunks_[{step, chunk}].first_sent.emplace(std::make_pair(rank, optimizer), now).second) {
    ++checkins_sent_;
  }
}

void Recorder::SkipSent(uint64_t step, uint32_t rank, bool duplicate) {
  absl::MutexLock lock(&mu_);
  if (duplicate) {
    ++duplicates_sent_;
    return;
  }
  if (skip_votes_[step].insert(rank).second) ++skips_sent_;
}

void Recorder::DirectiveArrived(uint32_t rank, const psync::v1::SyncDirective& directive) {
  const int64_t now = now_nanos_();
  absl::MutexLock lock(&mu_);
  chunks_[{directive.step(), directive.chunk()}].arrivals[rank].push_back(
      {now, directive.generation(), directive.sequence()});
}

void Recorder::DirectiveTaken(uint32_t rank, const psync::v1::SyncDirective& directive) {
  absl::MutexLock lock(&mu_);
  ++chunks_[{directive.step(), directive.chunk()}].taken[rank];
}

void Recorder::StepSkippedArrived(uint32_t rank, uint64_t step) {
  absl::MutexLock lock(&mu_);
  skipped_arrivals_[step].insert(rank);
}

void Recorder::ClientCounters(uint32_t rank, uint64_t duplicates_dropped, uint64_t reconnects,
                              uint64_t messages_resent) {
  absl::MutexLock lock(&mu_);
  client_counters_[rank] = {duplicates_dropped, reconnects, messages_resent};
}

SimReport Recorder::Analyze(const SimPlan& plan, uint64_t first_step, uint64_t steps,
                            const std::set<uint64_t>& skipped) const {
  absl::MutexLock lock(&mu_);
  SimReport report;
  report.checkins_sent = checkins_sent_;
  report.duplicates_sent = duplicates_sent_;
  report.skips_sent = skips_sent_;
  report.directives_per_rank.assign(plan.world_size, 0);
  for (const auto& [rank, c] : client_counters_) {
    report.duplicate_directives_dropped += c.duplicates_dropped;
    report.reconnects += c.reconnects;
    report.messages_resent += c.messages_resent;
  }

  std::vector<uint32_t> chunks;  // chunks that have members
  for (uint32_t c = 0; c < plan.num_chunks; ++c) {
    if (!plan.Members(c).empty()) chunks.push_back(c);
  }
  std::map<uint64_t, Key> sequence_owner;
  const uint64_t end_step = first_step + steps;

  for (const auto& [key, record] : chunks_) {
    const auto& [step, chunk] = key;
    for (const auto& [rank, arrivals] : record.arrivals) {
      if (rank < plan.world_size) report.directives_per_rank[rank] += arrivals.size();
      report.directives_received += arrivals.size();
    }
    if (step < first_step || step >= end_step) {
      report.violations.push_back(absl::StrCat(Where(step, chunk),
                                               "activity outside the simulated steps [", first_step,
                                               ", ", end_step, ")"));
    }
  }

  for (uint64_t step = first_step; step < end_step; ++step) {
    StepRow row;
    row.step = step;
    if (skipped.count(step) > 0) {
      row.skipped = true;
      ++report.skipped_steps;
      for (uint32_t c = 0; c < plan.num_chunks; ++c) {
        auto it = chunks_.find({step, c});
        if (it != chunks_.end() && !it->second.arrivals.empty()) {
          report.violations.push_back(
              absl::StrCat(Where(step, c), "released although every rank skipped the step"));
        }
      }
      auto got = skipped_arrivals_.find(step);
      const size_t reached = got == skipped_arrivals_.end() ? 0 : got->second.size();
      if (reached != plan.world_size) {
        report.violations.push_back(absl::StrCat("step ", step, ": StepSkipped reached ", reached,
                                                 " of ", plan.world_size, " ranks"));
      }
      report.steps.push_back(row);
      continue;
    }

    std::vector<absl::Duration> latencies;
    int64_t step_first_send = INT64_MAX;
    int64_t step_last_send = INT64_MIN;
    for (uint32_t chunk : chunks) {
      ++row.chunks_expected;
      ++report.expected_releases;
      auto it = chunks_.find({step, chunk});
      if (it == chunks_.end()) {
        report.violations.push_back(absl::StrCat(Where(step, chunk), "nothing recorded"));
        continue;
      }
      const ChunkRecord& record = it->second;

      // The last contributor's send.
      int64_t last_send = INT64_MIN;
      SimContributor last;
      std::vector<std::string> unsent;
      for (const SimContributor& c : plan.Contributors(chunk)) {
        auto sent = record.first_sent.find({c.rank, c.optimizer});
        if (sent == record.first_sent.end()) {
          unsent.push_back(absl::StrCat("r", c.rank, "/", c.optimizer));
          continue;
        }
        if (sent->second > last_send) {
          last_send = sent->second;
          last = c;
        }
        step_first_send = std::min(step_first_send, sent->second);
        if (sent->second > step_last_send) {
          step_last_send = sent->second;
          row.slowest = c;
        }
      }

      // Deliveries to members.
      const std::vector<uint32_t> members = plan.Members(chunk);
      const std::set<uint32_t> member_set(members.begin(), members.end());
      std::set<uint64_t> sequences;
      int64_t last_arrival = INT64_MIN;
      bool all_delivered = true;
      for (uint32_t m : members) {
        auto got = record.arrivals.find(m);
        const size_t n = got == record.arrivals.end() ? 0 : got->second.size();
        if (n != 1) {
          all_delivered = all_delivered && n > 0;
          report.violations.push_back(
              absl::StrCat(Where(step, chunk), "rank ", m, " received the directive ", n,
                           " times past its client's de-duplication (want exactly 1)"));
        }
        auto taken = record.taken.find(m);
        const int t = taken == record.taken.end() ? 0 : taken->second;
        if (n > 0 && t != 1) {
          report.violations.push_back(absl::StrCat(Where(step, chunk), "WaitForDirective handed ",
                                                   "the directive to rank ", m, " ", t,
                                                   " times (want exactly 1)"));
        }
        if (n == 0) continue;
        for (const Arrival& a : got->second) {
          sequences.insert(a.sequence);
          last_arrival = std::max(last_arrival, a.time);
          if (!unsent.empty()) {
            report.violations.push_back(absl::StrCat(
                Where(step, chunk), "early release: the directive reached rank ", m,
                " but contributors [", absl::StrJoin(unsent, ","), "] never sent a check-in"));
          } else if (a.time < last_send) {
            report.violations.push_back(
                absl::StrCat(Where(step, chunk), "early release: the directive reached rank ", m,
                             " ", absl::FormatDuration(absl::Nanoseconds(last_send - a.time)),
                             " before r", last.rank, "/", last.optimizer, " sent its check-in"));
          }
        }
      }
      for (const auto& [rank, arrivals] : record.arrivals) {
        if (member_set.count(rank) == 0) {
          report.violations.push_back(absl::StrCat(Where(step, chunk), "rank ", rank,
                                                   " is not a member but got the directive"));
        }
      }
      if (sequences.size() > 1) {
        report.violations.push_back(absl::StrCat(Where(step, chunk),
                                                 "members saw different sequence numbers [",
                                                 absl::StrJoin(sequences, ","), "]"));
      }
      for (uint64_t seq : sequences) {
        auto [owner, fresh] = sequence_owner.emplace(seq, Key{step, chunk});
        if (!fresh && owner->second != Key{step, chunk}) {
          report.violations.push_back(
              absl::StrCat(Where(step, chunk), "sequence ", seq, " was already used by step ",
                           owner->second.first, " chunk ", owner->second.second));
        }
      }
      if (all_delivered && !members.empty()) {
        ++row.chunks_released;
        ++report.releases;
        if (last_send != INT64_MIN)
          latencies.push_back(absl::Nanoseconds(last_arrival - last_send));
      }
    }
    if (!latencies.empty()) {
      std::sort(latencies.begin(), latencies.end());
      row.latency_p50 = latencies[(latencies.size() - 1) / 2];
      row.latency_max = latencies.back();
    }
    if (step_last_send != INT64_MIN)
      row.slowest_lag = absl::Nanoseconds(step_last_send - step_first_send);
    report.steps.push_back(row);
  }
  return report;
}

}  // namespace psync::sim
