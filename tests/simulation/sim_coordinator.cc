// SimCoordinator; contract: sim_coordinator.h.
#include "tests/simulation/sim_coordinator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/batch_parts.h"
#include "agent/merge.h"
#include "server/ha/ownership.h"
#include "server/rpc/agent_batch.h"
#include "server/rpc/convert.h"
#include "server/rpc/session_attach.h"
#include "server/rpc/session_dispatch.h"
#include "wire/not_served.h"
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

SimCoordinator::SimCoordinator(World* world, Network* network, server::CoordinatorOptions options,
                               std::optional<ReplicaSetup> replica)
    : world_(world),
      network_(network),
      options_(std::move(options)),
      origin_(world->NewOrigin()),
      index_(replica.has_value() ? replica->index : 0),
      address_(replica.has_value() ? replica->replica.ownership.self : "coordinator"),
      wire_(replica.has_value() ? replica->wire : nullptr) {
  if (replica.has_value()) {
    replica_ = std::make_unique<SimReplica>(
        world, replica->etcd, replica->replica, &paused_until_,
        [this](const std::vector<std::string>& jobs) {
          if (owner_ != nullptr) {
            owner_->DropJobs(jobs, wire::NotServedHere(server::ha::kLostReason, "", 0));
          }
        });
  }
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
  if (replica_ != nullptr) {
    options.gate = replica_.get();
    replica_->Start();
  }
  owner_ = std::make_unique<server::Coordinator>(options, world_->clock());
  released_.clear();
  world_->Trace(absl::StrCat(address_, ": incarnation ", incarnation_, " up"));
  ScheduleLiveness();
}

void SimCoordinator::Crash() {
  if (owner_ == nullptr) return;
  world_->Trace(absl::StrCat(address_, ": incarnation ", incarnation_, " crashed"));
  if (replica_ != nullptr) replica_->Crash();
  for (auto& [id, stream] : streams_) {
    if (stream.sink != nullptr) stream.sink->Orphan();
  }
  std::vector<uint64_t> connections;
  for (const auto& [id, stream] : streams_) connections.push_back(id);
  std::sort(connections.begin(), connections.end());
  streams_.clear();
  held_.clear();  // what the agent's batches held is lost with the process
  owner_.reset();
  for (uint64_t c : connections) network_->Cut(c, "coordinator crashed");
  ++crashes_;
  ++incarnation_;
}

bool SimCoordinator::Deferred(std::function<void()> again) {
  return world_->DeferWhilePaused(paused_until_, origin_, std::move(again));
}

void SimCoordinator::Pause(absl::Duration length) {
  paused_until_ = std::max(paused_until_, world_->now() + length);
  world_->Trace(absl::StrCat(address_, ": paused for ", absl::FormatDuration(length)));
}

void SimCoordinator::ScheduleLiveness() {
  const uint64_t incarnation = incarnation_;
  world_->After(absl::Milliseconds(500), origin_, [this, incarnation] {
    auto enforce = [this, incarnation] {
      if (owner_ == nullptr || incarnation_ != incarnation) return;
      owner_->EnforceLiveness();
      ScheduleLiveness();
    };
    if (!Deferred(enforce)) enforce();
  });
}

size_t SimCoordinator::ReleasedAt(uint64_t epoch) const {
  size_t n = 0;
  for (const auto& key : released_) n += std::get<0>(key) == epoch;
  return n;
}

void SimCoordinator::Read(const std::string& job) {
  if (Deferred([this, job] { Read(job); })) return;
  if (owner_ == nullptr) return;
  // Only an answer from the live job's state is judged (an ended job's record may be answered
  // when no replica owns the job).
  absl::StatusOr<server::JobStatusView> status = owner_->GetJobStatus(job);
  if (status.ok() && status->end.kind == server::JobEndKind::kLive && wire_ != nullptr) {
    wire_->OnReadAnswered(address_, job);
  }
}

void SimCoordinator::NoteStatus(const std::string& job, const absl::Status& status) {
  if (wire_ != nullptr && wire::RedirectOf(status).has_value()) wire_->OnNotServed(address_, job);
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
  if (Deferred([this, connection, request] { OnJoin(connection, request); })) return;
  if (!streams_.contains(connection) || owner_ == nullptr) return;
  if (replica_ == nullptr) {
    FinishJoin(connection, request);
    return;
  }
  // As Replica::AdmitJoin: an unowned job this replica is to own is claimed in etcd first.
  replica_->BeforeJoin(request.job_id(), [this, connection, request, incarnation = incarnation_] {
    if (incarnation == incarnation_) FinishJoin(connection, request);
  });
}

