// SimRank: one training rank in the simulated world: psync's client protocol and a worker loop.
//
// The client part follows psync::Client (client/client.cc) step for step, with the client's own
// decision code where it is separate from gRPC: NoticeQueue de-duplicates and hands out notices,
// ResumeTracker builds the resume a re-join carries. Join, then attach; every report is kept until
// its Ack and sent again, in order and under the current generation, after a reconnect; a re-join
// after a coordinator restart carries the resume and continues in the generation the coordinator
// answers with (resumed); a Session that ends or a connection that is cut is re-joined after a
// back-off, at the coordinator replica TargetChoice names (the job's start entry, a redirect's
// owner, the next entry after a failure). (psync::Client itself mixes this with gRPC's threads and
// cannot run here.)
//
// The worker: per step, each (chunk, optimizer) it contributes is staged after a compute delay;
// each directive its client hands out is executed (the RankChecker is told) and reported SyncDone
// after a sync delay; once every chunk it syncs is reported, the next step starts. Skipped steps
// are voted and waited for. An Abort of its generation restarts the rank (a new client with a new
// incarnation joins again and runs from the step the coordinator names), as psync's contract asks.
//
// The client's keepalive ends a connection whose coordinator process does not answer its ping for
// 2 s (a paused replica), so the rank moves on as psync::Client does.
//
// Pause() models a stalled process (a long GC, swapping): nothing it receives or schedules is
// handled until the pause ends, then in order. Not thread-safe (one simulation thread). Does not
// own the world, the coordinator or the checker.
#ifndef PSYNC_TESTS_SIMULATION_SIM_RANK_H_
#define PSYNC_TESTS_SIMULATION_SIM_RANK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/notice_queue.h"
#include "client/resume_tracker.h"
#include "client/target_choice.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "tests/simulation/rank_checker.h"
#include "tests/simulation/sim_coordinator.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

struct RankSetup {
  v1::JoinRequest join;                                 // without a resume
  std::vector<std::pair<uint32_t, std::string>> items;  // (chunk, optimizer) staged every step
  std::vector<uint32_t> syncs;                          // chunks it executes the sync of
  std::map<uint32_t, std::vector<std::string>> groups;  // its sync groups in each chunk
  std::set<uint64_t> skipped;                           // steps every rank skips
  uint64_t end_step = 0;                                // the run ends before this step
};

class SimRank final : public RankPeer {
 public:
  // `coordinators`: the single coordinator, or every replica (the rank's target list).
  SimRank(World* world, std::vector<SimCoordinator*> coordinators, RankChecker* checker,
          RankSetup setup);

  void Start();
  void Pause(absl::Duration length);
  // The rank's process dies and starts again: a new client, with a new incarnation, joins afresh.
  void RestartProcess();
  // Every step done and every report answered.
  bool finished() const { return step_ >= setup_.end_step && tracked_.empty(); }
  uint32_t rank() const { return setup_.join.rank(); }
  // The connection it uses now (0: none).
  uint64_t connection() const { return connection_; }
  // Where it stands, for a run that does not finish.
  std::string Describe() const;

  void OnJoinAnswer(uint64_t connection, absl::StatusOr<v1::JoinResponse> answer) override;
  void OnDown(uint64_t connection, const v1::SessionDown& down) override;
  void OnSessionEnd(uint64_t connection, const absl::Status& status) override;

 private:
  enum class Phase { kIdle, kJoining, kAttaching, kAttached, kFailed };

  // True (and the call is re-run when the pause ends) while paused.
  bool Deferred(std::function<void()> again);
  void Connect();
  // psync::Client's keepalive on `connection`: a ping every second; one unanswered for 2 s (its
  // coordinator is paused) ends the connection.
  void KeepAlive(uint64_t connection);
  // The generation was aborted: a new client, with a new incarnation, joins again.
  void Restart(const std::string& why);
  void Reconnect(const absl::Status& why);
  // The coordinator of the connection failed with `status` (moves along the targets as
  // psync::Client's Endpoints does).
  void NoteFailure(const absl::Status& status);
  void Attach();
  void SendTracked(v1::SessionUp up);
  void HandleAck(const v1::Ack& ack);
  void HandleNotice(const v1::SessionDown& down);
  void StartStep();
  void Progress();
  void SendSyncDone(uint64_t step, uint32_t chunk);

  World* const world_;
  const std::vector<SimCoordinator*> coordinators_;
  RankChecker* const checker_;
  const RankSetup setup_;
  const uint64_t origin_;
  Rng rng_;
  absl::Time paused_until_ = absl::InfinitePast();

  // The client.
  TargetChoice targets_;                   // which coordinator it uses (psync::Client's rule)
  SimCoordinator* coordinator_ = nullptr;  // the one of its connection
  v1::JoinRequest join_;                   // setup_.join with the current incarnation
  uint32_t run_ = 0;                       // restarts after an abort
  Phase phase_ = Phase::kIdle;
  uint64_t connection_ = 0;
  uint64_t connection_incarnation_ = 0;  // the coordinator's incarnation it reaches
  bool joined_ = false;
  uint64_t generation_ = 0;
  std::string session_id_;
  uint64_t next_request_id_ = 1;
  uint64_t attach_request_id_ = 0;
  std::map<uint64_t, v1::SessionUp> tracked_;  // sent, not answered: by request id
  ResumeTracker progress_;
  std::unique_ptr<NoticeQueue> notices_ = std::make_unique<NoticeQueue>();  // new per client

  // The worker.
  uint64_t step_ = 0;
  bool step_started_ = false;
  size_t items_sent_ = 0;
  std::set<std::pair<uint64_t, uint32_t>> executed_;  // (step, chunk) handed out and executed
  std::set<uint32_t> reported_;                       // chunks of step_ reported SyncDone
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIM_RANK_H_
