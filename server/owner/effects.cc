#include "server/owner/effects.h"

namespace psync::server {

void Effects::AddNotice(const std::shared_ptr<SessionSink>& sink, NoticeBatcher* transport,
                        const std::string& job_id, core::RankId rank,
                        const std::shared_ptr<const core::Notice>& notice) {
  if (transport == nullptr) {
    notices.emplace_back(sink, notice);
    return;
  }
  RunFor(sink, transport, job_id, notice).ranks.push_back(rank);
}

void Effects::AddNoticeToRanks(const std::shared_ptr<SessionSink>& holder, NoticeBatcher* transport,
                               const std::string& job_id, absl::Span<const core::RankId> ranks,
                               const std::shared_ptr<const core::Notice>& notice) {
  if (ranks.empty()) return;
  std::vector<core::RankId>& run = RunFor(holder, transport, job_id, notice).ranks;
  run.insert(run.end(), ranks.begin(), ranks.end());
}

TransportNotices::Run& Effects::RunFor(const std::shared_ptr<SessionSink>& sink,
                                       NoticeBatcher* transport, const std::string& job_id,
                                       const std::shared_ptr<const core::Notice>& notice) {
  if (last_transport_ >= transport_notices.size() ||
      transport_notices[last_transport_].transport != transport) {
    auto [it, added] = transport_index_.try_emplace(transport, transport_notices.size());
    if (added) transport_notices.push_back({transport, sink, {}});
    last_transport_ = it->second;
  }
  std::vector<TransportNotices::Run>& runs = transport_notices[last_transport_].runs;
  if (runs.empty() || runs.back().notice != notice) {
    runs.push_back({job_id, notice, {}});
  }
  return runs.back();
}

}  // namespace psync::server