void SimCoordinator::FinishJoin(uint64_t connection, const v1::JoinRequest& request) {
  auto it = streams_.find(connection);
  if (it == streams_.end() || owner_ == nullptr) return;
  absl::StatusOr<core::JoinResult> joined = owner_->Join(server::RankPlanFromProto(request));
  absl::StatusOr<v1::JoinResponse> answer;
  if (joined.ok()) {
    answer = server::JoinResponseToProto(*joined);
  } else {
    answer = joined.status();
    NoteStatus(request.job_id(), joined.status());
  }
  RankPeer* peer = it->second.peer;
  network_->Send(connection, Direction::kDown,
                 [peer, connection, answer] { peer->OnJoinAnswer(connection, answer); });
}

void SimCoordinator::OnUp(uint64_t connection, const v1::SessionUp& up) {
  if (Deferred([this, connection, up] { OnUp(connection, up); })) return;
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
        NoteStatus(up.attach().job_id(), pending.status());
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
      if (agent_window_ > absl::ZeroDuration()) {
        Hold(connection, stream, up);
        return;
      }
      [[fallthrough]];
    case wire::SessionAction::kLeave: {
      // A leave goes up after what its job's batch holds (as the agent's queue keeps them).
      if (held_.contains(stream.job_id)) {
        FlushAgentBatch(stream.job_id);
        auto again = streams_.find(connection);
        if (again == streams_.end() || again->second.sink == nullptr || owner_ == nullptr) return;
      }
      const Stream& current = streams_.at(connection);
      const std::string job_id = current.job_id;
      const uint32_t rank = current.rank;
      const absl::Status status =
          server::ApplySessionMessage(*owner_, job_id, rank, decision.action, up);
      // A replica that does not serve the job (any more) ends the Session with its redirect
      // instead of an Ack (as server/rpc/session_stream.cc).
      if (wire::RedirectOf(status).has_value()) {
        auto stream = streams_.find(connection);
        if (stream != streams_.end()) Detach(stream->second);
        CloseStream(connection, status);
        return;
      }
      SendDown(connection, wire::AckFor(up.request_id(), status));
      return;
    }
  }
}

void SimCoordinator::Hold(uint64_t connection, const Stream& stream, const v1::SessionUp& up) {
  std::vector<Held>& held = held_[stream.job_id];
  held.push_back(Held{connection, stream.sink, stream.rank, up});
  if (held.size() > 1) return;  // the window is running
  const uint64_t incarnation = incarnation_;
  const std::string job = stream.job_id;
  world_->After(agent_window_, origin_, [this, incarnation, job] {
    auto flush = [this, incarnation, job] {
      if (owner_ != nullptr && incarnation_ == incarnation) FlushAgentBatch(job);
    };
    if (!Deferred(flush)) flush();
  });
}

v1::AgentBatch SimCoordinator::MergeAsAgents(const std::string& job, uint64_t generation,
                                             const std::vector<Held>& held, size_t begin,
                                             size_t end, std::vector<size_t>* order) const {
  // Behind a relay, each node's messages are merged by its agent, in arrival order, and the nodes'
  // batches joined one after the other, a node in the order of its first message.
  const auto node_of = [this](const Held& h) {
    return ranks_per_node_ == 0 ? 0 : h.rank / ranks_per_node_;
  };
  std::vector<uint32_t> nodes;
  for (size_t i = begin; i < end; ++i) {
    if (std::find(nodes.begin(), nodes.end(), node_of(held[i])) == nodes.end()) {
      nodes.push_back(node_of(held[i]));
    }
  }
  v1::AgentBatch batch;
  for (uint32_t node : nodes) {
    std::vector<agent::MergeInput> inputs;
    for (size_t i = begin; i < end; ++i) {
      if (node_of(held[i]) != node) continue;
      order->push_back(i);
      inputs.push_back({held[i].rank, &held[i].up});
    }
    agent::AppendBatch(agent::MergeMessages(job, generation, inputs), &batch);
  }
  return batch;
}

absl::Status SimCoordinator::SameMessages(const server::ExpandedBatch& expanded,
                                          const std::vector<Held>& held,
                                          const std::vector<size_t>& order) {
  if (expanded.messages.size() != order.size()) {
    return absl::InternalError(
        absl::StrCat(expanded.messages.size(), " messages instead of ", order.size()));
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (expanded.messages[k].rank != held[order[k]].rank) {
      return absl::InternalError(
          absl::StrCat("message ", k, " is not rank ", held[order[k]].rank, "'s"));
    }
  }
  return absl::OkStatus();
}

