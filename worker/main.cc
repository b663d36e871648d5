// psync-worker: one training rank of the synthetic MoE model (worker/README.md).
//
//   psync-worker --target=127.0.0.1:7070 --job=demo --world_size=4 --rank=0 --expert_parallel=2
//       [--sync=coordinated|naive|local-deferred] [--dtype=bf16|mxfp8] [--compute=cpu|cuda]
//       [--collective=gloo|nccl] [--steps=20] [--chunks=4] [--bench]
//   psync-worker --target=127.0.0.1:7070 --job=demo --audit     (print the coordinator's audit)
//
// Exit status: 0 when every step's weights verified on this rank (--bench: when every step ran;
// --audit: when the audit is clean); 1 when a step's weights were wrong (--audit: violations);
// 2 for bad flags; 3 when the run failed (coordinator, collective or backend error).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "worker/collective/collective_factory.h"
#include "worker/compute/backend_registry.h"
#include "worker/coordination.h"
#include "worker/coordinator_kv_store.h"
#include "worker/model_layout.h"
#include "worker/rank_model.h"
#include "worker/reference_model.h"
#include "worker/report.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, target, "127.0.0.1:7070", "coordinator address (host:port)");
ABSL_FLAG(std::string, job, "psync", "job id");
ABSL_FLAG(int, world_size, 1, "number of ranks W");
ABSL_FLAG(int, rank, 0, "this rank, in [0, W)");
ABSL_FLAG(int, chunks, 4, "model chunks C");
ABSL_FLAG(int64_t, dense_elements, 4096, "dense parameters per chunk D (data-parallel over all W)");
ABSL_FLAG(int64_t, expert_elements, 4096,
          "expert parameters per chunk and EP rank X (replicated over W/E ranks)");
ABSL_FLAG(int, expert_parallel, 1, "expert-parallel size E (divides W)");
ABSL_FLAG(int, buckets, 2, "buckets per chunk buffer (each one all-gather / reduce-scatter)");
ABSL_FLAG(std::string, dtype, "bf16", "staged param dtype: bf16 or mxfp8");
ABSL_FLAG(std::string, compute, "cpu",
          "compute backend: cpu, cuda (GPU --device, default: this rank's index) or cuda:N");
ABSL_FLAG(int, device, -1, "GPU index for --compute=cuda; -1: the rank");
ABSL_FLAG(std::string, collective, "gloo", "collective backend: gloo (with cpu) or nccl (cuda)");
ABSL_FLAG(std::string, gloo_hostname, "127.0.0.1", "address Gloo listens on and advertises");
ABSL_FLAG(std::string, sync, "coordinated", "param sync mode: coordinated, naive, local-deferred");
ABSL_FLAG(int64_t, steps, 20, "training steps");
ABSL_FLAG(uint64_t, seed, 1, "seed of the synthetic gradients and initial parameters");
ABSL_FLAG(double, lr, 1e-3, "AdamW learning rate");
ABSL_FLAG(double, beta1, 0.9, "AdamW beta1");
ABSL_FLAG(double, beta2, 0.999, "AdamW beta2");
ABSL_FLAG(double, eps, 1e-8, "AdamW epsilon");
ABSL_FLAG(double, weight_decay, 0.01, "AdamW decoupled weight decay");
ABSL_FLAG(bool, verify, true, "check the weights against the CPU reference after every sync");
ABSL_FLAG(double, tolerance, 0.0, "largest accepted |weight - reference| (0: equal)");
ABSL_FLAG(bool, report, true,
          "naive / local-deferred: report check-ins and SyncDones to the coordinator (observe)");
ABSL_FLAG(bool, async_reports, true,
          "coordinated: send check-ins and SyncDones from a background thread, in order");
ABSL_FLAG(bool, checksums, true, "SyncDone carries a checksum of each group's weights");
ABSL_FLAG(double, timeout_s, 60, "timeout of coordinator calls, directive waits and collectives");
ABSL_FLAG(bool, summary, true, "rank 0: print the coordinator's audit totals after every step");
ABSL_FLAG(bool, print_steps, true, "print one line per step");
ABSL_FLAG(bool, bench, false,
          "time the step phases: no verification, no checksums, gradients made on the backend; "
          "prints medians at the end");
ABSL_FLAG(int64_t, warmup_steps, 3, "--bench: steps run before timing");
ABSL_FLAG(bool, audit, false, "print the coordinator's audit of --job and exit (1: violations)");

