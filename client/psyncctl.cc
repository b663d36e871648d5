#include "client/psyncctl.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/endpoints.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/version.h"

namespace psync::ctl {

// Handlers run under mu_, so that once SetHandler(nullptr) returns no handler runs any more (the
// handler may refer to a caller's local state).
void Interrupt::SetHandler(std::function<void()> handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
  if (fired_ && handler_) handler_();
}

void Interrupt::Fire() {
  absl::MutexLock lock(&mu_);
  fired_ = true;
  if (handler_) handler_();
}

bool Interrupt::fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

namespace {

constexpr int kOk = 0;
constexpr int kBad = 1;
constexpr int kUsage = 2;

constexpr char kUsageText[] =
    R"(psyncctl: ask a psync coordinator who is missing, who is slow, and whether every sync
happened exactly once.

Usage: psyncctl [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]

Commands:
  jobs [--state S,S]                 every job the coordinator holds: live ones, then the last
                                     ended or evicted ones; --state keeps only those states
                                     (FORMING, RUNNING, DEGRADED, ABORTED, ENDED, EVICTED)
  replicas                           coordinator replicas (--etcd): each one and the jobs it
                                     owns, every job's owner and epoch, failovers
  end-job JOB [--reason TEXT] [--token T]
                                     end the job: its ranks' sessions end, it moves to the
                                     history of finished jobs (state ENDED)
  status JOB [--ranks]               job state, per-chunk readiness (what each chunk waits for,
                                     grouped: "expert: 480 ranks on 60 nodes"), counters, audit
                                     totals, the slowest nodes; --ranks: up to four missing
                                     rank/optimizers per chunk instead, and no node table
  missing JOB [--ranks] [--step S --chunk C]
                                     who holds a chunk back, grouped by (chunk, step, what is
                                     missing): how many ranks on how many nodes, how long the
                                     chunk has waited, its stall deadline; the longest waiting
                                     first. --ranks: one row per rank; --step S --chunk C: that
                                     (step, chunk), one row per rank, and its latest arrivals
                                     (--ranks: every arrival)
  stragglers JOB [--top K]           the K slowest ranks by rolling lateness (default 10)
  audit JOB [--last N]               the sync audit of recent (step, chunk)s (default: all held)
  watch [JOB] [--kinds a,b] [--count N] [--replay]
                                     one line per event until interrupted (Ctrl-C) or N events;
                                     --replay first prints the events held in memory. Kinds: join,
                                     generation, checkin, duplicate, release, sync_done,
                                     sync_complete, skip_vote, step_skipped, violation, abort,
                                     rejected, stall, rank_lost, job_ended, job_evicted
  trace JOB --steps A:B -o FILE      Chrome trace JSON of steps A..B (open in ui.perfetto.dev);
                                     FILE "-" writes to stdout
  health [SERVICE]                   the gRPC health status (grpc.health.v1) of SERVICE (default
                                     "": the server as a whole; e.g. psync.v1.Coordinator)

Global flags:
  --target HOST:PORT   coordinator gRPC address (default localhost:7070); with coordinator
                       replicas any of them: a command about one job that reaches a replica
                       not owning it follows it to the owner (a line on stderr says so)
  --json               machine output: the answer as proto3 JSON
  --timeout SECONDS    deadline of each unary call (default 10)
  --help               this text
  --version            the release and the commit psyncctl was built from

Exit codes:
  0  ok
  1  the answer is bad: status (job ABORTED or DEGRADED, a rank lost, violations counted, or a
     chunk waiting past its deadline), missing (someone waited past the deadline), audit (a
     double release, checksum mismatch, early or repeated sync), watch (a violation, stall,
     rank_lost or abort event was printed), health (not SERVING)
  2  usage error, RPC failure (the gRPC code and message are printed), or unwritable output file
)";

// ---- arguments -----------------------------------------------------------------------------

struct FlagSpec {
  const char* name;
  bool takes_value;
  const char* command;  // nullptr: global
};

constexpr FlagSpec kFlags[] = {
    {"target", true, nullptr},   {"json", false, nullptr},    {"timeout", true, nullptr},
    {"help", false, nullptr},    {"step", true, "missing"},   {"chunk", true, "missing"},
    {"top", true, "stragglers"}, {"last", true, "audit"},     {"kinds", true, "watch"},
    {"count", true, "watch"},    {"replay", false, "watch"},  {"steps", true, "trace"},
    {"output", true, "trace"},   {"state", true, "jobs"},     {"reason", true, "end-job"},
    {"token", true, "end-job"},  {"version", false, nullptr}, {"ranks", false, "status,missing"},
};

// True when flag `spec` applies to `command` (its commands are a comma-separated list).
bool AppliesTo(const FlagSpec& spec, const std::string& command) {
  for (absl::string_view c : absl::StrSplit(spec.command, ',')) {
    if (c == command) return true;
  }
  return false;
}

const FlagSpec* FindFlag(absl::string_view name) {
  for (const FlagSpec& f : kFlags) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

struct Args {
  std::string target = "localhost:7070";
  bool json = false;
  bool help = false;
  bool version = false;
  absl::Duration timeout = absl::Seconds(10);
  std::string command;
  std::vector<std::string> positional;       // after the command
  std::map<std::string, std::string> flags;  // command flags as given
};

struct UsageError {
  std::string message;
};

std::optional<UsageError> Parse(const std::vector<std::string>& argv, Args* args) {
  std::vector<std::string> words;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-') {
      words.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name;
    std::optional<std::string> value;
    if (a == "-o") {
      name = "output";
    } else if (a == "-h") {
      name = "help";
    } else if (absl::StartsWith(a, "--")) {
      name = a.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    } else {
      return UsageError{absl::StrCat("unknown flag '", a, "'")};
    }
    const FlagSpec* spec = FindFlag(name);
    if (spec == nullptr) return UsageError{absl::StrCat("unknown flag '--", name, "'")};
    if (spec->takes_value && !value) {
      if (i + 1 >= argv.size()) return UsageError{absl::StrCat("flag --", name, " needs a value")};
      value = argv[++i];
    }
    if (!spec->takes_value && value) {
      return UsageError{absl::StrCat("flag --", name, " takes no value")};
    }
    if (name == "target") {
      if (value->empty()) return UsageError{"--target must not be empty"};
      args->target = *value;
    } else if (name == "json") {
      args->json = true;
    } else if (name == "help") {
      args->help = true;
    } else if (name == "version") {
      args->version = true;
    } else if (name == "timeout") {
      double seconds = 0;
      if (!absl::SimpleAtod(*value, &seconds) || !(seconds > 0)) {
        return UsageError{
            absl::StrCat("--timeout must be a positive number of seconds (got '", *value, "')")};
      }
      args->timeout = absl::Seconds(seconds);
    } else {
      args->flags[name] = value.value_or("true");
    }
  }
  if (!words.empty()) {
    args->command = words.front();
    args->positional.assign(words.begin() + 1, words.end());
  }
  for (const auto& [name, value] : args->flags) {
    const FlagSpec* spec = FindFlag(name);
    if (!AppliesTo(*spec, args->command)) {
      return UsageError{absl::StrCat(
          "flag --", name, " does not apply to ",
          args->command.empty() ? "no command" : "'" + args->command + "'", " (it belongs to '",
          absl::StrJoin(absl::StrSplit(spec->command, ','), "' or '"), "')")};
    }
  }
  return std::nullopt;
}

std::optional<UsageError> FlagUint(const Args& args, const std::string& name, uint64_t* out,
                                   bool* present = nullptr) {
  auto it = args.flags.find(name);
  if (present != nullptr) *present = it != args.flags.end();
  if (it == args.flags.end()) return std::nullopt;
  if (!absl::SimpleAtoi(it->second, out)) {
    return UsageError{
        absl::StrCat("--", name, " must be a non-negative integer (got '", it->second, "')")};
  }
  return std::nullopt;
}

// ---- output helpers --------------------------------------------------------------------------

// The code's canonical name ("FAILED_PRECONDITION"), as absl::StatusCodeToString spells it (gRPC
// and Abseil share the numbering); "CODE_<n>" for a number outside it.
std::string CodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  if (name.empty()) return absl::StrCat("CODE_", static_cast<int>(code));
  return name;
}

