// SimCoordinator: a psync coordinator process in the simulated world. It runs the real owner
// (server::Coordinator: admission, the tracker, the ordered delivery, liveness) with the world's
// clock and no delivery threads, and the real Session rules (wire::DecideSessionMessage,
// AttachSession, ApplySessionMessage): only gRPC is replaced, by the simulated network. A crash
// loses every job (the coordinator's state is soft) and cuts every connection; a restart starts a
// new owner, which ranks rebuild by re-joining with their resumes.
//
// As a coordinator replica (ReplicaSetup), its owner's JobGate is a SimReplica (sim_replica.h)
// on the simulated etcd, a Join first waits for its claim, a message the replica does not serve
// ends the Session with the redirect (as server/rpc/session_stream.cc), and the jobs its replica
// stops serving are dropped. What it sends that the ownership checks judge (releases with their
// epochs, "not served here" answers, reads answered) is told to a ReplicaWire. Pause() stops the
// whole process (a long GC, SIGSTOP): what arrives meanwhile is handled when it ends, in order.
//
// Behind an agent (MergeLikeAnAgent), the ranks' check-ins, skips and SyncDones are not applied
// as each arrives but as a node agent sends them: those of a job that arrive within the window are
// merged by the agent's own code (agent/merge.h) into one AgentBatch per generation (with nodes:
// one per node, joined into one by a relay's own code, agent/batch_parts.h), which the
// coordinator's own path expands (server/rpc/agent_batch.h) and applies at once
// (Coordinator::ApplyBatch), each message then answered with its status. A message whose Session
// ended meanwhile is not applied (the coordinator refuses a rank no longer attached to the
// agent's stream); a crash loses what waits.
//
// RankPeer is what a rank's end of a connection receives. Not thread-safe (one simulation thread).
// Does not own the world, the network, the etcd or the peers.
#ifndef PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_
#define PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/owner/coordinator.h"
#include "server/rpc/agent_batch.h"
#include "tests/simulation/network.h"
#include "tests/simulation/sim_etcd.h"
#include "tests/simulation/sim_replica.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

class RankPeer {
 public:
  virtual ~RankPeer() = default;
  virtual void OnJoinAnswer(uint64_t connection, absl::StatusOr<v1::JoinResponse> answer) = 0;
  virtual void OnDown(uint64_t connection, const v1::SessionDown& down) = 0;
  // The Session on `connection` ended with `status` (the coordinator closed it, or the connection
  // was cut: UNAVAILABLE).
  virtual void OnSessionEnd(uint64_t connection, const absl::Status& status) = 0;
};

// What a coordinator replica sends on the wire that the ownership checks judge.
class ReplicaWire {
 public:
  virtual ~ReplicaWire() = default;
  // A directive of `job` stamped with owner `epoch` leaves `replica`.
  virtual void OnRelease(const std::string& replica, const std::string& job, uint64_t epoch) = 0;
  // `replica` answers a message of `job` (or ends its Session) with "not served here".
  virtual void OnNotServed(const std::string& replica, const std::string& job) = 0;
  // `replica` answers a read of `job`'s status from its state.
  virtual void OnReadAnswered(const std::string& replica, const std::string& job) = 0;
};

struct ReplicaSetup {
  SimEtcd* etcd = nullptr;
  SimReplicaOptions replica;  // replica.ownership.self: its address
  ReplicaWire* wire = nullptr;
  uint32_t index = 0;  // among the replicas
};

class SimCoordinator {
 public:
  // A single coordinator (no `replica`), or one replica of several.
  SimCoordinator(World* world, Network* network, server::CoordinatorOptions options,
                 std::optional<ReplicaSetup> replica = std::nullopt);
  ~SimCoordinator();

  bool up() const { return owner_ != nullptr; }
  // Starts with the first incarnation up; Crash() and Restart() bump it.
  uint64_t incarnation() const { return incarnation_; }
  // Unique over every process of the run: the index of the replica (0 for a single coordinator)
  // times 1000, plus the incarnation.
  uint64_t process_incarnation() const { return index_ * 1000 + incarnation_; }
  // The address ranks know it by ("coordinator", or the replica's).
  const std::string& address() const { return address_; }
  // The replica (null for a single coordinator).
  SimReplica* replica() { return replica_.get(); }
  // The running owner (null while down).
  server::Coordinator* owner() { return owner_.get(); }

  // A rank opens a connection to this coordinator (refused at once, as a cut, while it is down).
  uint64_t Connect(RankPeer* peer);
  // Arrivals over the network (the rank's sends).
  void SendJoin(uint64_t connection, const v1::JoinRequest& request);
  void SendUp(uint64_t connection, const v1::SessionUp& up);
  // The rank's end gave up on the connection (it re-connects elsewhere).
  void Hangup(uint64_t connection);

