#include "tests/ha/etcd_process.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/ha/grpc_etcd_client.h"
#include "tests/chaos/spawn.h"

namespace psync::testing {

namespace {

// Binds 127.0.0.1:`port` (0: a port the kernel chooses) and releases it; the port bound, or 0.
int BindAndRelease(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

// The lowest ephemeral port (net.ipv4.ip_local_port_range), or Linux's default when unreadable.
int LowestEphemeralPort() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int read_low = 0;
  if (range >> read_low && read_low > 0) low = read_low;
  return low;
}

}  // namespace

int FreePort() {
  // Below the ephemeral range, from 10000 up (ports lower than that are often services'); chosen
  // at random so that tests running at once rarely try the same one.
  constexpr int kLowest = 10000;
  const int below = LowestEphemeralPort();
  if (below > kLowest + 100) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(kLowest, below - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (const int port = BindAndRelease(pick(rng)); port > 0) return port;
    }
  }
  return BindAndRelease(0);
}

EtcdProcess::EtcdProcess(std::string dir)
    : dir_(std::move(dir)), client_port_(FreePort()), peer_port_(FreePort()) {
  if (std::system(absl::StrCat("mkdir -p ", dir_).c_str()) != 0) return;
}

EtcdProcess::~EtcdProcess() { Kill(); }

std::string EtcdProcess::endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

absl::Status EtcdProcess::Start() {
  if (access("/usr/bin/etcd", X_OK) != 0) {
    return absl::FailedPreconditionError(
        "/usr/bin/etcd is missing: install Debian's etcd-server (tools/bootstrap does)");
  }
  const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  const std::string log = absl::StrCat(dir_, "/etcd.", starts_++, ".log");
  pid_ = chaos::Spawn({"/usr/bin/etcd", "--name=psync-test", "--data-dir=" + dir_ + "/data",
                       "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
                       "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
                       "--initial-cluster=psync-test=" + peer},
                      log);
  if (pid_ < 0) return absl::UnavailableError("could not start /usr/bin/etcd");
  auto etcd = server::ha::GrpcEtcdClient::Create(endpoint());
  if (!etcd.ok()) return etcd.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if ((*etcd)->Get("/psync/probe").ok()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::UnavailableError(absl::StrCat("etcd did not answer within 30 s; see ", log));
}

void EtcdProcess::Kill() {
  if (pid_ > 0) chaos::KillAndReap(pid_);
  pid_ = -1;
}

}  // namespace psync::testing
