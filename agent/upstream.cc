#include "agent/upstream.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/answered_requests.h"
#include "agent/directive_age.h"
#include "agent/merge.h"
#include "wire/wire_status.h"

namespace psync::agent {
Upstream::Upstream(UpstreamOptions options, AgentCounters* counters)
    : options_(std::move(options)),
      counters_(counters),
      stub_(v1::Coordinator::NewStub(options_.channel)) {
  ReconnectingStreamOptions stream_options;
  stream_options.backoff = options_.backoff;
  stream_options.cancel_before_finish = true;  // a write blocked on a dead connection ends
  stream_ = std::make_unique<ReconnectingStream<v1::AgentUp, v1::AgentDown>>(
      stream_options,
      [stub = stub_.get()](grpc::ClientContext* context) { return stub->AgentSession(context); },
      static_cast<StreamProtocol<v1::AgentUp, v1::AgentDown>*>(this));
}

Upstream::~Upstream() { Shutdown(); }

bool Upstream::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return false;
    started_ = true;
  }
  stream_->Start();
  return true;
}

void Upstream::Shutdown() { stream_->Close(absl::ZeroDuration()); }

bool Upstream::connected() const { return stream_->open(); }

// ---------------------------------------------------------------------------------------------
// Local side

void Upstream::Attach(std::shared_ptr<LocalRank> link) {
  absl::MutexLock lock(&mu_);
  LocalRank* key = link.get();
  routes_(link->job_id(), link->rank()) = key;
  Queued q;
  q.kind = Queued::Kind::kAttach;
  q.link = link;
  q.at = absl::Now();
  queue_.push_back(std::move(q));
  ++queued_controls_;
  links_[key] = AttachedRank{std::move(link), 0, false};
  counters_->local_sessions.fetch_add(1);
  WakeWriter();
}

void Upstream::Submit(const std::shared_ptr<LocalRank>& link, v1::SessionUp up) {
  {
    absl::MutexLock lock(&mu_);
    if (links_.contains(link.get())) {
      counters_->local_messages.fetch_add(1);
      if (up.has_staged()) {
        counters_->local_checkins.fetch_add(up.staged().items_size());
        for (const v1::Staged& item : up.staged().items()) {
          if (completion_.Checkin(link->job_id(), link->rank(), item.step(), item.chunk())) {
            write_now_ = true;
          }
        }
      }
      // A skip vote is rare, and its rank waits for the step's outcome: never held back.
      if (up.has_skip()) write_now_ = true;
      Queued q;
      q.kind = Queued::Kind::kMessage;
      q.link = link;
      q.bytes = up.ByteSizeLong();
      q.up = std::move(up);
      q.at = absl::Now();
      const absl::Time now = q.at;
      queue_.push_back(std::move(q));
      ++queued_messages_;
      // The writer needs to hear of this message only when it is due now, or when it is the
      // only one queued (its window is the writer's new deadline). Behind others, the oldest
      // one's deadline covers it: waking the writer per message would cost a thread switch each.
      absl::Time deadline;
      if (queue_.size() == 1 || DueLocked(now, &deadline)) WakeWriter();
      return;
    }
    // Its Session is ending with UNAVAILABLE: no answer, the client sends it again after it
    // joined again (an error here would fail the message for good).
    if (link->rejoining()) return;
  }
  // Its attach was refused or its Session is over.
  link->Ack(up.request_id(), absl::FailedPreconditionError(
                                 absl::StrCat("rank ", link->rank(), " of job '", link->job_id(),
                                              "' is not attached through this agent")));
}

void Upstream::Detach(const std::shared_ptr<LocalRank>& link) {
  absl::MutexLock lock(&mu_);
  auto it = links_.find(link.get());
  if (it == links_.end()) return;
  const uint64_t attach_id = it->second.attach_id;
  ForgetLocked(link.get());
  if (attach_id == 0) return;  // its attach is still queued: BuildLocked skips it
  Queued q;
  q.kind = Queued::Kind::kDetach;
  q.detach.set_job_id(link->job_id());
  q.detach.set_rank(link->rank());
  q.detach.set_attach_request_id(attach_id);
  q.at = absl::Now();
  queue_.push_back(std::move(q));
  ++queued_controls_;
  WakeWriter();
}

