#include "bench/echo_floor.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/echo.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "serve/daemon.h"

namespace psync::bench {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads one message, writes it back, reads the next. Deletes itself when done.
class EchoReactor final : public grpc::ServerBidiReactor<EchoMessage, EchoMessage> {
 public:
  EchoReactor() { StartRead(&message_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&message_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&message_);
  }
  void OnDone() override { delete this; }

 private:
  EchoMessage message_;
};

class EchoService final : public Echo::CallbackService {
  grpc::ServerBidiReactor<EchoMessage, EchoMessage>* Stream(grpc::CallbackServerContext*) override {
    return new EchoReactor;
  }
};

}  // namespace

int ServeEcho(const std::string& listen, const std::string& port_file) {
  const sigset_t stop = serve::BlockStopSignals();
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "echo server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  serve::WritePortFile(port_file, port);
  serve::WaitForStopSignal(stop);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

absl::StatusOr<std::vector<int64_t>> MeasureRoundTrips(const std::string& target, int count,
                                                       int warmup, int payload_bytes) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = Echo::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stream = stub->Stream(&context);
  EchoMessage ping, pong;
  ping.set_payload(std::string(static_cast<size_t>(payload_bytes), 'x'));
  std::vector<int64_t> rtts;
  rtts.reserve(static_cast<size_t>(count));
  for (int i = 0; i < warmup + count; ++i) {
    ping.set_seq(static_cast<uint64_t>(i));
    const int64_t start = NowNs();
    if (!stream->Write(ping) || !stream->Read(&pong)) {
      grpc::Status status = stream->Finish();
      return absl::UnavailableError(
          absl::StrCat("echo stream to ", target, " broke: ", status.error_message()));
    }
    if (i >= warmup) rtts.push_back(NowNs() - start);
  }
  stream->WritesDone();
  stream->Finish();
  return rtts;
}

absl::StatusOr<uint64_t> RunEchoLoad(const std::string& target, int streams,
                                     absl::Duration interval, absl::Duration duration,
                                     int payload_bytes) {
  std::atomic<uint64_t> round_trips{0};
  absl::Mutex mu;
  absl::Status failure;                                            // the first stream's failure
  const absl::Time start = absl::Now() + absl::Milliseconds(200);  // every stream connected
  const absl::Time end = start + duration;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(streams));
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      // A channel argument of its own gives each stream its own subchannel: its own connection.
      grpc::ChannelArguments args;
      args.SetInt("psync.bench.echo_stream", i);
      auto stub = Echo::NewStub(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
      grpc::ClientContext context;
      auto stream = stub->Stream(&context);
      EchoMessage ping, pong;
      ping.set_payload(std::string(static_cast<size_t>(payload_bytes), 'x'));
      // Streams start spread over one interval, as ranks do not tick in unison.
      absl::Time next = start + interval * i / streams;
      uint64_t done = 0;
      bool broke = false;
      while (next < end) {
        absl::SleepFor(next - absl::Now());
        ping.set_seq(done);
        if (!stream->Write(ping) || !stream->Read(&pong)) {
          broke = true;
          break;
        }
        ++done;
        next += interval;
      }
      stream->WritesDone();
      const grpc::Status status = stream->Finish();
      round_trips += done;
      if (broke) {
        absl::MutexLock lock(&mu);
        if (failure.ok()) {
          failure = absl::UnavailableError(
              absl::StrCat("echo stream ", i, " to ", target, " broke: ", status.error_message()));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu);
  if (!failure.ok()) return failure;
  return round_trips.load();
}

}  // namespace psync::bench
