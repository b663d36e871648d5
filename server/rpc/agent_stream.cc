#include "server/rpc/agent_stream.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "serve/agent_down_queue.h"
#include "serve/job_rank_map.h"
#include "serve/stream_writer.h"
#include "server/rpc/agent_batch.h"
#include "server/rpc/convert.h"
#include "server/rpc/session_attach.h"
#include "wire/arena_message.h"
#include "wire/wire_status.h"

namespace psync::server {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>;

// What waits to go down one AgentSession: the merged messages, and the last notice added,
// converted and keyed, since a release reaches the sinks of its ranks one after the other with
// the same notice (converted and keyed once, not once per rank).
struct ConvertedAgentDownQueue {
  bool empty() const { return queue.empty(); }
  size_t size() const { return queue.size(); }
  size_t bytes() const { return queue.bytes(); }
  void Clear() { queue.Clear(); }
  v1::AgentDown Take() { return queue.Take(); }

  void AddNotice(const std::string& job_id, absl::Span<const core::RankId> ranks,
                 const core::Notice& notice) {
    if (!last_notice.has_value() || !(*last_notice == notice) || last_job != job_id) {
      last_notice = notice;
      last_job = job_id;
      last_proto = NoticeToProto(notice);
      last_key = serve::AgentDownQueue::NoticeKey(job_id, last_proto);
    }
    queue.AddNotice(job_id, ranks, last_proto, last_key);
  }

  serve::AgentDownQueue queue;
  std::optional<core::Notice> last_notice;
  std::string last_job;
  v1::SessionDown last_proto;
  std::string last_key;
};

// Queues what goes down one AgentSession (merged by serve::AgentDownQueue) and writes one message
// at a time (StreamWriter). Shared by the sinks of every rank of the stream; while corked (the
// coordinator hands out one decision's notices) nothing new starts, so those notices leave
// together. Outlives the reactor: once the stream is done, everything added is dropped.
class AgentStreamBatcher final : public NoticeBatcher,
                                 public std::enable_shared_from_this<AgentStreamBatcher> {
 public:
  using Writer = serve::StreamWriter<v1::AgentUp, v1::AgentDown, ConvertedAgentDownQueue>;

  // Bounded by `limits`; call ArmOverflowTimer once the batcher is owned by a shared_ptr.
  AgentStreamBatcher(Reactor* reactor, const serve::StreamLimits& limits)
      : writer_(reactor, "agent", limits, /*clock=*/nullptr,
                [this](absl::Duration after) { overflow_timer_(after); }) {
    if (limits.agent_down_wait) writer_.SetWaitObserver(limits.agent_down_wait);
    if (limits.agent_down_write) writer_.SetWriteObserver(limits.agent_down_write);
  }
  void ArmOverflowTimer() {
    overflow_timer_ = serve::AlarmTimer(weak_from_this(),
                                        [](AgentStreamBatcher& b) -> Writer& { return b.writer_; });
  }

  void AddAck(v1::AgentAck ack) {
    writer_.Add([&](ConvertedAgentDownQueue& p) { p.queue.AddAck(std::move(ack)); });
  }
  // One lock and one conversion of the notice for the ranks of a release.
  void SendToRanks(const std::string& job_id, absl::Span<const core::RankId> ranks,
                   const core::Notice& notice) override {
    writer_.Add([&](ConvertedAgentDownQueue& p) { p.AddNotice(job_id, ranks, notice); });
  }
  void AddClosed(v1::AgentRankClosed closed) {
    writer_.Add([&](ConvertedAgentDownQueue& p) { p.queue.AddClosed(std::move(closed)); });
  }
  // The batch `request_id` (lazy_ack) was applied, every message accepted: the next message
  // written says so (AgentDown.acked_through), or a message of its own once `delay` has passed.
  void AckLater(uint64_t request_id, absl::Duration delay) {
    bool arm = false;
    writer_.Add([&](ConvertedAgentDownQueue& p) { arm = p.queue.AckLater(request_id); });
    if (arm)
      serve::RunAfter(delay, weak_from_this(), [](AgentStreamBatcher& b) { b.FlushLazyAcks(); });
  }
  void FlushLazyAcks() {
    writer_.Add([](ConvertedAgentDownQueue& p) { p.queue.FlushLazyAcks(); });
  }

  void Cork() override { writer_.Cork(); }
  void Uncork() override { writer_.Uncork(); }

  // Ends the stream with `status` once what is queued is written, the lazy acks included.
  void Close(const grpc::Status& status) {
    FlushLazyAcks();
    writer_.Close(status);
  }
  // Called from the reactor's OnWriteDone.
  void WriteDone(bool ok) { writer_.WriteDone(ok); }
  // Called from the reactor's OnDone: nothing is written after this.
  void Detach() { writer_.Detach(); }
  Writer& writer() { return writer_; }

 private:
  // Set once by ArmOverflowTimer, before the stream reads its first message.
  std::function<void(absl::Duration)> overflow_timer_;
  Writer writer_;
};

// How many sinks of one stream are closed, or closing, while its table still holds them (a sink
// removed from the table as it closes may stay counted: the count only ever errs high). While it
// is 0, no rank of the table has a closed sink, so a batch's attached check needs only the table,
// not each rank's sink (an object of its own: a miss to memory per rank of a relay's batch).
// A sink counts itself before it is seen closed, so a check that reads 0 and skips the sinks
// decides as reading every sink at that moment would.
using ClosedSinks = std::atomic<int64_t>;

// The session of one rank attached on an AgentSession: its notices go into the stream's outbox
// tagged with the rank (the coordinator addresses them to the outbox, its batcher(), with the
// rank); closing it (the coordinator superseded it) tells the agent.
class AgentRankSink final : public SessionSink {
 public:
  AgentRankSink(std::shared_ptr<AgentStreamBatcher> outbox, std::string job_id, core::RankId rank,
                uint64_t attach_request_id, std::shared_ptr<ClosedSinks> closed_sinks)
      : outbox_(std::move(outbox)),
        job_id_(std::move(job_id)),
        rank_(rank),
        attach_request_id_(attach_request_id),
        closed_sinks_(std::move(closed_sinks)) {}

