// ReleaseWatch and HopSplit; contract: release_watch.h.
#include "bench/release_watch.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace psync::bench {

std::string HopSplit::Json() const {
  return absl::StrCat("{\"matched\":", matched, ",\"up\":", up.Json(),
                      ",\"down_first\":", down_first.Json(), ",\"down_last\":", down_last.Json(),
                      "}");
}

absl::StatusOr<std::unique_ptr<ReleaseWatch>> ReleaseWatch::Start(const std::string& target,
                                                                  const std::string& job_id) {
  std::unique_ptr<ReleaseWatch> watch(new ReleaseWatch());
  watch->stub_ =
      v1::Coordinator::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  watch->unix_minus_mono_ns_ = absl::GetCurrentTimeNanos() - NowNs();
  v1::WatchEventsRequest request;
  request.set_job_id(job_id);
  request.add_kinds("release");
  watch->stream_ = watch->stub_->WatchEvents(&watch->context_, request);
  if (watch->stream_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("WatchEvents at ", target, " did not start"));
  }
  watch->reader_ = std::thread([w = watch.get()] { w->Read(); });
  return watch;
}

ReleaseWatch::~ReleaseWatch() { Stop(0, absl::ZeroDuration()); }

void ReleaseWatch::Stop(size_t releases, absl::Duration patience) {
  if (!reader_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    auto read_all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return decided_ns_.size() >= releases;
    };
    mu_.AwaitWithTimeout(absl::Condition(&read_all), patience);
  }
  context_.TryCancel();
  reader_.join();
  stream_->Finish().ok();  // cancelled: its status says only that
}

void ReleaseWatch::Read() {
  v1::Event event;
  while (stream_->Read(&event)) {
    if (event.kind() != "release" || !event.has_step() || !event.has_chunk()) continue;
    const int64_t mono = event.time_unix_micros() * 1000 - unix_minus_mono_ns_;
    absl::MutexLock lock(&mu_);
    decided_ns_.emplace(std::make_pair(event.step(), event.chunk()), mono);
  }
}

HopSplit ReleaseWatch::Split(const std::vector<ReleaseTimes>& times) {
  std::vector<int64_t> up, down_first, down_last;
  {
    absl::MutexLock lock(&mu_);
    for (const ReleaseTimes& t : times) {
      auto it = decided_ns_.find({t.step, t.chunk});
      if (it == decided_ns_.end()) continue;
      up.push_back(it->second - t.last_send_ns);
      down_first.push_back(t.first_directive_ns - it->second);
      down_last.push_back(t.last_directive_ns - it->second);
    }
  }
  HopSplit split;
  split.matched = up.size();
  split.up = Summarize(std::move(up));
  split.down_first = Summarize(std::move(down_first));
  split.down_last = Summarize(std::move(down_last));
  return split;
}

}  // namespace psync::bench
