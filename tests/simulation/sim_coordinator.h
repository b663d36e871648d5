// SimCoordinator: a psync coordinator process in the simulated world. It runs the real owner
// (server::Coordinator: admission, the tracker, the ordered delivery, liveness) with the world's
// clock and no delivery threads, and the real Session rules (wire::DecideSessionMessage,
// AttachSession, ApplySessionMessage): only gRPC is replaced, by the simulated network. A crash
// loses every job (the coordinator's state is soft) and cuts every connection; a restart starts a
// new owner, which ranks rebuild by re-joining with their resumes.
//
// RankPeer is what a rank's end of a connection receives. Not thread-safe (one simulation thread).
// Does not own the world, the network or the peers.
#ifndef PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_
#define PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "server/owner/coordinator.h"
#include "tests/simulation/network.h"
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

class SimCoordinator {
 public:
  SimCoordinator(World* world, Network* network, server::CoordinatorOptions options);
  ~SimCoordinator();

  bool up() const { return owner_ != nullptr; }
  // Starts with the first incarnation up; Crash() and Restart() bump it.
  uint64_t incarnation() const { return incarnation_; }
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

  uint64_t crashes() const { return crashes_; }

 private:
  class Sink;
  struct Stream {
    RankPeer* peer = nullptr;
    uint64_t incarnation = 0;
    std::shared_ptr<Sink> sink;  // set once attached
    std::string job_id;
    uint32_t rank = 0;
  };

  void OnJoin(uint64_t connection, const v1::JoinRequest& request);
  void OnUp(uint64_t connection, const v1::SessionUp& up);
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
  std::unique_ptr<server::Coordinator> owner_;
  uint64_t incarnation_ = 1;
  uint64_t crashes_ = 0;
  absl::flat_hash_map<uint64_t, Stream> streams_;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIM_COORDINATOR_H_
