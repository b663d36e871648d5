#include "tests/service/raw_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/sync_stream.h"

namespace psync::testing {

v1::JoinRequest MakeJoin(const std::string& job, uint32_t world, uint32_t rank, uint32_t chunks,
                         const std::vector<uint32_t>& expert_chunks, uint32_t experts) {
  v1::JoinRequest r;
  r.set_job_id(job);
  r.set_world_size(world);
  r.set_rank(rank);
  r.set_num_chunks(chunks);
  r.set_incarnation(absl::StrCat("inc-", rank));
  for (uint32_t c = 0; c < chunks; ++c) {
    v1::ChunkPlan* plan = r.add_chunks();
    plan->set_chunk(c);
    plan->add_optimizers("dense");
    v1::SyncGroup* dp = plan->add_groups();
    dp->set_name("dp");
    for (uint32_t q = 0; q < world; ++q) dp->add_ranks(q);
    if (std::find(expert_chunks.begin(), expert_chunks.end(), c) == expert_chunks.end()) continue;
    plan->add_optimizers("expert");
    v1::SyncGroup* edp = plan->add_groups();
    edp->set_name(absl::StrCat("edp", rank % experts));
    for (uint32_t q = rank % experts; q < world; q += experts) edp->add_ranks(q);
  }
  return r;
}

v1::SessionUp AttachMessage(const std::string& job, uint32_t rank, const v1::JoinResponse& joined) {
  v1::SessionUp up;
  up.set_request_id(1);
  v1::Attach* a = up.mutable_attach();
  a->set_job_id(job);
  a->set_rank(rank);
  a->set_generation(joined.generation());
  a->set_session_id(joined.session_id());
  return up;
}

v1::KvSetRequest MakeKvSet(const std::string& job, uint64_t generation, const std::string& key,
                           const std::string& value) {
  v1::KvSetRequest set;
  set.set_job_id(job);
  set.set_generation(generation);
  set.set_key(key);
  set.set_value(value);
  return set;
}

v1::KvGetRequest MakeKvGet(const std::string& job, uint64_t generation, const std::string& key,
                           bool wait) {
  v1::KvGetRequest get;
  get.set_job_id(job);
  get.set_generation(generation);
  get.add_keys(key);
  get.set_wait(wait);
  return get;
}

RawOutcome RunRawSession(grpc::Channel* channel, const std::vector<std::string>& frames,
                         bool half_close) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel,
          grpc::internal::RpcMethod("/psync.v1.Coordinator/Session",
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &context));
  for (const std::string& frame : frames) {
    grpc::Slice slice(frame);
    grpc::ByteBuffer buffer(&slice, 1);
    if (!stream->Write(buffer)) break;  // the server ended the stream
  }
  if (half_close) stream->WritesDone();
  RawOutcome outcome;
  grpc::ByteBuffer buffer;
  while (stream->Read(&buffer)) {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (buffer.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    v1::SessionDown down;
    if (!down.ParseFromString(bytes)) down.mutable_ack()->set_message("<unparsable SessionDown>");
    outcome.down.push_back(std::move(down));
  }
  outcome.status = stream->Finish();
  return outcome;
}

grpc::Status RawSession::Attach(const std::string& job, uint32_t rank, uint64_t generation,
                                const std::string& session_id) {
  stream_ = stub_->Session(&context_);
  v1::SessionUp up;
  up.mutable_attach()->set_job_id(job);
  up.mutable_attach()->set_rank(rank);
  up.mutable_attach()->set_generation(generation);
  up.mutable_attach()->set_session_id(session_id);
  grpc::Status status = Send(std::move(up));
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      status.error_message() == "stream ended") {
    return Finish();
  }
  return status;
}

grpc::Status RawSession::Send(v1::SessionUp up) {
  const uint64_t id = next_request_++;
  up.set_request_id(id);
  if (!stream_->Write(up)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended");
  v1::SessionDown down;
  while (stream_->Read(&down)) {
    if (down.has_ack() && down.ack().request_id() == id) {
      return grpc::Status(static_cast<grpc::StatusCode>(down.ack().code()), down.ack().message());
    }
    if (!down.has_ack()) notices_.push_back(down);
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream ended");
}

grpc::Status RawSession::Stage(uint64_t generation, uint64_t step, uint32_t chunk,
                               const std::string& optimizer) {
  v1::SessionUp up;
  up.mutable_staged()->set_generation(generation);
  v1::Staged* item = up.mutable_staged()->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  item->set_optimizer(optimizer);
  return Send(std::move(up));
}

grpc::Status RawSession::SyncDone(uint64_t generation, uint64_t step, uint32_t chunk) {
  v1::SessionUp up;
  up.mutable_sync_done()->set_generation(generation);
  v1::SyncDone* item = up.mutable_sync_done()->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  return Send(std::move(up));
}

bool RawSession::ReadNotice(v1::SessionDown* out) {
  if (consumed_ < notices_.size()) {
    *out = notices_[consumed_++];
    return true;
  }
  v1::SessionDown down;
  while (stream_->Read(&down)) {
    if (down.has_ack()) continue;
    notices_.push_back(down);
    ++consumed_;
    *out = down;
    return true;
  }
  return false;
}

grpc::Status RawSession::Finish() {
  stream_->WritesDone();
  v1::SessionDown down;
  while (stream_->Read(&down)) {
    if (!down.has_ack()) notices_.push_back(down);
  }
  return stream_->Finish();
}

}  // namespace psync::testing
