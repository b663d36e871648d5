// Endpoints: the coordinator replicas a client talks to, and which one it talks to now. A client
// is given a list of targets (ClientOptions::target "host1:7070,host2:7070", or one DNS name that
// resolves to several: gRPC's own resolver spreads those); it starts on one of them, moves to the
// next when the current one fails (unreachable, or it could not serve the job), and goes straight
// to a job's owner when a replica redirects it there (psync.v1.OwnerRedirect). A redirect target
// that fails is forgotten: the client goes back to its list.
//
// With one target, Current() is always that target, so a single coordinator behaves as before.
// Thread-safe. Owns the channels it creates.
#ifndef PSYNC_CLIENT_ENDPOINTS_H_
#define PSYNC_CLIENT_ENDPOINTS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/target_choice.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync {

// The targets of a comma-separated list ("a:7070, b:7070"), without blanks. INVALID_ARGUMENT
// naming `field` when it holds none.
absl::StatusOr<std::vector<std::string>> SplitTargets(const std::string& list,
                                                      const std::string& field);

// The owner named by a status that ends a call or stream: the binary error details of a replica's
// UNAVAILABLE (OwnerRedirect), or by the same status turned into an absl::Status (StatusFromGrpc
// keeps it as a payload). nullopt when there is none; an empty owner means "nobody now".
std::optional<psync::v1::OwnerRedirect> RedirectIn(const grpc::Status& status);
std::optional<psync::v1::OwnerRedirect> RedirectIn(const absl::Status& status);

class Endpoints {
 public:
  using ChannelFactory = std::function<std::shared_ptr<grpc::Channel>(const std::string& target)>;

  // `targets` must not be empty. `start` picks the first one (modulo the count), e.g. a hash of
  // the job id so that jobs spread over replicas before any redirect.
  Endpoints(std::vector<std::string> targets, ChannelFactory factory, size_t start = 0);
  // A single existing channel (ClientOptions::channel): never rotates, never redirects.
  explicit Endpoints(std::shared_ptr<grpc::Channel> channel);

  // The stub of the endpoint to use now, and its target.
  psync::v1::Coordinator::Stub* Stub(std::string* target = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // A call or stream to `target` ended with `status`: a redirect to another owner makes that
  // owner current; any other failure of the current endpoint (unreachable, or not serving the job
  // now) moves to the next target of the list. Returns whether the current endpoint changed.
  bool OnFailure(const std::string& target, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // The target in use now.
  std::string current() const ABSL_LOCKS_EXCLUDED(mu_);
  // Moves so far: to another target of the list, and to an owner named by a redirect.
  uint64_t rotations() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t redirects() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Endpoint {
    std::string target;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<psync::v1::Coordinator::Stub> stub;
  };
  Endpoint& Get(const std::string& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const bool fixed_channel_;  // the single given channel: never moves
  const ChannelFactory factory_;

  mutable absl::Mutex mu_;
  // Every endpoint used so far (the list's and redirect owners), by target; never removed, so
  // that a stub handed out stays valid for the client's life.
  std::vector<std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
  TargetChoice choice_ ABSL_GUARDED_BY(mu_);  // which target is current (the decision)
};

}  // namespace psync

#endif  // PSYNC_CLIENT_ENDPOINTS_H_
