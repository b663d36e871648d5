#include "worker/report.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/coordinator_kv_store.h"

namespace psync {
namespace worker {
namespace {

double Ms(double seconds) { return seconds * 1e3; }

std::string StagedText(bool dense_staged, bool expert_staged) {
  auto text = [](absl::string_view kind, bool staged) {
    return absl::StrCat(staged ? "after" : "before", " the ", kind, " optimizer staged");
  };
  return absl::StrCat("ran ", text("dense", dense_staged), ", ", text("expert", expert_staged));
}

std::string WeightsName(const ModelConfig& config, ParamKind kind) {
  return absl::StrCat(ParamKindName(kind), " weights (", config.GroupName(kind), ")");
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5));
  return values[i];
}

// A weight diff of a step that is not ok: after an execution that a later execution of the same
// chunk in the step overwrote, or at the end of the step.
struct WrongDiff {
  int chunk = 0;
  ParamKind kind = ParamKind::kDense;
  const WeightDiff* diff = nullptr;
  const SyncExecution* execution = nullptr;  // nullptr: at the end of the step
  int last_execution = 0;                    // with `execution`: the chunk's last in the step
};

// The wrong diffs of `r`: the overwritten executions' in execution order, then the step's end's
// by chunk; each by ParamKind.
std::vector<WrongDiff> WrongDiffs(const ModelConfig& config, const StepResult& r) {
  std::vector<WrongDiff> wrong;
  std::vector<int> last(config.num_chunks, 0);
  for (const SyncExecution& e : r.syncs) last[e.chunk] = std::max(last[e.chunk], e.execution);
  for (const SyncExecution& e : r.syncs) {
    if (e.execution == last[e.chunk]) continue;
    for (ParamKind kind : kParamKinds) {
      const WeightDiff& d = e.diff[static_cast<int>(kind)];
      if (!d.ok()) wrong.push_back({e.chunk, kind, &d, &e, last[e.chunk]});
    }
  }
  for (int c = 0; c < static_cast<int>(r.final_diff.size()); ++c) {
    for (ParamKind kind : kParamKinds) {
      const WeightDiff& d = r.final_diff[c][static_cast<int>(kind)];
      if (!d.ok()) wrong.push_back({c, kind, &d, nullptr, 0});
    }
  }
  return wrong;
}

}  // namespace

std::vector<std::string> StepLines(const ModelConfig& config, const TrainerOptions& options,
                                   const StepResult& r) {
  std::vector<std::string> lines;
  const std::string who = absl::StrCat("rank ", config.rank, " step ", r.step);
  std::string head = absl::StrFormat(
      "%s: synced %d/%d chunks in %d executions, %.2f ms (grad %.2f, stage %.2f, sync %.2f)", who,
      r.chunks_synced, config.num_chunks, r.executions, Ms(r.total_seconds()), Ms(r.grad_seconds),
      Ms(r.stage_seconds), Ms(r.sync_seconds));
  if (r.early_sync_answers > 0) {
    absl::StrAppend(&head, ", ", r.early_sync_answers, " SyncDone answered 'before the release'");
  }
  if (r.duplicate_directives > 0) {
    absl::StrAppend(&head, ", ", r.duplicate_directives, " duplicate directives ignored");
  }
  if (!options.verify) {
    absl::StrAppend(&head, ", not verified");
    lines.push_back(std::move(head));
    return lines;
  }
  absl::StrAppend(&head, r.verified ? ", verify OK" : ", verify FAIL");
  lines.push_back(std::move(head));

  for (const WrongDiff& w : WrongDiffs(config, r)) {
    if (w.execution != nullptr) {
      lines.push_back(absl::StrFormat(
          "%s chunk %d %s WRONG after sync %d of %d (%s): %s", who, w.chunk,
          WeightsName(config, w.kind), w.execution->execution, w.last_execution,
          StagedText(w.execution->dense_staged, w.execution->expert_staged), w.diff->Describe()));
    } else {
      lines.push_back(absl::StrFormat("%s chunk %d %s WRONG at the end of the step: %s", who,
                                      w.chunk, WeightsName(config, w.kind), w.diff->Describe()));
    }
  }
  return lines;
}

