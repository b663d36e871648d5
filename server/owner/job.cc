#include "server/owner/job.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/bounded_text.h"

namespace psync::server {

using core::EventKind;

namespace {

// The kRejected event of a refused message, without its job.
core::Event RejectedEvent(const absl::Status& status, absl::Time now) {
  core::Event e;
  e.kind = EventKind::kRejected;
  e.time = now;
  e.detail = wire::BoundEcho(status.ToString());
  return e;
}

// The tracker's events to `observer` (kRejected events are not its).
void Feed(absl::Span<const core::Event> events, observe::JobObserver& observer) {
  for (const core::Event& e : events) {
    if (e.kind != EventKind::kRejected) observer.OnEvent(e);
  }
}

}  // namespace

void RecordRejectionWithoutJob(const std::string& job_id, const absl::Status& status,
                               absl::Time now, Effects* effects) {
  core::Event e = RejectedEvent(status, now);
  e.job_id = wire::BoundEcho(job_id);
  effects->AddEvent(std::move(e));
}

void Job::RecordRejection(const absl::Status& status, absl::Time now, Effects* effects) {
  ++counters.rejected;
  core::Event e = RejectedEvent(status, now);
  e.job_id = tracker->job_id();
  e.generation = tracker->generation();
  effects->AddEvent(std::move(e));
}

void Job::Record(core::Decisions& decisions, Effects* effects) {
  const size_t first = effects->events.size();
  if (first == 0) {
    effects->events.swap(decisions.events);  // the common case: no event is moved
  } else {
    effects->events.insert(effects->events.end(), std::make_move_iterator(decisions.events.begin()),
                           std::make_move_iterator(decisions.events.end()));
  }
  decisions.events.clear();
  ObserveFrom(first, *effects);
  QueueNotices(decisions.deliveries, effects);
}

absl::Status Job::ApplyMessage(uint64_t generation, const RankMessage& m, absl::Time now,
                               core::Decisions& decisions, Effects* effects) {
  // The tracker appends this message's events after the batch's earlier ones (or merges a check-in
  // into one of them), where they stay: no event is moved again.
  decisions.deliveries.clear();
  decisions.events.swap(effects->events);
  absl::Status s;
  switch (m.kind) {
    case RankMessage::Kind::kStaged:
      s = tracker->Stage(m.rank, generation, m.staged, now, &decisions);
      break;
    case RankMessage::Kind::kSkip:
      s = tracker->Skip(m.rank, generation, m.skip_step, m.skip_reason, now, &decisions);
      break;
    case RankMessage::Kind::kSyncDone:
      s = tracker->SyncDone(m.rank, generation, m.sync_done, now, &decisions);
      break;
    case RankMessage::Kind::kLeave:  // see Leave
      s = absl::InternalError("a Leave is applied by Job::Leave");
      break;
  }
  decisions.events.swap(effects->events);
  QueueNotices(decisions.deliveries, effects);
  if (!s.ok()) RecordRejection(s, now, effects);
  return s;
}

namespace {

// How many messages from messages[i] on are one-item SyncDones carrying the very item of
// messages[i] (0 when it is not one).
size_t SameSyncDoneFrom(absl::Span<const RankMessage> messages, size_t i) {
  const auto is_one_sync_done = [](const RankMessage& m) {
    return m.kind == RankMessage::Kind::kSyncDone && m.sync_done.size() == 1;
  };
  if (!is_one_sync_done(messages[i])) return 0;
  const core::SyncDoneItem* item = messages[i].sync_done.data();
  size_t n = 1;
  while (i + n < messages.size() && is_one_sync_done(messages[i + n]) &&
         messages[i + n].sync_done.data() == item) {
    ++n;
  }
  return n;
}

}  // namespace

void Job::ApplyMessages(uint64_t generation, absl::Span<const RankMessage> messages, absl::Time now,
                        core::Decisions& decisions, Effects* effects,
                        absl::Span<absl::Status> statuses) {
  std::vector<core::RankId> ranks;
  for (size_t i = 0; i < messages.size();) {
    const size_t same = SameSyncDoneFrom(messages, i);
    if (same < 2) {
      statuses[i] = ApplyMessage(generation, messages[i], now, decisions, effects);
      ++i;
      continue;
    }
    ranks.clear();
    for (size_t k = i; k < i + same; ++k) ranks.push_back(messages[k].rank);
    const core::SyncDoneItem& item = messages[i].sync_done[0];
    // The group's common reports at once; a rank that is not one on its own, where it stands.
    for (size_t k = 0; k < same;) {
      decisions.deliveries.clear();
      decisions.events.swap(effects->events);
      const size_t recorded = tracker->SyncDonesInSlots(
          generation, item, absl::MakeConstSpan(ranks).subspan(k), now, &decisions);
      decisions.events.swap(effects->events);
      QueueNotices(decisions.deliveries, effects);
      std::fill_n(statuses.begin() + i + k, recorded, absl::OkStatus());
      k += recorded;
      if (k < same) {
        statuses[i + k] = ApplyMessage(generation, messages[i + k], now, decisions, effects);
        ++k;
      }
    }
    i += same;
  }
}

void Job::ApplyMergedCheckin(uint64_t generation, const core::StagedItem& item,
                             absl::Span<const core::RankId> ranks, absl::Time now,
                             core::Decisions& decisions, Effects* effects,
                             absl::Span<absl::Status> statuses) {
  decisions.deliveries.clear();
  decisions.events.swap(effects->events);
  tracker->StageMerged(generation, item, ranks, now, &decisions, statuses);
  decisions.events.swap(effects->events);
  QueueNotices(decisions.deliveries, effects);
  for (const absl::Status& s : statuses) {
    if (!s.ok()) RecordRejection(s, now, effects);
  }
}

void Job::ObserveFrom(size_t first_event, const Effects& effects) {
  CountFrom(first_event, effects);
  absl::MutexLock observer_lock(&observer_mu);
  ObserveEvents(absl::MakeConstSpan(effects.events).subspan(first_event));
}

void Job::CountFrom(size_t first_event, const Effects& effects) {
  for (size_t i = first_event; i < effects.events.size(); ++i) {
    const core::Event& e = effects.events[i];
    switch (e.kind) {
      case EventKind::kCheckin:
        counters.checkins += core::RankCount(e);
        break;
      case EventKind::kDuplicate:
        ++counters.duplicate_checkins;
        break;
      case EventKind::kRelease:
        ++counters.releases;
        break;
      case EventKind::kSyncDone:
        counters.syncs_done += core::RankCount(e);
        break;
      case EventKind::kStepSkipped:
        ++counters.skipped_steps;
        break;
      case EventKind::kViolation:
        ++counters.violations;
        break;
      default:
        break;
    }
  }
}

void Job::ObserveEvents(absl::Span<const core::Event> events) { Feed(events, CaughtUpObserver()); }

void Job::ObserveLater(std::shared_ptr<const std::vector<core::Event>> events) {
  if (events == nullptr || events->empty()) return;
  absl::MutexLock observer_lock(&observer_mu);
  unobserved.push_back(std::move(events));
}

observe::JobObserver& Job::CaughtUpObserver() const {
  while (!unobserved.empty()) {
    Feed(*unobserved.front(), observer);
    unobserved.pop_front();
  }
  return observer;
}

void Job::QueueNotices(const std::vector<core::Delivery>& deliveries, Effects* effects) {
  // A run of deliveries of the same notice (a release's directive to every member: one object,
  // so one pointer compare a rank) shares one copy stamped with the epoch, addressed to the
  // transports of the members' sinks with their ranks (Effects::AddNotice). Equal notices made
  // apart (each rank's own) share it too. A delivery to every member of a chunk is addressed
  // transport by transport, through the chunk's routes kept between releases.
  const core::Notice* source = nullptr;  // the tracker's notice `stamped` copies
  std::shared_ptr<const core::Notice> stamped;
  const auto stamp = [&](const std::shared_ptr<const core::Notice>& notice) {
    if (notice.get() == source) return;
    core::Notice copy = *notice;
    if (auto* directive = std::get_if<core::SyncDirective>(&copy)) directive->epoch = epoch;
    if (stamped == nullptr || !(*stamped == copy)) {
      stamped = std::make_shared<const core::Notice>(std::move(copy));
    }
    source = notice.get();
  };
  const std::string& job_id = tracker->job_id();
  for (const core::Delivery& d : deliveries) {
    if (d.members_of.has_value()) {
      const MemberRoutes& routes =
          sessions.RoutesTo(*d.members_of, tracker->plan().chunk(*d.members_of).members);
      stamp(d.notice);
      for (const auto& [rank, sink] : routes.own_sinks) {
        effects->AddNotice(sink, nullptr, job_id, rank, stamped);
      }
      for (const MemberRoutes::Route& route : routes.by_transport) {
        effects->AddNoticeToRanks(route.holder, route.transport, job_id, route.ranks, stamped);
      }
      continue;
    }
    const AttachedSession* session = sessions.Find(d.rank);
    // A rank without a session gets its pending notices when it attaches.
    if (session == nullptr) continue;
    stamp(d.notice);
    effects->AddNotice(session->sink, session->transport, job_id, d.rank, stamped);
  }
}

void Job::TrackDetached(core::RankId rank, uint64_t generation_before, absl::Time now) {
  if (tracker->generation() == generation_before) {
    // The same generation: only the joining rank changed (O(1) instead of O(ranks) per join).
    if (!sessions.contains(rank)) detached_since.try_emplace(rank, now);
    return;
  }
  finished.clear();  // a new generation: every rank runs again
  const std::vector<core::RankId> joined = tracker->JoinedRanks();
  for (auto it = detached_since.begin(); it != detached_since.end();) {
    if (!std::binary_search(joined.begin(), joined.end(), it->first)) {
      lost.erase(it->first);
      detached_since.erase(it++);
    } else {
      ++it;
    }
  }
  for (core::RankId r : joined) {
    if (!sessions.contains(r)) detached_since.try_emplace(r, now);
  }
}

absl::Status Job::Leave(core::RankId rank, uint64_t generation, bool leaves_finished, bool* ends) {
  const uint64_t current = tracker->generation();
  if (generation != current) {
    return absl::FailedPreconditionError(absl::StrCat(
        "leave.generation ", generation, " is ", generation < current ? "stale" : "not issued yet",
        ": job '", tracker->job_id(), "' is at generation ", current));
  }
  if (!tracker->IsJoined(rank)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " has not joined generation ", current));
  }
  if (!leaves_finished) return absl::OkStatus();
  finished.insert(rank);
  detached_since.erase(rank);
  lost.erase(rank);
  *ends = finished.size() == tracker->plan().world_size();
  return absl::OkStatus();
}

