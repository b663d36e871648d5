// BoundEcho: text a client sent, cut to a bound before it is sent back or kept (a status message,
// an event's detail, an abort reason, a rejected message's job id). No gRPC: the coordinator's
// core types and the wire code both use it. Pure functions; thread-safe.
#ifndef PSYNC_WIRE_BOUNDED_TEXT_H_
#define PSYNC_WIRE_BOUNDED_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace psync::wire {

// The most bytes of text that go back to a client in one field that may quote what a client sent:
// a status message, an event's detail, an abort reason.
inline constexpr size_t kMaxEchoedBytes = 1024;

// `text` when it has at most `max` bytes; otherwise its first bytes (cut at a UTF-8 character
// boundary) followed by "...(<n> more bytes)", `max` bytes at most in all. `max` must leave room
// for the marker (at least 32).
std::string BoundEcho(absl::string_view text, size_t max = kMaxEchoedBytes);
// Where BoundEcho keeps nothing to copy: the longest prefix of `text` of at most `max` bytes that
// does not cut a UTF-8 character (no marker).
absl::string_view BoundEchoView(absl::string_view text, size_t max = kMaxEchoedBytes);

}  // namespace psync::wire

#endif  // PSYNC_WIRE_BOUNDED_TEXT_H_
