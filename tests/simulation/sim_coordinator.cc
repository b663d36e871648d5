// SimCoordinator; contract: sim_coordinator.h.
#include "tests/simulation/sim_coordinator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/rpc/convert.h"
#include "server/rpc/session_attach.h"
#include "server/rpc/session_dispatch.h"
#include "wire/session_protocol.h"
#include "wire/wire_status.h"

namespace psync::simulation {

// The owner's SessionSink for one simulated Session: notices go down its connection.
class SimCoordinator::Sink final : public server::SessionSink {
 public:
  Sink(SimCoordinator* coordinator, uint64_t connection)
      : coordinator_(coordinator), connection_(connection) {}
  void Send(const core::Notice& notice) override {
    if (!closed_) coordinator_->SendDown(connection_, server::NoticeToProto(notice));
  }
  void Close(const absl::Status& status) override {
    if (closed_) return;
    closed_ = true;
    coordinator_->CloseStream(connection_, status);
  }
  // The coordinator crashed: this sink's owner is gone; later calls do nothing.
  void Orphan() { closed_ = true; }

 private:
  SimCoordinator* const coordinator_;
  const uint64_t connection_;
  bool closed_ = false;
};

SimCoordinator::SimCoordinator(World* world, Network* network, server::CoordinatorOptions options)
    : world_(world), network_(network), options_(std::move(options)), origin_(world->NewOrigin()) {
  Restart();
  crashes_ = 0;
  incarnation_ = 1;
}

SimCoordinator::~SimCoordinator() {
  for (auto& [id, stream] : streams_) {
    if (stream.sink != nullptr) stream.sink->Orphan();
  }
}

void SimCoordinator::Restart() {
  if (owner_ != nullptr) return;
  server::CoordinatorOptions options = options_;
  options.delivery_threads = 0;
  owner_ = std::make_unique<server::Coordinator>(options, world_->clock());
  world_->Trace(absl::StrCat("coordinator: incarnation ", incarnation_, " up"));
  ScheduleLiveness();
}

void SimCoordinator::Crash() {
  if (owner_ == nullptr) return;
  world_->Trace(absl::StrCat("coordinator: incarnation ", incarnation_, " crashed"));
  for (auto& [id, stream] : streams_) {
    if (stream.sink != nullptr) stream.sink->Orphan();
  }
  std::vector<uint64_t> connections;
  for (const auto& [id, stream] : streams_) connections.push_back(id);
  std::sort(connections.begin(), connections.end());
  streams_.clear();
  owner_.reset();
  for (uint64_t c : connections) network_->Cut(c, "coordinator crashed");
  ++crashes_;
  ++incarnation_;
}

void SimCoordinator::ScheduleLiveness() {
  const uint64_t incarnation = incarnation_;
  world_->After(absl::Milliseconds(500), origin_, [this, incarnation] {
    if (owner_ == nullptr || incarnation_ != incarnation) return;
    owner_->EnforceLiveness();
    ScheduleLiveness();
  });
}

uint64_t SimCoordinator::Connect(RankPeer* peer) {
  const uint64_t connection = network_->Open(
      [peer](uint64_t c) { peer->OnSessionEnd(c, absl::UnavailableError("connection lost")); },
      [this](uint64_t c) { OnCut(c); });
  if (!up()) {
    network_->Cut(connection, "connection refused: the coordinator is down");
    return connection;
  }
  Stream& stream = streams_[connection];
  stream.peer = peer;
  stream.incarnation = incarnation_;
  return connection;
}

void SimCoordinator::SendJoin(uint64_t connection, const v1::JoinRequest& request) {
  network_->Send(connection, Direction::kUp,
                 [this, connection, request] { OnJoin(connection, request); });
}

void SimCoordinator::SendUp(uint64_t connection, const v1::SessionUp& up) {
  network_->Send(connection, Direction::kUp, [this, connection, up] { OnUp(connection, up); });
}

void SimCoordinator::Hangup(uint64_t connection) { network_->Cut(connection, "rank hung up"); }

void SimCoordinator::OnJoin(uint64_t connection, const v1::JoinRequest& request) {
  auto it = streams_.find(connection);
  if (it == streams_.end() || owner_ == nullptr) return;
  absl::StatusOr<core::JoinResult> joined = owner_->Join(server::RankPlanFromProto(request));
  absl::StatusOr<v1::JoinResponse> answer;
  if (joined.ok()) {
    v1::JoinResponse response;
    response.set_generation(joined->generation);
    response.set_session_id(joined->session_id);
    response.set_next_step(joined->next_step);
    response.set_resumed(joined->resumed);
    answer = std::move(response);
  } else {
    answer = joined.status();
  }
  RankPeer* peer = it->second.peer;
  network_->Send(connection, Direction::kDown,
                 [peer, connection, answer] { peer->OnJoinAnswer(connection, answer); });
}

void SimCoordinator::OnUp(uint64_t connection, const v1::SessionUp& up) {
  auto it = streams_.find(connection);
  if (it == streams_.end() || owner_ == nullptr) return;
  Stream& stream = it->second;
  const bool attached = stream.sink != nullptr;
  const wire::SessionDecision decision = wire::DecideSessionMessage(attached, up);
  switch (decision.action) {
    case wire::SessionAction::kClose:
      owner_->RecordRejected(stream.job_id, decision.status);
      CloseStream(connection, decision.status);
      return;
    case wire::SessionAction::kAck:
      owner_->RecordRejected(stream.job_id, decision.status);
      SendDown(connection, wire::AckFor(up.request_id(), decision.status));
      return;
    case wire::SessionAction::kAttach: {
      auto sink = std::make_shared<Sink>(this, connection);
      absl::StatusOr<std::vector<core::Notice>> pending =
          server::AttachSession(*owner_, up.attach(), sink);
      if (!pending.ok()) {
        CloseStream(connection, pending.status());
        return;
      }
      // Attaching may have closed another Session of the rank (streams_ changed): look again.
      Stream& attached_stream = streams_[connection];
      attached_stream.sink = sink;
      attached_stream.job_id = up.attach().job_id();
      attached_stream.rank = up.attach().rank();
      SendDown(connection, wire::AckFor(up.request_id(), absl::OkStatus()));
      for (const core::Notice& n : *pending) sink->Send(n);
      return;
    }
    case wire::SessionAction::kStaged:
    case wire::SessionAction::kSkip:
    case wire::SessionAction::kSyncDone:
    case wire::SessionAction::kLeave: {
      const std::string job_id = stream.job_id;
      const uint32_t rank = stream.rank;
      const absl::Status status =
          server::ApplySessionMessage(*owner_, job_id, rank, decision.action, up);
      SendDown(connection, wire::AckFor(up.request_id(), status));
      return;
    }
  }
}

void SimCoordinator::SendDown(uint64_t connection, v1::SessionDown down) {
  auto it = streams_.find(connection);
  if (it == streams_.end()) return;
  RankPeer* peer = it->second.peer;
  network_->Send(connection, Direction::kDown,
                 [peer, connection, down = std::move(down)] { peer->OnDown(connection, down); });
}

void SimCoordinator::CloseStream(uint64_t connection, const absl::Status& status) {
  auto it = streams_.find(connection);
  if (it == streams_.end()) return;
  // Called by the owner (a superseded Session, an ended job) or for a Session it never attached:
  // the owner has already let go of this sink, so it is not called back.
  RankPeer* peer = it->second.peer;
  if (it->second.sink != nullptr) it->second.sink->Orphan();
  streams_.erase(it);
  network_->Send(connection, Direction::kDown, [this, peer, connection, status] {
    peer->OnSessionEnd(connection, status);
    network_->Cut(connection, "session ended");
  });
}

void SimCoordinator::OnCut(uint64_t connection) {
  auto it = streams_.find(connection);
  if (it == streams_.end()) return;
  Detach(it->second);
  streams_.erase(it);
}

void SimCoordinator::Detach(Stream& stream) {
  if (stream.sink == nullptr || owner_ == nullptr) return;
  std::shared_ptr<Sink> sink = std::move(stream.sink);
  sink->Orphan();
  owner_->Detach(stream.job_id, stream.rank, sink.get());
}

}  // namespace psync::simulation
