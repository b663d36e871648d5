/* psync_c: a small, stable C ABI over psync::Client (client/client.h), for languages that load a
 * shared library (Python's ctypes: python/psync). It adds no protocol of its own: joining,
 * reconnecting, re-attaching, re-sending, resuming after a coordinator restart and dropping
 * repeated directives all stay in psync::Client.
 *
 * Calls. Every call that can fail takes a psync_status* (may be NULL) and returns its code: 0 (OK)
 * or a google.rpc.Code value, with the message in status->message (cut to fit, always
 * NUL-terminated). The codes are psync::Client's, unchanged (INVALID_ARGUMENT fix the input,
 * FAILED_PRECONDITION fix the order, DEADLINE_EXCEEDED a wait ran out, ...). Bad arguments to this
 * layer (a NULL handle, malformed plan JSON, a negative timeout) are INVALID_ARGUMENT naming the
 * argument, and change nothing.
 *
 * Blocking calls (psync_connect, psync_report_staged, psync_wait_directive, psync_wait_ticket,
 * psync_finish, ...) block only the calling thread; a caller that holds a lock of its own (e.g. an
 * interpreter's) should release it around them (ctypes.CDLL does).
 *
 * Asynchronous reports (psync_*_async) queue the message and return at once with a ticket (> 0);
 * its answer is kept until psync_wait_ticket takes it or psync_forget_ticket drops it. A call the
 * client refused at once (closed, failed) still returns a ticket, whose answer is that status.
 *
 * Thread-safety: every function may be called from any thread, concurrently, on the same handle,
 * except psync_client_free, which must be the last call on a handle (it closes the client first).
 *
 * Ownership: psync_connect returns a handle the caller frees with psync_client_free. Strings the
 * library returns (char**) are freed with psync_string_free. Input strings are copied. */
#ifndef PSYNC_CLIENT_C_API_PSYNC_C_H_
#define PSYNC_CLIENT_C_API_PSYNC_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: psync_directive gained released_unix_micros (a caller's struct is written whole, so a library
 * and a caller of different versions must not meet: the Python package refuses to load one). */
#define PSYNC_C_ABI_VERSION 2
#define PSYNC_STATUS_MESSAGE_BYTES 2048

typedef struct psync_status {
  int32_t code; /* google.rpc.Code: 0 OK */
  char message[PSYNC_STATUS_MESSAGE_BYTES];
} psync_status;

/* Channel security. NULL or all-empty fields: an insecure channel. PEM strings, NUL-terminated. */
typedef struct psync_tls {
  const char* root_certs_pem;       /* CA that signed the coordinator's certificate; "" system */
  const char* cert_chain_pem;       /* client certificate (mutual TLS); "" none */
  const char* private_key_pem;      /* its key */
  const char* target_name_override; /* host name to check the certificate against; "" none */
} psync_tls;

typedef struct psync_directive {
  uint64_t generation;
  uint64_t step;
  uint32_t chunk;
  uint64_t sequence;
  uint32_t last_rank;
  char last_optimizer[72];
  int64_t wait_micros;
  /* When the coordinator decided the release, in microseconds since the Unix epoch by its clock
   * (SyncDirective.released_unix_micros; 0 from a coordinator older than the field). */
  int64_t released_unix_micros;
} psync_directive;

typedef struct psync_info {
  uint64_t generation;
  uint64_t next_step;
  uint32_t rank;
  int32_t connected;
  uint64_t directives_received;
  uint64_t duplicate_directives_dropped;
  uint64_t stale_notices_dropped;
  uint64_t reconnects;
  uint64_t messages_resent;
  uint64_t resumes;
} psync_info;

typedef struct psync_client psync_client;

/* PSYNC_C_ABI_VERSION of the loaded library. */
int32_t psync_abi_version(void);

/* Joins and attaches (Client::Connect). `plan_json`: the rank's psync.v1.JoinRequest in proto3
 * JSON (job_id, world_size, rank, num_chunks, chunks, first_step, incarnation, token).
 * `call_timeout_s` > 0: see ClientOptions::call_timeout. Returns NULL on error. */
psync_client* psync_connect(const char* target, const char* plan_json, const psync_tls* tls,
                            double call_timeout_s, psync_status* status);
/* Closes (if not closed) and frees the handle. NULL is ignored. */
void psync_client_free(psync_client* client);