void Job::EnforceLiveness(const LivenessRules& rules, absl::Time now, Effects* effects) {
  if (tracker->state() == core::JobState::kAborted) return;
  // Only a rank gone past its lease (or past the abort's wait, if shorter) has anything to do
  // below; those, in rank order. The others are not copied or sorted: after a coordinator restart
  // a whole job of 131,072 ranks may be detached for a while, and this runs every inspection.
  const absl::Duration due = std::min(rules.rank_lease, rules.lost_rank_abort_after);
  std::vector<std::pair<core::RankId, absl::Time>> detached;
  for (const auto& [rank, since] : detached_since) {
    if (now - since >= due) detached.emplace_back(rank, since);
  }
  std::sort(detached.begin(), detached.end());
  for (const auto& [rank, since] : detached) {
    const absl::Duration gone = now - since;
    if (gone >= rules.rank_lease && lost.insert(rank).second) {
      core::Event e;
      e.kind = EventKind::kRankLost;
      e.time = now;
      e.job_id = tracker->job_id();
      e.generation = tracker->generation();
      e.rank = rank;
      e.step = tracker->rank_step(rank);
      e.duration = gone;
      e.detail = absl::StrCat("rank ", rank, " lost: no session for ", absl::FormatDuration(gone),
                              " (lease ", absl::FormatDuration(rules.rank_lease),
                              "); the job aborts after ",
                              absl::FormatDuration(rules.lost_rank_abort_after));
      {
        absl::MutexLock observer_lock(&observer_mu);
        CaughtUpObserver().OnEvent(e);
      }
      effects->AddEvent(std::move(e));
    }
    if (gone >= rules.lost_rank_abort_after) {
      core::Decisions decisions = NewDecisions();
      tracker->Abort(
          absl::StrCat("rank ", rank, " lost: no session for ", absl::FormatDuration(gone)), now,
          &decisions);
      Record(decisions, effects);
      return;
    }
  }
}

