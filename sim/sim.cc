#include "sim/sim.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "sim/recorder.h"

namespace psync::sim {
namespace {

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Shared by the rank threads of one run: the first failure stops every rank.
class RunControl {
 public:
  void Register(uint32_t rank, Client* client) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    clients_[rank] = client;
    if (stopped_) client->Close();
  }

  void Unregister(uint32_t rank) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    clients_[rank] = nullptr;
  }

  // Records the error unless the run was already stopped (then it is a consequence), and stops.
  void Fail(std::string error) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    errors_.push_back(std::move(error));
    for (Client* c : clients_) {
      if (c != nullptr) c->Close();
    }
  }

  bool stopped() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }

  std::vector<std::string> errors() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return errors_;
  }

  explicit RunControl(uint32_t world_size) : clients_(world_size, nullptr) {}

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<Client*> clients_ ABSL_GUARDED_BY(mu_);
};

class SimulatedRank {
 public:
  SimulatedRank(uint32_t rank, const SimPlan& plan, const SimOptions& options,
                const std::set<uint64_t>& skipped, Recorder* recorder, RunControl* control)
      : rank_(rank),
        plan_(plan),
        options_(options),
        skipped_(skipped),
        recorder_(recorder),
        control_(control),
        rng_(SplitMix(options.seed ^ SplitMix(rank + 1))) {}

  void Run() {
    ClientOptions client_options;
    client_options.target = options_.target;
    client_options.channel = options_.channel;
    client_options.plan = plan_.JoinRequestFor(rank_, options_.job_id, options_.first_step);
    client_options.call_timeout = options_.call_timeout;
    absl::StatusOr<std::unique_ptr<Client>> connected = Client::Connect(client_options);
    if (!connected.ok()) {
      control_->Fail(absl::StrCat("rank ", rank_, ": Connect: ", connected.status().ToString()));
      return;
    }
    std::unique_ptr<Client> client = std::move(*connected);
    client->SetNoticeHandler([this](const psync::v1::SessionDown& down) {
      if (down.has_directive()) recorder_->DirectiveArrived(rank_, down.directive());
      if (down.has_step_skipped()) recorder_->StepSkippedArrived(rank_, down.step_skipped().step());
    });
    control_->Register(rank_, client.get());
    client_ = client.get();
    if (client->next_step() != options_.first_step) {
      Fail(absl::StrCat("Join returned next_step ", client->next_step(), ", want ",
                        options_.first_step));
    }
    for (uint64_t s = 0; s < options_.steps && !control_->stopped(); ++s) {
      const uint64_t step = options_.first_step + s;
      if (skipped_.count(step) > 0 ? !Skip(step) : !Sync(step)) break;
    }
    const ClientStats stats = client->stats();
    recorder_->ClientCounters(rank_, stats.duplicate_directives_dropped, stats.reconnects,
                              stats.messages_resent);
    control_->Unregister(rank_);
    client_ = nullptr;
    client->Close();
  }

 private:
  void Fail(const std::string& what) { control_->Fail(absl::StrCat("rank ", rank_, ": ", what)); }

  bool Check(const absl::Status& status, const std::string& what) {
    if (status.ok()) return true;
    Fail(absl::StrCat(what, ": ", status.ToString()));
    return false;
  }

  void Delay() {
    if (options_.max_arrival_delay <= absl::ZeroDuration()) return;
    std::uniform_int_distribution<int64_t> nanos(
        0, absl::ToInt64Nanoseconds(options_.max_arrival_delay));
    absl::SleepFor(absl::Nanoseconds(nanos(rng_)));
  }

  bool Duplicate() {
    return options_.duplicate_probability > 0 &&
           std::bernoulli_distribution(options_.duplicate_probability)(rng_);
  }

  bool Skip(uint64_t step) {
    Delay();
    recorder_->SkipSent(step, rank_, false);
    if (!Check(client_->SkipStep(step, "found_inf"), absl::StrCat("SkipStep(", step, ")"))) {
      return false;
    }
    if (Duplicate()) {
      recorder_->SkipSent(step, rank_, true);
      if (!Check(client_->SkipStep(step, "found_inf"),
                 absl::StrCat("duplicate SkipStep(", step, ")"))) {
        return false;
      }
    }
    return Check(client_->WaitForStepSkipped(step, options_.call_timeout),
                 absl::StrCat("WaitForStepSkipped(", step, ")"));
  }

