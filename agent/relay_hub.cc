#include "agent/relay_hub.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/answered_requests.h"
#include "agent/batch_parts.h"
#include "agent/directive_age.h"
#include "serve/agent_down_queue.h"
#include "wire/agent_batch_shape.h"
#include "wire/limits.h"
#include "wire/wire_status.h"

namespace psync::agent {

RelayHub::RelayHub(RelayHubOptions options, AgentCounters* counters)
    : options_(std::move(options)),
      counters_(counters),
      stub_(v1::Coordinator::NewStub(options_.channel)),
      fanout_(options_.fanout_threads) {
  ReconnectingStreamOptions stream_options;
  stream_options.backoff = options_.backoff;
  stream_options.cancel_before_finish = true;  // a write blocked on a dead connection ends
  stream_ = std::make_unique<ReconnectingStream<v1::AgentUp, v1::AgentDown>>(
      stream_options,
      [stub = stub_.get()](grpc::ClientContext* context) { return stub->AgentSession(context); },
      static_cast<StreamProtocol<v1::AgentUp, v1::AgentDown>*>(this));
}

RelayHub::~RelayHub() { Shutdown(); }

void RelayHub::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    started_ = true;  // a later Connect starts nothing
  }
  stream_->Close(absl::ZeroDuration());
}

bool RelayHub::connected() const { return stream_->open(); }

// ---------------------------------------------------------------------------------------------
// Downstream

void RelayHub::Connect(const std::shared_ptr<RelayedAgent>& agent) {
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    downstream_[agent.get()].agent = agent;
    start = !started_;
    started_ = true;
  }
  if (start) stream_->Start();
}

void RelayHub::Disconnect(RelayedAgent* agent) {
  absl::MutexLock lock(&mu_);
  auto it = downstream_.find(agent);
  if (it == downstream_.end()) return;
  std::vector<uint64_t> handles;
  handles.reserve(it->second.by_attach_id.size());
  for (const auto& [id, handle] : it->second.by_attach_id) handles.push_back(handle);
  std::sort(handles.begin(), handles.end());
  for (uint64_t handle : handles) ForgetLocked(handle, /*detach_upstream=*/true);
  downstream_.erase(agent);
  WakeWriter();
}

void RelayHub::Receive(const std::shared_ptr<RelayedAgent>& agent, v1::AgentUp* received) {
  const v1::AgentUp& up = *received;
  v1::AgentAck answer;
  answer.set_request_id(up.request_id());
  bool answer_now = false;
  absl::ReleasableMutexLock lock(&mu_);
  if (!downstream_.contains(agent.get())) return;  // disconnected meanwhile
  const size_t queued_before = queue_.size();
  const absl::Time now = absl::Now();
  const bool held_before = queued_before > 0 && HeldUntilLocked() > now;  // a window is running
  switch (up.kind_case()) {
    case v1::AgentUp::kAttach:
      ReceiveAttach(agent, up.request_id(), up.attach().attach());
      break;
    case v1::AgentUp::kDetach:
      ReceiveDetach(agent.get(), up.detach());
      answer_now = true;
      break;
    case v1::AgentUp::kBatch:
      answer_now = !ReceiveBatch(agent, received, &answer);
      break;
    case v1::AgentUp::KIND_NOT_SET:
      wire::SetWireStatus(
          absl::InvalidArgumentError("kind: one of attach, detach, batch must be set"), &answer);
      answer_now = true;
      break;
  }
  // The writer takes the whole queue once it is due (Produce): it needs waking only for a
  // queue it left empty, or when this message ends the window it sleeps through (an attach or
  // a detach behind held batches, or the most messages one batch carries); otherwise it takes
  // this message with those before it.
  if (queue_.size() > queued_before &&
      (queued_before == 0 || (held_before && HeldUntilLocked() <= now))) {
    WakeWriter();
  }
  if (!answer_now) return;
  // After what was decided for the agent before it (a closure of its rank among them).
  absl::MutexLock turn(&deliver_mu_);
  lock.Release();
  std::vector<FanoutPool::Task> task;
  task.push_back({agent.get(), [agent, answer = std::move(answer)]() mutable {
                    agent->writer().Add(
                        [&](serve::AgentDownQueue& q) { q.AddAck(std::move(answer)); });
                  }});
  fanout_.Run(std::move(task));
}