void RunSummary::Add(const StepResult& r) {
  ++steps_;
  if (options_.verify && !r.verified) ++failed_steps_;
  executions_ += r.executions;
  chunk_syncs_ += r.chunks_synced;
  early_answers_ += r.early_sync_answers;
  auto note = [this](const Key& key, const WeightDiff& d) {
    Wrong& w = wrong_[key];
    ++w.steps;
    w.max_zeroed = std::max(w.max_zeroed, d.zeroed_fraction());
    w.max_nonfinite = std::max(w.max_nonfinite, d.nonfinite_fraction());
    w.max_mismatched = std::max(w.max_mismatched, d.mismatched_fraction());
    w.max_abs_error = std::max(w.max_abs_error, d.max_abs_error);
    return &w;
  };
  for (const WrongDiff& wrong : WrongDiffs(config_, r)) {
    const bool overwritten = wrong.execution != nullptr;
    Wrong* w = note({wrong.chunk, static_cast<int>(wrong.kind), overwritten}, *wrong.diff);
    if (overwritten) {
      w->dense_staged = wrong.execution->dense_staged;
      w->expert_staged = wrong.execution->expert_staged;
      w->execution = wrong.execution->execution;
      w->of = wrong.last_execution;
    }
  }
}

std::vector<std::string> RunSummary::Lines() const {
  std::vector<std::string> lines;
  const std::string who = absl::StrCat("rank ", config_.rank);
  if (!options_.verify) {
    lines.push_back(absl::StrCat(who, " result: ", steps_ > 0 ? "DONE" : "FAIL", ": ", steps_,
                                 " steps, weights not verified"));
  } else if (ok()) {
    lines.push_back(absl::StrFormat(
        "%s result: OK: all %d steps verified: every chunk's dense and expert weights equal the "
        "CPU reference %s",
        who, steps_,
        options_.tolerance == 0 ? "bit for bit"
                                : absl::StrFormat("within %g", options_.tolerance)));
  } else {
    lines.push_back(absl::StrFormat("%s result: FAIL: %d of %d steps ended with wrong weights", who,
                                    failed_steps_, steps_));
  }
  for (const auto& [key, w] : wrong_) {
    const auto& [chunk, kind_index, intermediate] = key;
    const ParamKind kind = static_cast<ParamKind>(kind_index);
    const std::string how = absl::StrFormat(
        "up to %.1f%% of the elements wrong, %.1f%% zeroed, %.1f%% non-finite, max abs error %.4g",
        100 * w.max_mismatched, 100 * w.max_zeroed, 100 * w.max_nonfinite, w.max_abs_error);
    if (intermediate) {
      lines.push_back(
          absl::StrFormat("%s   chunk %d %s wrong after sync %d of %d in %d steps (%s): %s", who,
                          chunk, WeightsName(config_, kind), w.execution, w.of, w.steps,
                          StagedText(w.dense_staged, w.expert_staged), how));
    } else {
      lines.push_back(absl::StrFormat("%s   chunk %d %s wrong at the end of %d of %d steps: %s",
                                      who, chunk, WeightsName(config_, kind), w.steps, steps_,
                                      how));
    }
  }
  const int64_t expected = steps_ * config_.num_chunks;
  lines.push_back(absl::StrFormat(
      "%s   syncs: %d chunk syncs in %d executions (exactly once would be %d)%s", who, chunk_syncs_,
      executions_, expected,
      early_answers_ > 0
          ? absl::StrFormat("; %d SyncDone reports answered 'before the release' (early syncs)",
                            early_answers_)
          : ""));
  return lines;
}

BenchSummary SummarizeBench(const std::vector<StepResult>& timed) {
  BenchSummary b;
  b.steps = static_cast<int64_t>(timed.size());
  std::vector<double> total, grad, stage, sync;
  for (const StepResult& r : timed) {
    total.push_back(r.total_seconds());
    grad.push_back(r.grad_seconds);
    stage.push_back(r.stage_seconds);
    sync.push_back(r.sync_seconds);
  }
  b.step_median = Quantile(total, 0.5);
  b.step_p10 = Quantile(total, 0.1);
  b.step_p90 = Quantile(total, 0.9);
  b.grad_median = Quantile(grad, 0.5);
  b.stage_median = Quantile(stage, 0.5);
  b.sync_median = Quantile(sync, 0.5);
  return b;
}

