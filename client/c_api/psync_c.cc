// The C ABI of psync_c.h over psync::Client. Each function validates its arguments, converts them
// to the client's types, calls the client and converts the answer back; nothing here speaks the
// protocol.
#include "client/c_api/psync_c.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/endpoints.h"
#include "client/job_start.h"
#include "client/reconnecting_stream.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace {

// Answers of asynchronous reports, by ticket, until taken. Shared with the callbacks, which may
// outlive a wait (they run on the client's reader thread).
class TicketBook {
 public:
  // A new ticket whose answer is not in yet.
  uint64_t Open() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const uint64_t ticket = next_++;
    tickets_[ticket] = Entry{};
    ++pending_;
    return ticket;
  }
  void Complete(uint64_t ticket, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end() || it->second.done) return;
    --pending_;
    if (it->second.forgotten) {
      tickets_.erase(it);
      return;
    }
    it->second.done = true;
    it->second.status = std::move(status);
    answered_.SignalAll();
  }
  // The answer of `ticket` (*answered = true), or DEADLINE_EXCEEDED / NOT_FOUND.
  absl::Status Wait(uint64_t ticket, absl::Duration timeout, bool* answered)
      ABSL_LOCKS_EXCLUDED(mu_) {
    *answered = false;
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      auto it = tickets_.find(ticket);
      if (it == tickets_.end() || it->second.forgotten) {
        return absl::NotFoundError(absl::StrCat("ticket ", ticket,
                                                " is not held (unknown, or "
                                                "its answer was already taken)"));
      }
      if (it->second.done) {
        absl::Status status = std::move(it->second.status);
        tickets_.erase(it);
        *answered = true;
        return status;
      }
      // A deadline already passed only looks: a timed wait would still block in the kernel.
      if (deadline <= absl::Now() || answered_.WaitWithDeadline(&mu_, deadline)) {
        return absl::DeadlineExceededError(absl::StrCat("no answer for ticket ", ticket, " within ",
                                                        absl::FormatDuration(timeout)));
      }
    }
  }
  void Forget(uint64_t ticket) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = tickets_.find(ticket);
    if (it == tickets_.end()) return;
    if (it->second.done) {
      tickets_.erase(it);
    } else {
      it->second.forgotten = true;
    }
  }
  uint64_t pending() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return pending_;
  }

 private:
  struct Entry {
    bool done = false;
    bool forgotten = false;
    absl::Status status;
  };
  mutable absl::Mutex mu_;
  absl::CondVar answered_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> tickets_ ABSL_GUARDED_BY(mu_);
};

// Copies `text` into the fixed C buffer `out` of `N` bytes, cut to fit, always NUL-terminated.
template <size_t N>
void CopyTruncated(absl::string_view text, char (&out)[N]) {
  const size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

int32_t Report(const absl::Status& s, psync_status* status) {
  const int32_t code = static_cast<int32_t>(s.code());
  if (status != nullptr) {
    status->code = code;
    CopyTruncated(s.message(), status->message);
  }
  return code;
}

absl::Status BadArgument(absl::string_view what) { return absl::InvalidArgumentError(what); }

absl::StatusOr<absl::Duration> Seconds(double seconds, absl::string_view name) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return BadArgument(
        absl::StrCat(name, " must be a finite number of seconds >= 0, got ", seconds));
  }
  return absl::Seconds(seconds);
}

std::string Field(const char* s) { return s == nullptr ? std::string() : std::string(s); }

bool HasTls(const psync_tls* tls) {
  return tls != nullptr &&
         !(Field(tls->root_certs_pem).empty() && Field(tls->cert_chain_pem).empty() &&
           Field(tls->private_key_pem).empty() && Field(tls->target_name_override).empty());
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const psync_tls* tls) {
  if (!HasTls(tls)) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Field(tls->root_certs_pem);
  ssl.pem_cert_chain = Field(tls->cert_chain_pem);
  ssl.pem_private_key = Field(tls->private_key_pem);
  return grpc::SslCredentials(ssl);
}

void SetOverride(const psync_tls* tls, grpc::ChannelArguments* args) {
  if (tls != nullptr && !Field(tls->target_name_override).empty()) {
    args->SetSslTargetNameOverride(Field(tls->target_name_override));
  }
}

