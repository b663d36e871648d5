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
    : targets_(std::move(targets)), factory_(std::move(factory)) {
  absl::MutexLock lock(&mu_);
  next_ = targets_.empty() ? 0 : start % targets_.size();
  current_ = targets_.empty() ? "" : targets_[next_];
}

Endpoints::Endpoints(std::shared_ptr<grpc::Channel> channel) {
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
  if (targets_.empty()) {  // the single given channel
    if (target != nullptr) target->clear();
    return endpoints_.front()->stub.get();
  }
  if (target != nullptr) *target = current_;
  return Get(current_).stub.get();
}

bool Endpoints::OnFailure(const std::string& target, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (targets_.empty() || target != current_) return false;  // fixed channel, or already moved
  if (std::optional<psync::v1::OwnerRedirect> r = RedirectIn(status);
      r.has_value() && !r->owner().empty() && r->owner() != current_) {
    current_ = r->owner();
    ++redirects_;
    return true;
  }
  if (targets_.size() == 1 && current_ == targets_[0]) return false;
  // The current list entry (or a redirect owner that failed): on to the next entry.
  const bool on_list = current_ == targets_[next_];
  if (on_list) next_ = (next_ + 1) % targets_.size();
  current_ = targets_[next_];
  ++rotations_;
  return true;
}

std::string Endpoints::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

uint64_t Endpoints::rotations() const {
  absl::MutexLock lock(&mu_);
  return rotations_;
}

uint64_t Endpoints::redirects() const {
  absl::MutexLock lock(&mu_);
  return redirects_;
}

}  // namespace psync