int RpcFailure(std::ostream& err, const std::string& rpc, const std::string& target,
               const grpc::Status& status) {
  err << "psyncctl: " << rpc << " to " << target << " failed: " << CodeName(status.error_code())
      << ": " << status.error_message() << "\n";
  return kUsage;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Only fails for messages with unresolvable Any fields; psync.v1 has none.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

std::string Micros(int64_t us) {
  if (us < 0) return absl::StrCat("-", Micros(-us));
  if (us >= 60'000'000) return absl::StrFormat("%.1fmin", us / 60e6);
  if (us >= 1'000'000) return absl::StrFormat("%.2fs", us / 1e6);
  if (us >= 1'000) return absl::StrFormat("%.1fms", us / 1e3);
  return absl::StrCat(us, "us");
}

std::string Seconds(double s) { return Micros(static_cast<int64_t>(s * 1e6)); }

// Prints `rows` under `header` with columns separated by two spaces; `align` has one letter per
// column: 'l' (left) or 'r' (right). No trailing spaces.
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows, const std::string& align) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      line += (c < align.size() && align[c] == 'r') ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  print(header);
  for (const auto& row : rows) print(row);
}

std::string Who(const v1::Contributor& c) { return absl::StrCat(c.rank(), "/", c.optimizer()); }

// "0-7,9,12-15": at most 6 runs, then "...".
std::string RunsText(const google::protobuf::RepeatedPtrField<v1::RankRange>& runs,
                     bool truncated) {
  constexpr int kRunsShown = 6;
  std::vector<std::string> parts;
  for (int i = 0; i < runs.size() && i < kRunsShown; ++i) {
    const v1::RankRange& r = runs[i];
    parts.push_back(r.first() == r.last() ? absl::StrCat(r.first())
                                          : absl::StrCat(r.first(), "-", r.last()));
  }
  if (truncated || runs.size() > kRunsShown) parts.push_back("...");
  return absl::StrJoin(parts, ",");
}

// "rank 5 (node-0)", "ranks 0-7,9 (node-0, node-1)", "480 ranks on 60 nodes (node-0, node-1,
// node-2 +57)".
std::string GroupWho(const v1::MissingGroup& g) {
  constexpr int kNodesShown = 3;
  std::vector<std::string> nodes;
  for (int i = 0; i < g.nodes_size() && i < kNodesShown; ++i) nodes.push_back(g.nodes(i));
  std::string where = absl::StrJoin(nodes, ", ");
  if (g.num_nodes() > nodes.size()) absl::StrAppend(&where, " +", g.num_nodes() - nodes.size());
  if (g.num_ranks() == 1 && g.ranks_size() == 1) {
    return absl::StrCat("rank ", g.ranks(0).first(), " (", where, ")");
  }
  if (g.ranks_size() <= 3 && !g.ranks_truncated()) {
    return absl::StrCat("ranks ", RunsText(g.ranks(), false), " (", where, ")");
  }
  return absl::StrCat(g.num_ranks(), " ranks on ", g.num_nodes(), " nodes (", where, ")");
}

