// World: simulated time and the order of everything that happens in one simulation, from one
// seed. Events run one at a time on the calling thread, in the order of (time, origin, the
// origin's count): an origin (a process, a connection) schedules its own events in an order its
// own code fixes, and draws its randomness from a stream of its own (RngFor), so the order in
// which the code under test calls different origins (which may follow a hash map's order) changes
// nothing. The same seed therefore replays the same run, event for event; the trace's hash says so.
//
// Not thread-safe: a simulation is one thread. Owns its clock (a serve::Clock the code under test
// reads) and its events.
#ifndef PSYNC_TESTS_SIMULATION_WORLD_H_
#define PSYNC_TESTS_SIMULATION_WORLD_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "serve/clock.h"

namespace psync::simulation {

// A small, portable pseudo-random stream (splitmix64): the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n); 0 when n is 0.
  uint64_t Below(uint64_t n);
  bool Chance(double p);
  // Uniform in [lo, hi], to the microsecond.
  absl::Duration Between(absl::Duration lo, absl::Duration hi);

 private:
  uint64_t state_;
};

// Mixes two numbers into a seed (for one origin's stream of a run's seed).
uint64_t MixSeed(uint64_t a, uint64_t b);

class World {
 public:
  World(uint64_t seed, bool keep_trace);
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  serve::Clock* clock() { return &clock_; }
  absl::Time now() { return clock_.Now(); }
  absl::Time start() const { return start_; }
  uint64_t seed() const { return seed_; }

  // A new origin of events, numbered in the order of these calls.
  uint64_t NewOrigin() { return ++origins_; }
  // The random stream of `origin` (the same for the same seed and origin).
  Rng RngFor(uint64_t origin) const { return Rng(MixSeed(seed_, origin)); }

  // Runs `fn` at `at` (now, if `at` is in the past), after the events due earlier and after
  // `origin`'s events already scheduled for the same time.
  void At(absl::Time at, uint64_t origin, std::function<void()> fn);
  void After(absl::Duration delay, uint64_t origin, std::function<void()> fn) {
    At(now() + delay, origin, std::move(fn));
  }

  // Whether a process paused until `paused_until` must wait to run `fn`: then `fn` is scheduled
  // for when the pause ends, in order with `origin`'s other deferred events, and true returned.
  bool DeferWhilePaused(absl::Time paused_until, uint64_t origin, std::function<void()> fn) {
    if (now() >= paused_until) return false;
    At(paused_until, origin, std::move(fn));
    return true;
  }

  // Runs the next event due at or before `until`, moving the clock to its time. False when none is.
  bool RunNext(absl::Time until);
  uint64_t events_run() const { return events_run_; }
  bool idle() const { return queue_.empty(); }

  // One line of the trace, stamped with the simulated time: always hashed, kept when keep_trace.
  void Trace(const std::string& line);
  uint64_t trace_hash() const { return trace_hash_; }
  const std::vector<std::string>& trace() const { return trace_; }

 private:
  struct Event {
    absl::Time at;
    uint64_t origin;
    uint64_t count;
    size_t fn;  // index into functions_
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const;
  };

  const uint64_t seed_;
  const bool keep_trace_;
  const absl::Time start_;
  serve::FakeClock clock_;
  uint64_t origins_ = 0;
  uint64_t counts_ = 0;  // global, increasing: an origin's events keep their order
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<std::function<void()>> functions_;
  std::vector<size_t> free_functions_;
  uint64_t events_run_ = 0;
  uint64_t trace_hash_ = 1469598103934665603ull;  // FNV-1a
  std::vector<std::string> trace_;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_WORLD_H_
