#include "server/http_api.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "serve/metrics/http_handler.h"
#include "server/ha/replica_proto.h"
#include "server/owner/job_history.h"
#include "server/rpc/convert.h"
#include "server/rpc/job_overview.h"

namespace psync::server {
namespace {

// `defaults`: fields at their default value (0, "", false, []) are printed too.
http::Response JsonOf(const google::protobuf::Message& message, bool defaults = true) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = defaults;
  std::string json;
  if (auto s = google::protobuf::util::MessageToJsonString(message, &json, options); !s.ok()) {
    return http::Response::Text(500, std::string(s.message()));
  }
  return http::Response::Json(200, std::move(json));
}

http::Response ErrorOf(const absl::Status& status) {
  int code = 500;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      code = 404;
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      code = 400;
      break;
    case absl::StatusCode::kUnavailable:  // another replica owns the job: the message names it
      code = 503;
      break;
    default:
      break;
  }
  return http::Response::Text(code, std::string(status.message()) + "\n");
}

// Parses query parameter `name` as an unsigned integer; absent -> `fallback`.
absl::Status ParseUint(const http::Request& request, absl::string_view name, uint64_t fallback,
                       uint64_t* out) {
  const std::string text = request.QueryParam(name);
  if (text.empty()) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter '", name, "' must be an unsigned integer"));
  }
  return absl::OkStatus();
}

// As ParseUint with fallback 0, for a 32-bit field.
absl::Status ParseUint32(const http::Request& request, absl::string_view name, uint32_t* out) {
  uint64_t value = 0;
  if (auto s = ParseUint(request, name, 0, &value); !s.ok()) return s;
  if (value > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter '", name, "' must be below 2^32"));
  }
  *out = static_cast<uint32_t>(value);
  return absl::OkStatus();
}

absl::Status RequireId(const http::Request& request, std::string* id) {
  *id = request.QueryParam("id");
  if (id->empty()) return absl::InvalidArgumentError("query parameter 'id' (the job) is required");
  return absl::OkStatus();
}

// Compares in time independent of where the strings first differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

http::Response Unauthorized(absl::string_view why) {
  http::Response response = http::Response::Text(
      401, absl::StrCat("401 Unauthorized: ", why, "; send 'Authorization: Bearer <token>'\n"));
  response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"psync\"");
  return response;
}

// `handler`, answering 401 unless the request carries "Authorization: Bearer <token>".
http::Handler RequireToken(std::string token, http::Handler handler) {
  return [token = std::move(token), handler = std::move(handler)](const http::Request& request) {
    const std::string authorization = request.Header("authorization");
    if (authorization.empty()) return Unauthorized("no Authorization header");
    constexpr absl::string_view kBearer = "Bearer ";
    if (authorization.size() < kBearer.size() ||
        !absl::EqualsIgnoreCase(absl::string_view(authorization).substr(0, kBearer.size()),
                                kBearer)) {
      return Unauthorized("the Authorization header is not a Bearer token");
    }
    if (!ConstantTimeEquals(absl::string_view(authorization).substr(kBearer.size()), token)) {
      return Unauthorized("wrong token");
    }
    return handler(request);
  };
}

}  // namespace