void RelayHub::ReceiveAttach(const std::shared_ptr<RelayedAgent>& agent, uint64_t request_id,
                             const v1::Attach& attach) {
  const uint64_t handle = next_handle_++;
  Attachment& a = attachments_[handle];
  a.agent = agent.get();
  a.downstream_id = request_id;
  a.attach = attach;
  Downstream& d = downstream_[agent.get()];
  // A repeated attach id replaces the older attachment's entry; the coordinator supersedes it.
  d.by_attach_id[request_id] = handle;
  d.by_rank(attach.job_id(), attach.rank()) = handle;
  routes_(attach.job_id(), attach.rank()) = Route{handle, agent.get()};
  Queued q;
  q.kind = Queued::Kind::kAttach;
  q.handle = handle;
  queue_.push_back(std::move(q));
  counters_->relayed_attaches.fetch_add(1);
}

void RelayHub::ReceiveDetach(RelayedAgent* agent, const v1::AgentDetach& detach) {
  Downstream& d = downstream_[agent];
  auto it = d.by_attach_id.find(detach.attach_request_id());
  if (it == d.by_attach_id.end()) return;
  const uint64_t handle = it->second;
  const Attachment& a = attachments_.at(handle);
  if (a.attach.job_id() != detach.job_id() || a.attach.rank() != detach.rank()) return;
  ForgetLocked(handle, /*detach_upstream=*/true);
}

bool RelayHub::ReceiveBatch(const std::shared_ptr<RelayedAgent>& agent, v1::AgentUp* received,
                            v1::AgentAck* answer_now) {
  const v1::AgentUp& up = *received;
  const v1::AgentBatch& batch = up.batch();
  const Downstream& d = downstream_.at(agent.get());
  Queued q;
  q.kind = Queued::Kind::kBatch;
  q.at = absl::Now();
  q.part.agent = agent;
  q.part.downstream_id = up.request_id();
  q.part.lazy = up.lazy_ack();
  // A malformed batch goes up alone and whole: the coordinator refuses it, naming the field.
  q.mergeable = wire::CheckAgentBatchShape(batch).ok();
  // Only ranks attached through this agent's stream may send through it (as on the coordinator).
  std::vector<bool> keep(batch.ranks_size(), true);
  const auto* attached = d.by_rank.RanksOf(batch.job_id());  // the job found once
  for (int i = 0; q.mergeable && i < batch.ranks_size(); ++i) {
    const uint32_t rank = batch.ranks(i);
    if (serve::JobRankMap<uint64_t>::Find(attached, rank) != nullptr) continue;
    keep[i] = false;
    v1::MessageStatus refused;
    refused.set_index(static_cast<uint32_t>(i));
    wire::SetWireStatus(
        absl::FailedPreconditionError(absl::StrCat("rank ", rank, " of job '", batch.job_id(),
                                                   "' is not attached on this agent session")),
        &refused);
    q.part.refused.push_back(std::move(refused));
  }
  counters_->relay_refused.fetch_add(q.part.refused.size());
  if (q.part.refused.size() == static_cast<size_t>(batch.ranks_size()) && !q.part.refused.empty()) {
    for (v1::MessageStatus& r : q.part.refused) *answer_now->add_rejected() = std::move(r);
    return false;
  }
  if (q.part.refused.empty()) {
    q.up.mutable_batch()->Swap(received->mutable_batch());  // no copy
  } else {
    *q.up.mutable_batch() = KeepMessages(batch, keep, &q.part.index_of);
    q.part.lazy = false;  // a refusal is always answered at once
  }
  q.part.count = static_cast<uint32_t>(q.up.batch().ranks_size());
  q.bytes = q.up.batch().ByteSizeLong();
  counters_->relayed_batches.fetch_add(1);
  queue_.push_back(std::move(q));
  return true;
}

