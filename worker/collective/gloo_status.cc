#include "worker/collective/gloo_status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gloo/common/logging.h"

namespace psync {
namespace worker {
namespace {

// Gloo reports every transport failure as IoException; only the message
// tells a timeout ("Timed out waiting 2000ms for recv operation to complete",
// "Connect timeout", ...) from a broken connection.
bool IsTimeoutMessage(absl::string_view message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

}  // namespace

absl::Status GlooExceptionToStatus(absl::string_view what, std::exception_ptr error) {
  if (error == nullptr) {
    return absl::InternalError(absl::StrCat(what, ": no exception"));
  }
  try {
    std::rethrow_exception(error);
  } catch (const GlooStatusError& e) {
    if (e.status().ok()) {
      return absl::InternalError(absl::StrCat(what, ": store error without a status"));
    }
    return absl::Status(e.status().code(), absl::StrCat(what, ": ", e.status().message()));
  } catch (const gloo::IoException& e) {
    const absl::StatusCode code = IsTimeoutMessage(e.what()) ? absl::StatusCode::kDeadlineExceeded
                                                             : absl::StatusCode::kUnavailable;
    return absl::Status(code, absl::StrCat(what, ": ", e.what()));
  } catch (const gloo::EnforceNotMet& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, ": unknown exception"));
  }
}

}  // namespace worker
}  // namespace psync
