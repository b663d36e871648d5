#include "server/wire_status.h"

#include "absl/strings/str_cat.h"

namespace psync::server {

std::string BoundEcho(absl::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  // The marker's length depends on the count it states; size it for the largest count possible.
  const size_t room =
      max - std::string("...( more bytes)").size() - absl::StrCat(text.size()).size();
  size_t keep = room;
  // Do not cut a UTF-8 sequence: back up over continuation bytes (10xxxxxx).
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return absl::StrCat(text.substr(0, keep), "...(", text.size() - keep, " more bytes)");
}

v1::SessionDown AckFor(uint64_t request_id, const absl::Status& status) {
  v1::SessionDown down;
  down.mutable_ack()->set_request_id(request_id);
  SetWireStatus(status, down.mutable_ack());
  return down;
}

absl::string_view BoundEchoView(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t keep = max;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return text.substr(0, keep);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), BoundEcho(status.message()));
}

}  // namespace psync::server
