#include "server/owner/effects.h"

namespace psync::server {

void Effects::AddNotice(const std::shared_ptr<SessionSink>& sink, NoticeBatcher* transport,
                        const std::string& job_id, core::RankId rank,
                        const std::shared_ptr<const core::Notice>& notice) {
  if (transport == nullptr) {
    notices.emplace_back(sink, notice);
    return;
  }
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
  runs.back().ranks.push_back(rank);
}

}  // namespace psync::server
