// SimEtcd: etcd in the simulated world. The store is a FakeEtcd on the world's clock (revisions,
// leases that expire on simulated time and delete their keys). Each replica reaches it over a link
// of its own: a request is applied when it arrives and its answer reaches the caller after the
// reply delay, unless the caller's timeout comes first (DEADLINE_EXCEEDED; the request may still
// have been applied, as with a real etcd). A link can be slowed (extra delay each way) or cut (a
// partition: what is sent while it lasts is lost) for a while.
//
// Truth() answers from the store itself, with no link: what etcd holds now, for the checker.
//
// Not thread-safe (one simulation thread). Does not own the world.
#ifndef PSYNC_TESTS_SIMULATION_SIM_ETCD_H_
#define PSYNC_TESTS_SIMULATION_SIM_ETCD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/ha/fake_etcd_client.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

class SimEtcd {
 public:
  explicit SimEtcd(World* world) : world_(world), store_(world->clock()) {}

  // A new link (one per replica process). Returns its id.
  size_t NewLink();
  // Link `link` adds `extra` to each direction's delay until now + `length`.
  void Slow(size_t link, absl::Duration extra, absl::Duration length);
  // Link `link` loses everything sent on it until now + `length`.
  void Partition(size_t link, absl::Duration length);

  // Sends `op` over `link`. `done` runs exactly once: with the answer, or with DEADLINE_EXCEEDED
  // at now + `timeout` when the answer has not come by then (lost, or late).
  template <typename T>
  void Call(size_t link, absl::Duration timeout,
            std::function<absl::StatusOr<T>(server::ha::EtcdClient&)> op,
            std::function<void(absl::StatusOr<T>)> done);

  // The key as etcd holds it now (no link, no delay): the checker's truth.
  std::optional<server::ha::KeyValue> Truth(const std::string& key);

  uint64_t calls() const { return calls_; }
  uint64_t lost() const { return lost_; }

 private:
  struct Link {
    explicit Link(Rng r, uint64_t o) : rng(r), origin(o) {}
    Rng rng;
    uint64_t origin;
    absl::Time slow_until = absl::InfinitePast();
    absl::Duration extra;
    absl::Time cut_until = absl::InfinitePast();
  };
  // One direction's delay on `link` now.
  absl::Duration Delay(Link& link);
  bool Cut(const Link& link) const { return world_->now() < link.cut_until; }

  World* const world_;
  server::ha::FakeEtcd store_;
  std::vector<Link> links_;
  uint64_t calls_ = 0;
  uint64_t lost_ = 0;
};

template <typename T>
void SimEtcd::Call(size_t link_id, absl::Duration timeout,
                   std::function<absl::StatusOr<T>(server::ha::EtcdClient&)> op,
                   std::function<void(absl::StatusOr<T>)> done) {
  ++calls_;
  auto answered = std::make_shared<bool>(false);
  auto finish = [answered, done](absl::StatusOr<T> result) {
    if (*answered) return;
    *answered = true;
    done(std::move(result));
  };
  Link& link = links_[link_id];
  const uint64_t origin = link.origin;
  world_->After(timeout, origin, [finish, timeout] {
    finish(absl::DeadlineExceededError(
        absl::StrCat("etcd did not answer within ", absl::FormatDuration(timeout))));
  });
  if (Cut(link)) {
    ++lost_;
    return;
  }
  world_->After(Delay(link), origin, [this, link_id, op, finish, origin] {
    Link& l = links_[link_id];
    if (Cut(l)) {
      ++lost_;
      return;
    }
    absl::StatusOr<T> result = op(store_);
    world_->After(Delay(l), origin, [this, link_id, finish, result = std::move(result)] {
      if (Cut(links_[link_id])) {
        ++lost_;
        return;
      }
      finish(result);
    });
  });
}

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_SIM_ETCD_H_