// The lost ranks, at most 16 then "+N more"; "none".
std::string LostRanksText(const v1::JobStatus& status) {
  constexpr int kShown = 16;
  if (status.lost_ranks().empty()) return "none";
  std::vector<uint32_t> shown(
      status.lost_ranks().begin(),
      status.lost_ranks().begin() + std::min(kShown, status.lost_ranks_size()));
  std::string text = absl::StrJoin(shown, ",");
  if (status.lost_ranks_size() > kShown) {
    absl::StrAppend(&text, " +", status.lost_ranks_size() - kShown, " more");
  }
  return text;
}

// True when a chunk of a JobStatus waits past its stall deadline (for contributors or SyncDone).
bool Late(const v1::ChunkStatus& c) {
  const bool waiting = c.state() == "WAITING" || c.state() == "RELEASED";
  return waiting && c.deadline_micros() > 0 && c.waiting_micros() > c.deadline_micros();
}

// ---- the commands ----------------------------------------------------------------------------

class Command {
 public:
  Command(const Args& args, std::ostream& out, std::ostream& err, Interrupt* interrupt)
      : args_(args), out_(out), err_(err), interrupt_(interrupt) {
    Connect(args.target);
  }

  int Jobs() {
    v1::ListJobsRequest request;
    if (auto it = args_.flags.find("state"); it != args_.flags.end()) {
      for (absl::string_view state : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
        request.add_states(std::string(absl::StripAsciiWhitespace(state)));
      }
    }
    v1::ListJobsResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    if (auto s = stub_->ListJobs(&context, request, &response); !s.ok()) {
      return RpcFailure(err_, "ListJobs", target_, s);
    }
    if (args_.json) {
      out_ << ToJson(response) << "\n";
      return kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const v1::JobSummary& j : response.jobs()) {
      rows.push_back({j.job_id(), j.state(), absl::StrCat(j.generation()),
                      absl::StrCat(j.ranks_joined(), "/", j.world_size()),
                      absl::StrCat(j.min_rank_step()), j.end_reason()});
    }
    PrintTable(out_, {"JOB", "STATE", "GEN", "RANKS", "MIN_STEP", "ENDED_BECAUSE"}, rows, "llrrrl");
    return kOk;
  }