  void Send(const core::Notice& notice) override {
    if (closed_.load()) return;
    outbox_->SendToRanks(job_id_, {rank_}, notice);
  }

  void Close(const absl::Status& status) override {
    if (closed_.load()) return;
    closed_sinks_->fetch_add(1);  // before closed_ can be seen set (see ClosedSinks)
    if (closed_.exchange(true)) {
      closed_sinks_->fetch_sub(1);  // another Close got there first and counted it
      return;
    }
    v1::AgentRankClosed closed;
    closed.set_job_id(job_id_);
    closed.set_rank(rank_);
    closed.set_attach_request_id(attach_request_id_);
    wire::SetWireStatusAndRedirect(status, &closed);
    outbox_->AddClosed(std::move(closed));
  }

  NoticeBatcher* batcher() override { return outbox_.get(); }

  bool closed() const { return closed_.load(); }
  // Starts loading what closed() reads, for a batch checking many ranks' sinks.
  void PrefetchClosed() const { __builtin_prefetch(&closed_); }
  uint64_t attach_request_id() const { return attach_request_id_; }

 private:
  const std::shared_ptr<AgentStreamBatcher> outbox_;
  const std::string job_id_;
  const core::RankId rank_;
  const uint64_t attach_request_id_;
  const std::shared_ptr<ClosedSinks> closed_sinks_;
  std::atomic<bool> closed_{false};
};

// The ranks attached on one AgentSession, by job, then rank: a batch (of one job) finds its job
// once and then each rank by number. Shared by the reactor and the writer's overflow, which
// outlives it: an agent that does not read is detached from the coordinator when the overflow
// deadline ends its stream, not when (if ever) it takes the status.
struct AgentAttachments {
  // Detaches every rank attached (idempotent).
  void DetachAll(Coordinator* coordinator) ABSL_LOCKS_EXCLUDED(mu) {
    serve::JobRankMap<std::shared_ptr<AgentRankSink>> detached;
    {
      absl::MutexLock lock(&mu);
      detached.swap(ranks);  // closed_sinks stays as it was: it may err high
    }
    detached.ForEach([coordinator](const std::string& job_id, core::RankId rank,
                                   const std::shared_ptr<AgentRankSink>& sink) {
      coordinator->Detach(job_id, rank, sink.get());
    });
  }

  // To be called, with mu held, for a sink taken out of `ranks` by an erase or a replacement.
  void Removed(const AgentRankSink& sink) {
    if (sink.closed()) closed_sinks->fetch_sub(1);
  }

