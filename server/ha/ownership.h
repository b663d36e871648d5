// Ownership: one coordinator replica's view of who owns which job, and its decisions, as a pure
// state machine (no threads, no I/O, no clock reads: `now` is passed in). Replica (replica.h) adds
// the lock and the etcd calls around it.
//
// The model (docs/design.md, "Replicas"): every replica holds one etcd lease, keeps it alive, and
// registers /psync/replicas/<address> under it. A job is owned by the replica whose key
// /psync/jobs/<job> (value: the replica's address, attached to its lease) exists; the key is
// created with a create-if-absent transaction, so at most one replica owns a job at a time. The
// owner's epoch is the key's create_revision: it rises with every new owner, and directives
// carry it so that ranks drop a deposed owner's messages.
//
// Fencing: the lease is granted or renewed by etcd after the request was sent, so it lasts at
// least until sent + ttl on etcd's clock. A replica serves its jobs only while
// now < sent + ttl - margin on its own clock, where `sent` is when the last answered keepalive
// (or the grant) was sent. The lease and the per-message check are one state: the first call that
// sees `now` at or past the deadline (a route, a keepalive's answer, TakeLost) lapses the lease
// for good, whatever answer arrives later. Its jobs are lost (TakeLost) and a new lease must be
// granted before anything is served again. `margin` covers the clocks' rate difference and the
// time a release takes to leave the process.
//
// The etcd latency a replica tolerates (ToleratedEtcdLatency): a keepalive is sent a third of the
// TTL after the previous one was sent, or at once when the previous answer took longer, and must
// be answered before the deadline it extends; a reply latency L holds the lease while
// max(ttl/3, L) + L < ttl - margin.
//
// Reads are fenced like releases (RouteQuery): a replica answers for a job only while it serves
// it, redirects to the owner a recent view of etcd names, and says it cannot tell (UNAVAILABLE)
// when it holds no lease or its view of etcd is older than the lease's TTL.
//
// Which replica should own an unowned job: the highest of hash(job, replica) over the live
// replicas (rendezvous hashing), so jobs spread over replicas and every replica agrees given the
// same view; the preferred replica claims it, the others redirect there.
//
// Thread-compatible (not thread-safe); Replica locks it.
#ifndef PSYNC_SERVER_HA_OWNERSHIP_H_
#define PSYNC_SERVER_HA_OWNERSHIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/ha/etcd_client.h"

namespace psync::server::ha {

inline constexpr char kReplicaPrefix[] = "/psync/replicas/";
inline constexpr char kJobPrefix[] = "/psync/jobs/";
// Why a replica no longer serves a job it served: the one text for its Sessions and messages.
inline constexpr char kLostReason[] =
    "this replica's etcd lease lapsed or the job moved; it no longer serves the job: join again "
    "at any replica";

struct OwnershipOptions {
  // This replica's address as clients reach it (--advertise), e.g. "10.0.0.5:7070".
  std::string self;
  // The etcd lease's TTL (--etcd_lease_ttl).
  absl::Duration lease_ttl = absl::Seconds(5);
  // Serving stops this long before the lease can expire in etcd (see the fencing rule above).
  absl::Duration margin = absl::Seconds(1);
};

// The longest etcd reply latency with which a replica keeps its lease (see above):
// min(2 * ttl / 3 - margin, (ttl - margin) / 2). 2 s for the defaults (TTL 5 s, margin 1 s).
absl::Duration ToleratedEtcdLatency(const OwnershipOptions& options);

// What to do with a request for a job.
enum class RouteKind {
  kServe,     // this replica owns the job and holds its lease: serve it, with `epoch`
  kClaim,     // nobody owns it and this replica should: claim it (Replica does), then serve
  kRedirect,  // `owner` owns it (or should): the client goes there
  kRefuse,    // nobody may serve it here now (no lease; or not owned, for a non-Join): `reason`
  kUnowned,   // (RouteQuery only) a recent view of etcd shows no owner: the job is not running
};

struct Route {
  RouteKind kind = RouteKind::kRefuse;
  uint64_t epoch = 0;
  std::string owner;
  std::string reason;
};

// A job's owner as this replica last saw it.
struct JobOwner {
  std::string job;
  std::string owner;
  uint64_t epoch = 0;
};

class Ownership {
 public:
  explicit Ownership(OwnershipOptions options);

  const OwnershipOptions& options() const { return options_; }

  // --- The lease.
  // A lease `lease` was granted in answer to a request sent at `sent`. Serving may start.
  void LeaseGranted(int64_t lease, absl::Time sent);
  // A keepalive of the current lease sent at `sent` was answered at `now`: the deadline moves to
  // sent + ttl - margin (it never moves back). An answer at or past the deadline comes too late:
  // the lease lapses (see Lapse) instead of being revived. Ignored for another lease (or none).
  void KeepAliveAnswered(int64_t lease, absl::Time sent, absl::Duration ttl, absl::Time now);
  // What the answer to a keepalive of `lease` sent at `sent` did, at `now`: renewed it
  // (KeepAliveAnswered, which may still lapse it, too late), found it expired (NOT_FOUND: Lapse),
  // or failed (etcd not reached: the lease lapses only when its deadline has passed).
  enum class KeepAliveOutcome { kAnswered, kExpired, kFailed };
  KeepAliveOutcome KeepAliveResult(int64_t lease, const absl::StatusOr<absl::Duration>& ttl,
                                   absl::Time sent, absl::Time now);
  // The lease is gone (a keepalive found it expired, or the deadline passed): every owned job is
  // lost (TakeLost returns them) and no job is served until LeaseGranted. Returns the lease
  // that lapsed (0: none held).
  int64_t Lapse();
  // The current lease (0: none) and the time serving stops without a renewal.
  int64_t lease() const { return lease_; }
  absl::Time deadline() const { return deadline_; }
  // Whether a lease is held at `now` (before the deadline).
  bool Holding(absl::Time now) const { return lease_ != 0 && now < deadline_; }
  // When a keepalive is due: a third of the TTL after the last one was sent.
  absl::Time NextKeepAlive() const { return last_sent_ + options_.lease_ttl / 3; }
  // Leases lapsed so far (each once, however it was noticed).
  uint64_t lapses() const { return lapses_; }