absl::StatusOr<std::vector<psync::v1::Staged>> StagedItems(size_t n, const uint64_t* steps,
                                                           const uint32_t* chunks,
                                                           const char* const* optimizers,
                                                           const uint8_t* has_checksum,
                                                           const uint64_t* checksums) {
  if (n == 0) return BadArgument("n must be at least 1 (no check-ins given)");
  if (steps == nullptr || chunks == nullptr || optimizers == nullptr) {
    return BadArgument("steps, chunks and optimizers must not be NULL");
  }
  std::vector<psync::v1::Staged> items(n);
  for (size_t i = 0; i < n; ++i) {
    if (optimizers[i] == nullptr) return BadArgument(absl::StrCat("optimizers[", i, "] is NULL"));
    items[i].set_step(steps[i]);
    items[i].set_chunk(chunks[i]);
    items[i].set_optimizer(optimizers[i]);
    if (checksums != nullptr && (has_checksum == nullptr || has_checksum[i] != 0)) {
      items[i].set_shard_checksum(checksums[i]);
    }
  }
  return items;
}

absl::StatusOr<std::vector<psync::v1::GroupChecksum>> GroupChecksums(size_t n,
                                                                     const char* const* groups,
                                                                     const uint64_t* checksums) {
  if (n > 0 && (groups == nullptr || checksums == nullptr)) {
    return BadArgument("groups and checksums must not be NULL when n_groups > 0");
  }
  std::vector<psync::v1::GroupChecksum> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (groups[i] == nullptr) return BadArgument(absl::StrCat("groups[", i, "] is NULL"));
    out[i].set_group(groups[i]);
    out[i].set_checksum(checksums[i]);
  }
  return out;
}

// A one-shot query follows at most this many redirects besides trying each listed replica once.
constexpr size_t kMaxOwnerHops = 2;

template <typename Request, typename Response, typename Call>
int32_t Query(const char* target, const psync_tls* tls, const char* job_id, double timeout_s,
              char** json_out, psync_status* status, Call call) {
  if (target == nullptr || *target == '\0') return Report(BadArgument("target is empty"), status);
  if (job_id == nullptr) return Report(BadArgument("job_id is NULL"), status);
  if (json_out == nullptr) return Report(BadArgument("json_out is NULL"), status);
  absl::StatusOr<absl::Duration> timeout = Seconds(timeout_s, "timeout_s");
  if (!timeout.ok()) return Report(timeout.status(), status);
  absl::StatusOr<std::vector<std::string>> targets = psync::SplitTargets(target, "target");
  if (!targets.ok()) return Report(targets.status(), status);
  // Where the job's ranks start, then as psync::Client goes: to the owner a replica names, or
  // to the next replica of the list when one is unreachable or serves nobody the job now; each
  // entry and redirect at most once, all within the timeout.
  grpc::ChannelArguments args;
  SetOverride(tls, &args);
  psync::Endpoints endpoints(
      *targets,
      [&](const std::string& t) { return grpc::CreateCustomChannel(t, Credentials(tls), args); },
      psync::JobStartIndex(job_id, targets->size()));
  const absl::Time deadline = absl::Now() + *timeout;
  const size_t attempts = targets->size() + kMaxOwnerHops;
  Request request;
  request.set_job_id(job_id);
  Response response;
  for (size_t attempt = 1;; ++attempt) {
    std::string at;
    psync::v1::Coordinator::Stub* stub = endpoints.Stub(&at);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    const grpc::Status s = call(stub, &context, request, &response);
    if (s.ok()) break;
    const absl::Status failed =
        absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || attempt == attempts ||
        absl::Now() >= deadline || !endpoints.OnFailure(at, psync::StatusFromGrpc(s, ""))) {
      return Report(failed, status);
    }
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;  // zeros too: every field is present
  (void)google::protobuf::util::MessageToJsonString(response, &json, print);
  *json_out = strdup(json.c_str());
  return Report(absl::OkStatus(), status);
}

}  // namespace

struct psync_client {
  std::unique_ptr<psync::Client> client;
  std::shared_ptr<TicketBook> tickets = std::make_shared<TicketBook>();

  // Queues an asynchronous call with a fresh ticket; `send` gets the ack callback.
  template <typename Send>
  uint64_t Async(Send send) {
    const uint64_t ticket = tickets->Open();
    std::shared_ptr<TicketBook> book = tickets;
    send([book, ticket](absl::Status s) { book->Complete(ticket, std::move(s)); });
    return ticket;
  }
};

