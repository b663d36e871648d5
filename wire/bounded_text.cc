#include "wire/bounded_text.h"

#include "absl/strings/str_cat.h"

namespace psync::wire {

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

absl::string_view BoundEchoView(absl::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t keep = max;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return text.substr(0, keep);
}

}  // namespace psync::wire
