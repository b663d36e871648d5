#include "agent/upstream.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/merge.h"

namespace psync::agent {
namespace {

absl::Status FromAck(int32_t code, const std::string& message) {
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace

Upstream::Upstream(UpstreamOptions options, AgentCounters* counters)
    : options_(std::move(options)),
      counters_(counters),
      stub_(v1::Coordinator::NewStub(options_.channel)),
      skip_recovery_(stub_.get()) {}

Upstream::~Upstream() { Shutdown(); }

void Upstream::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
  }
  reader_ = std::thread([this] { ReadLoop(); });
  writer_ = std::thread([this] { WriteLoop(); });
}

void Upstream::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (reader_.joinable()) reader_.join();
  if (writer_.joinable()) writer_.join();
}

bool Upstream::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

// ---------------------------------------------------------------------------------------------
// Local side

void Upstream::Attach(std::shared_ptr<LocalLink> link) {
  absl::MutexLock lock(&mu_);
  LocalLink* key = link.get();
  routes_[RankKey(link->job_id(), link->rank())] = key;
  Queued q;
  q.kind = Queued::Kind::kAttach;
  q.link = link;
  q.at = absl::Now();
  queue_.push_back(std::move(q));
  ++queued_controls_;
  links_[key] = Link{std::move(link), 0, false};
  counters_->local_sessions.fetch_add(1);
}

void Upstream::Submit(const std::shared_ptr<LocalLink>& link, v1::SessionUp up) {
  {
    absl::MutexLock lock(&mu_);
    if (links_.contains(link.get())) {
      counters_->local_messages.fetch_add(1);
      if (up.has_staged()) {
        counters_->local_checkins.fetch_add(up.staged().items_size());
        for (const v1::Staged& item : up.staged().items()) {
          if (completion_.Checkin(link->job_id(), item.step(), item.chunk())) {
            completes_chunk_ = true;
          }
        }
      }
      Queued q;
      q.kind = Queued::Kind::kMessage;
      q.link = link;
      q.bytes = up.ByteSizeLong();
      q.up = std::move(up);
      q.at = absl::Now();
      queue_.push_back(std::move(q));
      ++queued_messages_;
      return;
    }
  }
  // Its attach was refused or its Session is over.
  link->Ack(up.request_id(), absl::FailedPreconditionError(absl::StrCat(
                                 "rank ", link->rank(), " of job '", link->job_id(),
                                 "' is not attached through this agent")));
}

void Upstream::Detach(const std::shared_ptr<LocalLink>& link) {
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
}

