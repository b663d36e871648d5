#include "server/observe/trace_export.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace psync::observe {
namespace {

using core::ChunkId;
using core::Event;
using core::EventKind;
using core::RankId;
using core::Step;

// Tracks are owned by a rank or by the coordinator (sorted first).
constexpr int64_t kCoordinatorOwner = -1;
// Overflow lanes per owner (chunks of one rank that overlap in time need one lane each).
constexpr int kMaxLanes = 2047;

using Key = std::tuple<uint64_t, Step, ChunkId>;  // generation, step, chunk

struct Checkin {
  std::string optimizer;
  absl::Time time;
};

// What the events say about one (generation, step, chunk).
struct ChunkTrace {
  std::map<RankId, std::vector<Checkin>> checkins;  // in arrival order
  std::optional<absl::Time> release;
  RankId last_rank = 0;
  std::string last_optimizer;
  uint64_t sequence = 0;
  absl::Duration wait;
  std::map<RankId, absl::Time> sync_done;  // first SyncDone per rank
  std::optional<absl::Time> complete;
  std::set<RankId> stalled_ranks;  // named by stall events as sync-pending
};

// A JSON value of an args object: an integer, a string or a boolean.
struct Value {
  enum class Type { kInt, kString, kBool } type;
  int64_t number = 0;
  std::string text;

  static Value Int(int64_t n) { return {Type::kInt, n, ""}; }
  static Value Str(std::string s) { return {Type::kString, 0, std::move(s)}; }
  static Value Bool(bool b) { return {Type::kBool, b ? 1 : 0, ""}; }
};
using Fields = std::vector<std::pair<std::string, Value>>;

void AppendObject(const Fields& fields, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [key, value] : fields) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(key, out);
    out->push_back(':');
    switch (value.type) {
      case Value::Type::kInt:
        absl::StrAppend(out, value.number);
        break;
      case Value::Type::kString:
        AppendJsonString(value.text, out);
        break;
      case Value::Type::kBool:
        out->append(value.number != 0 ? "true" : "false");
        break;
    }
  }
  out->push_back('}');
}

// Order of records at the same timestamp, chosen so that flow ends bind to the intended slice
// (a viewer binds a flow to the slice on top of the track's stack when it reads the flow event).
enum Order {
  kZeroSpan = 0,  // a span of zero duration (the stage of a single-optimizer last contributor)
  kFlowStart = 1,
  kSpan = 2,
  kFlowEnd = 3,
  kInstant = 4,
};

struct Record {
  int64_t ts = 0;
  int order = 0;
  int64_t tid = 0;
  std::string name;
  std::string json;
};

std::string ChunkSuffix(const Key& key) {
  return absl::StrCat(" c", std::get<2>(key), " s", std::get<1>(key));
}

Fields KeyArgs(const Key& key) {
  return {{"generation", Value::Int(static_cast<int64_t>(std::get<0>(key)))},
          {"step", Value::Int(static_cast<int64_t>(std::get<1>(key)))},
          {"chunk", Value::Int(std::get<2>(key))}};
}

struct Interval {
  absl::Time start;
  absl::Time end;
};

class Exporter {
 public:
  Exporter(absl::string_view job_id, Step first, Step last)
      : job_id_(job_id), first_(first), last_(last) {}