void RelayHub::ForgetLocked(uint64_t handle, bool detach_upstream) {
  auto it = attachments_.find(handle);
  if (it == attachments_.end()) return;
  Attachment a = std::move(it->second);
  attachments_.erase(it);
  const std::string& job_id = a.attach.job_id();
  const uint32_t rank = a.attach.rank();
  const auto is_this = [handle](uint64_t h) { return h == handle; };
  if (auto d = downstream_.find(a.agent); d != downstream_.end()) {
    if (auto by_id = d->second.by_attach_id.find(a.downstream_id);
        by_id != d->second.by_attach_id.end() && by_id->second == handle) {
      d->second.by_attach_id.erase(by_id);
    }
    d->second.by_rank.EraseIf(job_id, rank, is_this);
  }
  routes_.EraseIf(job_id, rank, [handle](const Route& r) { return r.handle == handle; });
  if (a.upstream_id == 0) return;  // its attach is still queued: the writer skips it
  by_upstream_id_.erase(a.upstream_id);
  if (!detach_upstream) return;
  Queued q;
  q.kind = Queued::Kind::kDetach;
  v1::AgentDetach* detach = q.up.mutable_detach();
  detach->set_job_id(job_id);
  detach->set_rank(rank);
  detach->set_attach_request_id(a.upstream_id);
  queue_.push_back(std::move(q));
}

// ---------------------------------------------------------------------------------------------
// Writer

v1::AgentUp RelayHub::AttachUpLocked(uint64_t handle, Attachment& a) {
  const uint64_t id = next_request_id_++;
  a.upstream_id = id;
  by_upstream_id_[id] = handle;
  AwaitingAck p;
  p.kind = Queued::Kind::kAttach;
  awaiting_ack_.emplace(id, std::move(p));
  v1::AgentUp up;
  up.set_request_id(id);
  *up.mutable_attach()->mutable_attach() = a.attach;
  return up;
}

void RelayHub::SendBatchLocked(std::vector<Queued>* run) {
  if (run->empty()) return;
  // The queue is in arrival order: the run's first batch waited longest.
  AgentCounters::Observe(counters_->upstream_wait_agents, absl::Now() - run->front().at);
  const uint64_t id = next_request_id_++;
  AwaitingAck p;
  p.kind = Queued::Kind::kBatch;
  p.lazy = true;
  v1::AgentUp up;
  up.set_request_id(id);
  if (run->size() == 1) {
    Queued& q = run->front();
    p.lazy = q.part.lazy;
    p.parts.push_back(std::move(q.part));
    *up.mutable_batch() = std::move(*q.up.mutable_batch());
  } else {
    for (Queued& q : *run) {
      AppendBatch(std::move(*q.up.mutable_batch()), up.mutable_batch());
      p.lazy = p.lazy && q.part.lazy;
      p.parts.push_back(std::move(q.part));
    }
    counters_->relay_merged_batches.fetch_add(run->size() - 1);
  }
  up.set_lazy_ack(p.lazy);
  awaiting_ack_.emplace(id, std::move(p));
  stream_->Send(id, std::move(up), Delivery::kTracked);
  run->clear();
}

void RelayHub::WakeWriter() {
  counters_->upstream_wake_requests.fetch_add(1);
  stream_->Wake();
}