/* Blocking check-ins (Client::ReportStagedBatch): n items, all or none applied.
 * optimizers[i] NUL-terminated; checksums may be NULL (no shard checksums), else has_checksum[i]
 * says whether checksums[i] is set. */
int32_t psync_report_staged(psync_client* client, size_t n, const uint64_t* steps,
                            const uint32_t* chunks, const char* const* optimizers,
                            const uint8_t* has_checksum, const uint64_t* checksums,
                            psync_status* status);
/* The same, asynchronous: *ticket receives the ticket. */
int32_t psync_report_staged_async(psync_client* client, size_t n, const uint64_t* steps,
                                  const uint32_t* chunks, const char* const* optimizers,
                                  const uint8_t* has_checksum, const uint64_t* checksums,
                                  uint64_t* ticket, psync_status* status);

/* Client::ReportSyncDone: one checksum per sync group (n_groups may be 0). */
int32_t psync_sync_done(psync_client* client, uint64_t step, uint32_t chunk, size_t n_groups,
                        const char* const* groups, const uint64_t* checksums, uint32_t executions,
                        psync_status* status);
int32_t psync_sync_done_async(psync_client* client, uint64_t step, uint32_t chunk, size_t n_groups,
                              const char* const* groups, const uint64_t* checksums,
                              uint32_t executions, uint64_t* ticket, psync_status* status);

/* Client::SkipStep. */
int32_t psync_skip_step(psync_client* client, uint64_t step, const char* reason,
                        psync_status* status);
int32_t psync_skip_step_async(psync_client* client, uint64_t step, const char* reason,
                              uint64_t* ticket, psync_status* status);

/* Waits up to timeout_s (>= 0; 0 only looks) for the answer of `ticket`. When it came,
 * *answered = 1 and the answer is returned (the ticket is forgotten); when it did not come in
 * time, *answered = 0 and DEADLINE_EXCEEDED is returned (the ticket is kept). NOT_FOUND
 * (*answered = 0) for a ticket that is not held (unknown, or already taken). */
int32_t psync_wait_ticket(psync_client* client, uint64_t ticket, double timeout_s,
                          int32_t* answered, psync_status* status);
/* Drops a ticket's answer (now, or when it arrives). Unknown tickets are ignored. */
void psync_forget_ticket(psync_client* client, uint64_t ticket);
/* Tickets whose answer has not arrived yet. */
uint64_t psync_tickets_pending(psync_client* client);

/* Client::WaitForDirective: the directive of (step, chunk), once; timeout_s >= 0 (0 only looks).
 * `directive` (may be NULL) is filled on OK and unchanged otherwise. */
int32_t psync_wait_directive(psync_client* client, uint64_t step, uint32_t chunk, double timeout_s,
                             psync_directive* directive, psync_status* status);
/* Client::WaitForStepSkipped. */
int32_t psync_wait_step_skipped(psync_client* client, uint64_t step, double timeout_s,
                                psync_status* status);

/* Client::Finish (Leave with finished, then Close) and Client::Close. */
int32_t psync_finish(psync_client* client, psync_status* status);
void psync_close(psync_client* client);

/* Generation, next step, rank, connection and ClientStats. */
int32_t psync_get_info(psync_client* client, psync_info* info, psync_status* status);
/* The client's incarnation and session id (*out: a string to free with psync_string_free). */
int32_t psync_get_incarnation(psync_client* client, char** out, psync_status* status);

/* Unary queries on a coordinator (a channel of their own, no client needed): GetJobStatus and
 * GetAudit of `job_id`, answered as proto3 JSON in *json_out (freed with psync_string_free).
 * `target` is one address or a comma-separated list of replicas: the query starts where the
 * job's ranks start, follows a replica's OwnerRedirect to the job's owner, and moves to the next
 * listed replica while one is unreachable or serves nobody the job (UNAVAILABLE); every listed
 * replica and at most 2 redirects within `timeout_s`. The last answer's status is returned. */
int32_t psync_get_job_status(const char* target, const psync_tls* tls, const char* job_id,
                             double timeout_s, char** json_out, psync_status* status);
int32_t psync_get_audit(const char* target, const psync_tls* tls, const char* job_id,
                        double timeout_s, char** json_out, psync_status* status);

void psync_string_free(char* s);

#ifdef __cplusplus
}
#endif

#endif /* PSYNC_CLIENT_C_API_PSYNC_C_H_ */