  absl::Mutex mu;
  serve::JobRankMap<std::shared_ptr<AgentRankSink>> ranks ABSL_GUARDED_BY(mu);
  const std::shared_ptr<ClosedSinks> closed_sinks = std::make_shared<ClosedSinks>(0);
};

class AgentStream final : public Reactor {
 public:
  AgentStream(Coordinator* coordinator, const serve::StreamLimits& limits)
      : coordinator_(coordinator),
        lazy_ack_delay_(limits.lazy_ack_delay),
        outbox_(std::make_shared<AgentStreamBatcher>(this, limits)),
        attachments_(std::make_shared<AgentAttachments>()) {
    outbox_->ArmOverflowTimer();
    outbox_->writer().SetOnOverflow(
        [attachments = attachments_, coordinator] { attachments->DetachAll(coordinator); });
    // Reading stops while what is queued for the agent is over the bound (it does not read):
    // HTTP/2 flow control then holds the agent back. It resumes once the queue drained.
    outbox_->writer().SetResumeRead([this] { StartRead(request_.Renew()); });
    StartRead(request_.get());
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent finished writing, or the call ended
      DetachAll();
      outbox_->Close(grpc::Status::OK);
      return;
    }
    switch (request_->kind_case()) {
      case v1::AgentUp::kAttach:
        HandleAttach(request_->request_id(), request_->attach().attach());
        break;
      case v1::AgentUp::kDetach:
        HandleDetach(request_->request_id(), request_->detach());
        break;
      case v1::AgentUp::kBatch:
        HandleBatch(request_->request_id(), request_->lazy_ack(), request_->batch());
        break;
      case v1::AgentUp::KIND_NOT_SET: {
        v1::AgentAck ack;
        ack.set_request_id(request_->request_id());
        wire::SetWireStatus(
            absl::InvalidArgumentError("kind: one of attach, detach, batch must be set"), &ack);
        outbox_->AddAck(std::move(ack));
        break;
      }
    }
    if (outbox_->writer().ReadAllowed()) StartRead(request_.Renew());
  }

  void OnWriteDone(bool ok) override { outbox_->WriteDone(ok); }

  void OnCancel() override {
    DetachAll();
    outbox_->Close(grpc::Status(grpc::StatusCode::CANCELLED, "agent session cancelled"));
  }

  void OnDone() override {
    DetachAll();
    outbox_->Detach();
    delete this;
  }

 private:
  void HandleAttach(uint64_t request_id, const v1::Attach& a) {
    v1::AgentAck ack;
    ack.set_request_id(request_id);
    auto sink = std::make_shared<AgentRankSink>(outbox_, a.job_id(), a.rank(), request_id,
                                                attachments_->closed_sinks);
    absl::StatusOr<std::vector<core::Notice>> pending = AttachSession(*coordinator_, a, sink);
    if (!pending.ok()) {
      wire::SetWireStatusAndRedirect(pending.status(), &ack);
      outbox_->AddAck(std::move(ack));
      return;
    }
    {
      absl::MutexLock lock(&attachments_->mu);
      // An older attach of the rank on this stream was superseded by this one (and closed).
      std::shared_ptr<AgentRankSink>& attached = attachments_->ranks(a.job_id(), a.rank());
      if (attached != nullptr) attachments_->Removed(*attached);
      attached = sink;
    }
    outbox_->AddAck(std::move(ack));
    outbox_->Cork();
    for (const core::Notice& n : *pending) sink->Send(n);
    outbox_->Uncork();
  }

  void HandleDetach(uint64_t request_id, const v1::AgentDetach& d) {
    std::shared_ptr<AgentRankSink> sink;
    {
      absl::MutexLock lock(&attachments_->mu);
      attachments_->ranks.EraseIf(d.job_id(), d.rank(),
                                  [&](std::shared_ptr<AgentRankSink>& attached) {
                                    if (attached->attach_request_id() != d.attach_request_id()) {
                                      return false;
                                    }
                                    attachments_->Removed(*attached);
                                    sink = std::move(attached);
                                    return true;
                                  });
    }
    // Detach is a no-op when a newer session of the rank replaced this one.
    if (sink != nullptr) coordinator_->Detach(d.job_id(), d.rank(), sink.get());
    v1::AgentAck ack;
    ack.set_request_id(request_id);
    outbox_->AddAck(std::move(ack));
  }