void Upstream::ForgetLocked(LocalRank* link) {
  auto it = links_.find(link);
  if (it == links_.end()) return;
  if (it->second.attach_id != 0) attach_ids_.erase(it->second.attach_id);
  links_.erase(it);
  counters_->local_sessions.fetch_sub(1);
  const std::string job_id = link->job_id();
  const uint32_t rank = link->rank();
  if (!routes_.EraseIf(job_id, rank, [link](LocalRank* route) { return route == link; })) return;
  // An older Session of the rank that is still attached (the newer one's attach was refused).
  for (auto& [other, l] : links_) {
    if (l.answered && other->job_id() == job_id && other->rank() == rank) {
      routes_(job_id, rank) = other;
      break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

bool Upstream::DueLocked(absl::Time now, absl::Time* deadline) const {
  *deadline = absl::InfiniteFuture();
  if (queued_controls_ > 0 || queued_messages_ >= options_.flush_messages) return true;
  if (queued_messages_ == 0) return false;
  if (options_.flush_window <= absl::ZeroDuration() || write_now_) return true;
  // The oldest queued message (controls would have made it due already).
  const absl::Time due = queue_.front().at + options_.flush_window;
  if (now >= due) return true;
  *deadline = due;
  return false;
}

v1::AgentUp Upstream::AttachUpLocked(AttachedRank& link) {
  const uint64_t id = next_request_id_++;
  link.attach_id = id;
  attach_ids_[id] = link.link.get();
  AwaitingAck p;
  p.kind = AwaitingAck::Kind::kAttach;
  awaiting_ack_.emplace(id, std::move(p));
  v1::AgentUp up;
  up.set_request_id(id);
  *up.mutable_attach()->mutable_attach() = link.link->attach();
  return up;
}

void Upstream::Declare(const v1::JoinRequest& join) {
  absl::MutexLock lock(&mu_);
  completion_.Declare(join);
}

void Upstream::BuildLocked() {
  write_now_ = false;       // every queued message leaves now
  std::vector<Queued> run;  // messages of one job and generation
  size_t run_bytes = 0;
  const absl::Time now = absl::Now();
  auto flush_run = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (run.empty()) return;
    // The queue is in arrival order: the run's first message waited longest.
    AgentCounters::Observe(counters_->upstream_wait_ranks, now - run.front().at);
    std::vector<MergeInput> inputs;
    inputs.reserve(run.size());
    AwaitingAck p;
    p.kind = AwaitingAck::Kind::kBatch;
    // Lazy when no rank of it waits for its answer (asynchronous reports only).
    p.lazy = true;
    for (const Queued& q : run) {
      inputs.push_back({q.link->rank(), &q.up});
      p.origins.push_back({q.link, q.up.request_id(), q.up.lazy_ack()});
      p.lazy = p.lazy && q.up.lazy_ack();
    }
    const uint64_t id = next_request_id_++;
    v1::AgentUp up;
    up.set_request_id(id);
    up.set_lazy_ack(p.lazy);
    *up.mutable_batch() = MergeMessages(run.front().link->job_id(), GenerationOf(run.front().up),
                                        inputs, options_.merge);
    awaiting_ack_.emplace(id, std::move(p));
    stream_->Send(id, std::move(up), Delivery::kTracked);
    run.clear();
    run_bytes = 0;
  };
  while (!queue_.empty()) {
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    if (q.kind != Queued::Kind::kMessage) {
      --queued_controls_;
      flush_run();
      if (q.kind == Queued::Kind::kAttach) {
        auto it = links_.find(q.link.get());
        if (it != links_.end() && it->second.attach_id == 0) {
          v1::AgentUp up = AttachUpLocked(it->second);
          const uint64_t id = up.request_id();
          stream_->Send(id, std::move(up), Delivery::kOnce);
        }
      } else {
        const uint64_t id = next_request_id_++;
        AwaitingAck p;
        p.kind = AwaitingAck::Kind::kDetach;
        awaiting_ack_.emplace(id, std::move(p));
        v1::AgentUp up;
        up.set_request_id(id);
        *up.mutable_detach() = std::move(q.detach);
        stream_->Send(id, std::move(up), Delivery::kOnce);
      }
      continue;
    }
    --queued_messages_;
    if (!run.empty()) {
      const Queued& first = run.front();
      if (first.link->job_id() != q.link->job_id() ||
          GenerationOf(first.up) != GenerationOf(q.up) ||
          run.size() >= options_.max_batch_messages ||
          run_bytes + q.bytes > options_.max_batch_bytes) {
        flush_run();
      }
    }
    run_bytes += q.bytes;
    run.push_back(std::move(q));
  }
  flush_run();
}

void Upstream::WakeWriter() {
  counters_->upstream_wake_requests.fetch_add(1);
  stream_->Wake();
}

absl::Time Upstream::Produce(absl::Time now) {
  counters_->upstream_writer_wakeups.fetch_add(1);
  absl::MutexLock lock(&mu_);
  absl::Time deadline;
  if (DueLocked(now, &deadline)) {
    BuildLocked();
    return absl::InfiniteFuture();  // until the next Wake()
  }
  return deadline;
}

void Upstream::OnWrite(const v1::AgentUp& up) {
  counters_->upstream_messages.fetch_add(1);
  if (up.has_batch()) {
    counters_->upstream_batches.fetch_add(1);
    if (up.lazy_ack()) counters_->lazy_batches.fetch_add(1);
    counters_->merged_checkins.fetch_add(up.batch().staged_size());
    counters_->merged_sync_dones.fetch_add(up.batch().merged_sync_dones_size());
  }
}

// ---------------------------------------------------------------------------------------------
// Reader

absl::Status Upstream::Prepare(bool* retry) {
  *retry = true;  // nothing to do before a stream: the ranks joined through the agent already
  absl::MutexLock lock(&mu_);
  if (options_.leave_when_unreachable && unreachable_ && links_.empty() && queue_.empty()) {
    // Nobody to carry to a replica that did not answer: try again after a (growing) backoff.
    return absl::UnavailableError(
        absl::StrCat("coordinator replica '", options_.target, "' unreachable; no local rank"));
  }
  return absl::OkStatus();
}

std::vector<v1::AgentUp> Upstream::OnOpen(bool* handshake) {
  *handshake = false;
  absl::MutexLock lock(&mu_);
  answered_ = false;
  // The coordinator detached every rank of the ended stream: queued detaches are moot.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->kind == Queued::Kind::kDetach) {
      it = queue_.erase(it);
      --queued_controls_;
    } else {
      ++it;
    }
  }
  for (auto it = awaiting_ack_.begin(); it != awaiting_ack_.end();) {
    if (it->second.kind == AwaitingAck::Kind::kBatch) {
      counters_->batches_resent.fetch_add(1);  // the stream writes it again
      ++it;
    } else {
      it = awaiting_ack_.erase(it);
    }
  }
  attach_ids_.clear();
  // Re-attach, oldest attach first.
  std::vector<AttachedRank*> attached;
  for (auto& [key, link] : links_) {
    if (link.attach_id != 0) attached.push_back(&link);
  }
  std::sort(attached.begin(), attached.end(), [](const AttachedRank* a, const AttachedRank* b) {
    return a->attach_id < b->attach_id;
  });
  std::vector<v1::AgentUp> first;
  first.reserve(attached.size());
  for (AttachedRank* link : attached) first.push_back(AttachUpLocked(*link));
  return first;
}

