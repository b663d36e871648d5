#include "wire/not_served.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psync::wire {

// The payload is "<epoch> <owner>" (the owner may be empty).
absl::Status NotServedHere(absl::string_view message, const std::string& owner, uint64_t epoch) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kNotServedHereUrl, absl::Cord(absl::StrCat(epoch, " ", owner)));
  return status;
}

std::optional<Redirect> RedirectOf(const absl::Status& status) {
  auto payload = status.GetPayload(kNotServedHereUrl);
  if (!payload) return std::nullopt;
  const std::string text(*payload);
  const size_t space = text.find(' ');
  Redirect redirect;
  if (space == std::string::npos || !absl::SimpleAtoi(text.substr(0, space), &redirect.epoch)) {
    return std::nullopt;
  }
  redirect.owner = text.substr(space + 1);
  return redirect;
}

}  // namespace psync::wire