absl::Time RelayHub::Produce(absl::Time now) {
  counters_->upstream_writer_wakeups.fetch_add(1);
  absl::MutexLock lock(&mu_);
  if (const absl::Time due = HeldUntilLocked(); now < due) return due;
  std::vector<Queued> run;  // mergeable batches of one job and generation
  size_t run_messages = 0;
  size_t run_bytes = 0;
  while (!queue_.empty()) {
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    if (q.kind == Queued::Kind::kBatch) {
      if (!run.empty()) {
        const v1::AgentBatch& first = run.front().up.batch();
        const v1::AgentBatch& next = q.up.batch();
        if (!q.mergeable || first.job_id() != next.job_id() ||
            first.generation() != next.generation() ||
            run_messages + q.part.count > wire::kMaxAgentBatchMessages ||
            run_bytes + q.bytes > options_.max_batch_bytes) {
          SendBatchLocked(&run);
          run_messages = 0;
          run_bytes = 0;
        }
      }
      const bool mergeable = q.mergeable;
      run_messages += q.part.count;
      run_bytes += q.bytes;
      run.push_back(std::move(q));
      if (!mergeable) {
        SendBatchLocked(&run);
        run_messages = 0;
        run_bytes = 0;
      }
      continue;
    }
    SendBatchLocked(&run);  // in order with the attaches and detaches around it
    run_messages = 0;
    run_bytes = 0;
    if (q.kind == Queued::Kind::kAttach) {
      auto it = attachments_.find(q.handle);
      if (it == attachments_.end() || it->second.upstream_id != 0) continue;  // detached meanwhile
      v1::AgentUp up = AttachUpLocked(q.handle, it->second);
      const uint64_t id = up.request_id();
      stream_->Send(id, std::move(up), Delivery::kOnce);
      continue;
    }
    const uint64_t id = next_request_id_++;
    AwaitingAck p;
    p.kind = Queued::Kind::kDetach;
    awaiting_ack_.emplace(id, std::move(p));
    q.up.set_request_id(id);
    stream_->Send(id, std::move(q.up), Delivery::kOnce);
  }
  SendBatchLocked(&run);
  return absl::InfiniteFuture();  // until the next Wake()
}

absl::Time RelayHub::HeldUntilLocked() const {
  if (options_.flush_window <= absl::ZeroDuration() || queue_.empty()) return absl::InfinitePast();
  size_t messages = 0;
  for (const Queued& q : queue_) {
    if (q.kind != Queued::Kind::kBatch) return absl::InfinitePast();  // in order with it: now
    messages += q.part.count;
  }
  if (messages >= wire::kMaxAgentBatchMessages) return absl::InfinitePast();
  return queue_.front().at + options_.flush_window;
}

void RelayHub::OnWrite(const v1::AgentUp& up) {
  counters_->upstream_messages.fetch_add(1);
  if (up.has_batch()) {
    counters_->upstream_batches.fetch_add(1);
    if (up.lazy_ack()) counters_->lazy_batches.fetch_add(1);
  }
}

// ---------------------------------------------------------------------------------------------
// Reader

absl::Status RelayHub::Prepare(bool* retry) {
  *retry = true;
  absl::MutexLock lock(&mu_);
  if (options_.leave_when_unreachable && unreachable_ && attachments_.empty() && queue_.empty()) {
    // Nobody to carry to a replica that did not answer: try again after a (growing) backoff.
    return absl::UnavailableError(
        absl::StrCat("coordinator replica '", options_.target, "' unreachable; no relayed rank"));
  }
  return absl::OkStatus();
}

std::vector<v1::AgentUp> RelayHub::OnOpen(bool* handshake) {
  *handshake = false;
  absl::MutexLock lock(&mu_);
  answered_ = false;
  // The coordinator detached every rank of the ended stream: queued detaches are moot.
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                              [](const Queued& q) { return q.kind == Queued::Kind::kDetach; }),
               queue_.end());
  for (auto it = awaiting_ack_.begin(); it != awaiting_ack_.end();) {
    if (it->second.kind == Queued::Kind::kBatch) {
      counters_->batches_resent.fetch_add(1);  // the stream writes it again
      ++it;
    } else {
      it = awaiting_ack_.erase(it);
    }
  }
  by_upstream_id_.clear();
  // Re-attach, oldest attach first.
  std::vector<std::pair<uint64_t, uint64_t>> attached;  // (old upstream id, handle)
  for (const auto& [handle, a] : attachments_) {
    if (a.upstream_id != 0) attached.emplace_back(a.upstream_id, handle);
  }
  std::sort(attached.begin(), attached.end());
  std::vector<v1::AgentUp> first;
  first.reserve(attached.size());
  for (const auto& [old_id, handle] : attached) {
    first.push_back(AttachUpLocked(handle, attachments_.at(handle)));
  }
  return first;
}