std::vector<std::shared_ptr<LocalRank>> Upstream::LeaveAllLocked() {
  std::vector<std::shared_ptr<LocalRank>> left;
  left.reserve(links_.size());
  for (auto& [key, link] : links_) left.push_back(link.link);
  for (const std::shared_ptr<LocalRank>& link : left) {
    link->MarkRejoining();
    ForgetLocked(link.get());
  }
  queue_.clear();
  queued_messages_ = 0;
  queued_controls_ = 0;
  write_now_ = false;
  for (const auto& [id, p] : awaiting_ack_) {
    if (p.kind == AwaitingAck::Kind::kBatch) stream_->Abandon(id);
  }
  awaiting_ack_.clear();
  return left;
}

absl::Status Upstream::OnClosed(const StreamEnd& end, bool* retry) {
  *retry = true;
  if (stream_->closing()) return end.finished;
  std::vector<std::shared_ptr<LocalRank>> left;
  bool quiet = false;  // a replica that stays unreachable, with no local rank: said once
  {
    absl::MutexLock lock(&mu_);
    if (options_.leave_when_unreachable && !answered_) {
      // A stream that got no answer (after one that broke): the replica is gone or unreachable.
      quiet = unreachable_ && links_.empty();
      unreachable_ = true;
      if (!links_.empty()) left = LeaveAllLocked();
    }
  }
  if (quiet) return end.finished;
  if (left.empty()) {
    std::cerr << "psync-agent: coordinator stream"
              << (options_.target.empty() ? "" : absl::StrCat(" to '", options_.target, "'"))
              << " ended (" << end.finished << "); reconnecting\n";
    return end.finished;
  }
  counters_->replicas_lost.fetch_add(1);
  std::cerr << "psync-agent: coordinator replica '" << options_.target << "' unreachable ("
            << end.finished << "): " << left.size()
            << " local sessions end, their ranks join again\n";
  const grpc::Status status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("coordinator replica '", options_.target, "' is unreachable: join again"));
  std::vector<std::string> jobs;
  for (const std::shared_ptr<LocalRank>& link : left) {
    if (std::find(jobs.begin(), jobs.end(), link->job_id()) == jobs.end()) {
      jobs.push_back(link->job_id());
    }
  }
  if (options_.on_not_served) {
    for (const std::string& job : jobs) options_.on_not_served(job, "");
  }
  for (const std::shared_ptr<LocalRank>& link : left) link->Close(status);
  return end.finished;
}

