// ReconnectingStream: one bidirectional gRPC stream to the coordinator that reconnects with
// backoff, re-attaches, re-sends what was not acknowledged and hands out what arrives. The rank's
// Session (psync::Client) and the node agent's AgentSession (agent::Upstream) are both built on
// it; what differs between them (how to join, what an attach is, how an answer is read) is the
// StreamProtocol they plug in.
//
// The cycle, run by the stream's reader thread until Close() or a final failure:
//   1. protocol->Prepare(): work before a stream, e.g. a Join RPC. Non-OK: no stream this round.
//   2. The stream is opened (a new epoch). protocol->OnOpen() returns the messages that go first
//      (attach, re-attaches) and whether the stream needs a handshake: then nothing else is
//      written until the protocol calls Established() (e.g. on the attach's Ack), and a stream
//      not established within options.handshake_timeout is cancelled.
//   3. Every tracked message not yet acknowledged is written again, in the order it was first
//      sent (Send() order), then whatever is sent from then on.
//   4. protocol->OnRead() gets each message read.
//   5. The stream ends: protocol->OnClosed() says why and whether to try again. A retry waits a
//      backoff delay (reset once a stream was established and answered, or stayed open longer
//      than the backoff's maximum: ResetsBackoff).
// The writer thread writes one message at a time (protocol->OnWrite() sees each); when it has
// nothing to write it calls protocol->Produce() (e.g. to merge queued check-ins once a flush
// window elapsed).
//
// Messages. Send(id, up, kTracked) keeps `up` until Acknowledge(id) or Abandon(id): it is written
// on the current stream and on every later one. kOnce messages are written on the current stream
// only (dropped if it breaks first). Ids must rise with every Send (request ids do).
//
// Thread-safety: all public methods are thread-safe. Protocol callbacks run on the stream's own
// threads (Prepare, OnOpen, OnRead, OnClosed on the reader thread; Produce and OnWrite on the
// writer thread) with none of the stream's locks held, so they may call Send(), Established() and
// the other public methods. Ownership: owns its two threads and the streams it opens; borrows the
// protocol, which must outlive it. The destructor closes without grace.
#ifndef PSYNC_CLIENT_RECONNECTING_STREAM_H_
#define PSYNC_CLIENT_RECONNECTING_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/backoff.h"
#include "grpcpp/grpcpp.h"