absl::Status RelayHub::OnClosed(const StreamEnd& end, bool* retry) {
  *retry = true;
  if (stream_->closing()) return end.finished;
  Deliveries deliveries;
  std::vector<std::string> jobs;
  size_t left = 0;
  bool quiet = false;  // a replica that stays unreachable, with nothing attached: said once
  absl::ReleasableMutexLock lock(&mu_);
  if (options_.leave_when_unreachable && !answered_) {
    // A stream that got no answer (after one that broke): the replica is gone or unreachable.
    quiet = unreachable_ && attachments_.empty();
    unreachable_ = true;
    left = attachments_.size();
    if (left > 0) jobs = LeaveAllLocked(&deliveries);
  }
  absl::MutexLock turn(&deliver_mu_);
  lock.Release();
  if (quiet) return end.finished;
  if (left == 0) {
    std::cerr << "psync-agent: relay stream to '" << options_.target << "' ended (" << end.finished
              << "); reconnecting\n";
    return end.finished;
  }
  counters_->replicas_lost.fetch_add(1);
  std::cerr << "psync-agent: coordinator replica '" << options_.target << "' unreachable ("
            << end.finished << "): " << left
            << " relayed attachments end, their ranks join again through the relay\n";
  // The jobs move on before their ranks hear of it, so that they join again elsewhere.
  if (options_.on_not_served) {
    for (const std::string& job : jobs) options_.on_not_served(job, "");
  }
  Deliver(std::move(deliveries), absl::Now(), /*timed=*/false);
  return end.finished;
}

std::vector<std::string> RelayHub::LeaveAllLocked(Deliveries* deliveries) {
  const std::string why =
      absl::StrCat("coordinator replica '", options_.target, "' is unreachable: join again");
  std::vector<uint64_t> handles;
  handles.reserve(attachments_.size());
  for (const auto& [handle, a] : attachments_) handles.push_back(handle);
  std::sort(handles.begin(), handles.end());
  std::vector<std::string> jobs;
  for (uint64_t handle : handles) {
    const Attachment& a = attachments_.at(handle);
    if (std::find(jobs.begin(), jobs.end(), a.attach.job_id()) == jobs.end()) {
      jobs.push_back(a.attach.job_id());
    }
    auto d = downstream_.find(a.agent);
    std::shared_ptr<RelayedAgent> agent = d == downstream_.end() ? nullptr : d->second.agent.lock();
    if (agent != nullptr) {
      AgentShare& share = ShareFor(deliveries, agent);
      if (a.answered) {
        v1::AgentRankClosed closed;
        closed.set_job_id(a.attach.job_id());
        closed.set_rank(a.attach.rank());
        closed.set_attach_request_id(a.downstream_id);
        closed.set_code(static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE));
        closed.set_message(why);
        share.closed.push_back(std::move(closed));
      } else {
        v1::AgentAck answer;
        answer.set_request_id(a.downstream_id);
        wire::SetWireStatus(absl::UnavailableError(why), &answer);
        share.answers.emplace_back(false, std::move(answer));
      }
    }
    ForgetLocked(handle, /*detach_upstream=*/false);
  }
  // What was queued or unanswered belongs to the ranks just ended (their clients send it again),
  // except the relay's own refusals of ranks attached elsewhere: nothing else would answer those.
  const auto answer_refusals = [&](const Queued::Part& part) {
    if (part.refused.empty()) return;
    std::shared_ptr<RelayedAgent> agent = part.agent.lock();
    if (agent == nullptr) return;
    v1::AgentAck answer;
    answer.set_request_id(part.downstream_id);
    wire::SetWireStatus(absl::UnavailableError(why), &answer);
    ShareFor(deliveries, agent).answers.emplace_back(false, std::move(answer));
  };
  for (const Queued& q : queue_) {
    if (q.kind == Queued::Kind::kBatch) answer_refusals(q.part);
  }
  queue_.clear();
  for (const auto& [id, p] : awaiting_ack_) {
    if (p.kind != Queued::Kind::kBatch) continue;
    stream_->Abandon(id);
    for (const Queued::Part& part : p.parts) answer_refusals(part);
  }
  awaiting_ack_.clear();
  by_upstream_id_.clear();
  return jobs;
}

