// AuditLedger: each owner's audit summary of a job, kept in etcd beside the job's ownership, so
// that a job's audit outlives its moves between replicas (docs/design.md, "The audit across
// owners").
//
// Keys: /psync/audit/<job>/<epoch> = the record the owner at that ownership epoch published
// (opaque bytes here; server/ha/owner_audit.h encodes them). They carry no lease: an owner's death
// must not take its part of the audit along. Who writes what:
//   - the replica that claims a job (Claimed): its empty record, created at once, so that an owner
//     lost or paused at any time after its claim is named in the job's audit; it then reads the
//     job's earlier records;
//   - the owner, at a round (the replica's view thread), at most every publish_interval, its record
//     of each job it owns when it changed; a write succeeds only while the key is the one it
//     created (a job ended and deleted meanwhile is never written back);
//   - the owner that loses a job (Lost), its last word, written at the next publication (or by
//     FlushLastWords, a replica stopping), on the same condition;
//   - the owner a job ends at (Ended) deletes the job's records at the next round (the
//     coordinator keeps them in its history of ended jobs);
//   - any replica deletes the records of a job it has seen owned by nobody for orphan_ttl (every
//     rank went away without ending it, and its last owner went too).
// Every publication also reads every record back, so Others answers from memory.
//
// Thread-safe: Round and FlushLastWords run on one thread at a time (the view thread, then the
// stopping one); Claimed waits for etcd (on the claiming thread); the others never wait for etcd.
// Does not own the EtcdClient or the Clock.
#ifndef PSYNC_SERVER_HA_AUDIT_LEDGER_H_
#define PSYNC_SERVER_HA_AUDIT_LEDGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "serve/clock.h"
#include "server/ha/etcd_client.h"

namespace psync::server::ha {

inline constexpr char kAuditPrefix[] = "/psync/audit/";

struct AuditLedgerOptions {
  // How often an owner writes the records that changed, and the records are read back.
  absl::Duration publish_interval = absl::Seconds(1);
  // How long a job must be seen owned by nobody before its records are deleted.
  absl::Duration orphan_ttl = absl::Minutes(10);
};

class AuditLedger {
 public:
  // The record of `job` as the coordinator holds it at ownership `epoch`; nullopt when it holds
  // no such job (it ended, or it is held at another epoch). Called without the ledger's lock.
  using Source = std::function<std::optional<std::string>(const std::string& job, uint64_t epoch)>;
  // The record of an owner of `job` at `epoch` that has released nothing yet.
  using EmptyRecord = std::function<std::string(const std::string& job, uint64_t epoch)>;

  AuditLedger(AuditLedgerOptions options, EtcdClient* etcd, serve::Clock* clock);
  AuditLedger(const AuditLedger&) = delete;
  AuditLedger& operator=(const AuditLedger&) = delete;

  // Set before the first round or claim.
  void SetSource(Source source, EmptyRecord empty) {
    source_ = std::move(source);
    empty_ = std::move(empty);
  }

  // This replica just claimed `job` at `epoch`: creates its empty record and reads the job's
  // records (so that a job that ends here within publish_interval still has its earlier owners').
  // Returns the etcd calls that failed.
  int Claimed(const std::string& job, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);

  // One round: deletes the records of jobs that ended here; when publish_interval has passed,
  // writes the changed records of `owned` (job -> epoch) and the last words of lost jobs, reads
  // every record back, and deletes orphans (`jobs_with_owner`: the jobs whose ownership key the
  // view just read). Returns the etcd calls that failed.
  int Round(const absl::flat_hash_map<std::string, uint64_t>& owned,
            const absl::flat_hash_set<std::string>& jobs_with_owner) ABSL_LOCKS_EXCLUDED(mu_);
  // `job` may no longer be served here: its record, as the Source gives it now, is written at the
  // next publication, when the key is still the one this replica created.
  void Lost(const std::string& job) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the last words queued by Lost now, without waiting for a round (a replica stopping).
  // Returns the etcd calls that failed.
  int FlushLastWords() ABSL_LOCKS_EXCLUDED(mu_);
  // `job` ended here: its records are deleted at the next round and no longer answered.
  void Ended(const std::string& job) ABSL_LOCKS_EXCLUDED(mu_);
  // The records of `job` published by owners at epochs other than `epoch`, oldest epoch first,
  // as last read.
  std::vector<std::string> Others(const std::string& job, uint64_t epoch) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A record this replica writes: its epoch, the key's create_revision once created (0: not yet;
  // -1: deleted since, never written again), and the value last written.
  struct Mine {
    uint64_t epoch = 0;
    int64_t created = 0;
    std::string written;
  };
  // A lost job's record as the Source gave it (nullopt: it had none), and its epoch.
  struct LastWord {
    uint64_t epoch = 0;
    std::optional<std::string> record;
  };
  // Writes `words` (job -> last word) to the records this replica created and that are not
  // deleted since.
  int WriteLastWords(absl::flat_hash_map<std::string, LastWord> words);
  // Moves the records created by claims into mine_.
  void TakeClaims() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `value` as `job`'s record at `mine.epoch`; false when etcd failed.
  bool Write(const std::string& job, const std::string& value, Mine* mine);
  // job -> epoch -> record.
  using Records = absl::flat_hash_map<std::string, std::map<uint64_t, std::string>>;
  static std::string KeyOf(const std::string& job, uint64_t epoch);
  static std::string JobPrefix(const std::string& job);
  // The records among `kvs` (keys of kAuditPrefix); keys of another layout are left out.
  static Records ParseRecords(std::vector<KeyValue> kvs);
  // Reads every record back into records_ and deletes the orphans' (part of a publication).
  // Returns the etcd calls that failed.
  int ReadBackAndSweep(const absl::flat_hash_set<std::string>& jobs_with_owner, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

  const AuditLedgerOptions options_;
  EtcdClient* const etcd_;
  serve::Clock* const clock_;
  Source source_;
  EmptyRecord empty_;

  // Used by Round only (one thread at a time).
  absl::flat_hash_map<std::string, Mine> mine_;
  absl::Time next_publish_ = absl::InfinitePast();
  // Jobs with records and no owner: job -> when first seen so.
  absl::flat_hash_map<std::string, absl::Time> unowned_since_;

  mutable absl::Mutex mu_;
  // Every job's records as last read: job -> epoch -> record.
  Records records_ ABSL_GUARDED_BY(mu_);
  // Last words to write: job -> its last word.
  absl::flat_hash_map<std::string, LastWord> last_words_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> ended_ ABSL_GUARDED_BY(mu_);
  // The jobs owned here at the last round or claimed since: job -> epoch (Lost reads it here).
  absl::flat_hash_map<std::string, uint64_t> owned_ ABSL_GUARDED_BY(mu_);
  // Records created by claims since the last round.
  absl::flat_hash_map<std::string, Mine> claimed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_AUDIT_LEDGER_H_
