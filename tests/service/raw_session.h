// RawSession: a test helper that speaks psync.v1 directly over a gRPC stub (no client library), so
// service tests see exactly what goes over the wire. Not thread-safe; one test thread drives it.
#ifndef PSYNC_TESTS_SERVICE_RAW_SESSION_H_
#define PSYNC_TESTS_SERVICE_RAW_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::testing {

// Builds the JoinRequest of `rank` in a W-rank job with `chunks` chunks where every rank has a
// "dense" optimizer in every chunk, and an "expert" one in chunks listed in `expert_chunks`; groups
// "dp" = all ranks, "edp<k>" = ranks r with r % experts == k (only in expert chunks).
v1::JoinRequest MakeJoin(const std::string& job, uint32_t world, uint32_t rank, uint32_t chunks,
                         const std::vector<uint32_t>& expert_chunks = {}, uint32_t experts = 1);

// Request 1 of a Session: the attach of `rank` of `job` as `joined` (its Join answer) allows.
v1::SessionUp AttachMessage(const std::string& job, uint32_t rank, const v1::JoinResponse& joined);

// The rendezvous requests of a rank of `job` in `generation`.
v1::KvSetRequest MakeKvSet(const std::string& job, uint64_t generation, const std::string& key,
                           const std::string& value);
v1::KvGetRequest MakeKvGet(const std::string& job, uint64_t generation, const std::string& key,
                           bool wait = false);

// What the server sent on one Session stream (Acks included) and how the stream ended.
struct RawOutcome {
  std::vector<v1::SessionDown> down;
  grpc::Status status;
};

// Opens a Session on `channel` as a stream of bytes, writes each of `frames` as it is (so a test
// can send bytes that are not a SessionUp), half-closes (unless !half_close: then the server must
// end the stream itself), and reads until the server ends the stream.
RawOutcome RunRawSession(grpc::Channel* channel, const std::vector<std::string>& frames,
                         bool half_close = true);

class RawSession {
 public:
  explicit RawSession(v1::Coordinator::Stub* stub) : stub_(stub) {}

  // Opens the stream and sends attach; returns the attach Ack's status, or the stream's final
  // status when the server ended the stream instead.
  grpc::Status Attach(const std::string& job, uint32_t rank, uint64_t generation,
                      const std::string& session_id);
  // Sends `up` (request_id assigned) and returns the Ack's status. Notices read meanwhile are kept.
  grpc::Status Send(v1::SessionUp up);
  grpc::Status Stage(uint64_t generation, uint64_t step, uint32_t chunk,
                     const std::string& optimizer);
  grpc::Status SyncDone(uint64_t generation, uint64_t step, uint32_t chunk);
  // Reads until a notice arrives (or the stream ends: returns false).
  bool ReadNotice(v1::SessionDown* out);
  // Ends the stream; returns the server's final status.
  grpc::Status Finish();

  std::vector<v1::SessionDown>& notices() { return notices_; }

 private:
  v1::Coordinator::Stub* stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionUp, v1::SessionDown>> stream_;
  uint64_t next_request_ = 1;
  std::vector<v1::SessionDown> notices_;
  size_t consumed_ = 0;
};

}  // namespace psync::testing

#endif  // PSYNC_TESTS_SERVICE_RAW_SESSION_H_
