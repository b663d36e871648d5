// ExportChromeTrace on a hand-built event sequence: the JSON parses, and the spans, flows and
// instants are exactly the expected ones (names, tracks, start times, durations).
#include "server/observe/trace_export.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace psync::observe {
namespace {

using core::Event;
using core::EventKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

class Events {
 public:
  Event& Add(EventKind kind, int64_t at_us, std::string job = "j") {
    Event e;
    e.index = events_.size();
    e.kind = kind;
    e.time = kStart + absl::Microseconds(at_us);
    e.job_id = std::move(job);
    e.generation = 1;
    events_.push_back(e);
    return events_.back();
  }
  void Checkin(int64_t at, uint64_t step, uint32_t chunk, uint32_t rank, std::string opt) {
    Event& e = Add(EventKind::kCheckin, at);
    e.step = step;
    e.chunk = chunk;
    e.rank = rank;
    e.optimizer = std::move(opt);
  }
  void Release(int64_t at, uint64_t step, uint32_t chunk, uint32_t last_rank, std::string opt,
               uint64_t sequence, int64_t wait_us) {
    Event& e = Add(EventKind::kRelease, at);
    e.step = step;
    e.chunk = chunk;
    e.rank = last_rank;
    e.optimizer = std::move(opt);
    e.sequence = sequence;
    e.duration = absl::Microseconds(wait_us);
  }
  void SyncDone(int64_t at, uint64_t step, uint32_t chunk, uint32_t rank) {
    Event& e = Add(EventKind::kSyncDone, at);
    e.step = step;
    e.chunk = chunk;
    e.rank = rank;
  }
  void Complete(int64_t at, uint64_t step, uint32_t chunk) {
    Event& e = Add(EventKind::kSyncComplete, at);
    e.step = step;
    e.chunk = chunk;
  }
  const std::vector<Event>& all() const { return events_; }
  std::vector<Event>& all_mutable() { return events_; }

 private:
  std::vector<Event> events_;
};

// A 2-rank job with 2 chunks; rank 0 has a dense and an expert optimizer in chunk 0.
// Step 1 finishes; in step 2, rank 1 never stages chunk 0 (a stall) and never reports SyncDone of
// chunk 1; a violation names rank 0. Events of another job and of step 5 must be left out.
Events Scenario() {
  Events ev;
  ev.Add(EventKind::kJoin, 0).rank = 0;  // no step: not exported, not the origin
  ev.Checkin(5, 1, 0, 0, "dense");
  ev.Checkin(15, 1, 0, 0, "expert");
  ev.Checkin(25, 1, 0, 1, "dense");
  ev.Release(25, 1, 0, 1, "dense", 1, 20);
  ev.Checkin(30, 1, 1, 0, "dense");
  ev.SyncDone(35, 1, 0, 0);
  ev.Checkin(45, 1, 1, 1, "dense");
  ev.Release(45, 1, 1, 1, "dense", 2, 15);
  ev.SyncDone(55, 1, 0, 1);
  ev.Complete(55, 1, 0);
  ev.SyncDone(65, 1, 1, 0);
  ev.SyncDone(75, 1, 1, 1);
  ev.Complete(75, 1, 1);
  {
    Event& other = ev.Add(EventKind::kCheckin, 80, "other-job");
    other.step = 1;
    other.chunk = 0;
    other.rank = 7;
    other.optimizer = "dense";
  }
  ev.Checkin(105, 2, 0, 0, "dense");
  ev.Checkin(115, 2, 1, 0, "dense");
  ev.Checkin(125, 2, 1, 1, "dense");
  ev.Release(125, 2, 1, 1, "dense", 3, 10);
  ev.SyncDone(135, 2, 1, 0);
  {
    Event& stall = ev.Add(EventKind::kStall, 305);
    stall.step = 2;
    stall.chunk = 0;
    stall.contributors = {{1, "dense"}};
    stall.duration = absl::Microseconds(200);
    stall.detail = "step 2 chunk 0 waited 200us for: rank 1 dense";
  }
  {
    Event& v = ev.Add(EventKind::kViolation, 315);
    v.step = 2;
    v.chunk = 0;
    v.rank = 0;
    v.detail = "conflicting \"duplicate\"\n\ttab \x01 and bad utf-8 \xff end";
  }
  ev.Checkin(400, 5, 0, 0, "dense");  // outside [1, 2]
  return ev;
}

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct root;
  auto status = google::protobuf::util::JsonStringToMessage(json, &root);
  EXPECT_TRUE(status.ok()) << status << "\n" << json;
  return root;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kNull;
  auto it = s.fields().find(key);
  return it == s.fields().end() ? kNull : it->second;
}