  void Crash();
  void Restart();
  // Nothing of the process runs until now + `length`.
  void Pause(absl::Duration length);
  // When its current pause ends (in the past when it is not paused).
  absl::Time paused_until() const { return paused_until_; }
  // A read of `job`'s status arrives (the answer is judged by the ReplicaWire, not returned).
  void Read(const std::string& job);
  // From now on, applies the ranks' messages as a node agent batches them over `window` (see
  // above); zero: each as it arrives, as on its own Session. With `ranks_per_node`, rank r is on
  // node r / ranks_per_node, each node's messages are merged by its own agent, and a relay joins
  // the nodes' batches into one; zero: one agent for every rank.
  void MergeLikeAnAgent(absl::Duration window, uint32_t ranks_per_node = 0) {
    agent_window_ = window;
    ranks_per_node_ = ranks_per_node;
  }
  // Batches applied by MergeLikeAnAgent, and the messages in them.
  uint64_t agent_batches() const { return agent_batches_; }
  // Why a batch of MergeLikeAnAgent did not expand into the messages merged (empty: none failed).
  const std::string& broken() const { return broken_; }
  uint64_t agent_batch_messages() const { return agent_batch_messages_; }

  uint64_t crashes() const { return crashes_; }
  // The (generation, step, chunk)s this incarnation sent directives of at owner `epoch`.
  size_t ReleasedAt(uint64_t epoch) const;
  // Whether a directive of (generation, step, chunk) went to a rank's stream at `epoch`.
  bool Sent(uint64_t epoch, uint64_t generation, uint64_t step, uint32_t chunk) const {
    return released_.contains(std::make_tuple(epoch, generation, step, chunk));
  }

 private:
  class Sink;
  struct Stream {
    RankPeer* peer = nullptr;
    uint64_t incarnation = 0;
    std::shared_ptr<Sink> sink;  // set once attached
    std::string job_id;
    uint32_t rank = 0;
  };

  // True (and the call is re-run when the pause ends) while paused.
  bool Deferred(std::function<void()> again);
  void OnJoin(uint64_t connection, const v1::JoinRequest& request);
  void FinishJoin(uint64_t connection, const v1::JoinRequest& request);
  // Tells the ReplicaWire of a "not served here" answer of `job`.
  void NoteStatus(const std::string& job, const absl::Status& status);
  void OnUp(uint64_t connection, const v1::SessionUp& up);
  // A check-in, skip or SyncDone behind an agent: waits in its job's batch.
  void Hold(uint64_t connection, const Stream& stream, const v1::SessionUp& up);
  // Applies `job`'s waiting messages as the agent's batches (MergeLikeAnAgent).
  void FlushAgentBatch(const std::string& job);
  struct Held;
  // held[begin, end) (one generation) as the agents and the relay send them up; *order gets the
  // batch's messages as indices into held.
  v1::AgentBatch MergeAsAgents(const std::string& job, uint64_t generation,
                               const std::vector<Held>& held, size_t begin, size_t end,
                               std::vector<size_t>* order) const;
  // OK when the expansion gives back the merged messages' ranks, in order.
  static absl::Status SameMessages(const server::ExpandedBatch& expanded,
                                   const std::vector<Held>& held, const std::vector<size_t>& order);

  // The coordinator's end of `connection` found it cut: the rank is detached.
  void OnCut(uint64_t connection);
  void SendDown(uint64_t connection, v1::SessionDown down);
  // Ends the Session on `connection` with `status` after what is queued on it.
  void CloseStream(uint64_t connection, const absl::Status& status);
  void Detach(Stream& stream);
  void ScheduleLiveness();

  World* const world_;
  Network* const network_;
  const server::CoordinatorOptions options_;
  const uint64_t origin_;
  const uint64_t index_;
  const std::string address_;
  ReplicaWire* const wire_;
  absl::Time paused_until_ = absl::InfinitePast();
  std::unique_ptr<SimReplica> replica_;  // its lifetime is the process's; Crash() empties it
  std::unique_ptr<server::Coordinator> owner_;
  uint64_t incarnation_ = 1;
  uint64_t crashes_ = 0;
  absl::flat_hash_map<uint64_t, Stream> streams_;
  // MergeLikeAnAgent: the messages waiting, per job, in arrival order.
  struct Held {
    uint64_t connection = 0;
    std::shared_ptr<Sink> sink;  // the Session's when it arrived: applied only while still it
    uint32_t rank = 0;
    v1::SessionUp up;
  };
  absl::Duration agent_window_ = absl::ZeroDuration();
  uint32_t ranks_per_node_ = 0;
  // While a held batch is applied: what it sends down waits here, behind the batch's answers.
  bool corked_ = false;
  std::vector<std::function<void()>> corked_sends_;
  absl::flat_hash_map<std::string, std::vector<Held>> held_;
  uint64_t agent_batches_ = 0;
  std::string broken_;
  uint64_t agent_batch_messages_ = 0;
  // (epoch, generation, step, chunk) of every directive this incarnation sent.
  absl::flat_hash_set<std::tuple<uint64_t, uint64_t, uint64_t, uint32_t>> released_;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_