std::vector<std::string> BenchLines(const ModelConfig& config, const TrainerOptions& options,
                                    absl::string_view compute, absl::string_view collective,
                                    const BenchSummary& b, const GatherStats gather[2],
                                    int64_t warmup_steps) {
  std::vector<std::string> lines;
  const std::string who = absl::StrCat("bench rank ", config.rank);
  lines.push_back(absl::StrFormat(
      "%s: sync %s, %s on %s + %s, W=%d E=%d C=%d D=%d X=%d buckets=%d; %d timed steps after %d "
      "warm-up: step median %.3f ms (p10 %.3f, p90 %.3f); medians grad %.3f, stage %.3f, sync "
      "%.3f ms",
      who, SyncModeName(options.mode), ParamDtypeName(config.dtype), compute, collective,
      config.world_size, config.expert_parallel, config.num_chunks, config.dense_elements,
      config.expert_elements, config.buckets, b.steps, warmup_steps, Ms(b.step_median),
      Ms(b.step_p10), Ms(b.step_p90), Ms(b.grad_median), Ms(b.stage_median), Ms(b.sync_median)));
  for (ParamKind kind : kParamKinds) {
    const GatherStats& g = gather[static_cast<int>(kind)];
    if (g.calls == 0 || g.seconds <= 0) continue;
    const int n = config.GroupSize(kind);
    const double per_call_bytes = static_cast<double>(g.bytes) / g.calls;
    const double algbw = g.bytes / g.seconds;
    const double busbw = algbw * (n - 1) / n;
    lines.push_back(
        absl::StrFormat("%s: %s all-gather over %s (%d ranks): %d timed calls, %.0f bytes out per "
                        "call, %.1f us per call, algbw %.2f GB/s, busbw %.2f GB/s",
                        who, ParamKindName(kind), config.GroupName(kind), n, g.calls,
                        per_call_bytes, 1e6 * g.seconds / g.calls, algbw / 1e9, busbw / 1e9));
  }
  return lines;
}

absl::StatusOr<AuditSnapshot> FetchAudit(psync::v1::Coordinator::Stub* stub,
                                         const std::string& job_id, absl::Duration timeout) {
  AuditSnapshot snapshot;
  psync::v1::GetJobStatusRequest status_request;
  status_request.set_job_id(job_id);
  absl::Status status = CallWithTimeout(timeout, "GetJobStatus", [&](grpc::ClientContext* context) {
    return stub->GetJobStatus(context, status_request, &snapshot.status);
  });
  if (!status.ok()) return status;
  psync::v1::GetAuditRequest audit_request;
  audit_request.set_job_id(job_id);
  status = CallWithTimeout(timeout, "GetAudit", [&](grpc::ClientContext* context) {
    return stub->GetAudit(context, audit_request, &snapshot.audit);
  });
  if (!status.ok()) return status;
  return snapshot;
}

std::string AuditTotalsText(const psync::v1::AuditTotals& t) {
  return absl::StrCat("released ", t.released(), ", complete ", t.complete(), ", released twice ",
                      t.double_releases(), ", checksum mismatches ", t.checksum_mismatches(),
                      ", early syncs ", t.early_syncs(), ", repeated syncs ", t.repeated_syncs());
}

bool AuditClean(const psync::v1::AuditTotals& t) {
  return t.double_releases() == 0 && t.checksum_mismatches() == 0 && t.early_syncs() == 0 &&
         t.repeated_syncs() == 0 && t.complete() == t.released();
}