  int Health(const std::string& service) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    if (auto s = grpc::health::v1::Health::NewStub(channel_)->Check(&context, request, &response);
        !s.ok()) {
      return RpcFailure(err_, "Health.Check", target_, s);
    }
    if (args_.json) {
      out_ << ToJson(response) << "\n";
    } else {
      out_ << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
    }
    return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kOk : kBad;
  }

  // The coordinator replicas in etcd, the owner of every job, and the answering replica's
  // failover counters (ListReplicas).
  int Replicas() {
    v1::ListReplicasResponse response;
    grpc::ClientContext context;
    SetDeadline(&context);
    if (auto s = stub_->ListReplicas(&context, v1::ListReplicasRequest(), &response); !s.ok()) {
      return RpcFailure(err_, "ListReplicas", target_, s);
    }
    if (args_.json) {
      out_ << ToJson(response) << "\n";
      return kOk;
    }
    if (response.self().empty()) {
      out_ << "a single coordinator (no --etcd): it serves every job\n";
      return kOk;
    }
    std::vector<std::vector<std::string>> replicas;
    for (const v1::Replica& r : response.replicas()) {
      replicas.push_back({r.address(), absl::StrCat(r.jobs_owned()),
                          r.address() == response.self() ? "answered" : ""});
    }
    PrintTable(out_, {"REPLICA", "JOBS", ""}, replicas, "lrl");
    out_ << "\n";
    std::vector<std::vector<std::string>> owners;
    for (const v1::JobOwner& o : response.owners()) {
      owners.push_back({o.job_id(), o.owner(), absl::StrCat(o.epoch())});
    }
    PrintTable(out_, {"JOB", "OWNER", "EPOCH"}, owners, "llr");
    out_ << "\n"
         << response.self() << ": took over " << response.takeovers() << " jobs, lost "
         << response.jobs_lost() << "\n";
    return kOk;
  }

  int EndJob(const std::string& job) {
    v1::EndJobRequest request;
    request.set_job_id(job);
    if (auto it = args_.flags.find("reason"); it != args_.flags.end()) {
      request.set_reason(it->second);
    }
    if (auto it = args_.flags.find("token"); it != args_.flags.end()) request.set_token(it->second);
    v1::EndJobResponse response;
    if (auto s = AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
          return stub->EndJob(context, request, &response);
        });
        !s.ok()) {
      return RpcFailure(err_, "EndJob", target_, s);
    }
    if (args_.json) {
      out_ << ToJson(response) << "\n";
      return kOk;
    }
    out_ << "job " << job << (response.already_ended() ? " had already ended: " : " ended: ")
         << response.status().end_reason() << "\n";
    return kOk;
  }

  // The job's header lines, then (`nodes`: "" for none) a line about its nodes.
  void PrintSummary(const v1::JobStatus& status, const std::string& nodes) {
    const v1::JobCounters& k = status.counters();
    const v1::AuditTotals& a = status.audit();
    std::vector<std::vector<std::string>> summary = {
        {"job", status.job_id()},
        {"state", absl::StrCat(status.state(), status.abort_reason().empty() ? "" : ": ",
                               status.abort_reason(), status.end_reason().empty() ? "" : ": ",
                               status.end_reason())},
        {"generation", absl::StrCat(status.generation())},
        {"ranks", absl::StrCat(status.ranks_joined(), "/", status.world_size(), " joined, ",
                               status.sessions_connected(), " connected")},
        {"min step", absl::StrCat(status.min_rank_step())},
        {"lost ranks", LostRanksText(status)},
        {"counters",
         absl::StrCat("checkins=", k.checkins(), " duplicates=", k.duplicate_checkins(),
                      " releases=", k.releases(), " syncs_done=", k.syncs_done(),
                      " skipped_steps=", k.skipped_steps(), " violations=", k.violations(),
                      " rejected=", k.rejected(), " stalls=", k.stalls())},
        {"audit", absl::StrCat("released=", a.released(), " complete=", a.complete(),
                               " double_releases=", a.double_releases(), " checksum_mismatches=",
                               a.checksum_mismatches(), " early_syncs=", a.early_syncs(),
                               " repeated_syncs=", a.repeated_syncs(), " resumed=", a.resumed())},
    };
    if (!nodes.empty()) summary.insert(summary.begin() + 4, {"nodes", nodes});
    for (const auto& row : summary) {
      out_ << absl::StrFormat("%-11s %s\n", row[0], row[1]);
    }
    out_ << "\n";
  }

  static bool StatusIsBad(const v1::JobStatus& status) {
    bool bad = status.state() == "ABORTED" || status.state() == "DEGRADED" ||
               status.lost_ranks_size() > 0 || status.counters().violations() > 0;
    for (const v1::ChunkStatus& c : status.chunks()) bad = bad || Late(c);
    return bad;
  }

  // By default, what each chunk waits for grouped, and the slowest nodes (GetJobOverview);
  // --ranks or --json: the JobStatus, each chunk's missing contributors one by one.
  int Status(const std::string& job) {
    if (args_.json || args_.flags.count("ranks") > 0) return StatusByRank(job);
    v1::JobOverview overview;
    if (auto s = GetJobOverview(job, /*node_limit=*/1, &overview); !s.ok()) {
      return RpcFailure(err_, "GetJobOverview", target_, s);
    }
    const v1::JobStatus& status = overview.status();
    PrintSummary(status, absl::StrCat(overview.num_nodes(), ", ", overview.nodes_holding_back(),
                                      " holding a chunk back"));
    std::vector<std::vector<std::string>> rows;
    for (const v1::ChunkStatus& c : status.chunks()) {
      std::vector<std::string> waiting_for;
      for (const v1::MissingGroup& g : overview.missing()) {
        if (g.chunk() != c.chunk()) continue;
        waiting_for.push_back(
            absl::StrCat(g.what() == "sync_done" ? "SyncDone" : g.what(), ": ", GroupWho(g)));
      }
      rows.push_back({absl::StrCat(c.chunk()), absl::StrCat(c.step()), c.state(),
                      absl::StrCat(c.staged_count(), "/", c.staged_count() + c.missing_count()),
                      c.state() == "IDLE" ? "-" : Micros(c.waiting_micros()),
                      Micros(c.deadline_micros()), Late(c) ? "LATE" : "",
                      absl::StrJoin(waiting_for, "; ")});
    }
    PrintTable(out_, {"CHUNK", "STEP", "STATE", "STAGED", "WAITING", "DEADLINE", "", "WAITING_FOR"},
               rows, "rrlrrrll");
    if (overview.slowest_nodes_size() > 0) {
      out_ << "\n";
      std::vector<std::vector<std::string>> slow;
      for (int i = 0; i < overview.slowest_nodes_size() && i < kSlowestNodesShown; ++i) {
        const v1::NodeOverview& n = overview.slowest_nodes(i);
        slow.push_back({n.node(), RunsText(n.ranks(), false), absl::StrCat(n.slowest_rank()),
                        Seconds(n.straggler_score_seconds()),
                        absl::StrCat(n.missing() + n.sync_pending())});
      }
      PrintTable(out_, {"SLOWEST_NODE", "RANKS", "SLOWEST_RANK", "SCORE", "HOLDING_BACK"}, slow,
                 "llrrr");
    }
    return StatusIsBad(status) ? kBad : kOk;
  }

  int StatusByRank(const std::string& job) {
    v1::JobStatus status;
    if (auto s = GetJobStatus(job, &status); !s.ok()) {
      return RpcFailure(err_, "GetJobStatus", target_, s);
    }
    const bool bad = StatusIsBad(status);
    if (args_.json) {
      out_ << ToJson(status) << "\n";
      return bad ? kBad : kOk;
    }
    PrintSummary(status, "");
    std::vector<std::vector<std::string>> rows;
    for (const v1::ChunkStatus& c : status.chunks()) {
      std::vector<std::string> missing;
      for (const v1::Contributor& who : c.missing()) missing.push_back(Who(who));
      std::vector<std::string> pending;
      for (uint32_t r : c.sync_pending_ranks()) pending.push_back(absl::StrCat(r));
      std::string waiting_for;
      if (c.state() == "WAITING") waiting_for = ListSome(missing);
      if (c.state() == "RELEASED") waiting_for = "SyncDone: " + ListSome(pending);
      rows.push_back({absl::StrCat(c.chunk()), absl::StrCat(c.step()), c.state(),
                      absl::StrCat(c.staged_size(), "/", c.staged_size() + c.missing_size()),
                      c.state() == "IDLE" ? "-" : Micros(c.waiting_micros()),
                      Micros(c.deadline_micros()), Late(c) ? "LATE" : "", waiting_for});
    }
    PrintTable(out_, {"CHUNK", "STEP", "STATE", "STAGED", "WAITING", "DEADLINE", "", "WAITING_FOR"},
               rows, "rrlrrrll");
    return bad ? kBad : kOk;
  }

  int Missing(const std::string& job) {
    uint64_t step = 0;
    uint64_t chunk = 0;
    bool has_step = false;
    bool has_chunk = false;
    if (auto e = FlagUint(args_, "step", &step, &has_step)) return Usage(e->message);
    if (auto e = FlagUint(args_, "chunk", &chunk, &has_chunk)) return Usage(e->message);
    if (has_step && !has_chunk) return Usage("--step needs --chunk");
    if (!has_step && args_.flags.count("ranks") == 0) {
      return MissingGrouped(job, has_chunk, static_cast<uint32_t>(chunk));
    }

    std::vector<v1::ChunkStatus> chunks;
    if (has_step) {
      v1::GetChunkStatusRequest request;
      request.set_job_id(job);
      request.set_step(step);
      request.set_chunk(static_cast<uint32_t>(chunk));
      v1::ChunkStatus status;
      if (auto s = AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
            return stub->GetChunkStatus(context, request, &status);
          });
          !s.ok()) {
        return RpcFailure(err_, "GetChunkStatus", target_, s);
      }
      chunks.push_back(std::move(status));
    } else {
      v1::JobStatus status;
      if (auto s = GetJobStatus(job, &status); !s.ok()) {
        return RpcFailure(err_, "GetJobStatus", target_, s);
      }
      if (has_chunk && chunk >= status.chunks_size()) {
        return Usage(
            absl::StrCat("--chunk ", chunk, " out of range [0, ", status.chunks_size(), ")"));
      }
      for (const v1::ChunkStatus& c : status.chunks()) {
        if (has_chunk && c.chunk() != chunk) continue;
        chunks.push_back(c);
      }
    }

    // One row per missing contributor of a WAITING (or, for --step, IDLE) chunk and per rank
    // without SyncDone of a RELEASED chunk.
    struct Row {
      uint32_t chunk;
      uint64_t step;
      uint32_t rank;
      std::string what;
      int64_t waiting;
      int64_t deadline;
      bool late;
    };
    std::vector<Row> rows;
    bool bad = false;
    for (const v1::ChunkStatus& c : chunks) {
      const bool late = Late(c);
      const bool waiting = c.state() == "WAITING" || (has_step && c.state() == "IDLE");
      if (waiting) {
        for (const v1::Contributor& who : c.missing()) {
          rows.push_back({c.chunk(), c.step(), who.rank(), "stage " + who.optimizer(),
                          c.waiting_micros(), c.deadline_micros(), late});
        }
      }
      if (c.state() == "RELEASED") {
        for (uint32_t r : c.sync_pending_ranks()) {
          rows.push_back(
              {c.chunk(), c.step(), r, "sync_done", c.waiting_micros(), c.deadline_micros(), late});
        }
      }
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return std::tie(a.chunk, a.step, a.rank, a.what) < std::tie(b.chunk, b.step, b.rank, b.what);
    });
    for (const Row& r : rows) bad = bad || r.late;

    if (args_.json) {
      std::vector<std::string> parts;
      for (const v1::ChunkStatus& c : chunks) parts.push_back(ToJson(c));
      out_ << "{\"chunks\":[" << absl::StrJoin(parts, ",") << "]}\n";
      return bad ? kBad : kOk;
    }
    if (rows.empty()) {
      out_ << "nobody is missing";
      if (has_step)
        out_ << " in step " << step << " chunk " << chunk << " (" << chunks[0].state() << ")";
      out_ << "\n";
    } else {
      std::vector<std::vector<std::string>> table;
      for (const Row& r : rows) {
        table.push_back({absl::StrCat(r.chunk), absl::StrCat(r.step), absl::StrCat(r.rank), r.what,
                         Micros(r.waiting), Micros(r.deadline), r.late ? "LATE" : ""});
      }
      PrintTable(out_, {"CHUNK", "STEP", "RANK", "MISSING", "WAITING", "DEADLINE", ""}, table,
                 "rrrlrrl");
    }
    if (has_step && chunks[0].staged_size() > 0) {
      out_ << "\n";
      std::vector<std::pair<int64_t, const v1::Contributor*>> staged;
      for (int i = 0; i < chunks[0].staged_size(); ++i) {
        const int64_t after =
            i < chunks[0].staged_after_micros_size() ? chunks[0].staged_after_micros(i) : 0;
        staged.push_back({after, &chunks[0].staged(i)});
      }
      std::stable_sort(staged.begin(), staged.end(), [](const auto& a, const auto& b) {
        return std::make_tuple(a.first, a.second->rank(), a.second->optimizer()) <
               std::make_tuple(b.first, b.second->rank(), b.second->optimizer());
      });
      // Without --ranks, only the latest arrivals: where a chunk's wait went.
      const size_t skipped = args_.flags.count("ranks") > 0 || staged.size() <= kLatestArrivals
                                 ? 0
                                 : staged.size() - kLatestArrivals;
      if (skipped > 0) {
        out_ << skipped << " earlier arrivals not shown (--ranks shows every one)\n";
      }
      std::vector<std::vector<std::string>> table;
      for (size_t i = skipped; i < staged.size(); ++i) {
        table.push_back({absl::StrCat(staged[i].second->rank()), staged[i].second->optimizer(),
                         "+" + Micros(staged[i].first)});
      }
      PrintTable(out_, {"STAGED_RANK", "OPTIMIZER", "AFTER_FIRST"}, table, "rlr");
    }
    return bad ? kBad : kOk;
  }

  // Who holds each chunk back, one row per (chunk, step, what) (GetJobOverview's missing
  // groups), the longest waiting first; `only_chunk`: that chunk's rows only.
  int MissingGrouped(const std::string& job, bool has_chunk, uint32_t only_chunk) {
    v1::JobOverview overview;
    if (auto s = GetJobOverview(job, /*node_limit=*/1, &overview); !s.ok()) {
      return RpcFailure(err_, "GetJobOverview", target_, s);
    }
    if (has_chunk && only_chunk >= overview.status().chunks_size()) {
      return Usage(absl::StrCat("--chunk ", only_chunk, " out of range [0, ",
                                overview.status().chunks_size(), ")"));
    }
    std::vector<const v1::MissingGroup*> groups;
    bool bad = false;
    for (const v1::MissingGroup& g : overview.missing()) {
      if (has_chunk && g.chunk() != only_chunk) continue;
      groups.push_back(&g);
      bad = bad || g.late();
    }
    if (args_.json) {
      std::vector<std::string> parts;
      for (const v1::MissingGroup* g : groups) parts.push_back(ToJson(*g));
      out_ << "{\"groups\":[" << absl::StrJoin(parts, ",") << "]}\n";
      return bad ? kBad : kOk;
    }
    if (groups.empty()) {
      out_ << "nobody is missing\n";
      return kOk;
    }
    std::vector<std::vector<std::string>> table;
    for (const v1::MissingGroup* g : groups) {
      table.push_back({absl::StrCat(g->chunk()), absl::StrCat(g->step()),
                       g->what() == "sync_done" ? "sync_done" : "stage " + g->what(),
                       absl::StrCat(g->num_ranks()), absl::StrCat(g->num_nodes()),
                       Micros(g->waiting_micros()), Micros(g->deadline_micros()),
                       g->late() ? "LATE" : "", GroupWho(*g)});
    }
    PrintTable(out_,
               {"CHUNK", "STEP", "MISSING", "RANKS", "NODES", "WAITING", "DEADLINE", "", "WHO"},
               table, "rrlrrrrll");
    if (overview.missing_groups() > static_cast<uint32_t>(overview.missing_size())) {
      out_ << "+" << overview.missing_groups() - overview.missing_size()
           << " more groups (--ranks lists every rank)\n";
    }
    return bad ? kBad : kOk;
  }

  int Stragglers(const std::string& job) {
    uint64_t top = 10;
    if (auto e = FlagUint(args_, "top", &top)) return Usage(e->message);
    v1::JobStatus status;
    if (auto s = GetJobStatus(job, &status); !s.ok()) {
      return RpcFailure(err_, "GetJobStatus", target_, s);
    }
    std::vector<v1::StragglerScore> scores(status.stragglers().begin(), status.stragglers().end());
    std::stable_sort(scores.begin(), scores.end(),
                     [](const v1::StragglerScore& a, const v1::StragglerScore& b) {
                       if (a.score_seconds() != b.score_seconds()) {
                         return a.score_seconds() > b.score_seconds();
                       }
                       return a.rank() < b.rank();
                     });
    if (scores.size() > top) scores.resize(top);
    if (args_.json) {
      std::vector<std::string> parts;
      for (const v1::StragglerScore& s : scores) parts.push_back(ToJson(s));
      out_ << "{\"stragglers\":[" << absl::StrJoin(parts, ",") << "]}\n";
      return kOk;
    }
    if (scores.empty()) {
      out_ << "no straggler scores yet (no chunk released)\n";
      return kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const v1::StragglerScore& s : scores) {
      rows.push_back({absl::StrCat(s.rank()), Seconds(s.score_seconds()), Seconds(s.last_seconds()),
                      absl::StrCat(s.samples()), absl::StrCat(s.times_last())});
    }
    PrintTable(out_, {"RANK", "SCORE", "LAST", "SAMPLES", "TIMES_LAST"}, rows, "rrrrr");
    return kOk;
  }

  static std::string TotalsText(const v1::AuditTotals& t) {
    return absl::StrCat("released=", t.released(), " complete=", t.complete(),
                        " double_releases=", t.double_releases(),
                        " checksum_mismatches=", t.checksum_mismatches(),
                        " early_syncs=", t.early_syncs(), " repeated_syncs=", t.repeated_syncs(),
                        " resumed=", t.resumed());
  }

  int Audit(const std::string& job) {
    uint64_t last = 0;
    bool has_last = false;
    if (auto e = FlagUint(args_, "last", &last, &has_last)) return Usage(e->message);
    v1::GetAuditRequest request;
    request.set_job_id(job);
    v1::GetAuditResponse response;
    if (auto s = AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
          return stub->GetAudit(context, request, &response);
        });
        !s.ok()) {
      return RpcFailure(err_, "GetAudit", target_, s);
    }
    // The whole job's totals: this owner's and, after a move, its earlier owners'.
    const v1::AuditTotals& t = response.job_totals();
    bool bad = t.double_releases() > 0 || t.checksum_mismatches() > 0 || t.early_syncs() > 0 ||
               t.repeated_syncs() > 0;
    for (const v1::SyncAuditRecord& r : response.records()) bad = bad || r.releases() > 1;
    if (has_last && response.records_size() > static_cast<int>(last)) {
      response.mutable_records()->DeleteSubrange(0,
                                                 response.records_size() - static_cast<int>(last));
    }
    if (args_.json) {
      out_ << ToJson(response) << "\n";
      return bad ? kBad : kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const v1::SyncAuditRecord& r : response.records()) {
      std::vector<std::string> problems;
      if (r.releases() != 1) problems.push_back(absl::StrCat("released ", r.releases(), "x"));
      if (r.checksum_mismatch()) problems.push_back("checksum mismatch");
      if (r.early_syncs() > 0) problems.push_back(absl::StrCat(r.early_syncs(), " early"));
      if (r.repeated_syncs() > 0) problems.push_back(absl::StrCat(r.repeated_syncs(), " repeated"));
      rows.push_back({absl::StrCat(r.generation()), absl::StrCat(r.step()), absl::StrCat(r.chunk()),
                      absl::StrCat(r.sequence()), absl::StrCat(r.releases()),
                      absl::StrCat(r.syncs_done()), r.complete() ? "yes" : "no",
                      Micros(r.wait_micros()), r.complete() ? Micros(r.sync_micros()) : "-",
                      absl::StrJoin(problems, ", ")});
    }
    PrintTable(out_,
               {"GEN", "STEP", "CHUNK", "SEQ", "RELEASES", "SYNCS_DONE", "COMPLETE", "WAIT", "SYNC",
                "PROBLEMS"},
               rows, "rrrrrrlrrl");
    out_ << "\n"
         << "totals: " << TotalsText(response.totals()) << "\n";
    if (response.earlier_owners_size() > 0) {
      for (const v1::OwnerAudit& o : response.earlier_owners()) {
        out_ << "earlier owner " << o.replica() << " (epoch " << o.epoch()
             << "): " << TotalsText(o.totals()) << "\n";
      }
      out_ << "job totals: " << TotalsText(t) << "\n";
    }
    return bad ? kBad : kOk;
  }

  int Watch(const std::string& job) {
    uint64_t count = 0;
    bool has_count = false;
    if (auto e = FlagUint(args_, "count", &count, &has_count)) return Usage(e->message);
    if (has_count && count == 0) return Usage("--count must be at least 1");
    v1::WatchEventsRequest request;
    request.set_job_id(job);
    request.set_replay(args_.flags.count("replay") > 0);
    if (auto it = args_.flags.find("kinds"); it != args_.flags.end()) {
      for (absl::string_view kind : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
        request.add_kinds(std::string(absl::StripAsciiWhitespace(kind)));
      }
    }
    grpc::ClientContext context;
    if (interrupt_ != nullptr) interrupt_->SetHandler([&context] { context.TryCancel(); });
    std::unique_ptr<grpc::ClientReader<v1::Event>> reader = stub_->WatchEvents(&context, request);
    uint64_t seen = 0;
    bool bad = false;
    v1::Event event;
    while (reader->Read(&event)) {
      bad = bad || event.kind() == "violation" || event.kind() == "stall" ||
            event.kind() == "rank_lost" || event.kind() == "abort";
      if (args_.json) {
        out_ << ToJson(event) << std::endl;
      } else {
        out_ << EventLine(event) << std::endl;
      }
      if (has_count && ++seen >= count) {
        context.TryCancel();
        break;
      }
    }
    grpc::Status status = reader->Finish();
    if (interrupt_ != nullptr) interrupt_->SetHandler(nullptr);
    const bool stopped =
        (has_count && seen >= count) || (interrupt_ != nullptr && interrupt_->fired());
    if (!status.ok() && !(stopped && status.error_code() == grpc::StatusCode::CANCELLED)) {
      return RpcFailure(err_, "WatchEvents", target_, status);
    }
    return bad ? kBad : kOk;
  }

  int Trace(const std::string& job) {
    auto it = args_.flags.find("steps");
    if (it == args_.flags.end()) return Usage("trace needs --steps A:B");
    std::vector<std::string> range = absl::StrSplit(it->second, ':');
    uint64_t first = 0;
    uint64_t last = 0;
    if (range.size() != 2 || !absl::SimpleAtoi(range[0], &first) ||
        !absl::SimpleAtoi(range[1], &last)) {
      return Usage(
          absl::StrCat("--steps must be A:B with non-negative integers (got '", it->second, "')"));
    }
    if (first > last) return Usage(absl::StrCat("--steps ", it->second, ": A must not exceed B"));
    auto output = args_.flags.find("output");
    if (output == args_.flags.end() || output->second.empty()) {
      return Usage("trace needs -o FILE (\"-\" for stdout)");
    }
    v1::GetTraceRequest request;
    request.set_job_id(job);
    request.set_first_step(first);
    request.set_last_step(last);
    v1::GetTraceResponse response;
    if (auto s = AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
          return stub->GetTrace(context, request, &response);
        });
        !s.ok()) {
      return RpcFailure(err_, "GetTrace", target_, s);
    }
    const std::string& path = output->second;
    if (path == "-") {
      out_ << response.trace_json();
      return kOk;
    }
    {
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file << response.trace_json();
      file.close();
      if (!file) {
        err_ << "psyncctl: cannot write " << path << "\n";
        return kUsage;
      }
    }
    if (args_.json) {
      out_ << "{\"path\":" << JsonString(path) << ",\"bytes\":" << response.trace_json().size()
           << "}\n";
    } else {
      out_ << "wrote " << response.trace_json().size() << " bytes to " << path << " (steps "
           << first << ".." << last << "); open it in ui.perfetto.dev or chrome://tracing\n";
    }
    return kOk;
  }

 private:
  void SetDeadline(grpc::ClientContext* context) const {
    context->set_deadline(absl::ToChronoTime(absl::Now() + args_.timeout));
  }

  grpc::Status GetJobOverview(const std::string& job, uint32_t node_limit,
                              v1::JobOverview* overview) {
    v1::GetJobOverviewRequest request;
    request.set_job_id(job);
    request.set_node_limit(node_limit);
    request.set_missing_limit(kMaxMissingGroups);
    return AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
      return stub->GetJobOverview(context, request, overview);
    });
  }

  grpc::Status GetJobStatus(const std::string& job, v1::JobStatus* status) {
    v1::GetJobStatusRequest request;
    request.set_job_id(job);
    return AtOwner([&](v1::Coordinator::Stub* stub, grpc::ClientContext* context) {
      return stub->GetJobStatus(context, request, status);
    });
  }

  void Connect(const std::string& target) {
    target_ = target;
    channel_ = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    stub_ = v1::Coordinator::NewStub(channel_);
  }

  // Runs `rpc` (a unary call about one job) at the current target. When a coordinator replica
  // answers that another replica owns the job (UNAVAILABLE with an OwnerRedirect), it says so on
  // stderr and asks the owner instead, at most kMaxRedirects times; later commands of this
  // invocation stay there, and failures name the replica that answered.
  template <typename Rpc>
  grpc::Status AtOwner(Rpc rpc) {
    for (int hop = 0;; ++hop) {
      grpc::ClientContext context;
      SetDeadline(&context);
      const grpc::Status status = rpc(stub_.get(), &context);
      const std::optional<v1::OwnerRedirect> redirect = RedirectIn(status);
      if (hop == kMaxRedirects || !redirect.has_value() || redirect->owner().empty() ||
          redirect->owner() == target_) {
        return status;
      }
      err_ << "psyncctl: " << target_ << " does not serve the job; its owner is replica "
           << redirect->owner() << " (epoch " << redirect->epoch() << "): asking there\n";
      Connect(redirect->owner());
    }
  }
  static constexpr int kMaxRedirects = 2;
  static constexpr int kSlowestNodesShown = 5;
  static constexpr size_t kLatestArrivals = 10;
  static constexpr uint32_t kMaxMissingGroups = 1024;  // GetJobOverviewRequest's largest limit

  int Usage(const std::string& message) {
    err_ << "psyncctl " << args_.command << ": " << message << "\n"
         << "Run 'psyncctl --help' for usage.\n";
    return kUsage;
  }

  static std::string ListSome(const std::vector<std::string>& items) {
    constexpr size_t kShown = 4;
    if (items.size() <= kShown) return absl::StrJoin(items, " ");
    return absl::StrCat(absl::StrJoin(items.begin(), items.begin() + kShown, " "), " +",
                        items.size() - kShown, " more");
  }

  static std::string JsonString(const std::string& text) {
    google::protobuf::Value value;
    value.set_string_value(text);
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(value, &json);
    return json;
  }

  static std::string EventLine(const v1::Event& e) {
    const absl::Time time = absl::FromUnixMicros(e.time_unix_micros());
    std::vector<std::string> where = {absl::StrCat("job=", e.job_id()),
                                      absl::StrCat("gen=", e.generation())};
    if (e.has_step()) where.push_back(absl::StrCat("step=", e.step()));
    if (e.has_chunk()) where.push_back(absl::StrCat("chunk=", e.chunk()));
    if (e.has_rank()) where.push_back(absl::StrCat("rank=", e.rank()));
    if (!e.optimizer().empty()) where.push_back(absl::StrCat("opt=", e.optimizer()));
    if (e.sequence() != 0) where.push_back(absl::StrCat("seq=", e.sequence()));
    if (e.duration_micros() != 0)
      where.push_back(absl::StrCat("dur=", Micros(e.duration_micros())));
    if (e.contributors_size() > 0) {
      std::vector<std::string> who;
      for (const v1::Contributor& c : e.contributors()) who.push_back(Who(c));
      where.push_back(absl::StrCat("missing=", absl::StrJoin(who, ",")));
    }
    if (e.ranks_size() > 0) where.push_back(absl::StrCat("ranks=", absl::StrJoin(e.ranks(), ",")));
    std::string line =
        absl::StrFormat("%s  %-13s %s", absl::FormatTime("%H:%M:%E3S", time, absl::LocalTimeZone()),
                        e.kind(), absl::StrJoin(where, " "));
    if (!e.detail().empty()) absl::StrAppend(&line, "  ", e.detail());
    return line;
  }

  const Args& args_;
  std::ostream& out_;
  std::ostream& err_;
  Interrupt* interrupt_;
  std::string target_;  // where calls go now: --target, or the owner a replica named
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