void Job::FindStalls(absl::Time now, Effects* effects) {
  if (tracker->state() != core::JobState::kRunning) return;
  // The (O(ranks)) lists of who is missing are built only for a chunk reported stalled.
  const core::JobTracker& t = *tracker;
  auto lists_of = [&](const core::ChunkSnapshot& brief, size_t list_limit) {
    absl::StatusOr<core::ChunkSnapshot> full = t.ChunkAt(brief.step, brief.chunk, now, list_limit);
    return full.ok() ? *std::move(full) : brief;
  };
  absl::MutexLock observer_lock(&observer_mu);
  for (core::Event& e : CaughtUpObserver().Inspect(
           now, t.Snapshot(now, /*lists_after=*/absl::InfiniteDuration()), lists_of)) {
    effects->AddEvent(std::move(e));
  }
}

size_t Job::CloseSessions(const absl::Status& status, Effects* effects) {
  const size_t attached = sessions.size();
  for (auto& [rank, sink] : sessions.TakeAll()) {
    // A rank that left finished is done with its Session: it is not told why the job went.
    if (!finished.contains(rank)) effects->closes.emplace_back(std::move(sink), status);
  }
  return attached;
}

void Job::NameNode(core::RankId rank, const std::string& node) {
  auto it = nodes.find(rank);
  if (it == nodes.end() ? node.empty() : it->second == node) return;
  if (node.empty()) {
    nodes.erase(it);
  } else {
    nodes[rank] = node;
  }
  node_layout.reset();
}

