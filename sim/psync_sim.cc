// psync_sim: runs a simulated MoE training job (one thread and one psync client per rank) against
// a coordinator and prints the per-step table and a verdict.
//
// Exit status: 0 when every (step, chunk) was released exactly once to every member after all its
// contributors; 1 when the recorder found a violation or a rank's call failed; 2 for bad flags.
//
//   psync_sim --target=127.0.0.1:7070 --ranks=64 --chunks=4 --experts=8 --steps=50
//       --dup_prob=0.05 --skip_steps=10,20
#include <cstdio>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/sim.h"

ABSL_FLAG(std::string, target, "127.0.0.1:7070", "coordinator address (host:port)");
ABSL_FLAG(std::string, job, "sim", "job id");
ABSL_FLAG(uint32_t, ranks, 8, "world size W");
ABSL_FLAG(uint32_t, chunks, 4, "model chunks C");
ABSL_FLAG(uint32_t, experts, 2, "expert-parallel size E (must divide --ranks)");
ABSL_FLAG(std::string, dense_chunks, "all", "chunks with dense parameters: 'all' or a list 0,2");
ABSL_FLAG(std::string, expert_chunks, "all", "chunks with expert parameters: 'all' or a list");
ABSL_FLAG(uint64_t, steps, 10, "steps to run");
ABSL_FLAG(uint64_t, first_step, 0, "first step");
ABSL_FLAG(uint64_t, seed, 1, "random seed (order, delays, duplicates, --skip_prob)");
ABSL_FLAG(double, max_delay_ms, 2.0, "max random delay before each check-in, milliseconds");
ABSL_FLAG(double, dup_prob, 0.0, "probability that a check-in is sent twice");
ABSL_FLAG(std::string, skip_steps, "", "steps every rank skips, e.g. 3,7");
ABSL_FLAG(double, skip_prob, 0.0, "probability that a step is skipped (seeded: all ranks agree)");
ABSL_FLAG(uint32_t, batch, 1, "max check-ins per StagedBatch (1: one ReportStaged per check-in)");
ABSL_FLAG(double, timeout_ms, 30000, "per-call and per-wait timeout, milliseconds");

namespace {

// "all" -> nullopt; "" -> empty set; "0,2" -> {0, 2}.
absl::StatusOr<std::optional<std::set<uint32_t>>> ParseChunks(const std::string& text,
                                                              const char* flag) {
  if (text == "all") return std::optional<std::set<uint32_t>>();
  std::set<uint32_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    uint32_t chunk = 0;
    if (!absl::SimpleAtoi(part, &chunk)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", part, "' is not a chunk"));
    }
    out.insert(chunk);
  }
  return std::optional<std::set<uint32_t>>(std::move(out));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs simulated ranks against a psync coordinator.");
  absl::ParseCommandLine(argc, argv);

  psync::sim::SimPlan plan;
  plan.world_size = absl::GetFlag(FLAGS_ranks);
  plan.num_chunks = absl::GetFlag(FLAGS_chunks);
  plan.expert_parallel = absl::GetFlag(FLAGS_experts);
  auto dense = ParseChunks(absl::GetFlag(FLAGS_dense_chunks), "dense_chunks");
  auto expert = ParseChunks(absl::GetFlag(FLAGS_expert_chunks), "expert_chunks");
  if (!dense.ok() || !expert.ok()) {
    std::fprintf(stderr, "%s\n",
                 (dense.ok() ? expert.status() : dense.status()).ToString().c_str());
    return 2;
  }
  plan.dense_chunks = *dense;
  plan.expert_chunks = *expert;

  psync::sim::SimOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.job_id = absl::GetFlag(FLAGS_job);
  options.steps = absl::GetFlag(FLAGS_steps);
  options.first_step = absl::GetFlag(FLAGS_first_step);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.max_arrival_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_delay_ms) * 1000);
  options.duplicate_probability = absl::GetFlag(FLAGS_dup_prob);
  options.skip_probability = absl::GetFlag(FLAGS_skip_prob);
  options.max_batch_items = absl::GetFlag(FLAGS_batch);
  options.call_timeout = absl::Microseconds(absl::GetFlag(FLAGS_timeout_ms) * 1000);
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_skip_steps), ',', absl::SkipWhitespace())) {
    uint64_t step = 0;
    if (!absl::SimpleAtoi(part, &step)) {
      std::fprintf(stderr, "--skip_steps: '%s' is not a step\n", std::string(part).c_str());
      return 2;
    }
    options.skip_steps.insert(step);
  }

  std::printf("psync_sim: job '%s' on %s: %u ranks x %u chunks, E=%u, steps [%llu, %llu)\n",
              options.job_id.c_str(), options.target.c_str(), plan.world_size, plan.num_chunks,
              plan.expert_parallel, static_cast<unsigned long long>(options.first_step),
              static_cast<unsigned long long>(options.first_step + options.steps));
  std::fflush(stdout);
  absl::StatusOr<psync::sim::SimReport> report = psync::sim::RunSimulatedJob(plan, options);
  if (!report.ok()) {
    std::fprintf(stderr, "psync_sim: %s\n", report.status().ToString().c_str());
    return 2;
  }
  std::fputs(psync::sim::FormatReport(*report).c_str(), stdout);
  return report->ok() ? 0 : 1;
}
