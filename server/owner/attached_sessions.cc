#include "server/owner/attached_sessions.h"

namespace psync::server {

const MemberRoutes& AttachedSessions::RoutesTo(core::ChunkId chunk,
                                               absl::Span<const core::RankId> members) {
  auto [it, added] = routes_.try_emplace(chunk);
  ChunkRoutes& cached = it->second;
  if (!added && absl::MakeConstSpan(cached.members) == members) return cached.routes;
  cached.members.assign(members.begin(), members.end());
  cached.routes = MemberRoutes();
  MemberRoutes& routes = cached.routes;
  // Index in by_transport of each transport seen, and of the last one (a node's or relay's ranks
  // are mostly consecutive).
  absl::flat_hash_map<const NoticeBatcher*, size_t> index;
  size_t last = 0;
  for (const core::RankId rank : members) {
    const AttachedSession* session = Find(rank);
    if (session == nullptr) continue;
    if (session->transport == nullptr) {
      routes.own_sinks.emplace_back(rank, session->sink);
      continue;
    }
    if (last >= routes.by_transport.size() ||
        routes.by_transport[last].transport != session->transport) {
      auto [it, added] = index.try_emplace(session->transport, routes.by_transport.size());
      if (added) routes.by_transport.push_back({session->transport, session->sink, {}});
      last = it->second;
    }
    routes.by_transport[last].ranks.push_back(rank);
  }
  return routes;
}

}  // namespace psync::server