namespace psync {
namespace worker {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitWrong = 1;
constexpr int kExitUsage = 2;
constexpr int kExitFailed = 3;

void Print(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) std::cout << line << "\n";
  std::cout.flush();
}

int Fail(int rank, const absl::Status& status) {
  std::cout.flush();
  std::cerr << "psync-worker rank " << rank << ": " << status << "\n";
  return kExitFailed;
}

int RunAudit() {
  // With coordinator replicas (a comma-separated --target) the replica that holds the job
  // answers: the first one that does not say NOT_FOUND.
  absl::StatusOr<AuditSnapshot> snapshot = absl::NotFoundError("no target");
  for (absl::string_view target : absl::StrSplit(absl::GetFlag(FLAGS_target), ',')) {
    auto channel = grpc::CreateChannel(std::string(target), grpc::InsecureChannelCredentials());
    auto stub = psync::v1::Coordinator::NewStub(channel);
    snapshot = FetchAudit(stub.get(), absl::GetFlag(FLAGS_job),
                          absl::Seconds(absl::GetFlag(FLAGS_timeout_s)));
    if (snapshot.ok()) break;
  }
  if (!snapshot.ok()) {
    std::cerr << "psync-worker --audit: " << snapshot.status() << "\n";
    return kExitFailed;
  }
  Print(AuditLines(*snapshot));
  return AuditClean(snapshot->audit.totals()) ? kExitOk : kExitWrong;
}

int Run() {
  ModelConfig config;
  config.world_size = absl::GetFlag(FLAGS_world_size);
  config.rank = absl::GetFlag(FLAGS_rank);
  config.num_chunks = absl::GetFlag(FLAGS_chunks);
  config.dense_elements = absl::GetFlag(FLAGS_dense_elements);
  config.expert_elements = absl::GetFlag(FLAGS_expert_elements);
  config.expert_parallel = absl::GetFlag(FLAGS_expert_parallel);
  config.buckets = absl::GetFlag(FLAGS_buckets);
  absl::StatusOr<ParamDtype> dtype = ParseParamDtype(absl::GetFlag(FLAGS_dtype));
  absl::StatusOr<SyncMode> mode = ParseSyncMode(absl::GetFlag(FLAGS_sync));
  const bool bench = absl::GetFlag(FLAGS_bench);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t warmup = bench ? absl::GetFlag(FLAGS_warmup_steps) : 0;
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  std::string compute = absl::GetFlag(FLAGS_compute);
  const std::string collective = absl::GetFlag(FLAGS_collective);
  absl::Status usage = config.Validate();
  if (usage.ok() && !dtype.ok()) usage = dtype.status();
  if (usage.ok() && !mode.ok()) usage = mode.status();
  if (usage.ok() && (steps < 1 || warmup < 0)) {
    usage = absl::InvalidArgumentError("--steps must be >= 1 and --warmup_steps >= 0");
  }
  if (usage.ok() && timeout <= absl::ZeroDuration()) {
    usage = absl::InvalidArgumentError("--timeout_s must be > 0");
  }
  if (compute == "cuda") {
    const int device = absl::GetFlag(FLAGS_device);
    compute = absl::StrCat("cuda:", device >= 0 ? device : config.rank);
  }
  const bool on_gpu = compute.rfind("cuda", 0) == 0;
  if (usage.ok() && on_gpu != (collective == "nccl")) {
    usage = absl::InvalidArgumentError(
        "--compute=cpu goes with --collective=gloo (host memory) and --compute=cuda with "
        "--collective=nccl (device memory)");
  }
  if (!usage.ok()) {
    std::cerr << "psync-worker: " << usage.message() << "\n";
    return kExitUsage;
  }
  config.dtype = *dtype;

  TrainerOptions options;
  options.mode = *mode;
  options.verify = absl::GetFlag(FLAGS_verify) && !bench;
  options.gradients = bench ? GradientSource::kBackend : GradientSource::kExactHost;
  options.checksums = absl::GetFlag(FLAGS_checksums) && !bench;
  options.tolerance = static_cast<float>(absl::GetFlag(FLAGS_tolerance));
  options.report = absl::GetFlag(FLAGS_report);
  options.directive_timeout = timeout;
  AdamParams adam;
  adam.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  adam.beta1 = static_cast<float>(absl::GetFlag(FLAGS_beta1));
  adam.beta2 = static_cast<float>(absl::GetFlag(FLAGS_beta2));
  adam.eps = static_cast<float>(absl::GetFlag(FLAGS_eps));
  adam.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const int rank = config.rank;

  // The backend first: for CUDA this makes the rank's GPU current, which NCCL groups use.
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = MakeComputeBackend(compute);
  if (!backend.ok()) return Fail(rank, backend.status());
  {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> touch = (*backend)->Allocate(0);
    if (!touch.ok()) return Fail(rank, touch.status());
  }

  // Join the job and attach the Session.
  const std::string job = absl::GetFlag(FLAGS_job);
  // Coordinator replicas (a comma-separated --target): the client follows redirects and
  // failovers itself; the rendezvous and status queries go to the replica it joined at.
  const std::string target = absl::GetFlag(FLAGS_target);
  const bool replicas = absl::StrContains(target, ',');
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  ClientOptions client_options;
  if (replicas) {
    client_options.target = target;
  } else {
    client_options.channel = channel;
  }
  client_options.plan = config.JoinRequestFor(job);
  client_options.call_timeout = timeout;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(std::move(client_options));
  if (!client.ok()) return Fail(rank, client.status());
  if (replicas) {
    channel = grpc::CreateChannel((*client)->target(), grpc::InsecureChannelCredentials());
  }
  const uint64_t generation = (*client)->generation();

  // The sync groups, through the coordinator's rendezvous store.
  CoordinatorKvStore store(channel, job, generation, timeout);
  absl::StatusOr<std::unique_ptr<CollectiveFactory>> factory = [&] {
    CollectiveBackendOptions collective_options;
    collective_options.gloo_hostname = absl::GetFlag(FLAGS_gloo_hostname);
    return MakeCollectiveFactory(collective, collective_options);
  }();
  if (!factory.ok()) return Fail(rank, factory.status());
  std::unique_ptr<Collective> groups[2];
  for (ParamKind kind : kParamKinds) {
    absl::StatusOr<std::unique_ptr<Collective>> group =
        (*factory)->Create(absl::StrCat("g", generation, ".", config.GroupName(kind)),
                           config.GroupRank(kind), config.GroupSize(kind), &store, timeout);
    if (!group.ok()) return Fail(rank, group.status());
    groups[static_cast<int>(kind)] = std::move(*group);
  }

  absl::StatusOr<std::unique_ptr<RankModel>> model =
      RankModel::Create(config, seed, adam, backend->get(), groups[0].get(), groups[1].get());
  if (!model.ok()) return Fail(rank, model.status());
  std::unique_ptr<ReferenceModel> reference;
  if (options.verify) reference = std::make_unique<ReferenceModel>(config, seed, adam);
  // Coordinated: reports use the client's asynchronous calls (observe-only modes count the
  // answers to their reports, so they wait for each).
  std::unique_ptr<Coordination> link =
      options.mode == SyncMode::kCoordinated && absl::GetFlag(FLAGS_async_reports)
          ? NewAsyncClientCoordination(client->get(), timeout)
          : NewClientCoordination(client->get());
  Trainer trainer(model->get(), reference.get(), link.get(), options);

  const BufferLayout dense = config.Layout(ParamKind::kDense);
  const BufferLayout expert = config.Layout(ParamKind::kExpert);
  std::cout << absl::StrCat("rank ", rank, " of ", config.world_size, ": job ", job, " generation ",
                            generation, ", sync ", SyncModeName(options.mode), ", ",
                            ParamDtypeName(config.dtype), ", ", (*backend)->Name(), " + ",
                            collective, ", ", config.num_chunks, " chunks x (dense ",
                            dense.real_elements(), " -> ", dense.padded_elements(),
                            " over dp, expert ", expert.real_elements(), " -> ",
                            expert.padded_elements(), " over ",
                            config.GroupName(ParamKind::kExpert), "), ", config.buckets, " buckets")
            << "\n";

  auto query_stub = psync::v1::Coordinator::NewStub(channel);
  RunSummary summary(config, options);
  std::vector<StepResult> timed;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    absl::StatusOr<StepResult> result = trainer.RunStep(step);
    if (!result.ok()) return Fail(rank, result.status());
    if (step < warmup) {
      if (step + 1 == warmup) (*model)->ResetGatherStats();
      continue;
    }
    summary.Add(*result);
    timed.push_back(*result);
    if (absl::GetFlag(FLAGS_print_steps)) Print(StepLines(config, options, *result));
    if (rank == 0 && absl::GetFlag(FLAGS_summary) && !bench) {
      absl::StatusOr<AuditSnapshot> audit = FetchAudit(query_stub.get(), job, timeout);
      if (audit.ok()) {
        std::cout << "step " << step
                  << " summary (coordinator, so far): " << AuditTotalsText(audit->audit.totals())
                  << "\n";
      }
    }
  }
  if (absl::Status finished = trainer.Finish(); !finished.ok()) return Fail(rank, finished);
  Print(summary.Lines());
  if (bench) {
    const GatherStats gather[2] = {(*model)->gather_stats(ParamKind::kDense),
                                   (*model)->gather_stats(ParamKind::kExpert)};
    Print(BenchLines(config, options, (*backend)->Name(), collective, SummarizeBench(timed), gather,
                     warmup));
  }
  (*client)->Close();
  return summary.ok() ? kExitOk : kExitWrong;
}

}  // namespace
}  // namespace worker
}  // namespace psync

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "psync-worker: one rank of a synthetic MoE training job whose param syncs are gated by a "
      "psync coordinator (see worker/README.md).");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_audit)) return psync::worker::RunAudit();
  return psync::worker::Run();
}