void Upstream::ForgetLocked(LocalLink* link) {
  auto it = links_.find(link);
  if (it == links_.end()) return;
  if (it->second.attach_id != 0) attach_ids_.erase(it->second.attach_id);
  links_.erase(it);
  counters_->local_sessions.fetch_sub(1);
  const RankKey key(link->job_id(), link->rank());
  auto route = routes_.find(key);
  if (route == routes_.end() || route->second != link) return;
  routes_.erase(route);
  // An older Session of the rank that is still attached (the newer one's attach was refused).
  for (auto& [other, l] : links_) {
    if (l.answered && other->job_id() == key.first && other->rank() == key.second) {
      routes_[key] = other;
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
  if (options_.flush_window <= absl::ZeroDuration() || completes_chunk_) return true;
  // The oldest queued message (controls would have made it due already).
  const absl::Time due = queue_.front().at + options_.flush_window;
  if (now >= due) return true;
  *deadline = due;
  return false;
}

void Upstream::AttachUpLocked(Link& link) {
  const uint64_t id = next_request_id_++;
  link.attach_id = id;
  attach_ids_[id] = link.link.get();
  Pending p;
  p.kind = Pending::Kind::kAttach;
  pending_.emplace(id, std::move(p));
  v1::AgentUp up;
  up.set_request_id(id);
  *up.mutable_attach()->mutable_attach() = link.link->attach();
  outgoing_.push_back(std::move(up));
}

void Upstream::Declare(const v1::JoinRequest& join) {
  absl::MutexLock lock(&mu_);
  completion_.Declare(join);
}

void Upstream::BuildLocked() {
  completes_chunk_ = false;  // every queued message leaves now
  std::vector<Queued> run;  // messages of one job and generation
  size_t run_bytes = 0;
  auto flush_run = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (run.empty()) return;
    std::vector<MergeInput> inputs;
    inputs.reserve(run.size());
    Pending p;
    p.kind = Pending::Kind::kBatch;
    for (const Queued& q : run) {
      inputs.push_back({q.link->rank(), &q.up});
      p.origins.emplace_back(q.link, q.up.request_id());
    }
    const uint64_t id = next_request_id_++;
    p.up.set_request_id(id);
    *p.up.mutable_batch() =
        MergeMessages(run.front().link->job_id(), GenerationOf(run.front().up), inputs);
    outgoing_.push_back(p.up);
    pending_.emplace(id, std::move(p));
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
        if (it != links_.end() && it->second.attach_id == 0) AttachUpLocked(it->second);
      } else {
        const uint64_t id = next_request_id_++;
        Pending p;
        p.kind = Pending::Kind::kDetach;
        pending_.emplace(id, std::move(p));
        v1::AgentUp up;
        up.set_request_id(id);
        *up.mutable_detach() = std::move(q.detach);
        outgoing_.push_back(std::move(up));
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

void Upstream::WriteLoop() {
  while (true) {
    v1::AgentUp up;
    std::shared_ptr<Stream> stream;
    uint64_t epoch = 0;
    {
      absl::MutexLock lock(&mu_);
      absl::Time deadline = absl::InfiniteFuture();
      auto ready = [this, &deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stopping_) return true;
        if (!connected_) return false;
        if (!outgoing_.empty()) return true;
        absl::Time d;
        // Due now, or newly timed (the deadline must be recomputed).
        return DueLocked(absl::Now(), &d) || d != deadline;
      };
      DueLocked(absl::Now(), &deadline);
      mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
      if (stopping_) break;
      if (!connected_) continue;
      if (outgoing_.empty()) {
        absl::Time unused;
        if (!DueLocked(absl::Now(), &unused)) continue;
        BuildLocked();
        if (outgoing_.empty()) continue;
      }
      up = std::move(outgoing_.front());
      outgoing_.pop_front();
      stream = stream_;
      epoch = epoch_;
    }
    absl::MutexLock write_lock(&write_mu_);
    {
      absl::MutexLock lock(&mu_);
      // A stream that ended meanwhile: what was built for it is rebuilt for the next one.
      if (epoch != epoch_ || !connected_) continue;
    }
    counters_->upstream_messages.fetch_add(1);
    if (up.has_batch()) {
      counters_->upstream_batches.fetch_add(1);
      counters_->merged_checkins.fetch_add(up.batch().staged_size());
    }
    // A failed write means the stream broke; the reader reconnects and writes it again.
    stream->Write(up);
  }
}

// ---------------------------------------------------------------------------------------------
// Reader

void Upstream::OnConnectedLocked() {
  outgoing_.clear();
  // The coordinator detached every rank of the ended stream: queued detaches are moot.
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->kind == Queued::Kind::kDetach) {
      it = queue_.erase(it);
      --queued_controls_;
    } else {
      ++it;
    }
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    it = it->second.kind == Pending::Kind::kBatch ? std::next(it) : pending_.erase(it);
  }
  attach_ids_.clear();
  // Re-attach, oldest attach first.
  std::vector<Link*> attached;
  for (auto& [key, link] : links_) {
    if (link.attach_id != 0) attached.push_back(&link);
  }
  std::sort(attached.begin(), attached.end(),
            [](const Link* a, const Link* b) { return a->attach_id < b->attach_id; });
  for (Link* link : attached) AttachUpLocked(*link);
  for (const auto& [id, p] : pending_) {
    if (p.kind != Pending::Kind::kBatch) continue;
    outgoing_.push_back(p.up);
    counters_->batches_resent.fetch_add(1);
  }
}

void Upstream::ReadLoop() {
  Backoff backoff(options_.backoff);
  while (true) {
    auto context = std::make_unique<grpc::ClientContext>();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      context_ = context.get();
    }
    std::shared_ptr<Stream> stream = stub_->AgentSession(context.get());
    const absl::Time opened = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      stream_ = stream;
      ++epoch_;
      connected_ = true;
      OnConnectedLocked();
    }
    bool answered = false;
    v1::AgentDown down;
    while (stream->Read(&down)) {
      if (!answered) {
        answered = true;
        absl::MutexLock lock(&mu_);
        if (answered_once_) counters_->reconnects.fetch_add(1);
        answered_once_ = true;
      }
      Handle(down);
    }
    {
      absl::MutexLock lock(&mu_);
      connected_ = false;
      stream_ = nullptr;
    }
    context->TryCancel();  // ends a write blocked on a dead connection
    grpc::Status status;
    {
      absl::MutexLock write_lock(&write_mu_);
      status = stream->Finish();
    }
    stream.reset();
    {
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
    }
    context.reset();
    if (answered || absl::Now() - opened > options_.backoff.max) backoff.Reset();

    absl::MutexLock lock(&mu_);
    if (stopping_) break;
    std::cerr << "psync-agent: coordinator stream ended (" << status.error_code() << ": "
              << status.error_message() << "); reconnecting\n";
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), backoff.NextDelay())) break;
  }
}