std::string Str(const google::protobuf::Struct& s, const std::string& key) {
  return Field(s, key).string_value();
}
int64_t Num(const google::protobuf::Struct& s, const std::string& key) {
  return static_cast<int64_t>(Field(s, key).number_value());
}

// One exported record, with its track resolved to the track's name.
struct Rec {
  std::string ph;
  std::string name;
  std::string track;  // thread name; "" for process-wide
  int64_t ts = 0;
  int64_t dur = 0;
  bool open = false;

  friend bool operator==(const Rec& a, const Rec& b) {
    return std::tie(a.ph, a.name, a.track, a.ts, a.dur, a.open) ==
           std::tie(b.ph, b.name, b.track, b.ts, b.dur, b.open);
  }
  friend std::ostream& operator<<(std::ostream& os, const Rec& r) {
    return os << r.ph << " '" << r.name << "' on '" << r.track << "' ts=" << r.ts
              << " dur=" << r.dur << (r.open ? " open" : "");
  }
};

struct Trace {
  google::protobuf::Struct root;
  std::map<int64_t, std::string> thread_names;
  std::vector<Rec> records;                   // non-metadata, in output order
  std::vector<google::protobuf::Struct> raw;  // same order as records
};

Trace Load(const std::string& json) {
  Trace t;
  t.root = Parse(json);
  for (const auto& v : Field(t.root, "traceEvents").list_value().values()) {
    const google::protobuf::Struct& e = v.struct_value();
    if (Str(e, "ph") == "M") {
      if (Str(e, "name") == "thread_name") {
        t.thread_names[Num(e, "tid")] = Str(Field(e, "args").struct_value(), "name");
      }
      continue;
    }
    Rec r;
    r.ph = Str(e, "ph");
    r.name = Str(e, "name");
    if (e.fields().count("tid") > 0) r.track = t.thread_names.at(Num(e, "tid"));
    r.ts = Num(e, "ts");
    r.dur = Num(e, "dur");
    r.open = Field(Field(e, "args").struct_value(), "open").bool_value();
    t.records.push_back(r);
    t.raw.push_back(e);
  }
  return t;
}

std::vector<Rec> OfPhase(const Trace& t, const std::string& ph) {
  std::vector<Rec> out;
  for (const Rec& r : t.records) {
    if (r.ph == ph) out.push_back(r);
  }
  return out;
}