  void Add(const Event& e) {
    if (e.job_id != job_id_) return;
    const bool in_range = e.step.has_value() && *e.step >= first_ && *e.step <= last_;
    switch (e.kind) {
      case EventKind::kCheckin:
        if (!in_range || !e.chunk) return;
        core::ForEachRank(e, [&](RankId rank) {
          Chunk(e).checkins[rank].push_back({e.optimizer, e.time});
        });
        break;
      case EventKind::kRelease: {
        if (!in_range || !e.chunk) return;
        ChunkTrace& c = Chunk(e);
        if (c.release) break;  // a second release is a violation, reported as one
        c.release = e.time;
        c.last_rank = e.rank.value_or(0);
        c.last_optimizer = e.optimizer;
        c.sequence = e.sequence;
        c.wait = e.duration;
        break;
      }
      case EventKind::kSyncDone:
        if (!in_range || !e.chunk) return;
        core::ForEachRank(e, [&](RankId rank) { Chunk(e).sync_done.emplace(rank, e.time); });
        break;
      case EventKind::kSyncComplete:
        if (!in_range || !e.chunk) return;
        if (!Chunk(e).complete) Chunk(e).complete = e.time;
        break;
      case EventKind::kStall:
        if (!in_range) return;
        if (e.chunk) {
          ChunkTrace& c = Chunk(e);
          c.stalled_ranks.insert(e.ranks.begin(), e.ranks.end());
        }
        instants_.push_back(&e);
        break;
      case EventKind::kStepSkipped:
        if (!in_range) return;
        instants_.push_back(&e);
        break;
      case EventKind::kViolation:
      case EventKind::kAbort:
        if (!in_range && e.step.has_value()) return;
        instants_.push_back(&e);
        break;
      default:
        return;
    }
    if (!origin_ || e.time < *origin_) origin_ = e.time;
    if (!end_ || e.time > *end_) end_ = e.time;
  }