template <typename Answer>
void RelayHub::NotServedBelow(const std::string& job_id, Answer* down,
                              std::vector<std::pair<std::string, std::string>>* not_served) {
  if (down->code() != static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE)) return;
  not_served->emplace_back(job_id, down->redirect().owner());
  down->clear_redirect();
}

RelayHub::AgentShare& RelayHub::ShareFor(Deliveries* deliveries,
                                         const std::shared_ptr<RelayedAgent>& agent) {
  auto [it, inserted] = deliveries->shares.try_emplace(agent.get());
  if (inserted) {
    it->second.agent = agent;
    deliveries->order.push_back(agent.get());
  }
  return it->second;
}

void RelayHub::AnswerPartsLocked(const AwaitingAck& batch, const v1::AgentAck* ack,
                                 Deliveries* deliveries) {
  std::vector<std::vector<v1::MessageStatus>> rejected(batch.parts.size());
  if (ack != nullptr) {
    std::vector<uint32_t> counts;
    counts.reserve(batch.parts.size());
    for (const Queued::Part& part : batch.parts) counts.push_back(part.count);
    rejected = SplitRejected(*ack, counts);
  }
  for (size_t k = 0; k < batch.parts.size(); ++k) {
    const Queued::Part& part = batch.parts[k];
    std::shared_ptr<RelayedAgent> agent = part.agent.lock();
    if (agent == nullptr) continue;
    AgentShare& share = ShareFor(deliveries, agent);
    v1::AgentAck answer;
    answer.set_request_id(part.downstream_id);
    if (ack == nullptr) {  // lazy, accepted whole
      share.answers.emplace_back(true, std::move(answer));
      continue;
    }
    // A batch refused whole (it cannot be for a part's shape: that was checked before merging).
    answer.set_code(ack->code());
    answer.set_message(ack->message());
    for (const v1::MessageStatus& r : part.refused) *answer.add_rejected() = r;
    for (v1::MessageStatus& r : rejected[k]) {
      if (!part.index_of.empty() && r.index() < part.index_of.size()) {
        r.set_index(part.index_of[r.index()]);  // the agent's own numbering
      }
      *answer.add_rejected() = std::move(r);
    }
    std::sort(answer.mutable_rejected()->begin(), answer.mutable_rejected()->end(),
              [](const v1::MessageStatus& a, const v1::MessageStatus& b) {
                return a.index() < b.index();
              });
    share.answers.emplace_back(false, std::move(answer));
  }
}

