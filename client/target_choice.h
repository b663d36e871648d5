// TargetChoice: which coordinator replica a client talks to now, as a pure decision (no channels,
// no threads). It starts on one entry of the target list, moves to the job's owner when a replica
// redirects there (a status naming the owner, decoded by the caller from its transport), and to
// the next entry of the list on any other failure of the current target; a redirect owner that
// fails is forgotten (back to the list). With one target and no redirect it never moves.
//
// Endpoints (endpoints.h) keeps one behind its lock for psync::Client; the deterministic
// simulation's ranks use it directly. Thread-compatible.
#ifndef PSYNC_CLIENT_TARGET_CHOICE_H_
#define PSYNC_CLIENT_TARGET_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace psync {

class TargetChoice {
 public:
  // `targets` must not be empty; `start` picks the first one (modulo the count).
  TargetChoice(std::vector<std::string> targets, size_t start);

  const std::string& current() const { return current_; }
  // A call or stream to `target` failed; `redirect_owner` is the owner its status named (empty:
  // none, or nobody now). A redirect to another owner makes that owner current; any other failure
  // of the current target moves to the next entry of the list. Returns whether the current target
  // changed (false when `target` is no longer current).
  bool OnFailure(const std::string& target, const std::string& redirect_owner);

  uint64_t rotations() const { return rotations_; }
  uint64_t redirects() const { return redirects_; }

 private:
  std::vector<std::string> targets_;
  size_t next_ = 0;  // the current list entry
  std::string current_;
  uint64_t rotations_ = 0;
  uint64_t redirects_ = 0;
};

}  // namespace psync

#endif  // PSYNC_CLIENT_TARGET_CHOICE_H_
