#include "worker/collective/gloo_collective.h"

#include <signal.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/attr.h"
#include "gloo/transport/tcp/device.h"
#include "worker/collective/gloo_status.h"
#include "worker/collective/gloo_store_adapter.h"
#include "worker/collective/group_args.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::string_view kBackend = "gloo";

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's TCP transport writes with writev(), which raises SIGPIPE when the
// peer has closed its socket; SIGPIPE's default action ends the process.
// Ignoring it turns that case into EPIPE, which Gloo reports as an I/O error.
// A handler the process installed itself is left alone.
void IgnoreSigpipeUnlessHandled() {
  static const bool kDone = [] {
    struct sigaction current;
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)kDone;
}

class GlooCollective final : public Collective {
 public:
  GlooCollective(std::string group, std::shared_ptr<gloo::Context> context,
                 std::chrono::milliseconds timeout)
      : group_(std::move(group)), context_(std::move(context)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  absl::Status DoAllGather(const void* send, void* recv, size_t bytes_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return Broken();
    // Gloo only reads the input buffer; its API takes a mutable pointer.
    uint8_t* in = static_cast<uint8_t*>(const_cast<void*>(send));
    uint8_t* out = static_cast<uint8_t*>(recv);
    const uint32_t tag = next_tag_++;
    return Record(RunGloo(Describe("AllGather"), [&] {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(in, bytes_per_rank);
      opts.setOutput(out, bytes_per_rank * context_->size);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    }));
  }

  absl::Status DoReduceScatterSum(const float* send, float* recv, size_t count_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return Broken();
    const size_t total = count_per_rank * context_->size;
    scratch_.resize(total);
    float* in = const_cast<float*>(send);
    float* sum = scratch_.data();
    const uint32_t tag = next_tag_++;
    absl::Status status = RunGloo(Describe("ReduceScatterSum"), [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setInput(in, total);
      opts.setOutput(sum, total);
      opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
    if (!status.ok()) return Record(std::move(status));
    std::memcpy(recv, sum + count_per_rank * context_->rank, count_per_rank * sizeof(float));
    return absl::OkStatus();
  }

  // Operations are synchronous: nothing is in flight.
  absl::Status Synchronize() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return broken_.ok() ? absl::OkStatus() : Broken();
  }

 private:
  std::string Describe(absl::string_view op) const {
    return absl::StrCat("gloo ", op, " in group \"", group_, "\" (rank ", context_->rank, " of ",
                        context_->size, ")");
  }

  // Records a failed operation's status as the group's first error and
  // closes this rank's connections: the group is unusable from now on, and
  // peers still waiting on this rank fail at once instead of at their
  // timeout.
  absl::Status Record(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (status.ok()) return status;
    broken_ = status;
    RunGloo("closing connections", [&] { context_->closeConnections(); }).IgnoreError();
    return status;
  }

  absl::Status Broken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo group \"", group_,
                     "\" is unusable after an earlier error; "
                     "create it again under a new name. First error: ",
                     broken_.ToString()));
  }

  // Constant after construction.
  const std::string group_;
  const std::shared_ptr<gloo::Context> context_;
  const std::chrono::milliseconds timeout_;

  // State below is protected by mu_, which is held for the whole of each
  // operation so that misuse from two threads cannot interleave them.
  absl::Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  uint32_t next_tag_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> scratch_ ABSL_GUARDED_BY(mu_);
};

class GlooCollectiveFactory final : public CollectiveFactory {
 public:
  explicit GlooCollectiveFactory(GlooOptions options) : options_(std::move(options)) {}

  absl::string_view backend() const override { return kBackend; }

  absl::StatusOr<std::unique_ptr<Collective>> DoCreate(absl::string_view group, int rank, int size,
                                                       KeyValueStore* store,
                                                       absl::Duration timeout) override {
    const std::chrono::milliseconds timeout_ms = absl::ToChronoMilliseconds(timeout);
    IgnoreSigpipeUnlessHandled();

    std::shared_ptr<gloo::rendezvous::Context> context;
    absl::Status status = RunGloo(
        absl::StrCat("forming gloo group \"", group, "\" (rank ", rank, " of ", size, ")"), [&] {
          gloo::transport::tcp::attr attr;
          if (!options_.interface.empty()) {
            attr.iface = options_.interface;
          } else {
            attr.hostname = options_.hostname;
          }
          std::shared_ptr<gloo::transport::Device> device =
              gloo::transport::tcp::CreateDevice(attr);
          auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
          ctx->setTimeout(timeout_ms);
          GlooStoreAdapter adapter(store, GroupKeyPrefix(kBackend, group), timeout);
          ctx->connectFullMesh(adapter, device);
          context = std::move(ctx);
        });
    if (!status.ok()) return status;
    return std::unique_ptr<Collective>(
        new GlooCollective(std::string(group), std::move(context), timeout_ms));
  }

 private:
  // Constant after construction.
  const GlooOptions options_;
};

}  // namespace

std::unique_ptr<CollectiveFactory> NewGlooCollectiveFactory(GlooOptions options) {
  return std::make_unique<GlooCollectiveFactory>(std::move(options));
}

}  // namespace worker
}  // namespace psync