void RelayHub::OnRead(const v1::AgentDown& down) {
  counters_->upstream_reads.fetch_add(1);
  const absl::Time read_at = absl::Now();
  Deliveries deliveries;
  // Jobs refused or ended with UNAVAILABLE, and the owner named (or empty).
  std::vector<std::pair<std::string, std::string>> not_served;
  absl::ReleasableMutexLock lock(&mu_);
  unreachable_ = false;
  if (!answered_) {
    answered_ = true;
    if (answered_once_) counters_->reconnects.fetch_add(1);
    answered_once_ = true;
  }
  // The answers, in request order: the AgentAcks, and the lazy batches acked_through covers.
  for (Answered<AwaitingAck>& settled : TakeAnswered(down, &awaiting_ack_)) {
    const uint64_t request_id = settled.request_id;
    AwaitingAck& p = settled.what;
    const v1::AgentAck* ack = settled.ack;
    if (p.kind == Queued::Kind::kDetach) continue;
    if (p.kind == Queued::Kind::kAttach) {
      auto h = by_upstream_id_.find(request_id);
      if (h == by_upstream_id_.end()) continue;  // detached meanwhile
      const uint64_t handle = h->second;
      Attachment& a = attachments_.at(handle);
      auto d = downstream_.find(a.agent);
      std::shared_ptr<RelayedAgent> agent =
          d == downstream_.end() ? nullptr : d->second.agent.lock();
      const bool first = !a.answered;
      a.answered = true;
      const absl::Status status = ack != nullptr ? wire::StatusFromWire(*ack) : absl::OkStatus();
      if (status.ok()) {
        if (first && agent != nullptr) {
          v1::AgentAck answer = ack != nullptr ? *ack : v1::AgentAck();
          answer.set_request_id(a.downstream_id);
          ShareFor(&deliveries, agent).answers.emplace_back(false, std::move(answer));
        }
        continue;
      }
      v1::AgentAck refusal = *ack;
      refusal.set_request_id(a.downstream_id);
      NotServedBelow(a.attach.job_id(), &refusal, &not_served);
      if (first && agent != nullptr) {
        ShareFor(&deliveries, agent).answers.emplace_back(false, std::move(refusal));
      }
      if (!first && agent != nullptr) {
        v1::AgentRankClosed closed;
        closed.set_job_id(a.attach.job_id());
        closed.set_rank(a.attach.rank());
        closed.set_attach_request_id(a.downstream_id);
        closed.set_code(static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE));
        closed.set_message(absl::StrCat("the coordinator refused to attach rank ", a.attach.rank(),
                                        " again after the relay reconnected: ", status.message()));
        ShareFor(&deliveries, agent).closed.push_back(std::move(closed));
      }
      a.upstream_id = 0;  // refused: nothing to detach upstream
      by_upstream_id_.erase(h);
      ForgetLocked(handle, /*detach_upstream=*/false);
      continue;
    }
    stream_->Acknowledge(request_id);
    AnswerPartsLocked(p, ack, &deliveries);
  }
  // Notices: each agent gets its ranks' share of every entry.
  absl::flat_hash_map<RelayedAgent*, std::vector<uint32_t>> ranks_of;
  for (const v1::AgentNotice& n : down.notices()) {
    counters_->notices_received.fetch_add(1);
    ObserveDirectiveAge(counters_->directive_age_read, n.notice(), read_at);
    ranks_of.clear();
    std::vector<RelayedAgent*> agents;                 // in the order of their first rank
    const auto* routes = routes_.RanksOf(n.job_id());  // the job found once
    // A node's ranks are most often next to each other in the list: a run of one agent's ranks
    // is appended without looking the agent up again.
    RelayedAgent* last_agent = nullptr;
    std::vector<uint32_t>* last_ranks = nullptr;
    for (uint32_t rank : n.ranks()) {
      const Route* route = serve::JobRankMap<Route>::Find(routes, rank);
      if (route == nullptr) {
        counters_->notices_unrouted.fetch_add(1);
        continue;
      }
      if (route->agent != last_agent) {
        auto [entry, inserted] = ranks_of.try_emplace(route->agent);
        if (inserted) agents.push_back(route->agent);
        last_agent = route->agent;
        last_ranks = &entry->second;
      }
      last_ranks->push_back(rank);
    }
    for (RelayedAgent* agent_key : agents) {
      auto d = downstream_.find(agent_key);
      if (d == downstream_.end()) continue;
      std::shared_ptr<RelayedAgent> agent = d->second.agent.lock();
      if (agent == nullptr) continue;
      v1::AgentNotice share;
      share.set_job_id(n.job_id());
      std::vector<uint32_t>& ranks = ranks_of[agent_key];
      share.mutable_ranks()->Add(ranks.begin(), ranks.end());
      *share.mutable_notice() = n.notice();
      ShareFor(&deliveries, agent).notices.push_back(std::move(share));
      counters_->notices_delivered.fetch_add(ranks.size());
    }
  }
  for (const v1::AgentRankClosed& c : down.closed()) {
    auto h = by_upstream_id_.find(c.attach_request_id());
    if (h == by_upstream_id_.end()) continue;
    const uint64_t handle = h->second;
    const Attachment& a = attachments_.at(handle);
    auto d = downstream_.find(a.agent);
    std::shared_ptr<RelayedAgent> agent = d == downstream_.end() ? nullptr : d->second.agent.lock();
    v1::AgentRankClosed closed = c;
    closed.set_attach_request_id(a.downstream_id);
    NotServedBelow(a.attach.job_id(), &closed, &not_served);
    if (agent != nullptr) ShareFor(&deliveries, agent).closed.push_back(std::move(closed));
    ForgetLocked(handle, /*detach_upstream=*/false);
  }
  absl::MutexLock turn(&deliver_mu_);
  lock.Release();
  // The job moves on before its ranks hear of it, so that they join again elsewhere.
  if (options_.on_not_served) {
    for (const auto& [job, owner] : not_served) options_.on_not_served(job, owner);
  }
  Deliver(std::move(deliveries), read_at, /*timed=*/true);
}

