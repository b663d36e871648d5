// Network: the simulated connections between ranks and coordinators. A connection is a pair of
// ordered, reliable streams (up: rank to coordinator; down: coordinator to rank) until it is cut.
// Each direction delivers in send order, after a delay drawn from the connection's own random
// stream (mostly tens to hundreds of microseconds, sometimes tens of milliseconds); a stalled
// direction (a partition of that direction that heals) holds everything sent on it until the stall
// ends. A cut drops what is in flight both ways, and each end finds out on its own, after a
// detection delay (a reset, a keepalive timeout).
//
// Not thread-safe (one simulation thread). Owns its connections; does not own the world.
#ifndef PSYNC_TESTS_SIMULATION_NETWORK_H_
#define PSYNC_TESTS_SIMULATION_NETWORK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "tests/simulation/world.h"

namespace psync::simulation {

enum class Direction { kUp = 0, kDown = 1 };

struct NetworkOptions {
  absl::Duration min_delay = absl::Microseconds(20);
  absl::Duration max_delay = absl::Microseconds(400);
  double slow_message = 0.02;  // share of messages with a slow path
  absl::Duration max_slow_delay = absl::Milliseconds(40);
  absl::Duration max_detection = absl::Milliseconds(300);  // cut -> an end finds out
};

class Network {
 public:
  Network(World* world, NetworkOptions options) : world_(world), options_(options) {}

  // What an end runs (once, with the connection's id) when it finds out the connection was cut.
  using OnCut = std::function<void(uint64_t connection)>;
  // Opens a connection. Returns its id (also its origin of events).
  uint64_t Open(OnCut rank_cut, OnCut coordinator_cut);
  bool IsOpen(uint64_t connection) const;
  // Delivers `deliver` at the other end, in order with the earlier sends in `direction`, unless
  // the connection is cut first.
  void Send(uint64_t connection, Direction direction, std::function<void()> deliver);
  // Cuts the connection (no-op when already cut): in-flight messages are dropped, each end's
  // on_cut runs after its own detection delay.
  void Cut(uint64_t connection, const std::string& why);
  // Holds `direction` of the connection until now + `length`.
  void Stall(uint64_t connection, Direction direction, absl::Duration length);
  // Open connections, in the order they were opened.
  std::vector<uint64_t> open_connections() const;

  uint64_t messages_sent() const { return sent_; }
  uint64_t messages_dropped() const { return dropped_; }
  uint64_t cuts() const { return cuts_; }

 private:
  struct Connection {
    explicit Connection(Rng r) : rng(r) {}
    Rng rng;
    bool open = true;
    absl::Time last_delivery[2];
    OnCut on_cut[2];  // [kUp]: the coordinator's end, [kDown]: the rank's
  };

  World* const world_;
  const NetworkOptions options_;
  absl::flat_hash_map<uint64_t, Connection> connections_;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
  uint64_t cuts_ = 0;
};

}  // namespace psync::simulation

#endif  // PSYNC_TESTS_SIMULATION_NETWORK_H_