const observe::NodeLayout& Job::NodesLaidOut(uint32_t world_size, uint32_t node_size) const {
  if (!node_layout.has_value() || node_layout->world_size != world_size ||
      node_layout->node_size != node_size) {
    // Read under mu, which the caller holds; the lambda cannot say so.
    const absl::flat_hash_map<core::RankId, std::string>* named = &nodes;
    node_layout = NodeLayoutCache{
        world_size, node_size,
        observe::LayOutNodes(world_size, node_size, [named](core::RankId rank) {
          auto it = named->find(rank);
          return it == named->end() ? absl::string_view() : absl::string_view(it->second);
        })};
  }
  return node_layout->layout;
}

JobStatusView Job::View(absl::Time now, uint32_t node_size, ViewDetail detail,
                        size_t list_limit) const {
  JobStatusView view;
  const bool no_lists = detail == ViewDetail::kSummary || detail == ViewDetail::kMissingByNode;
  view.snapshot = tracker->Snapshot(
      now, no_lists ? absl::InfiniteDuration() : -absl::InfiniteDuration(),
      detail == ViewDetail::kStatus ? core::SnapshotLists::kAll : core::SnapshotLists::kHoldingBack,
      list_limit);
  if (detail != ViewDetail::kSummary) {
    view.nodes = NodesLaidOut(view.snapshot.world_size, node_size);
  }
  if (detail == ViewDetail::kMissingByNode) {
    view.missing_by_node.assign(view.nodes.num_nodes(), 0);
    for (const core::ChunkSnapshot& chunk : view.snapshot.chunks) {
      if (chunk.state != "WAITING") continue;
      tracker->ForEachMissing(chunk.step, chunk.chunk, [&view](core::RankId rank) {
        if (rank < view.nodes.node_of_rank.size()) {
          ++view.missing_by_node[view.nodes.node_of_rank[rank]];
        }
      });
    }
  }
  view.counters = counters;
  view.sessions_connected = static_cast<uint32_t>(sessions.size());
  absl::MutexLock observer_lock(&observer_mu);
  const observe::JobObserver& observer = CaughtUpObserver();
  view.stalls = observer.stalls();
  if (detail == ViewDetail::kMissingByNode) {
    view.stragglers = observer.TopStragglers(1);
  } else if (detail != ViewDetail::kSummary) {
    view.stragglers = observer.TopStragglers(10);
  }
  if (detail == ViewDetail::kOverview) view.rank_scores = observer.StragglersByRank();
  for (core::ChunkId c = 0; c < view.snapshot.num_chunks; ++c) {
    view.deadlines.push_back(observer.Deadline(c));
  }
  view.audit = observer.totals();
  view.lost_ranks.assign(lost.begin(), lost.end());
  std::sort(view.lost_ranks.begin(), view.lost_ranks.end());
  view.lock_held = lock_times.held();
  view.lock_wait = lock_times.wait();
  view.lock_acquisitions = lock_times.acquisitions.load(std::memory_order_relaxed);
  return view;
}

}  // namespace psync::server