namespace psync {

// The status of a finished gRPC call as an absl::Status whose message starts with `what`; the
// call's binary error details (a replica's OwnerRedirect) are kept as a payload (endpoints.h).
absl::Status StatusFromGrpc(const grpc::Status& status, absl::string_view what);

// Whether a stream or call that ended with `status` is worth another attempt (UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELLED, UNKNOWN).
bool IsTransientFailure(const absl::Status& status);

// Whether a stream that ended with `status` is worth opening again: a transient failure, or, on a
// stream that was `established` (its attach answered), the RESOURCE_EXHAUSTED with which the
// coordinator ends a stream whose outbound queue stayed over its bound (the client did not read
// fast enough; server::kStreamOverflowMessage): a new stream re-attaches and gets what is pending.
// Any other RESOURCE_EXHAUSTED (an attach refused for a limit, a message over the size limit,
// which would only be refused again) is final.
bool IsTransientStreamEnd(const absl::Status& status, bool established);

// Channel arguments that align gRPC's own reconnect backoff with `backoff` (gRPC's default, 1 s
// doubling to 120 s, gates fail-fast calls while the channel is down) and turn on HTTP/2
// keepalive every `keepalive` (zero: off; a ping unanswered for twice that closes the
// connection), so a half-open connection or a paused peer ends the stream.
grpc::ChannelArguments ReconnectingChannelArguments(const BackoffOptions& backoff,
                                                    absl::Duration keepalive);

enum class Delivery { kTracked, kOnce };

// How a stream ended, for StreamProtocol::OnClosed.
struct StreamEnd {
  absl::Status finished;             // Finish()'s status (OK when the peer ended the call)
  bool established = false;          // Established() was called on this stream
  bool handshake_timed_out = false;  // cancelled because the handshake took too long
  bool received = false;             // the peer sent at least one message on it
};

// Whether a stream that ended as `end` after being open for `open_for` proves the peer works, so
// that the next reconnect starts from the backoff's first delay: it was established and the peer
// answered on it, or it stayed open longer than the backoff's maximum. A stream without a
// handshake (established at once) that ends before any answer does not: the delays keep growing
// while the peer is down.
inline bool ResetsBackoff(const StreamEnd& end, absl::Duration open_for,
                          absl::Duration backoff_max) {
  return (end.established && end.received) || open_for > backoff_max;
}

template <typename Up, typename Down>
class StreamProtocol {
 public:
  virtual ~StreamProtocol() = default;
  // Before each stream (e.g. Join). Non-OK: no stream this round; *retry says whether to try
  // again after a backoff delay (false ends the stream for good).
  virtual absl::Status Prepare(bool* retry) = 0;
  // A stream was opened and nothing was written on it yet: the messages to write first, in order.
  // *handshake = true holds every other write until Established().
  virtual std::vector<Up> OnOpen(bool* handshake) = 0;
  // One message read from the stream.
  virtual void OnRead(const Down& down) = 0;
  // The stream ended: why (the status reported as the reason the stream is down, or as the final
  // failure), and *retry whether to open another.
  virtual absl::Status OnClosed(const StreamEnd& end, bool* retry) = 0;
  // The writer has nothing to write: send (Send()) what is due at `now`, and return when to ask
  // again (InfiniteFuture: only after Wake()).
  virtual absl::Time Produce(absl::Time now) { return absl::InfiniteFuture(); }
  // On the writer thread, just before `up` is written (e.g. to count it).
  virtual void OnWrite(const Up& up) {}
};

struct ReconnectingStreamOptions {
  BackoffOptions backoff;
  // How long a stream may wait for Established() after its OnOpen asked for a handshake.
  absl::Duration handshake_timeout = absl::Seconds(30);
  // Cancel the call before finishing it (ends a write blocked on a dead connection), at the cost
  // of reporting CANCELLED rather than the peer's status when both race.
  bool cancel_before_finish = false;
};

template <typename Up, typename Down>
class ReconnectingStream {
 public:
  using Stream = grpc::ClientReaderWriter<Up, Down>;
  // Starts the call of a new stream on `context` (e.g. stub->Session(context)).
  using Opener = std::function<std::unique_ptr<Stream>(grpc::ClientContext* context)>;

  ReconnectingStream(ReconnectingStreamOptions options, Opener opener,
                     StreamProtocol<Up, Down>* protocol)
      : options_(std::move(options)), opener_(std::move(opener)), protocol_(protocol) {}
  ~ReconnectingStream() { Close(absl::ZeroDuration()); }
  ReconnectingStream(const ReconnectingStream&) = delete;
  ReconnectingStream& operator=(const ReconnectingStream&) = delete;

  // Starts the reader and writer threads. Once only.
  void Start() {
    reader_ = std::thread([this] { ReadLoop(); });
    writer_ = std::thread([this] { WriteLoop(); });
  }

