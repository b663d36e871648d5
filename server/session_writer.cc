#include "server/session_writer.h"

#include <utility>

namespace psync::server {

void SessionWriter::Enqueue(v1::SessionDown message) {
  Reactor* reactor = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (reactor_ == nullptr || closing_) return;
    queue_.push_back(std::move(message));
    if (writing_) return;
    writing_ = true;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    reactor = reactor_;
  }
  reactor->StartWrite(&current_);
}

void SessionWriter::Close(const grpc::Status& status) {
  Reactor* reactor = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (reactor_ == nullptr || closing_) return;
    closing_ = true;
    finish_status_ = status;
    if (writing_ || !queue_.empty()) return;  // finished when the queue drains
    finished_ = true;
    reactor = reactor_;
  }
  reactor->Finish(status);
}

void SessionWriter::WriteDone(bool ok) {
  Reactor* reactor = nullptr;
  bool finish = false;
  grpc::Status finish_status;
  {
    absl::MutexLock lock(&mu_);
    if (reactor_ == nullptr) return;
    reactor = reactor_;
    if (!ok) {
      // The peer is gone: drop what is queued and end the call.
      queue_.clear();
      if (!closing_) {
        closing_ = true;
        finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed: peer gone");
      }
    }
    if (ok && !queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
    } else {
      writing_ = false;
      if (closing_ && !finished_) finish = finished_ = true;
      if (!finish) return;
      finish_status = finish_status_;
    }
  }
  if (finish) {
    reactor->Finish(finish_status);
  } else {
    reactor->StartWrite(&current_);
  }
}

void SessionWriter::Detach() {
  absl::MutexLock lock(&mu_);
  reactor_ = nullptr;
  queue_.clear();
}

}  // namespace psync::server