TEST(TraceExportTest, SpansFlowsAndInstantsOfAStepRange) {
  const Events ev = Scenario();
  absl::StatusOr<std::string> json = ExportChromeTrace(ev.all(), "j", 1, 2);
  ASSERT_TRUE(json.ok()) << json.status();
  Trace t = Load(*json);

  EXPECT_EQ(Str(t.root, "displayTimeUnit"), "ms");
  const google::protobuf::Struct& other = Field(t.root, "otherData").struct_value();
  EXPECT_EQ(Str(other, "job_id"), "j");
  EXPECT_EQ(Num(other, "first_step"), 1);
  EXPECT_EQ(Num(other, "last_step"), 2);
  // The origin is the first exported event (the check-in at +5us), not the join.
  EXPECT_EQ(static_cast<int64_t>(Field(other, "start_unix_micros").number_value()),
            absl::ToUnixMicros(kStart) + 5);

  // Overlapping chunks of one rank get a second lane; tracks are numbered coordinator first.
  EXPECT_EQ(t.thread_names, (std::map<int64_t, std::string>{{1, "coordinator"},
                                                            {2, "coordinator #2"},
                                                            {3, "rank 0"},
                                                            {4, "rank 0 #2"},
                                                            {5, "rank 1"},
                                                            {6, "rank 1 #2"}}));

  // Times relative to +5us.
  const std::vector<Rec> spans = OfPhase(t, "X");
  EXPECT_THAT(spans, UnorderedElementsAreArray(std::vector<Rec>{
                         // step 1, chunk 0: rank 0 from its first (dense) check-in to the release
                         {"X", "stage c0 s1", "rank 0", 0, 20, false},
                         {"X", "stage c0 s1", "rank 1", 20, 0, false},
                         {"X", "release c0 s1", "coordinator", 20, 30, false},
                         {"X", "sync c0 s1", "rank 0", 20, 10, false},
                         {"X", "sync c0 s1", "rank 1", 20, 30, false},
                         // step 1, chunk 1 overlaps chunk 0 on both ranks and the coordinator
                         {"X", "stage c1 s1", "rank 0 #2", 25, 15, false},
                         {"X", "stage c1 s1", "rank 1 #2", 40, 0, false},
                         {"X", "release c1 s1", "coordinator #2", 40, 30, false},
                         {"X", "sync c1 s1", "rank 0 #2", 40, 20, false},
                         {"X", "sync c1 s1", "rank 1 #2", 40, 30, false},
                         // step 2, chunk 0: rank 1 never staged; open until the last event (+315)
                         {"X", "stage c0 s2", "rank 0", 100, 210, true},
                         // step 2, chunk 1: released; rank 1 never reported SyncDone
                         {"X", "stage c1 s2", "rank 0 #2", 110, 10, false},
                         {"X", "stage c1 s2", "rank 1", 120, 0, false},
                         {"X", "release c1 s2", "coordinator", 120, 190, true},
                         {"X", "sync c1 s2", "rank 0 #2", 120, 10, false},
                         {"X", "sync c1 s2", "rank 1", 120, 190, true},
                     }));

  // One flow per release, from the last contributor's check-in to the release.
  EXPECT_THAT(OfPhase(t, "s"), ElementsAre(Rec{"s", "release c0 s1", "rank 1", 20, 0, false},
                                           Rec{"s", "release c1 s1", "rank 1 #2", 40, 0, false},
                                           Rec{"s", "release c1 s2", "rank 1", 120, 0, false}));
  EXPECT_THAT(OfPhase(t, "f"),
              ElementsAre(Rec{"f", "release c0 s1", "coordinator", 20, 0, false},
                          Rec{"f", "release c1 s1", "coordinator #2", 40, 0, false},
                          Rec{"f", "release c1 s2", "coordinator", 120, 0, false}));
  std::map<int64_t, std::vector<std::string>> flow_phases;
  for (const auto& e : t.raw) {
    const std::string ph = Str(e, "ph");
    if (ph != "s" && ph != "f") continue;
    EXPECT_EQ(Str(e, "cat"), "psync");
    if (ph == "f") {
      EXPECT_EQ(Str(e, "bp"), "e");
    }
    flow_phases[Num(e, "id")].push_back(ph);
  }
  EXPECT_EQ(flow_phases.size(), 3u);
  for (const auto& [id, phases] : flow_phases) EXPECT_THAT(phases, ElementsAre("s", "f"));

  // The stall is drawn on the missing rank's track; the violation on the rank it names.
  EXPECT_THAT(OfPhase(t, "i"), ElementsAre(Rec{"i", "stall c0 s2", "rank 1", 300, 0, false},
                                           Rec{"i", "violation c0 s2", "rank 0", 310, 0, false}));
  for (const auto& e : t.raw) {
    if (Str(e, "name") == "stall c0 s2") {
      const auto& args = Field(e, "args").struct_value();
      EXPECT_EQ(Str(args, "missing"), "rank 1 dense");
      EXPECT_EQ(Num(args, "waited_us"), 200);
    }
    if (Str(e, "name") == "violation c0 s2") {
      EXPECT_EQ(Str(Field(e, "args").struct_value(), "detail"),
                "conflicting \"duplicate\"\n\ttab \x01 and bad utf-8 \xEF\xBF\xBD end");
    }
    if (Str(e, "name") == "stage c0 s1" && Str(e, "ph") == "X" && Num(e, "dur") == 20) {
      EXPECT_EQ(Str(Field(e, "args").struct_value(), "checkins"), "dense +0us, expert +10us");
    }
    if (Str(e, "name") == "release c0 s1" && Str(e, "ph") == "X") {
      const auto& args = Field(e, "args").struct_value();
      EXPECT_EQ(Str(args, "last_contributor"), "rank 1 dense");
      EXPECT_EQ(Num(args, "sequence"), 1);
      EXPECT_EQ(Num(args, "wait_us"), 20);
    }
  }
  EXPECT_THAT(*json, ::testing::Not(HasSubstr("other-job")));
  EXPECT_THAT(*json, ::testing::Not(HasSubstr(" s5")));
}

// A viewer drops spans that overlap partially on one track: every pair on one track must be
// disjoint or nested.
// A node's merged records (one checkin, one sync_done naming several ranks) draw exactly what the
// same check-ins and SyncDones as one event per rank draw.
TEST(TraceExportTest, AMergedRecordDrawsWhatItsRanksEventsDraw) {
  Events split;
  split.Checkin(5, 1, 0, 0, "dense");
  split.Checkin(5, 1, 0, 1, "dense");
  split.Release(5, 1, 0, 1, "dense", 1, 0);
  split.SyncDone(20, 1, 0, 0);
  split.SyncDone(20, 1, 0, 1);
  split.Complete(20, 1, 0);
  Events merged;
  merged.Checkin(5, 1, 0, 0, "dense");
  merged.all_mutable().back().rank.reset();
  merged.all_mutable().back().ranks = {0, 1};
  merged.Release(5, 1, 0, 1, "dense", 1, 0);
  merged.SyncDone(20, 1, 0, 0);
  merged.all_mutable().back().rank.reset();
  merged.all_mutable().back().ranks = {0, 1};
  merged.Complete(20, 1, 0);
  absl::StatusOr<std::string> a = ExportChromeTrace(split.all(), "j", 1, 1);
  absl::StatusOr<std::string> b = ExportChromeTrace(merged.all(), "j", 1, 1);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(*a, HasSubstr("rank 1"));
  EXPECT_EQ(*b, *a);
}