  void HandleBatch(uint64_t request_id, bool lazy_ack, const v1::AgentBatch& batch) {
    v1::AgentAck ack;
    ack.set_request_id(request_id);
    // Per call, not kept per stream: a stream's largest batch held for its lifetime cost about
    // 19 KB a stream (40 MB with 2,048 node streams).
    ExpandedBatch expanded;
    if (absl::Status s = ExpandAgentBatch(batch, &expanded); !s.ok()) {
      wire::SetWireStatus(s, &ack);
      outbox_->AddAck(std::move(ack));
      return;
    }
    // Only ranks attached on this stream may send through it.
    const std::vector<RankMessage>& messages = expanded.messages;
    std::vector<uint32_t> index_of;  // of the messages applied
    index_of.reserve(messages.size());
    {
      absl::MutexLock lock(&attachments_->mu);
      const auto* sinks = attachments_->ranks.RanksOf(batch.job_id());
      // The ranks' entries are all asked for before any is read, rather than one miss to memory
      // after another. While no sink in the table is closed (the common case), the table alone
      // decides; otherwise each rank's sink (an object of its own) is asked for, then read.
      using Sinks = serve::JobRankMap<std::shared_ptr<AgentRankSink>>;
      for (const RankMessage& m : messages) Sinks::Prefetch(sinks, m.rank);
      const bool read_sinks = attachments_->closed_sinks->load() != 0;
      std::vector<const AgentRankSink*> sink_of(messages.size(), nullptr);
      for (size_t i = 0; i < messages.size(); ++i) {
        const auto* sink = Sinks::Find(sinks, messages[i].rank);
        if (sink == nullptr) continue;
        sink_of[i] = sink->get();
        if (read_sinks) sink_of[i]->PrefetchClosed();
      }
      for (size_t i = 0; i < messages.size(); ++i) {
        const RankMessage& m = messages[i];
        if (sink_of[i] == nullptr || (read_sinks && sink_of[i]->closed())) {
          v1::MessageStatus* r = ack.add_rejected();
          r->set_index(static_cast<uint32_t>(i));
          wire::SetWireStatus(absl::FailedPreconditionError(
                                  absl::StrCat("rank ", m.rank, " of job '", batch.job_id(),
                                               "' is not attached on this agent session")),
                              r);
          continue;
        }
        index_of.push_back(static_cast<uint32_t>(i));
      }
    }
    // The messages applied: the batch's own when every rank is attached (the common case).
    std::vector<RankMessage> some;
    absl::Span<const RankMessage> apply = messages;
    if (index_of.size() < messages.size()) {
      some.reserve(index_of.size());
      for (uint32_t i : index_of) some.push_back(messages[i]);
      apply = some;
    }
    // Corked until the answer is queued, so that it leaves in the message of the notices the batch
    // released (one write, and a lazy answer rides on them).
    outbox_->Cork();
    if (!apply.empty()) {
      const std::vector<absl::Status> statuses =
          coordinator_->ApplyBatch(batch.job_id(), batch.generation(), apply);
      for (size_t k = 0; k < statuses.size(); ++k) {
        if (statuses[k].ok()) continue;
        v1::MessageStatus* r = ack.add_rejected();
        r->set_index(index_of[k]);
        wire::SetWireStatus(statuses[k], r);
      }
    }
    if (lazy_ack && lazy_ack_delay_ > absl::ZeroDuration() && ack.rejected().empty()) {
      outbox_->AckLater(request_id, lazy_ack_delay_);
    } else {
      outbox_->AddAck(std::move(ack));
    }
    outbox_->Uncork();
  }

  // Detaches every rank attached on this stream (idempotent).
  void DetachAll() { attachments_->DetachAll(coordinator_); }

  Coordinator* const coordinator_;
  const absl::Duration lazy_ack_delay_;  // zero: every batch gets an AgentAck of its own
  const std::shared_ptr<AgentStreamBatcher> outbox_;
  wire::ArenaMessage<v1::AgentUp> request_;  // touched by the read reactions only, one at a time
  // Written by the read reactions; emptied by OnCancel/OnDone or the overflow, which may run
  // concurrently.
  const std::shared_ptr<AgentAttachments> attachments_;
};

}  // namespace

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewAgentStream(
    Coordinator* coordinator, const serve::StreamLimits& limits) {
  return new AgentStream(coordinator, limits);
}

}  // namespace psync::server
