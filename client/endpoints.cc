#include "client/endpoints.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "wire/wire_status.h"

namespace psync {

// The payload under which StatusFromGrpc keeps a call's OwnerRedirect (wire/not_served.h's URL).
constexpr char kRedirectPayload[] = "type.googleapis.com/psync.v1.OwnerRedirect";

absl::StatusOr<std::vector<std::string>> SplitTargets(const std::string& list,
                                                      const std::string& field) {
  std::vector<std::string> targets;
  for (absl::string_view t : absl::StrSplit(list, ',')) {
    t = absl::StripAsciiWhitespace(t);
    if (!t.empty()) targets.emplace_back(t);
  }
  if (targets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must name at least one target (host:port[,host:port...])"));
  }
  return targets;
}

std::optional<psync::v1::OwnerRedirect> RedirectIn(const grpc::Status& status) {
  return wire::OwnerRedirectOf(status);
}

std::optional<psync::v1::OwnerRedirect> RedirectIn(const absl::Status& status) {
  auto payload = status.GetPayload(kRedirectPayload);
  if (!payload) return std::nullopt;
  // StatusFromGrpc keeps the call's error details, a serialized OwnerRedirect.
  psync::v1::OwnerRedirect redirect;
  if (!redirect.ParseFromString(std::string(*payload))) return std::nullopt;
  return redirect;
}

Endpoints::Endpoints(std::vector<std::string> targets, ChannelFactory factory, size_t start)
    : fixed_channel_(false), factory_(std::move(factory)), choice_(std::move(targets), start) {}

Endpoints::Endpoints(std::shared_ptr<grpc::Channel> channel)
    : fixed_channel_(true), choice_({}, 0) {
  absl::MutexLock lock(&mu_);
  auto e = std::make_unique<Endpoint>();
  e->channel = std::move(channel);
  e->stub = psync::v1::Coordinator::NewStub(e->channel);
  endpoints_.push_back(std::move(e));
}

Endpoints::Endpoint& Endpoints::Get(const std::string& target) {
  for (auto& e : endpoints_) {
    if (e->target == target) return *e;
  }
  auto e = std::make_unique<Endpoint>();
  e->target = target;
  e->channel = factory_(target);
  e->stub = psync::v1::Coordinator::NewStub(e->channel);
  endpoints_.push_back(std::move(e));
  return *endpoints_.back();
}

psync::v1::Coordinator::Stub* Endpoints::Stub(std::string* target) {
  absl::MutexLock lock(&mu_);
  if (fixed_channel_) {
    if (target != nullptr) target->clear();
    return endpoints_.front()->stub.get();
  }
  if (target != nullptr) *target = choice_.current();
  return Get(choice_.current()).stub.get();
}

bool Endpoints::OnFailure(const std::string& target, const absl::Status& status) {
  const std::optional<psync::v1::OwnerRedirect> redirect = RedirectIn(status);
  absl::MutexLock lock(&mu_);
  return choice_.OnFailure(target, redirect.has_value() ? redirect->owner() : "");
}

std::string Endpoints::current() const {
  absl::MutexLock lock(&mu_);
  return choice_.current();
}

uint64_t Endpoints::rotations() const {
  absl::MutexLock lock(&mu_);
  return choice_.rotations();
}

uint64_t Endpoints::redirects() const {
  absl::MutexLock lock(&mu_);
  return choice_.redirects();
}

}  // namespace psync
