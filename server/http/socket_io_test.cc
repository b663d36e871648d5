#include "server/http/socket_io.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/http/testing/refused_port.h"

namespace psync::http {
namespace {

struct SocketPair {
  UniqueFd a;
  UniqueFd b;
};

SocketPair MakeSocketPair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  SocketPair pair{UniqueFd(fds[0]), UniqueFd(fds[1])};
  EXPECT_TRUE(SetNonBlocking(pair.a.get()).ok());
  EXPECT_TRUE(SetNonBlocking(pair.b.get()).ok());
  return pair;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(UniqueFdTest, ClosesOnResetAndMovesOwnership) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]);
  UniqueFd original(fds[1]);
  UniqueFd moved(std::move(original));
  EXPECT_FALSE(original.valid());
  EXPECT_TRUE(moved.valid());
  UniqueFd target;
  target = std::move(moved);
  EXPECT_FALSE(moved.valid());
  EXPECT_EQ(target.get(), fds[1]);
  target.reset();
  EXPECT_FALSE(target.valid());
  // The write end is closed, so the read end reports end of input.
  char byte;
  EXPECT_EQ(read(read_end.get(), &byte, 1), 0);
}

TEST(SocketIoTest, WriteAllThenReadSomeRoundTrips) {
  SocketPair pair = MakeSocketPair();
  ASSERT_TRUE(WriteAll(pair.a.get(), "hello", Soon()).ok());
  char buffer[16];
  absl::StatusOr<size_t> n = ReadSome(pair.b.get(), buffer, sizeof(buffer), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buffer, *n), "hello");
}

TEST(SocketIoTest, WriteAllSendsMoreThanTheSocketBuffer) {
  SocketPair pair = MakeSocketPair();
  const std::string payload(8 << 20, 'x');
  std::string received;
  std::thread reader([&] {
    char buffer[65536];
    while (true) {
      absl::StatusOr<size_t> n = ReadSome(pair.b.get(), buffer, sizeof(buffer), Soon());
      if (!n.ok() || *n == 0) return;
      received.append(buffer, *n);
    }
  });
  EXPECT_TRUE(WriteAll(pair.a.get(), payload, Soon()).ok());
  pair.a.reset();
  reader.join();
  EXPECT_EQ(received.size(), payload.size());
}

TEST(SocketIoTest, ReadSomeReportsEndOfInput) {
  SocketPair pair = MakeSocketPair();
  pair.a.reset();
  char buffer[4];
  absl::StatusOr<size_t> n = ReadSome(pair.b.get(), buffer, sizeof(buffer), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
}

TEST(SocketIoTest, ReadSomeTimesOut) {
  SocketPair pair = MakeSocketPair();
  char buffer[4];
  absl::StatusOr<size_t> n =
      ReadSome(pair.b.get(), buffer, sizeof(buffer), absl::Now() + absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(n.status())) << n.status();
}

TEST(SocketIoTest, CancelFdAbortsWaits) {
  SocketPair pair = MakeSocketPair();
  int cancel[2];
  ASSERT_EQ(pipe(cancel), 0);
  UniqueFd cancel_read(cancel[0]);
  UniqueFd cancel_write(cancel[1]);
  ASSERT_EQ(write(cancel_write.get(), "x", 1), 1);
  char buffer[4];
  absl::StatusOr<size_t> n =
      ReadSome(pair.b.get(), buffer, sizeof(buffer), absl::InfiniteFuture(), cancel_read.get());
  EXPECT_TRUE(absl::IsCancelled(n.status())) << n.status();
  EXPECT_TRUE(absl::IsCancelled(
      WaitReady(pair.b.get(), POLLIN, absl::InfiniteFuture(), cancel_read.get())));
}

TEST(SocketIoTest, ListenOnPortZeroThenConnect) {
  absl::StatusOr<UniqueFd> listener = Listen("127.0.0.1", 0, 8);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<int> port = LocalPort(listener->get());
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  absl::StatusOr<UniqueFd> client = Connect("127.0.0.1", *port, Soon());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(WaitReady(listener->get(), POLLIN, Soon(), -1).ok());
  UniqueFd accepted(accept(listener->get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  ASSERT_TRUE(SetNonBlocking(accepted.get()).ok());
  ASSERT_TRUE(WriteAll(client->get(), "ping", Soon()).ok());
  char buffer[8];
  absl::StatusOr<size_t> n = ReadSome(accepted.get(), buffer, sizeof(buffer), Soon());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buffer, *n), "ping");
}

TEST(SocketIoTest, ListenRejectsBadPortAndHost) {
  EXPECT_TRUE(absl::IsInvalidArgument(Listen("127.0.0.1", 70000, 8).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Listen("127.0.0.1", -1, 8).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Listen("no.such.host.invalid", 0, 8).status()));
}

TEST(SocketIoTest, ListenOnTakenPortIsUnavailable) {
  absl::StatusOr<UniqueFd> first = Listen("127.0.0.1", 0, 8);
  ASSERT_TRUE(first.ok()) << first.status();
  int port = *LocalPort(first->get());
  EXPECT_TRUE(absl::IsUnavailable(Listen("127.0.0.1", port, 8).status()));
}

TEST(SocketIoTest, ConnectToClosedPortIsUnavailable) {
  absl::StatusOr<UniqueFd> bound = BindRefusedPort();
  ASSERT_TRUE(bound.ok()) << bound.status();
  absl::StatusOr<int> port = LocalPort(bound->get());
  ASSERT_TRUE(port.ok()) << port.status();
  absl::StatusOr<UniqueFd> client = Connect("127.0.0.1", *port, Soon());
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
}

}  // namespace
}  // namespace psync::http