extern "C" {

int32_t psync_abi_version(void) { return PSYNC_C_ABI_VERSION; }

psync_client* psync_connect(const char* target, const char* plan_json, const psync_tls* tls,
                            double call_timeout_s, psync_status* status) {
  if (target == nullptr || *target == '\0') {
    Report(BadArgument("target is empty (want host:port)"), status);
    return nullptr;
  }
  if (plan_json == nullptr) {
    Report(BadArgument("plan_json is NULL"), status);
    return nullptr;
  }
  if (!std::isfinite(call_timeout_s) || call_timeout_s <= 0) {
    Report(BadArgument(absl::StrCat("call_timeout_s must be > 0 seconds, got ", call_timeout_s)),
           status);
    return nullptr;
  }
  psync::ClientOptions options;
  options.target = target;
  options.call_timeout = absl::Seconds(call_timeout_s);
  const auto parsed = google::protobuf::util::JsonStringToMessage(plan_json, &options.plan);
  if (!parsed.ok()) {
    Report(BadArgument(absl::StrCat("plan_json is not a psync.v1.JoinRequest: ",
                                    std::string(parsed.message()))),
           status);
    return nullptr;
  }
  if (HasTls(tls)) {
    options.credentials = Credentials(tls);
    options.tls_target_name_override = Field(tls->target_name_override);
  }
  absl::StatusOr<std::unique_ptr<psync::Client>> client =
      psync::Client::Connect(std::move(options));
  if (!client.ok()) {
    Report(client.status(), status);
    return nullptr;
  }
  auto* handle = new psync_client;
  handle->client = std::move(*client);
  Report(absl::OkStatus(), status);
  return handle;
}

void psync_client_free(psync_client* client) {
  if (client == nullptr) return;
  client->client->Close();
  delete client;
}

int32_t psync_report_staged(psync_client* client, size_t n, const uint64_t* steps,
                            const uint32_t* chunks, const char* const* optimizers,
                            const uint8_t* has_checksum, const uint64_t* checksums,
                            psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  auto items = StagedItems(n, steps, chunks, optimizers, has_checksum, checksums);
  if (!items.ok()) return Report(items.status(), status);
  return Report(client->client->ReportStagedBatch(std::move(*items)), status);
}

int32_t psync_report_staged_async(psync_client* client, size_t n, const uint64_t* steps,
                                  const uint32_t* chunks, const char* const* optimizers,
                                  const uint8_t* has_checksum, const uint64_t* checksums,
                                  uint64_t* ticket, psync_status* status) {
  if (client == nullptr || ticket == nullptr) {
    return Report(BadArgument("client and ticket must not be NULL"), status);
  }
  auto items = StagedItems(n, steps, chunks, optimizers, has_checksum, checksums);
  if (!items.ok()) return Report(items.status(), status);
  *ticket = client->Async([&](psync::AckCallback done) {
    client->client->ReportStagedAsync(std::move(*items), std::move(done));
  });
  return Report(absl::OkStatus(), status);
}

int32_t psync_sync_done(psync_client* client, uint64_t step, uint32_t chunk, size_t n_groups,
                        const char* const* groups, const uint64_t* checksums, uint32_t executions,
                        psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  auto sums = GroupChecksums(n_groups, groups, checksums);
  if (!sums.ok()) return Report(sums.status(), status);
  return Report(client->client->ReportSyncDone(step, chunk, std::move(*sums), executions), status);
}

int32_t psync_sync_done_async(psync_client* client, uint64_t step, uint32_t chunk, size_t n_groups,
                              const char* const* groups, const uint64_t* checksums,
                              uint32_t executions, uint64_t* ticket, psync_status* status) {
  if (client == nullptr || ticket == nullptr) {
    return Report(BadArgument("client and ticket must not be NULL"), status);
  }
  auto sums = GroupChecksums(n_groups, groups, checksums);
  if (!sums.ok()) return Report(sums.status(), status);
  *ticket = client->Async([&](psync::AckCallback done) {
    client->client->ReportSyncDoneAsync(step, chunk, std::move(*sums), executions, std::move(done));
  });
  return Report(absl::OkStatus(), status);
}

int32_t psync_skip_step(psync_client* client, uint64_t step, const char* reason,
                        psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  return Report(client->client->SkipStep(step, Field(reason)), status);
}

int32_t psync_skip_step_async(psync_client* client, uint64_t step, const char* reason,
                              uint64_t* ticket, psync_status* status) {
  if (client == nullptr || ticket == nullptr) {
    return Report(BadArgument("client and ticket must not be NULL"), status);
  }
  const std::string text = Field(reason);
  *ticket = client->Async(
      [&](psync::AckCallback done) { client->client->SkipStepAsync(step, text, std::move(done)); });
  return Report(absl::OkStatus(), status);
}

int32_t psync_wait_ticket(psync_client* client, uint64_t ticket, double timeout_s,
                          int32_t* answered, psync_status* status) {
  if (client == nullptr || answered == nullptr) {
    return Report(BadArgument("client and answered must not be NULL"), status);
  }
  *answered = 0;
  absl::StatusOr<absl::Duration> timeout = Seconds(timeout_s, "timeout_s");
  if (!timeout.ok()) return Report(timeout.status(), status);
  bool got = false;
  const absl::Status answer = client->tickets->Wait(ticket, *timeout, &got);
  *answered = got ? 1 : 0;
  return Report(answer, status);
}

void psync_forget_ticket(psync_client* client, uint64_t ticket) {
  if (client != nullptr) client->tickets->Forget(ticket);
}

uint64_t psync_tickets_pending(psync_client* client) {
  return client == nullptr ? 0 : client->tickets->pending();
}

int32_t psync_wait_directive(psync_client* client, uint64_t step, uint32_t chunk, double timeout_s,
                             psync_directive* directive, psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  absl::StatusOr<absl::Duration> timeout = Seconds(timeout_s, "timeout_s");
  if (!timeout.ok()) return Report(timeout.status(), status);
  absl::StatusOr<psync::v1::SyncDirective> d =
      client->client->WaitForDirective(step, chunk, *timeout);
  if (!d.ok()) return Report(d.status(), status);
  if (directive != nullptr) {
    directive->generation = d->generation();
    directive->step = d->step();
    directive->chunk = d->chunk();
    directive->sequence = d->sequence();
    directive->last_rank = d->last_rank();
    CopyTruncated(d->last_optimizer(), directive->last_optimizer);
    directive->wait_micros = d->wait_micros();
    directive->released_unix_micros = d->released_unix_micros();
  }
  return Report(absl::OkStatus(), status);
}

int32_t psync_wait_step_skipped(psync_client* client, uint64_t step, double timeout_s,
                                psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  absl::StatusOr<absl::Duration> timeout = Seconds(timeout_s, "timeout_s");
  if (!timeout.ok()) return Report(timeout.status(), status);
  return Report(client->client->WaitForStepSkipped(step, *timeout), status);
}

int32_t psync_finish(psync_client* client, psync_status* status) {
  if (client == nullptr) return Report(BadArgument("client is NULL"), status);
  return Report(client->client->Finish(), status);
}

void psync_close(psync_client* client) {
  if (client != nullptr) client->client->Close();
}

int32_t psync_get_info(psync_client* client, psync_info* info, psync_status* status) {
  if (client == nullptr || info == nullptr) {
    return Report(BadArgument("client and info must not be NULL"), status);
  }
  const psync::Client& c = *client->client;
  const psync::ClientStats stats = c.stats();
  info->generation = c.generation();
  info->next_step = c.next_step();
  info->rank = c.rank();
  info->connected = c.connected() ? 1 : 0;
  info->directives_received = stats.directives_received;
  info->duplicate_directives_dropped = stats.duplicate_directives_dropped;
  info->stale_notices_dropped = stats.stale_notices_dropped;
  info->reconnects = stats.reconnects;
  info->messages_resent = stats.messages_resent;
  info->resumes = stats.resumes;
  return Report(absl::OkStatus(), status);
}

int32_t psync_get_incarnation(psync_client* client, char** out, psync_status* status) {
  if (client == nullptr || out == nullptr) {
    return Report(BadArgument("client and out must not be NULL"), status);
  }
  *out = strdup(client->client->incarnation().c_str());
  return Report(absl::OkStatus(), status);
}

int32_t psync_get_job_status(const char* target, const psync_tls* tls, const char* job_id,
                             double timeout_s, char** json_out, psync_status* status) {
  return Query<psync::v1::GetJobStatusRequest, psync::v1::JobStatus>(
      target, tls, job_id, timeout_s, json_out, status,
      [](psync::v1::Coordinator::Stub* stub, grpc::ClientContext* context,
         const psync::v1::GetJobStatusRequest& request, psync::v1::JobStatus* response) {
        return stub->GetJobStatus(context, request, response);
      });
}

int32_t psync_get_audit(const char* target, const psync_tls* tls, const char* job_id,
                        double timeout_s, char** json_out, psync_status* status) {
  return Query<psync::v1::GetAuditRequest, psync::v1::GetAuditResponse>(
      target, tls, job_id, timeout_s, json_out, status,
      [](psync::v1::Coordinator::Stub* stub, grpc::ClientContext* context,
         const psync::v1::GetAuditRequest& request, psync::v1::GetAuditResponse* response) {
        return stub->GetAudit(context, request, response);
      });
}

void psync_string_free(char* s) { free(s); }

}  // extern "C"