std::string StepRanges(const std::vector<uint64_t>& steps) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(steps[i]) : absl::StrCat(steps[i], "-", steps[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::vector<std::string> AuditLines(const AuditSnapshot& s) {
  std::vector<std::string> lines;
  const psync::v1::JobStatus& st = s.status;
  const psync::v1::AuditTotals& t = s.audit.totals();
  lines.push_back(absl::StrCat("coordinator audit of job ", st.job_id(), " (generation ",
                               st.generation(), ", ", st.state(), ", ", st.ranks_joined(), " of ",
                               st.world_size(), " ranks joined):"));
  lines.push_back(absl::StrCat("  (step, chunk)s ", AuditTotalsText(t)));
  // Per chunk: the steps with each kind of violation, and how many reports.
  struct PerChunk {
    std::vector<uint64_t> early_steps, repeated_steps, mismatch_steps, double_steps,
        incomplete_steps;
    uint64_t early = 0, repeated = 0;
  };
  std::map<uint32_t, PerChunk> chunks;
  for (const psync::v1::SyncAuditRecord& r : s.audit.records()) {
    PerChunk& p = chunks[r.chunk()];
    if (r.early_syncs() > 0) {
      p.early_steps.push_back(r.step());
      p.early += r.early_syncs();
    }
    if (r.repeated_syncs() > 0) {
      p.repeated_steps.push_back(r.step());
      p.repeated += r.repeated_syncs();
    }
    if (r.checksum_mismatch()) p.mismatch_steps.push_back(r.step());
    if (r.releases() > 1) p.double_steps.push_back(r.step());
    if (r.releases() > 0 && !r.complete()) p.incomplete_steps.push_back(r.step());
  }
  for (auto& [chunk, p] : chunks) {
    std::vector<std::string> parts;
    for (auto* v : {&p.early_steps, &p.repeated_steps, &p.mismatch_steps, &p.double_steps,
                    &p.incomplete_steps}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    if (!p.early_steps.empty()) {
      parts.push_back(absl::StrCat(p.early, " early syncs (SyncDone before the release) in steps ",
                                   StepRanges(p.early_steps)));
    }
    if (!p.repeated_steps.empty()) {
      parts.push_back(absl::StrCat(p.repeated, " repeated syncs (a rank synced twice) in steps ",
                                   StepRanges(p.repeated_steps)));
    }
    if (!p.mismatch_steps.empty()) {
      parts.push_back(absl::StrCat("checksum mismatches in steps ", StepRanges(p.mismatch_steps)));
    }
    if (!p.double_steps.empty()) {
      parts.push_back(absl::StrCat("released twice in steps ", StepRanges(p.double_steps)));
    }
    if (!p.incomplete_steps.empty()) {
      parts.push_back(absl::StrCat("SyncDone missing in steps ", StepRanges(p.incomplete_steps)));
    }
    if (!parts.empty()) {
      lines.push_back(absl::StrCat("  chunk ", chunk, ": ", absl::StrJoin(parts, "; ")));
    }
  }
  const psync::v1::JobCounters& c = st.counters();
  lines.push_back(absl::StrCat("  counters: check-ins ", c.checkins(), ", releases ", c.releases(),
                               ", syncs done ", c.syncs_done(), ", violations ", c.violations(),
                               ", rejected ", c.rejected(), ", stalls ", c.stalls()));
  if (AuditClean(t)) {
    lines.push_back(absl::StrCat("coordinator audit: CLEAN: ", t.released(),
                                 " (step, chunk)s, each released once and synced once by every "
                                 "rank, checksums agreed"));
  } else {
    std::vector<std::string> what;
    if (t.early_syncs() > 0) what.push_back(absl::StrCat(t.early_syncs(), " early syncs"));
    if (t.repeated_syncs() > 0) what.push_back(absl::StrCat(t.repeated_syncs(), " repeated syncs"));
    if (t.checksum_mismatches() > 0) {
      what.push_back(absl::StrCat(t.checksum_mismatches(), " checksum mismatches"));
    }
    if (t.double_releases() > 0) {
      what.push_back(absl::StrCat(t.double_releases(), " double releases"));
    }
    if (t.complete() != t.released()) {
      what.push_back(absl::StrCat(t.released() - t.complete(), " released but not complete"));
    }
    lines.push_back(absl::StrCat("coordinator audit: VIOLATIONS: ", absl::StrJoin(what, ", ")));
  }
  return lines;
}

}  // namespace worker
}  // namespace psync