void RelayHub::Deliver(Deliveries deliveries, absl::Time read_at, bool timed_fanout) {
  // Each agent's share in one queue operation: it leaves in as few messages as the queue allows.
  // The fan-out is timed from the read to the last share queued (on whichever thread that is).
  metrics::Histogram* const timed = timed_fanout ? counters_->fanout_agents : nullptr;
  metrics::Histogram* const aged = counters_->directive_age_queued_to_agent;
  if (deliveries.order.empty()) {
    AgentCounters::Observe(timed, absl::Now() - read_at);
    return;
  }
  auto left = std::make_shared<std::atomic<size_t>>(deliveries.order.size());
  std::vector<FanoutPool::Task> tasks;
  tasks.reserve(deliveries.order.size());
  for (RelayedAgent* key : deliveries.order) {
    auto delivery = std::make_shared<AgentShare>(std::move(deliveries.shares.at(key)));
    counters_->relay_notices.fetch_add(delivery->notices.size());
    tasks.push_back({key, [delivery, left, timed, aged, read_at] {
                       WriteShare(*delivery);
                       if (aged != nullptr) {
                         const absl::Time queued_at = absl::Now();
                         for (const v1::AgentNotice& n : delivery->notices) {
                           ObserveDirectiveAge(aged, n.notice(), queued_at);
                         }
                       }
                       if (left->fetch_sub(1) == 1) {
                         AgentCounters::Observe(timed, absl::Now() - read_at);
                       }
                     }});
  }
  fanout_.Run(std::move(tasks));
}

void RelayHub::WriteShare(AgentShare& delivery) {
  delivery.agent->writer().Add([&](serve::AgentDownQueue& q) {
    for (auto& [lazy, ack] : delivery.answers) {
      if (lazy) {
        q.AckLater(ack.request_id());
      } else {
        q.AddAck(std::move(ack));
      }
    }
    for (v1::AgentNotice& n : delivery.notices) {
      const std::string key = serve::AgentDownQueue::NoticeKey(n.job_id(), n.notice());
      q.AddNotice(n.job_id(), absl::MakeConstSpan(n.ranks().data(), n.ranks_size()), n.notice(),
                  key);
    }
    for (v1::AgentRankClosed& c : delivery.closed) q.AddClosed(std::move(c));
    q.FlushLazyAcks();
  });
}

}  // namespace psync::agent