void Upstream::Handle(const v1::AgentDown& down) {
  // Callbacks collected under the lock, run after it.
  std::vector<std::pair<std::shared_ptr<LocalLink>, absl::Status>> attach_results;
  std::vector<std::pair<std::shared_ptr<LocalLink>, grpc::Status>> closes;
  std::vector<std::tuple<std::shared_ptr<LocalLink>, uint64_t, absl::Status>> acks;
  std::vector<std::pair<std::shared_ptr<LocalLink>, const v1::SessionDown*>> notices;
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<LocalLink>>> reattached;
  {
    absl::MutexLock lock(&mu_);
    for (const v1::AgentAck& ack : down.acks()) {
      auto it = pending_.find(ack.request_id());
      if (it == pending_.end()) continue;
      Pending p = std::move(it->second);
      pending_.erase(it);
      const absl::Status status = FromAck(ack.code(), ack.message());
      if (p.kind == Pending::Kind::kAttach) {
        auto a = attach_ids_.find(ack.request_id());
        if (a == attach_ids_.end()) continue;  // detached meanwhile
        LocalLink* key = a->second;
        Link& link = links_.at(key);
        const bool first = !link.answered;
        link.answered = true;
        std::shared_ptr<LocalLink> local = link.link;
        if (status.ok()) {
          if (first) {
            attach_results.emplace_back(std::move(local), status);
          } else {
            reattached[local->job_id()].push_back(std::move(local));
          }
          continue;
        }
        ForgetLocked(key);
        if (first) {
          attach_results.emplace_back(std::move(local), status);
        } else {
          closes.emplace_back(
              std::move(local),
              grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           absl::StrCat("the coordinator refused to attach rank ", key->rank(),
                                        " again after the agent reconnected: ", ack.message())));
        }
        continue;
      }
      if (p.kind != Pending::Kind::kBatch) continue;
      absl::flat_hash_map<uint32_t, absl::Status> rejected;
      for (const v1::MessageStatus& r : ack.rejected()) {
        rejected.emplace(r.index(), FromAck(r.code(), r.message()));
      }
      for (size_t i = 0; i < p.origins.size(); ++i) {
        std::shared_ptr<LocalLink> local = p.origins[i].first.lock();
        if (local == nullptr) continue;
        absl::Status s = status;  // a malformed batch: every message gets its status
        if (s.ok()) {
          auto r = rejected.find(static_cast<uint32_t>(i));
          if (r != rejected.end()) s = r->second;
        }
        acks.emplace_back(std::move(local), p.origins[i].second, std::move(s));
      }
    }
    for (const v1::AgentNotice& n : down.notices()) {
      counters_->notices_received.fetch_add(1);
      for (uint32_t rank : n.ranks()) {
        auto route = routes_.find(RankKey(n.job_id(), rank));
        if (route == routes_.end()) {
          counters_->notices_unrouted.fetch_add(1);
          continue;
        }
        notices.emplace_back(links_.at(route->second).link, &n.notice());
      }
    }
    for (const v1::AgentRankClosed& c : down.closed()) {
      auto a = attach_ids_.find(c.attach_request_id());
      if (a == attach_ids_.end()) continue;
      std::shared_ptr<LocalLink> local = links_.at(a->second).link;
      ForgetLocked(a->second);
      closes.emplace_back(std::move(local),
                          grpc::Status(static_cast<grpc::StatusCode>(c.code()), c.message()));
    }
  }
  for (auto& [link, status] : attach_results) link->AttachResult(status);
  for (auto& [link, request_id, status] : acks) link->Ack(request_id, status);
  for (auto& [link, notice] : notices) link->Notice(*notice);
  for (auto& [link, status] : closes) link->Close(status);
  for (auto& [job_id, links] : reattached) skip_recovery_.Recover(job_id, std::move(links));
}

}  // namespace psync::agent