  // Stops: half-closes an established stream (WritesDone), waits up to `grace` for the peer to
  // end it, cancels it otherwise, and joins the threads. Idempotent; never hangs past `grace`
  // plus what a protocol callback in progress takes.
  void Close(absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (closing_) {
        mu_.Await(absl::Condition(&closed_));
        return;
      }
      closing_ = true;
      if (!established_ && context_ != nullptr) context_->TryCancel();
    }
    if (writer_.joinable()) writer_.join();
    {
      absl::MutexLock lock(&mu_);
      if (!mu_.AwaitWithTimeout(absl::Condition(&reader_done_), grace) && context_ != nullptr) {
        context_->TryCancel();
      }
    }
    if (reader_.joinable()) reader_.join();
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  // Queues `up` (its request id `id`) for writing; see the header comment for `delivery`.
  void Send(uint64_t id, Up up, Delivery delivery) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (delivery == Delivery::kTracked) {
      tracked_.emplace(id, Tracked{std::make_shared<const Up>(std::move(up)), 0});
      outgoing_.push_back({id, true, false, Up()});
    } else {
      outgoing_.push_back({id, false, false, std::move(up)});
    }
  }
  // `id` was answered: it is not written again. False if it was not tracked (or already settled).
  bool Acknowledge(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return tracked_.erase(id) > 0;
  }
  // The sender gave up on `id` (e.g. timed out): same as Acknowledge.
  bool Abandon(uint64_t id) { return Acknowledge(id); }
  // Runs `edit` on every tracked message not yet acknowledged (e.g. to stamp a new generation on
  // what a resumed stream re-sends).
  void EditTracked(const std::function<void(Up*)>& edit) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& [id, t] : tracked_) {
      auto edited = std::make_shared<Up>(*t.up);
      edit(edited.get());
      t.up = std::move(edited);
    }
  }
  // The current stream's handshake is done: its other writes may flow.
  void Established() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    established_ = true;
  }
  // Something new may be due from Produce().
  void Wake() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++wakes_;
  }
  // Cancels the current stream (it ends, and the cycle goes on as for any broken stream).
  void CancelStream() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (context_ != nullptr) context_->TryCancel();
  }

  // A stream is open (it may still be connecting or shaking hands).
  bool open() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stream_ != nullptr;
  }
  // The current stream is open and established.
  bool established() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stream_ != nullptr && established_;
  }
  bool closing() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return closing_;
  }
  // Tracked messages written again on a later stream than the one they were first written on.
  uint64_t resent() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return resent_;
  }

 private:
  struct Tracked {
    // Shared with a write in progress, so that writing never copies the message; never changed
    // in place (EditTracked replaces it).
    std::shared_ptr<const Up> up;
    uint64_t written_epoch = 0;  // 0: not yet written
  };
  struct Outgoing {
    uint64_t id = 0;
    bool tracked = false;    // the message is tracked_[id]
    bool handshake = false;  // from OnOpen: written before Established()
    Up up;                   // untracked messages
  };

  // Whether outgoing_.front() may be written now.
  bool FrontWritableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stream_ != nullptr && !outgoing_.empty() &&
           (established_ || outgoing_.front().handshake);
  }

  void ReadLoop() ABSL_LOCKS_EXCLUDED(mu_, write_mu_) {
    Backoff backoff(options_.backoff);
    while (true) {
      if (closing()) break;
      bool retry = true;
      absl::Status why = protocol_->Prepare(&retry);
      if (why.ok()) why = RunOneStream(&backoff, &retry);
      absl::MutexLock lock(&mu_);
      if (closing_ || !retry) break;
      if (mu_.AwaitWithTimeout(absl::Condition(&closing_), backoff.NextDelay())) break;
    }
    absl::MutexLock lock(&mu_);
    reader_done_ = true;
  }

  // Opens a stream, reads it until it ends, finishes it; returns OnClosed's answer.
  absl::Status RunOneStream(Backoff* backoff, bool* retry) ABSL_LOCKS_EXCLUDED(mu_, write_mu_) {
    auto context = std::make_unique<grpc::ClientContext>();
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return absl::CancelledError("closing");
      context_ = context.get();
    }
    // Starting the call may wait for the channel; Close() cancels it through context_.
    std::shared_ptr<Stream> stream(opener_(context.get()));
    bool handshake = false;
    std::vector<Up> first = protocol_->OnOpen(&handshake);
    const absl::Time opened = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      stream_ = stream;
      ++epoch_;
      established_ = !handshake;
      handshake_deadline_ =
          handshake ? opened + options_.handshake_timeout : absl::InfiniteFuture();
      handshake_timed_out_ = false;
      outgoing_.clear();
      for (Up& up : first) outgoing_.push_back({0, false, true, std::move(up)});
      for (auto& [id, t] : tracked_) outgoing_.push_back({id, true, false, Up()});
    }
    Down down;
    bool received = false;
    while (stream->Read(&down)) {
      received = true;
      protocol_->OnRead(down);
    }

    StreamEnd end;
    end.received = received;
    {
      absl::MutexLock lock(&mu_);
      stream_ = nullptr;
      end.established = established_;
      end.handshake_timed_out = handshake_timed_out_;
    }
    if (options_.cancel_before_finish) context->TryCancel();
    {
      // No write is in flight once write_mu_ is ours, and none starts: stream_ is gone.
      absl::MutexLock write_lock(&write_mu_);
      end.finished = StatusFromGrpc(stream->Finish(), "Session");
    }
    stream.reset();
    {
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
    }
    context.reset();
    if (ResetsBackoff(end, absl::Now() - opened, options_.backoff.max)) backoff->Reset();
    return protocol_->OnClosed(end, retry);
  }

  void WriteLoop() ABSL_LOCKS_EXCLUDED(mu_, write_mu_) {
    absl::Time ask_at = absl::InfinitePast();  // when Produce() wants to be asked again
    uint64_t wakes_seen = 0;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        // Drop what is settled or not for this stream.
        while (!outgoing_.empty() && outgoing_.front().tracked &&
               tracked_.count(outgoing_.front().id) == 0) {
          outgoing_.pop_front();
        }
        auto ready = [this, &wakes_seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          if (closing_ || FrontWritableLocked()) return true;
          const bool shaking = stream_ != nullptr && !established_;
          if (shaking && !handshake_timed_out_ && absl::Now() >= handshake_deadline_) return true;
          return stream_ != nullptr && established_ && outgoing_.empty() && wakes_ != wakes_seen;
        };
        absl::Time deadline = absl::InfiniteFuture();
        if (stream_ != nullptr && !established_ && !handshake_timed_out_) {
          deadline = handshake_deadline_;
        } else if (stream_ != nullptr && established_ && outgoing_.empty()) {
          deadline = ask_at;
        }
        const bool signalled = mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
        if (closing_) break;
        if (stream_ != nullptr && !established_ && !handshake_timed_out_ &&
            absl::Now() >= handshake_deadline_) {
          handshake_timed_out_ = true;
          if (context_ != nullptr) context_->TryCancel();
          continue;
        }
        if (!FrontWritableLocked()) {
          if (stream_ == nullptr || !established_ || !outgoing_.empty()) continue;
          if (signalled && wakes_ == wakes_seen && absl::Now() < ask_at) continue;
          wakes_seen = wakes_;
        }
      }
      // Nothing to write: ask the protocol for what is due, without our locks.
      if (!HasWritable()) {
        ask_at = protocol_->Produce(absl::Now());
        continue;
      }
      WriteFront();
    }
    // Half-close the stream so the peer ends it.
    absl::MutexLock write_lock(&write_mu_);
    std::shared_ptr<Stream> stream;
    {
      absl::MutexLock lock(&mu_);
      if (established_) stream = stream_;
    }
    if (stream != nullptr) stream->WritesDone();
  }

  bool HasWritable() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return FrontWritableLocked();
  }

  // Writes outgoing_.front() on the current stream.
  void WriteFront() ABSL_LOCKS_EXCLUDED(mu_, write_mu_) {
    absl::MutexLock write_lock(&write_mu_);
    std::shared_ptr<Stream> stream;
    std::shared_ptr<const Up> tracked;  // the tracked message being written, or
    Up once;                            // the untracked one
    {
      absl::MutexLock lock(&mu_);
      if (!FrontWritableLocked()) return;
      Outgoing next = std::move(outgoing_.front());
      outgoing_.pop_front();
      if (next.tracked) {
        auto it = tracked_.find(next.id);
        if (it == tracked_.end()) return;  // settled meanwhile
        if (it->second.written_epoch != 0 && it->second.written_epoch != epoch_) ++resent_;
        it->second.written_epoch = epoch_;
        tracked = it->second.up;
      } else {
        once = std::move(next.up);
      }
      stream = stream_;
    }
    const Up& up = tracked != nullptr ? *tracked : once;
    protocol_->OnWrite(up);
    // A failed write means the stream broke; the reader sees it end and opens the next one,
    // where tracked messages are written again.
    stream->Write(up);
  }

  // Constant after construction.
  const ReconnectingStreamOptions options_;
  const Opener opener_;
  StreamProtocol<Up, Down>* const protocol_;

  // Held while writing to the stream and while finishing it. Order: write_mu_ before mu_.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  mutable absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // rises with every stream opened
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool established_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time handshake_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool handshake_timed_out_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Tracked> tracked_ ABSL_GUARDED_BY(mu_);  // by id: the order of Send()
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mu_);        // for the current stream, in order
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t resent_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread reader_;
  std::thread writer_;
};

}  // namespace psync

#endif  // PSYNC_CLIENT_RECONNECTING_STREAM_H_
