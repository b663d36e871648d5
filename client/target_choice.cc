// TargetChoice; contract: target_choice.h.
#include "client/target_choice.h"

#include <utility>

namespace psync {

TargetChoice::TargetChoice(std::vector<std::string> targets, size_t start)
    : targets_(std::move(targets)) {
  next_ = targets_.empty() ? 0 : start % targets_.size();
  current_ = targets_.empty() ? "" : targets_[next_];
}

bool TargetChoice::OnFailure(const std::string& target, const std::string& redirect_owner) {
  if (targets_.empty() || target != current_) return false;  // already moved
  if (!redirect_owner.empty() && redirect_owner != current_) {
    current_ = redirect_owner;
    ++redirects_;
    return true;
  }
  if (targets_.size() == 1 && current_ == targets_[0]) return false;
  // The current list entry (or a redirect owner that failed): on to the next entry.
  if (current_ == targets_[next_]) next_ = (next_ + 1) % targets_.size();
  current_ = targets_[next_];
  ++rotations_;
  return true;
}

}  // namespace psync