  bool Sync(uint64_t step) {
    // 1. Stage every (chunk, optimizer) of this rank in a random order.
    std::vector<psync::v1::Staged> items;
    for (uint32_t chunk : plan_.MemberChunks(rank_)) {
      for (const std::string& optimizer : plan_.Optimizers(chunk)) {
        psync::v1::Staged item;
        item.set_step(step);
        item.set_chunk(chunk);
        item.set_optimizer(optimizer);
        item.set_shard_checksum(ShardChecksum(step, chunk, rank_, optimizer));
        items.push_back(std::move(item));
      }
    }
    std::shuffle(items.begin(), items.end(), rng_);
    for (size_t begin = 0; begin < items.size();) {
      size_t size = 1;
      if (options_.max_batch_items > 1) {
        size = std::uniform_int_distribution<size_t>(1, options_.max_batch_items)(rng_);
      }
      size = std::min(size, items.size() - begin);
      const std::vector<psync::v1::Staged> batch(items.begin() + begin,
                                                 items.begin() + begin + size);
      begin += size;
      Delay();
      if (!SendStaged(step, batch, false)) return false;
      if (Duplicate() && !SendStaged(step, batch, true)) return false;
    }

    // 2. Run every chunk's sync once its directive is here.
    for (uint32_t chunk : plan_.MemberChunks(rank_)) {
      absl::StatusOr<psync::v1::SyncDirective> directive =
          client_->WaitForDirective(step, chunk, options_.call_timeout);
      if (!Check(directive.status(), absl::StrCat("WaitForDirective(", step, ", ", chunk, ")"))) {
        return false;
      }
      recorder_->DirectiveTaken(rank_, *directive);
      std::vector<psync::v1::GroupChecksum> checksums;
      for (const std::string& group : plan_.GroupsOf(rank_, chunk)) {
        psync::v1::GroupChecksum c;
        c.set_group(group);
        c.set_checksum(GroupChecksum(step, chunk, group));
        checksums.push_back(std::move(c));
      }
      if (!Check(client_->ReportSyncDone(step, chunk, std::move(checksums)),
                 absl::StrCat("ReportSyncDone(", step, ", ", chunk, ")"))) {
        return false;
      }
    }
    return true;
  }

  bool SendStaged(uint64_t step, const std::vector<psync::v1::Staged>& batch, bool duplicate) {
    for (const psync::v1::Staged& item : batch) {
      recorder_->CheckinSent(step, item.chunk(), rank_, item.optimizer(), duplicate);
    }
    absl::Status status;
    if (batch.size() == 1) {
      status = client_->ReportStaged(step, batch[0].chunk(), batch[0].optimizer(),
                                     batch[0].shard_checksum());
    } else {
      status = client_->ReportStagedBatch(batch);
    }
    return Check(status, absl::StrCat(duplicate ? "duplicate " : "", "check-in of step ", step,
                                      " (", batch.size(), " items)"));
  }

  const uint32_t rank_;
  const SimPlan& plan_;
  const SimOptions& options_;
  const std::set<uint64_t>& skipped_;
  Recorder* const recorder_;
  RunControl* const control_;
  std::mt19937_64 rng_;
  Client* client_ = nullptr;
};

}  // namespace

absl::Status ValidateSimOptions(const SimOptions& options) {
  if (options.channel == nullptr && options.target.empty()) {
    return absl::InvalidArgumentError("target must not be empty (or set channel)");
  }
  if (options.job_id.empty()) return absl::InvalidArgumentError("job_id must not be empty");
  if (options.max_arrival_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_arrival_delay must be >= 0");
  }
  if (!(options.duplicate_probability >= 0 && options.duplicate_probability <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate_probability must be in [0, 1] (got ",
                                                   options.duplicate_probability, ")"));
  }
  if (!(options.skip_probability >= 0 && options.skip_probability <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("skip_probability must be in [0, 1] (got ", options.skip_probability, ")"));
  }
  if (options.max_batch_items < 1)
    return absl::InvalidArgumentError("max_batch_items must be >= 1");
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("call_timeout must be > 0");
  }
  return absl::OkStatus();
}

std::set<uint64_t> SkippedSteps(const SimOptions& options) {
  std::set<uint64_t> out;
  const uint64_t end = options.first_step + options.steps;
  for (uint64_t step : options.skip_steps) {
    if (step >= options.first_step && step < end) out.insert(step);
  }
  if (options.skip_probability > 0) {
    for (uint64_t step = options.first_step; step < end; ++step) {
      const double u = static_cast<double>(SplitMix(options.seed ^ SplitMix(~step)) >> 11) /
                       static_cast<double>(uint64_t{1} << 53);
      if (u < options.skip_probability) out.insert(step);
    }
  }
  return out;
}

absl::StatusOr<SimReport> RunSimulatedJob(const SimPlan& plan, const SimOptions& options) {
  if (absl::Status s = plan.Validate(); !s.ok()) return s;
  if (absl::Status s = ValidateSimOptions(options); !s.ok()) return s;
  const std::set<uint64_t> skipped = SkippedSteps(options);
  Recorder recorder;
  RunControl control(plan.world_size);

  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<SimulatedRank>> ranks;
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < plan.world_size; ++r) {
    ranks.push_back(
        std::make_unique<SimulatedRank>(r, plan, options, skipped, &recorder, &control));
  }
  for (auto& rank : ranks) threads.emplace_back([r = rank.get()] { r->Run(); });
  for (std::thread& t : threads) t.join();

  SimReport report = recorder.Analyze(plan, options.first_step, options.steps, skipped);
  report.errors = control.errors();
  report.wall_time = absl::Now() - start;
  return report;
}

}  // namespace psync::sim