int UsageFailure(std::ostream& err, const std::string& message) {
  err << "psyncctl: " << message << "\nRun 'psyncctl --help' for usage.\n";
  return kUsage;
}

}  // namespace

std::string PsyncctlUsage() { return kUsageText; }

int RunPsyncctl(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                Interrupt* interrupt) {
  Args args;
  if (auto e = Parse(argv, &args)) return UsageFailure(err, e->message);
  if (args.help) {
    out << kUsageText;
    return kOk;
  }
  if (args.version) {
    out << serve::VersionLine("psyncctl") << "\n";
    return kOk;
  }
  if (args.command.empty()) return UsageFailure(err, "no command given");

  // Commands and how many positional arguments they take: {min, max}.
  static const std::map<std::string, std::pair<size_t, size_t>> kArity = {
      {"jobs", {0, 0}},   {"status", {1, 1}},   {"missing", {1, 1}}, {"stragglers", {1, 1}},
      {"audit", {1, 1}},  {"watch", {0, 1}},    {"trace", {1, 1}},   {"end-job", {1, 1}},
      {"health", {0, 1}}, {"replicas", {0, 0}},
  };
  auto arity = kArity.find(args.command);
  if (arity == kArity.end()) {
    return UsageFailure(err, absl::StrCat("unknown command '", args.command, "'"));
  }
  const size_t n = args.positional.size();
  if (n < arity->second.first || n > arity->second.second) {
    return UsageFailure(
        err,
        absl::StrCat("'", args.command, "' takes ",
                     arity->second.first == arity->second.second
                         ? absl::StrCat(arity->second.first)
                         : absl::StrCat(arity->second.first, " or ", arity->second.second),
                     arity->second.second == 1 ? " argument (JOB)" : " arguments", ", got ", n));
  }
  Command command(args, out, err, interrupt);
  if (args.command == "health") return command.Health(n == 1 ? args.positional[0] : "");
  if (n == 1 && args.positional[0].empty()) return UsageFailure(err, "JOB must not be empty");
  const std::string job = n == 1 ? args.positional[0] : "";

  if (args.command == "jobs") return command.Jobs();
  if (args.command == "replicas") return command.Replicas();
  if (args.command == "status") return command.Status(job);
  if (args.command == "missing") return command.Missing(job);
  if (args.command == "stragglers") return command.Stragglers(job);
  if (args.command == "audit") return command.Audit(job);
  if (args.command == "watch") return command.Watch(job);
  if (args.command == "end-job") return command.EndJob(job);
  return command.Trace(job);
}

}  // namespace psync::ctl