  // --- The view of etcd.
  // The live replicas' addresses (from /psync/replicas/), this one included or not.
  void SetReplicas(std::vector<std::string> replicas);
  // Every job key (from /psync/jobs/), read by a request sent at `sent`: each job's owner and
  // epoch. A job this replica owned whose key is gone or now names another creation is lost
  // (TakeLost). The view counts as recent for RouteQuery until sent + lease_ttl.
  void SetJobKeys(const std::vector<KeyValue>& keys, absl::Time sent);
  // The answer to this replica's claim of `job`: the key after the transaction. Returns kServe
  // when the key is this replica's (this lease), else kRedirect to the owner it names.
  Route ClaimAnswered(const std::string& job, const KeyValue& key, absl::Time now);

  // --- Decisions. Each first lapses the lease when `now` is at or past its deadline.
  // A Join for `job` at `now`: kServe (owned here), kRedirect (owned elsewhere, or unowned and
  // another replica is preferred), kClaim (unowned, this replica is preferred; or its key is
  // attached to this replica's current lease: a claim whose answer never came, since etcd applied
  // the transaction after the call timed out; claiming again is answered with that key), kRefuse
  // (no lease held: this replica cannot own anything now; or the key is this replica's under a
  // lapsed lease, until it expires).
  Route RouteJoin(const std::string& job, absl::Time now);
  // Any other message of `job` (attach, check-ins): kServe when owned here and the lease is held,
  // kRedirect when another replica owns it, else kRefuse (the client joins again).
  Route RouteMessage(const std::string& job, absl::Time now);
  // A read of `job` (status, audit, trace, the HTTP API): kServe when served here, kRedirect when
  // a recent view names another owner, kUnowned when a recent view names none, else kRefuse (no
  // lease held, or no recent view: this replica cannot tell who owns the job).
  Route RouteQuery(const std::string& job, absl::Time now);
  // Jobs that were owned here and no longer may be served (the lease lapsed, or etcd shows the
  // key gone or someone else's), each once; the coordinator drops them. A deadline past at `now`
  // lapses the lease first.
  std::vector<std::string> TakeLost(absl::Time now);
  // Lapses the lease when `now` is at or past its deadline. Returns the lease that lapsed (0:
  // none did now).
  int64_t LapseIfPastDeadline(absl::Time now);
  // This replica stops owning `job` (it ended here and its key was deleted).
  void Release(const std::string& job);

  // --- Describing.
  const std::vector<std::string>& replicas() const { return replicas_; }
  // Every job with a known owner, sorted by job.
  std::vector<JobOwner> Owners() const;
  // The one text for a job this replica stopped serving (lease lapsed, or the key moved): its
  // Sessions are ended with it and its messages refused with it.
  std::string LostText(const std::string& job) const;
  // Jobs owned here: job -> epoch.
  const absl::flat_hash_map<std::string, uint64_t>& owned() const { return owned_; }
  // Whether `job` is owned here, and its epoch.
  bool Owns(const std::string& job, uint64_t* epoch = nullptr) const;
  // The replica preferred for `job` among the live ones and this one (rendezvous hashing).
  std::string Preferred(const std::string& job) const;

 private:
  // Whether a job owned here is served (joins, messages) at `now`: while the lease is held. (A
  // job still owned past the deadline exists only under an injected bug that keeps the lease past
  // it; skip_fencing serves it anyway.)
  bool ServesOwnedJob(absl::Time now) const;
  // Why a Join or read of `job` is refused while its key names this replica under a lapsed lease.
  static std::string LapsedLeaseText(const std::string& job);

  const OwnershipOptions options_;
  int64_t lease_ = 0;
  absl::Time deadline_ = absl::InfinitePast();
  absl::Time last_sent_ = absl::InfinitePast();
  uint64_t lapses_ = 0;
  // When the last job listing was requested (InfinitePast: never).
  absl::Time view_sent_ = absl::InfinitePast();
  std::vector<std::string> replicas_;
  // Jobs owned here: job -> epoch.
  absl::flat_hash_map<std::string, uint64_t> owned_;
  // A job key as last seen in etcd.
  struct SeenKey {
    std::string owner;  // the replica's address
    uint64_t epoch = 0;
    int64_t lease = 0;  // the lease the key is attached to
  };
  // Every job's key as last seen in etcd.
  absl::btree_map<std::string, SeenKey> owners_;
  std::vector<std::string> lost_;
};

// A stable 64-bit hash (FNV-1a) of `text`, the same in every process.
uint64_t StableHash(absl::string_view text);

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_OWNERSHIP_H_