  std::string Render() {
    PlanSpans();
    AssignLanes();
    std::vector<Record> records;
    EmitSpans(&records);
    EmitInstants(&records);
    std::stable_sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
      return std::tie(a.ts, a.order, a.tid, a.name) < std::tie(b.ts, b.order, b.tid, b.name);
    });

    std::string out = "{\"traceEvents\":[\n";
    bool first = true;
    auto append = [&](const std::string& json) {
      if (!first) out.append(",\n");
      first = false;
      out.append(json);
    };
    for (const std::string& m : Metadata()) append(m);
    for (const Record& r : records) append(r.json);
    out.append("\n],\"displayTimeUnit\":\"ms\",\"otherData\":");
    AppendObject({{"job_id", Value::Str(job_id_)},
                  {"first_step", Value::Int(static_cast<int64_t>(first_))},
                  {"last_step", Value::Int(static_cast<int64_t>(last_))},
                  {"start_unix_micros", Value::Int(origin_ ? absl::ToUnixMicros(*origin_) : 0)}},
                 &out);
    out.append("}\n");
    return out;
  }

 private:
  ChunkTrace& Chunk(const Event& e) { return chunks_[Key{e.generation, *e.step, *e.chunk}]; }

  int64_t Us(absl::Time t) const { return absl::ToInt64Microseconds(t - *origin_); }

  // The interval each owner's track needs for each chunk: a rank's stage and sync spans, the
  // coordinator's release span.
  void PlanSpans() {
    for (const auto& [key, c] : chunks_) {
      for (const auto& [rank, list] : c.checkins) Extend(rank, key, list.front().time, StageEnd(c));
      if (!c.release) continue;
      Extend(kCoordinatorOwner, key, *c.release, c.complete.value_or(*end_));
      for (RankId rank : SyncRanks(c)) Extend(rank, key, *c.release, SyncEnd(c, rank));
    }
  }

  absl::Time StageEnd(const ChunkTrace& c) const { return c.release.value_or(*end_); }

  absl::Time SyncEnd(const ChunkTrace& c, RankId rank) const {
    auto done = c.sync_done.find(rank);
    return done != c.sync_done.end() ? done->second : *end_;
  }

  // Ranks with a sync span: those that reported SyncDone, and, while the chunk's sync is not
  // complete, those that staged it or were named sync-pending by a stall.
  std::set<RankId> SyncRanks(const ChunkTrace& c) const {
    std::set<RankId> ranks;
    for (const auto& [rank, time] : c.sync_done) ranks.insert(rank);
    if (!c.complete) {
      for (const auto& [rank, list] : c.checkins) ranks.insert(rank);
      ranks.insert(c.stalled_ranks.begin(), c.stalled_ranks.end());
    }
    return ranks;
  }

  void Extend(int64_t owner, const Key& key, absl::Time start, absl::Time end) {
    auto [it, inserted] = intervals_[owner].try_emplace(key, Interval{start, end});
    if (!inserted) {
      it->second.start = std::min(it->second.start, start);
      it->second.end = std::max(it->second.end, end);
    }
  }

  // Packs each owner's intervals into the fewest lanes with no overlap, in order of start; then
  // numbers the tracks: coordinator lanes first, then rank by rank.
  void AssignLanes() {
    for (const Event* e : instants_) {
      for (RankId rank : InstantRanks(*e)) intervals_[rank];  // a track even without spans
    }
    int64_t next_tid = 1;
    for (auto& [owner, by_key] : intervals_) {
      std::vector<std::pair<Interval, Key>> order;
      for (const auto& [key, interval] : by_key) order.push_back({interval, key});
      std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return std::tie(a.first.start, a.first.end) < std::tie(b.first.start, b.first.end);
      });
      std::vector<absl::Time> lane_end;
      for (const auto& [interval, key] : order) {
        size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > interval.start) ++lane;
        if (lane >= static_cast<size_t>(kMaxLanes)) lane = kMaxLanes - 1;
        if (lane == lane_end.size()) lane_end.push_back(interval.end);
        lane_end[lane] = std::max(lane_end[lane], interval.end);
        lanes_[{owner, key}] = static_cast<int>(lane);
      }
      const size_t count = std::max<size_t>(lane_end.size(), 1);
      for (size_t lane = 0; lane < count; ++lane) {
        std::string name =
            owner == kCoordinatorOwner ? "coordinator" : absl::StrCat("rank ", owner);
        if (lane > 0) absl::StrAppend(&name, " #", lane + 1);
        tracks_.push_back({next_tid, std::move(name)});
        tids_[{owner, static_cast<int>(lane)}] = next_tid++;
      }
    }
  }

  int64_t Tid(int64_t owner, const Key& key) const {
    auto lane = lanes_.find({owner, key});
    return tids_.at({owner, lane == lanes_.end() ? 0 : lane->second});
  }

  std::vector<std::string> Metadata() const {
    std::vector<std::string> out;
    std::string process;
    AppendObject(
        {{"ph", Value::Str("M")}, {"pid", Value::Int(1)}, {"name", Value::Str("process_name")}},
        &process);
    process.pop_back();
    process.append(",\"args\":");
    AppendObject({{"name", Value::Str(absl::StrCat("job ", job_id_))}}, &process);
    process.push_back('}');
    out.push_back(std::move(process));
    for (const auto& [tid, name] : tracks_) {
      for (const char* kind : {"thread_name", "thread_sort_index"}) {
        std::string m;
        AppendObject({{"ph", Value::Str("M")},
                      {"pid", Value::Int(1)},
                      {"tid", Value::Int(tid)},
                      {"name", Value::Str(kind)}},
                     &m);
        m.pop_back();
        m.append(",\"args\":");
        if (std::string(kind) == "thread_name") {
          AppendObject({{"name", Value::Str(name)}}, &m);
        } else {
          AppendObject({{"sort_index", Value::Int(tid)}}, &m);
        }
        m.push_back('}');
        out.push_back(std::move(m));
      }
    }
    return out;
  }

  void Span(std::vector<Record>* out, int64_t tid, std::string name, absl::Time start,
            absl::Time end, Fields args, bool open) {
    if (open) args.push_back({"open", Value::Bool(true)});
    Record r;
    r.ts = Us(start);
    const int64_t dur = Us(end) - r.ts;
    r.order = dur == 0 ? kZeroSpan : kSpan;
    r.tid = tid;
    r.name = std::move(name);
    AppendObject({{"name", Value::Str(r.name)},
                  {"cat", Value::Str("psync")},
                  {"ph", Value::Str("X")},
                  {"pid", Value::Int(1)},
                  {"tid", Value::Int(tid)},
                  {"ts", Value::Int(r.ts)},
                  {"dur", Value::Int(dur)}},
                 &r.json);
    r.json.pop_back();
    r.json.append(",\"args\":");
    AppendObject(args, &r.json);
    r.json.push_back('}');
    out->push_back(std::move(r));
  }

  void Flow(std::vector<Record>* out, bool start, int64_t tid, absl::Time time, int64_t id,
            const std::string& name) {
    Record r;
    r.ts = Us(time);
    r.order = start ? kFlowStart : kFlowEnd;
    r.tid = tid;
    r.name = name;
    Fields fields = {{"name", Value::Str(name)},
                     {"cat", Value::Str("psync")},
                     {"ph", Value::Str(start ? "s" : "f")},
                     {"id", Value::Int(id)},
                     {"pid", Value::Int(1)},
                     {"tid", Value::Int(tid)},
                     {"ts", Value::Int(r.ts)}};
    if (!start) fields.push_back({"bp", Value::Str("e")});
    AppendObject(fields, &r.json);
    out->push_back(std::move(r));
  }

  void EmitSpans(std::vector<Record>* out) {
    int64_t flow_id = 0;
    for (const auto& [key, c] : chunks_) {
      const std::string suffix = ChunkSuffix(key);
      for (const auto& [rank, list] : c.checkins) {
        std::vector<const Checkin*> sorted;
        for (const Checkin& ci : list) sorted.push_back(&ci);
        std::stable_sort(sorted.begin(), sorted.end(), [](const Checkin* a, const Checkin* b) {
          return std::tie(a->time, a->optimizer) < std::tie(b->time, b->optimizer);
        });
        const absl::Time start = sorted.front()->time;
        std::vector<std::string> parts;
        for (const Checkin* ci : sorted) {
          parts.push_back(
              absl::StrCat(ci->optimizer, " +", absl::ToInt64Microseconds(ci->time - start), "us"));
        }
        Fields args = KeyArgs(key);
        args.push_back({"checkins", Value::Str(absl::StrJoin(parts, ", "))});
        if (c.release && rank == c.last_rank) {
          args.push_back({"last_contributor", Value::Str(c.last_optimizer)});
        }
        Span(out, Tid(rank, key), "stage" + suffix, start, StageEnd(c), std::move(args),
             !c.release);
      }
      if (!c.release) continue;
      Fields release_args = KeyArgs(key);
      release_args.push_back({"sequence", Value::Int(static_cast<int64_t>(c.sequence))});
      release_args.push_back({"last_contributor", Value::Str(absl::StrCat("rank ", c.last_rank, " ",
                                                                          c.last_optimizer))});
      release_args.push_back({"wait_us", Value::Int(absl::ToInt64Microseconds(c.wait))});
      Span(out, Tid(kCoordinatorOwner, key), "release" + suffix, *c.release,
           c.complete.value_or(*end_), std::move(release_args), !c.complete);
      for (RankId rank : SyncRanks(c)) {
        Fields args = KeyArgs(key);
        args.push_back({"sequence", Value::Int(static_cast<int64_t>(c.sequence))});
        Span(out, Tid(rank, key), "sync" + suffix, *c.release, SyncEnd(c, rank), std::move(args),
             c.sync_done.count(rank) == 0);
      }
      // The flow starts at the last contributor's check-in (inside its stage span).
      auto last = c.checkins.find(c.last_rank);
      if (last == c.checkins.end()) continue;
      for (const Checkin& ci : last->second) {
        if (ci.optimizer != c.last_optimizer) continue;
        ++flow_id;
        Flow(out, /*start=*/true, Tid(c.last_rank, key), ci.time, flow_id, "release" + suffix);
        Flow(out, /*start=*/false, Tid(kCoordinatorOwner, key), *c.release, flow_id,
             "release" + suffix);
        break;
      }
    }
  }

  // The ranks on whose tracks an instant is drawn (empty: process-wide).
  static std::vector<RankId> InstantRanks(const Event& e) {
    std::set<RankId> ranks;
    if (e.kind == EventKind::kViolation && e.rank) ranks.insert(*e.rank);
    if (e.kind == EventKind::kStall) {
      for (const core::Contributor& who : e.contributors) ranks.insert(who.rank);
      ranks.insert(e.ranks.begin(), e.ranks.end());
    }
    return {ranks.begin(), ranks.end()};
  }

  void EmitInstants(std::vector<Record>* out) {
    for (const Event* e : instants_) {
      std::string name;
      switch (e->kind) {
        case EventKind::kViolation:
          name = "violation";
          break;
        case EventKind::kStall:
          name = "stall";
          break;
        case EventKind::kStepSkipped:
          name = "step skipped";
          break;
        default:
          name = "abort";
          break;
      }
      if (e->chunk) absl::StrAppend(&name, " c", *e->chunk);
      if (e->step) absl::StrAppend(&name, " s", *e->step);
      Fields args = {{"generation", Value::Int(static_cast<int64_t>(e->generation))}};
      if (e->step) args.push_back({"step", Value::Int(static_cast<int64_t>(*e->step))});
      if (e->chunk) args.push_back({"chunk", Value::Int(*e->chunk)});
      if (e->kind == EventKind::kStall) {
        std::vector<std::string> missing;
        for (const core::Contributor& who : e->contributors) {
          missing.push_back(absl::StrCat("rank ", who.rank, " ", who.optimizer));
        }
        args.push_back({"missing", Value::Str(absl::StrJoin(missing, ", "))});
        args.push_back({"sync_pending_ranks", Value::Str(absl::StrJoin(e->ranks, ","))});
        args.push_back({"waited_us", Value::Int(absl::ToInt64Microseconds(e->duration))});
      }
      args.push_back({"detail", Value::Str(e->detail)});
      const std::vector<RankId> ranks = InstantRanks(*e);
      auto emit = [&](std::optional<RankId> rank) {
        Record r;
        r.ts = Us(e->time);
        r.order = kInstant;
        r.tid = rank ? tids_.at({*rank, 0}) : 0;
        r.name = name;
        Fields fields = {{"name", Value::Str(name)},
                         {"cat", Value::Str("psync")},
                         {"ph", Value::Str("i")},
                         {"s", Value::Str(rank ? "t" : "p")},
                         {"pid", Value::Int(1)}};
        if (rank) fields.push_back({"tid", Value::Int(r.tid)});
        fields.push_back({"ts", Value::Int(r.ts)});
        AppendObject(fields, &r.json);
        r.json.pop_back();
        r.json.append(",\"args\":");
        AppendObject(args, &r.json);
        r.json.push_back('}');
        out->push_back(std::move(r));
      };
      if (ranks.empty()) emit(std::nullopt);
      for (RankId rank : ranks) emit(rank);
    }
  }

  const std::string job_id_;
  const Step first_;
  const Step last_;
  std::map<Key, ChunkTrace> chunks_;
  std::vector<const Event*> instants_;  // in input order
  std::optional<absl::Time> origin_;
  std::optional<absl::Time> end_;
  std::map<int64_t, std::map<Key, Interval>> intervals_;  // by owner
  std::map<std::pair<int64_t, Key>, int> lanes_;
  std::map<std::pair<int64_t, int>, int64_t> tids_;      // (owner, lane) -> tid
  std::vector<std::pair<int64_t, std::string>> tracks_;  // (tid, name)
};

// Length of the valid UTF-8 sequence at the start of `s`, or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  size_t length;
  uint32_t min;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  uint32_t code = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

void AppendJsonString(absl::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(text.data() + i, length);
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

absl::StatusOr<std::string> ExportChromeTrace(absl::Span<const core::Event> events,
                                              absl::string_view job_id, core::Step first,
                                              core::Step last) {
  if (first > last) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_step ", first, " must not be greater than last_step ", last));
  }
  Exporter exporter(job_id, first, last);
  for (const core::Event& e : events) exporter.Add(e);
  return exporter.Render();
}

}  // namespace psync::observe
