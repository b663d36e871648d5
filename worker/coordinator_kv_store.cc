#include "worker/coordinator_kv_store.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync {
namespace worker {

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

absl::Status CallWithTimeout(absl::Duration timeout, absl::string_view what,
                             absl::FunctionRef<grpc::Status(grpc::ClientContext*)> call) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return FromGrpcStatus(call(&context), what);
}

CoordinatorKvStore::CoordinatorKvStore(std::shared_ptr<grpc::Channel> channel, std::string job_id,
                                       uint64_t generation, absl::Duration call_timeout)
    : channel_(std::move(channel)),
      stub_(psync::v1::Coordinator::NewStub(channel_)),
      job_id_(std::move(job_id)),
      generation_(generation),
      call_timeout_(call_timeout) {}

absl::Status CoordinatorKvStore::Set(absl::string_view key, absl::string_view value) {
  psync::v1::KvSetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  psync::v1::KvSetResponse response;
  return CallWithTimeout(
      call_timeout_, absl::StrCat("KvSet \"", key, "\""),
      [&](grpc::ClientContext* context) { return stub_->KvSet(context, request, &response); });
}

psync::v1::KvGetRequest CoordinatorKvStore::MakeKvGet(absl::Span<const std::string> keys,
                                                      bool wait) const {
  psync::v1::KvGetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  for (const std::string& key : keys) request.add_keys(key);
  request.set_wait(wait);
  return request;
}

absl::StatusOr<std::string> CoordinatorKvStore::Get(absl::string_view key) {
  const psync::v1::KvGetRequest request = MakeKvGet({std::string(key)}, /*wait=*/false);
  psync::v1::KvGetResponse response;
  absl::Status status = CallWithTimeout(
      call_timeout_, absl::StrCat("KvGet \"", key, "\""),
      [&](grpc::ClientContext* context) { return stub_->KvGet(context, request, &response); });
  if (!status.ok()) return status;
  if (response.values_size() != 1) {
    return absl::InternalError(absl::StrCat("KvGet \"", key, "\": the coordinator answered ",
                                            response.values_size(), " values for 1 key"));
  }
  return std::move(*response.mutable_values(0));
}

absl::Status CoordinatorKvStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (size_t first = 0; first < keys.size(); first += kMaxKeysPerGet) {
    const absl::Span<const std::string> part =
        keys.subspan(first, std::min(kMaxKeysPerGet, keys.size() - first));
    const psync::v1::KvGetRequest request = MakeKvGet(part, /*wait=*/true);
    psync::v1::KvGetResponse response;
    grpc::ClientContext context;
    if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
    const grpc::Status status = stub_->KvGet(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                       " waiting for key(s): ", absl::StrJoin(part, ", ")));
    }
    if (!status.ok()) {
      return FromGrpcStatus(status, absl::StrCat("KvGet(wait) of ", part.size(), " key(s)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psync