TEST(TraceExportTest, SpansOnEachTrackAreProperlyNested) {
  Trace t = Load(*ExportChromeTrace(Scenario().all(), "j", 0, 10));
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> by_track;
  for (const Rec& r : OfPhase(t, "X")) by_track[r.track].push_back({r.ts, r.ts + r.dur});
  for (const auto& [track, spans] : by_track) {
    for (size_t i = 0; i < spans.size(); ++i) {
      for (size_t j = i + 1; j < spans.size(); ++j) {
        const auto [a0, a1] = spans[i];
        const auto [b0, b1] = spans[j];
        const bool disjoint = a1 <= b0 || b1 <= a0;
        const bool nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
        EXPECT_TRUE(disjoint || nested)
            << track << ": [" << a0 << "," << a1 << ") and [" << b0 << "," << b1 << ")";
      }
    }
  }
}

TEST(TraceExportTest, OutputIsSortedByTime) {
  Trace t = Load(*ExportChromeTrace(Scenario().all(), "j", 1, 2));
  for (size_t i = 1; i < t.records.size(); ++i) {
    EXPECT_LE(t.records[i - 1].ts, t.records[i].ts) << t.records[i];
  }
}

TEST(TraceExportTest, RangeSelectsSteps) {
  Trace t = Load(*ExportChromeTrace(Scenario().all(), "j", 2, 2));
  const std::vector<Rec> spans = OfPhase(t, "X");
  EXPECT_EQ(spans.size(), 6u);
  for (const Rec& r : spans) EXPECT_THAT(r.name, ::testing::EndsWith(" s2"));
  // The origin moves to the first step-2 event (+105us).
  EXPECT_EQ(
      static_cast<int64_t>(
          Field(Field(t.root, "otherData").struct_value(), "start_unix_micros").number_value()),
      absl::ToUnixMicros(kStart) + 105);
  EXPECT_EQ(OfPhase(t, "X").front().ts, 0);
}

TEST(TraceExportTest, EmptySelectionHasOnlyTheProcessName) {
  absl::StatusOr<std::string> json = ExportChromeTrace(Scenario().all(), "nobody", 0, 100);
  ASSERT_TRUE(json.ok());
  Trace t = Load(*json);
  EXPECT_TRUE(t.records.empty());
  EXPECT_TRUE(t.thread_names.empty());
  ASSERT_EQ(Field(t.root, "traceEvents").list_value().values_size(), 1);
  const auto& process = Field(t.root, "traceEvents").list_value().values(0).struct_value();
  EXPECT_EQ(Str(Field(process, "args").struct_value(), "name"), "job nobody");
}

TEST(TraceExportTest, FirstAfterLastIsInvalidArgument) {
  absl::StatusOr<std::string> json = ExportChromeTrace(Scenario().all(), "j", 3, 2);
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(), HasSubstr("first_step 3"));
}

TEST(TraceExportTest, JobIdIsEscaped) {
  Events ev;
  const std::string job = "a\"b\\c\n\x7f\xc3\xa9";  // ends with a valid two-byte sequence (e-acute)
  ev.Add(EventKind::kCheckin, 0, job).step = 0;
  absl::StatusOr<std::string> json = ExportChromeTrace(ev.all(), job, 0, 0);
  ASSERT_TRUE(json.ok());
  Trace t = Load(*json);
  const auto& process = Field(t.root, "traceEvents").list_value().values(0).struct_value();
  EXPECT_EQ(Str(Field(process, "args").struct_value(), "name"), "job " + job);
}

TEST(TraceExportTest, AppendJsonStringEscapes) {
  std::string out;
  AppendJsonString("q\"b\\n\n\x1f\x7f\xe2\x82\xac\xe2\x82 \xf4\x90\x80\x80", &out);
  EXPECT_EQ(
      out,
      "\"q\\\"b\\\\n\\n\\u001f\\u007f\xe2\x82\xac\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd\\ufffd\"");
}

}  // namespace
}  // namespace psync::observe