absl::Status RegisterHttpApi(http::Server* server, Coordinator* coordinator,
                             metrics::Registry* registry,
                             absl::Span<const http::EmbeddedFile> dashboard,
                             const HttpApiOptions& options) {
  const bool api_token = !options.token.empty();
  auto guarded = [&](bool needs_token, http::Handler handler) {
    return needs_token ? RequireToken(options.token, std::move(handler)) : std::move(handler);
  };
  if (auto s = server->Handle("/metrics", guarded(api_token && options.metrics_require_token,
                                                  metrics::MetricsHandler(registry)));
      !s.ok()) {
    return s;
  }
  auto handle_api = [&](absl::string_view path, http::Handler handler) {
    return server->Handle(path, guarded(api_token, std::move(handler)));
  };

  auto jobs = [coordinator](const http::Request& request) {
    std::vector<std::string> states;
    for (absl::string_view name :
         absl::StrSplit(request.QueryParam("states"), ',', absl::SkipEmpty())) {
      std::optional<std::string> state = CanonicalJobState(name);
      if (!state.has_value()) {
        return ErrorOf(absl::InvalidArgumentError(
            absl::StrCat("query parameter 'states': '", name.substr(0, 32),
                         "' is not a job state (", kJobStateNames, ", in any case)")));
      }
      states.push_back(*std::move(state));
    }
    v1::ListJobsResponse response;
    for (const JobStatusView& view : coordinator->ListJobs(states, ViewDetail::kSummary)) {
      JobSummaryToProto(view, response.add_jobs());
    }
    return JsonOf(response);
  };
  if (auto s = handle_api("/api/jobs", jobs); !s.ok()) return s;

  auto job = [coordinator](const http::Request& request) {
    std::string id;
    uint64_t list_limit = 0;
    if (auto s = RequireId(request, &id); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint(request, "list_limit", 0, &list_limit); !s.ok()) return ErrorOf(s);
    const size_t limit = ListLimit(list_limit);
    absl::StatusOr<JobStatusView> view = coordinator->GetJobStatus(id, ViewDetail::kStatus, limit);
    if (!view.ok()) return ErrorOf(view.status());
    v1::JobStatus status;
    JobStatusToProto(*view, &status, limit);
    return JsonOf(status);
  };
  if (auto s = handle_api("/api/job", job); !s.ok()) return s;

  auto overview = [coordinator](const http::Request& request) {
    v1::GetJobOverviewRequest asked;
    std::string id;
    if (auto s = RequireId(request, &id); !s.ok()) return ErrorOf(s);
    asked.set_job_id(id);
    uint32_t node_offset = 0;
    uint32_t node_limit = 0;
    uint32_t missing_limit = 0;
    if (auto s = ParseUint32(request, "node_offset", &node_offset); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint32(request, "node_limit", &node_limit); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint32(request, "missing_limit", &missing_limit); !s.ok()) {
      return ErrorOf(s);
    }
    asked.set_node_offset(node_offset);
    asked.set_node_limit(node_limit);
    asked.set_missing_limit(missing_limit);
    for (absl::string_view node :
         absl::StrSplit(request.QueryParam("expand"), ',', absl::SkipEmpty())) {
      asked.add_expand_nodes(std::string(node));
    }
    absl::StatusOr<OverviewRequest> wanted = OverviewRequestFromProto(asked);
    if (!wanted.ok()) return ErrorOf(wanted.status());
    absl::StatusOr<JobStatusView> view = coordinator->GetJobStatus(id, ViewDetail::kOverview);
    if (!view.ok()) return ErrorOf(view.status());
    v1::JobOverview answer;
    JobOverviewToProto(*view, *wanted, &answer);
    // Without the default values: at 2,048 nodes 341 KB instead of 476 KB, and printed without
    // building a tree of every field first (docs/observability.md, "At scale").
    return JsonOf(answer, /*defaults=*/false);
  };
  if (auto s = handle_api("/api/overview", overview); !s.ok()) return s;

  auto chunk = [coordinator](const http::Request& request) {
    std::string id;
    uint64_t step = 0;
    uint64_t chunk_id = 0;
    if (auto s = RequireId(request, &id); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint(request, "step", 0, &step); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint(request, "chunk", 0, &chunk_id); !s.ok()) return ErrorOf(s);
    uint64_t list_limit = 0;
    if (auto s = ParseUint(request, "list_limit", 0, &list_limit); !s.ok()) return ErrorOf(s);
    absl::Duration deadline;
    absl::StatusOr<core::ChunkSnapshot> snapshot = coordinator->GetChunkStatus(
        id, step, static_cast<core::ChunkId>(chunk_id), &deadline, ListLimit(list_limit));
    if (!snapshot.ok()) return ErrorOf(snapshot.status());
    v1::ChunkStatus status;
    ChunkStatusToProto(*snapshot, deadline, &status);
    return JsonOf(status);
  };
  if (auto s = handle_api("/api/chunk", chunk); !s.ok()) return s;

  auto audit = [coordinator](const http::Request& request) {
    std::string id;
    if (auto s = RequireId(request, &id); !s.ok()) return ErrorOf(s);
    std::vector<std::string> earlier_owners;
    absl::StatusOr<std::vector<observe::SyncAudit>> records =
        coordinator->Audit(id, &earlier_owners);
    // Only the audit totals are read: no chunk lists, layout or stragglers.
    absl::StatusOr<JobStatusView> view = coordinator->GetJobStatus(id, ViewDetail::kSummary);
    if (!records.ok()) return ErrorOf(records.status());
    if (!view.ok()) return ErrorOf(view.status());
    v1::GetAuditResponse response;
    AuditToProto(*records, view->audit, earlier_owners, &response);
    return JsonOf(response);
  };
  if (auto s = handle_api("/api/audit", audit); !s.ok()) return s;

  auto events = [coordinator](const http::Request& request) {
    uint64_t since = 0;
    uint64_t limit = 0;
    if (auto s = ParseUint(request, "since", 0, &since); !s.ok()) return ErrorOf(s);
    // Refused, never clamped: one message for every limit out of range, a number past 64 bits
    // and a negative one included.
    if (!ParseUint(request, "limit", kMaxEventsPerAnswer, &limit).ok() || limit == 0 ||
        limit > kMaxEventsPerAnswer) {
      return ErrorOf(absl::InvalidArgumentError(
          absl::StrCat("query parameter 'limit' must be in 1..", kMaxEventsPerAnswer)));
    }
    const std::string job_filter = request.QueryParam("job");
    absl::flat_hash_set<std::string> kinds;
    for (absl::string_view k :
         absl::StrSplit(request.QueryParam("kinds"), ',', absl::SkipEmpty())) {
      kinds.insert(std::string(k));
    }
    uint64_t next = 0;
    uint64_t end = 0;
    const std::vector<core::Event> page =
        coordinator->EventsSince(since, &next, static_cast<size_t>(limit), &end);
    std::string body = "{\"events\":[";
    bool first = true;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    for (const core::Event& e : page) {
      if (!job_filter.empty() && e.job_id != job_filter) continue;
      if (!kinds.empty() && !kinds.contains(core::EventKindName(e.kind))) continue;
      v1::Event proto;
      EventToProto(e, &proto);
      std::string json;
      if (!google::protobuf::util::MessageToJsonString(proto, &json, options).ok()) continue;
      if (!first) body += ",";
      first = false;
      body += json;
    }
    absl::StrAppend(&body, "],\"next\":", next, ",\"end\":", end, "}");
    return http::Response::Json(200, std::move(body));
  };
  if (auto s = handle_api("/api/events", events); !s.ok()) return s;

  auto trace = [coordinator](const http::Request& request) {
    std::string id;
    uint64_t first = 0;
    uint64_t last = 0;
    if (auto s = RequireId(request, &id); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint(request, "first", 0, &first); !s.ok()) return ErrorOf(s);
    if (auto s = ParseUint(request, "last", UINT64_MAX, &last); !s.ok()) return ErrorOf(s);
    absl::StatusOr<std::string> json = coordinator->Trace(id, first, last);
    if (!json.ok()) return ErrorOf(json.status());
    return http::Response::Json(200, std::move(*json));
  };
  if (auto s = handle_api("/api/trace", trace); !s.ok()) return s;

  auto replicas = [replica = options.replica](const http::Request&) {
    return JsonOf(ha::ReplicasToProto(replica));
  };
  if (auto s = handle_api("/api/replicas", replicas); !s.ok()) return s;

  if (!dashboard.empty()) {
    if (auto s = server->HandlePrefix("/", http::ServeEmbeddedFiles(dashboard)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace psync::server