void Upstream::OnRead(const v1::AgentDown& down) {
  counters_->upstream_reads.fetch_add(1);
  AgentCounters::ScopedTimer fanout(counters_->fanout_ranks);
  const absl::Time read_at = absl::Now();
  // Callbacks collected under the lock, run after it.
  std::vector<std::pair<std::shared_ptr<LocalRank>, absl::Status>> attach_results;
  std::vector<std::pair<std::shared_ptr<LocalRank>, grpc::Status>> closes;
  // The answers to local messages, in request order. A lazy message accepted (no status here) is
  // answered by its link's acked_through.
  struct LocalAnswer {
    std::shared_ptr<LocalRank> link;
    uint64_t request_id;
    std::optional<absl::Status> status;
  };
  std::vector<LocalAnswer> answers;
  std::vector<std::pair<std::shared_ptr<LocalRank>, const v1::SessionDown*>> notices;
  // Jobs refused or ended with UNAVAILABLE, and the owner named (or empty).
  std::vector<std::pair<std::string, std::string>> not_served;
  {
    absl::MutexLock lock(&mu_);
    unreachable_ = false;
    if (!answered_) {
      answered_ = true;
      if (answered_once_) counters_->reconnects.fetch_add(1);
      answered_once_ = true;
    }
    // Ranks this message ends with UNAVAILABLE join again: a refusal of their messages in it (the
    // coordinator, or a relay, no longer has them attached) is not theirs to see.
    for (const v1::AgentRankClosed& c : down.closed()) {
      auto a = attach_ids_.find(c.attach_request_id());
      if (a != attach_ids_.end() &&
          c.code() == static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE)) {
        links_.at(a->second).link->MarkRejoining();
      }
    }
    // The answers, in request order: the AgentAcks, and the lazy batches acked_through covers
    // (accepted whole).
    for (Answered<AwaitingAck>& settled : TakeAnswered(down, &awaiting_ack_)) {
      const uint64_t request_id = settled.request_id;
      AwaitingAck& p = settled.what;
      const v1::AgentAck* ack = settled.ack;
      if (p.kind == AwaitingAck::Kind::kBatch) stream_->Acknowledge(request_id);
      const absl::Status status = ack != nullptr ? wire::StatusFromWire(*ack) : absl::OkStatus();
      if (p.kind == AwaitingAck::Kind::kAttach) {
        auto a = attach_ids_.find(request_id);
        if (a == attach_ids_.end()) continue;  // detached meanwhile
        LocalRank* key = a->second;
        AttachedRank& link = links_.at(key);
        const bool first = !link.answered;
        link.answered = true;
        std::shared_ptr<LocalRank> local = link.link;
        if (status.ok()) {
          if (first) attach_results.emplace_back(std::move(local), status);
          continue;
        }
        ForgetLocked(key);
        if (status.code() == absl::StatusCode::kUnavailable) {
          not_served.emplace_back(key->job_id(), ack != nullptr ? ack->redirect().owner() : "");
        }
        if (!first || status.code() == absl::StatusCode::kUnavailable) local->MarkRejoining();
        if (first) {
          attach_results.emplace_back(std::move(local), status);
        } else {
          closes.emplace_back(
              std::move(local),
              grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("the coordinator refused to attach rank ", key->rank(),
                                        " again after the agent reconnected: ", status.message())));
        }
        continue;
      }
      if (p.kind != AwaitingAck::Kind::kBatch) continue;
      absl::flat_hash_map<uint32_t, absl::Status> rejected;
      if (ack != nullptr) {
        for (const v1::MessageStatus& r : ack->rejected()) {
          rejected.emplace(r.index(), wire::StatusFromWire(r));
        }
      }
      for (size_t i = 0; i < p.origins.size(); ++i) {
        const AwaitingAck::Origin& origin = p.origins[i];
        std::shared_ptr<LocalRank> local = origin.link.lock();
        if (local == nullptr) continue;
        absl::Status s = status;  // a malformed batch: every message gets its status
        if (s.ok()) {
          auto r = rejected.find(static_cast<uint32_t>(i));
          if (r != rejected.end()) s = r->second;
        }
        // A rank joining again sends the message again on its next Session: left unanswered.
        if (!s.ok() && local->rejoining()) continue;
        answers.push_back({std::move(local), origin.request_id,
                           s.ok() && origin.lazy ? std::nullopt : std::optional(std::move(s))});
      }
    }
    for (const v1::AgentNotice& n : down.notices()) {
      counters_->notices_received.fetch_add(1);
      ObserveDirectiveAge(counters_->directive_age_read, n.notice(), read_at);
      const auto* routes = routes_.RanksOf(n.job_id());  // the job found once
      for (uint32_t rank : n.ranks()) {
        LocalRank* const* route = serve::JobRankMap<LocalRank*>::Find(routes, rank);
        if (route == nullptr) {
          counters_->notices_unrouted.fetch_add(1);
          continue;
        }
        notices.emplace_back(links_.at(*route).link, &n.notice());
      }
    }
    for (const v1::AgentRankClosed& c : down.closed()) {
      auto a = attach_ids_.find(c.attach_request_id());
      if (a == attach_ids_.end()) continue;
      std::shared_ptr<LocalRank> local = links_.at(a->second).link;
      ForgetLocked(a->second);
      if (c.code() == static_cast<int32_t>(grpc::StatusCode::UNAVAILABLE)) {
        not_served.emplace_back(c.job_id(), c.redirect().owner());
        local->MarkRejoining();
      }
      closes.emplace_back(std::move(local),
                          grpc::Status(static_cast<grpc::StatusCode>(c.code()), c.message()));
    }
  }
  // The job moves on before its ranks hear of it, so that they join again elsewhere.
  if (options_.on_not_served) {
    for (const auto& [job, owner] : not_served) options_.on_not_served(job, owner);
  }
  for (auto& [link, status] : attach_results) link->AttachResult(status);
  // In request order, as a coordinator answers a Session (serve/lazy_acks.h): an Ack is queued,
  // a lazy acceptance raises the acked_through of the newest message queued or of the next one.
  // The notices that follow carry the lazy answers, and a rank with none gets one message of its
  // own for them: one message down per rank, not one per check-in.
  for (LocalAnswer& a : answers) {
    if (a.status.has_value()) {
      a.link->Ack(a.request_id, *a.status);
    } else {
      a.link->AckLater(a.request_id);
    }
  }
  for (auto& [link, notice] : notices) link->Notice(*notice);
  if (!notices.empty() && counters_->directive_age_queued_to_ranks != nullptr) {
    const absl::Time queued_at = absl::Now();
    for (const v1::AgentNotice& n : down.notices()) {
      ObserveDirectiveAge(counters_->directive_age_queued_to_ranks, n.notice(), queued_at);
    }
  }
  for (LocalAnswer& a : answers) {
    if (!a.status.has_value()) a.link->FlushLazyAcks();
  }
  for (auto& [link, status] : closes) link->Close(status);
}

}  // namespace psync::agent