void SimCoordinator::FlushAgentBatch(const std::string& job) {
  auto it = held_.find(job);
  if (it == held_.end()) return;
  std::vector<Held> held = std::move(it->second);
  held_.erase(it);
  // Only ranks still attached through the agent's stream are applied (server/rpc/agent_stream.cc
  // refuses the others); their answers would go nowhere.
  std::vector<Held> live;
  for (Held& h : held) {
    auto s = streams_.find(h.connection);
    if (s != streams_.end() && s->second.sink == h.sink) live.push_back(std::move(h));
  }
  // One batch per run of one generation, in arrival order.
  for (size_t begin = 0; begin < live.size();) {
    const uint64_t generation = agent::GenerationOf(live[begin].up);
    size_t end = begin + 1;
    while (end < live.size() && agent::GenerationOf(live[end].up) == generation) ++end;
    std::vector<size_t> order;
    const v1::AgentBatch batch = MergeAsAgents(job, generation, live, begin, end, &order);
    server::ExpandedBatch expanded;
    absl::Status expand = server::ExpandAgentBatch(batch, &expanded);
    if (expand.ok()) expand = SameMessages(expanded, live, order);
    if (!expand.ok()) {
      // The agents' merge, the relay's join and the coordinator's expansion disagree: a bug of the
      // code under test. Nothing of the batch is applied; the run fails with it.
      if (broken_.empty()) {
        broken_ = absl::StrCat(address_, ": the agents' batch does not expand into the messages ",
                               "merged: ", expand.ToString());
      }
      return;
    }
    ++agent_batches_;
    agent_batch_messages_ += end - begin;
    // What the batch decides goes down with its answer in one AgentDown, which the agent hands
    // out answers first, then notices, then closes (agent/upstream.cc): corked until the answers
    // are out.
    corked_ = true;
    const std::vector<absl::Status> statuses =
        owner_->ApplyBatch(job, generation, expanded.messages);
    corked_ = false;
    for (size_t k = 0; k < statuses.size(); ++k) {
      const Held& h = live[order[k]];
      auto s = streams_.find(h.connection);
      if (s == streams_.end() || s->second.sink != h.sink) continue;
      // A replica that does not serve the job (any more) ends the Session with its redirect.
      if (wire::RedirectOf(statuses[k]).has_value()) {
        Detach(s->second);
        CloseStream(h.connection, statuses[k]);
        continue;
      }
      SendDown(h.connection, wire::AckFor(h.up.request_id(), statuses[k]));
    }
    std::vector<std::function<void()>> decided = std::move(corked_sends_);
    corked_sends_.clear();
    for (const auto& send : decided) send();
    begin = end;
  }
}

void SimCoordinator::SendDown(uint64_t connection, v1::SessionDown down) {
  if (corked_) {
    corked_sends_.push_back(
        [this, connection, down = std::move(down)] { SendDown(connection, down); });
    return;
  }
  auto it = streams_.find(connection);
  if (it == streams_.end()) return;
  if (down.has_directive()) {
    const v1::SyncDirective& d = down.directive();
    released_.insert({d.epoch(), d.generation(), d.step(), d.chunk()});
    if (wire_ != nullptr) wire_->OnRelease(address_, it->second.job_id, d.epoch());
  }
  RankPeer* peer = it->second.peer;
  network_->Send(connection, Direction::kDown,
                 [peer, connection, down = std::move(down)] { peer->OnDown(connection, down); });
}

void SimCoordinator::CloseStream(uint64_t connection, const absl::Status& status) {
  if (corked_) {
    corked_sends_.push_back([this, connection, status] { CloseStream(connection, status); });
    return;
  }
  auto it = streams_.find(connection);
  if (it == streams_.end()) return;
  // Called by the owner (a superseded Session, an ended job) or for a Session it never attached:
  // the owner has already let go of this sink, so it is not called back.
  RankPeer* peer = it->second.peer;
  if (it->second.sink != nullptr) it->second.sink->Orphan();
  NoteStatus(it->second.job_id, status);
  streams_.erase(it);
  network_->Send(connection, Direction::kDown, [this, peer, connection, status] {
    peer->OnSessionEnd(connection, status);
    network_->Cut(connection, "session ended");
  });
}

void SimCoordinator::OnCut(uint64_t connection) {
  if (Deferred([this, connection] { OnCut(connection); })) return;
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
