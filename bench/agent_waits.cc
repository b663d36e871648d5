#include "bench/agent_waits.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace psync::bench {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The histogram a series name and its labels belong to, or null.
WaitHistogram* Which(AgentWaits* w, absl::string_view family, absl::string_view labels) {
  struct Known {
    const char* family;
    const char* label;  // "" when the family has no label of its own
    WaitHistogram AgentWaits::*histogram;
  };
  static const Known kKnown[] = {
      {"psync_agent_upstream_wait_seconds", "from=\"rank\"", &AgentWaits::up_from_rank},
      {"psync_agent_upstream_wait_seconds", "from=\"agent\"", &AgentWaits::up_from_agent},
      {"psync_agent_fanout_seconds", "to=\"rank\"", &AgentWaits::fanout_to_rank},
      {"psync_agent_fanout_seconds", "to=\"agent\"", &AgentWaits::fanout_to_agent},
      {"psync_agent_down_wait_seconds", "to=\"rank\"", &AgentWaits::down_to_rank},
      {"psync_agent_down_wait_seconds", "to=\"agent\"", &AgentWaits::down_to_agent},
      {"psync_agent_down_write_seconds", "to=\"rank\"", &AgentWaits::write_to_rank},
      {"psync_agent_down_write_seconds", "to=\"agent\"", &AgentWaits::write_to_agent},
      {"psync_agent_stream_down_wait_seconds", "", &AgentWaits::coordinator_down},
      {"psync_agent_stream_down_write_seconds", "", &AgentWaits::coordinator_write},
      {"psync_decision_delivery_seconds", "", &AgentWaits::coordinator_delivery},
      {"psync_agent_directive_age_seconds", "at=\"read\"", &AgentWaits::age_read},
      {"psync_agent_directive_age_seconds", "at=\"queued_to_ranks\"",
       &AgentWaits::age_queued_to_ranks},
      {"psync_agent_directive_age_seconds", "at=\"queued_to_agent\"",
       &AgentWaits::age_queued_to_agent},
  };
  for (const Known& k : kKnown) {
    if (family == k.family && absl::StrContains(labels, k.label)) return &(w->*k.histogram);
  }
  return nullptr;
}

}  // namespace

void WaitHistogram::Add(const WaitHistogram& other, int sign) {
  for (const auto& [bound, n] : other.cumulative) cumulative[bound] += sign * n;
  sum_s += sign * other.sum_s;
  count += sign * other.count;
}

double WaitHistogram::QuantileBound(double q) const {
  if (count == 0) return 0;
  const double need = q * static_cast<double>(count);
  for (const auto& [bound, n] : cumulative) {
    if (static_cast<double>(n) >= need) return bound;
  }
  return kInf;
}

std::string WaitHistogram::Json() const {
  auto us = [](double bound) { return std::isinf(bound) ? -1.0 : bound * 1e6; };
  return absl::StrFormat("{\"count\":%d,\"mean_us\":%.1f,\"p50_le_us\":%.0f,\"p99_le_us\":%.0f}",
                         count, count > 0 ? sum_s / static_cast<double>(count) * 1e6 : 0.0,
                         us(QuantileBound(0.5)), us(QuantileBound(0.99)));
}

void AgentWaits::Add(const AgentWaits& other, int sign) {
  up_from_rank.Add(other.up_from_rank, sign);
  up_from_agent.Add(other.up_from_agent, sign);
  fanout_to_rank.Add(other.fanout_to_rank, sign);
  fanout_to_agent.Add(other.fanout_to_agent, sign);
  down_to_rank.Add(other.down_to_rank, sign);
  down_to_agent.Add(other.down_to_agent, sign);
  write_to_rank.Add(other.write_to_rank, sign);
  write_to_agent.Add(other.write_to_agent, sign);
  coordinator_down.Add(other.coordinator_down, sign);
  coordinator_write.Add(other.coordinator_write, sign);
  coordinator_delivery.Add(other.coordinator_delivery, sign);
  age_read.Add(other.age_read, sign);
  age_queued_to_ranks.Add(other.age_queued_to_ranks, sign);
  age_queued_to_agent.Add(other.age_queued_to_agent, sign);
}

std::string AgentWaits::Json() const {
  return absl::StrCat(
      "{\"up_from_rank\":", up_from_rank.Json(), ",\"up_from_agent\":", up_from_agent.Json(),
      ",\"fanout_to_rank\":", fanout_to_rank.Json(),
      ",\"fanout_to_agent\":", fanout_to_agent.Json(), ",\"down_to_rank\":", down_to_rank.Json(),
      ",\"down_to_agent\":", down_to_agent.Json(), ",\"write_to_rank\":", write_to_rank.Json(),
      ",\"write_to_agent\":", write_to_agent.Json(), ",\"directive_age_read\":", age_read.Json(),
      ",\"directive_age_queued_to_ranks\":", age_queued_to_ranks.Json(),
      ",\"directive_age_queued_to_agent\":", age_queued_to_agent.Json(), "}");
}

AgentWaits ParseAgentWaits(absl::string_view text) {
  AgentWaits w;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    // name{labels} value, or name value
    const size_t brace = std::min(line.find('{'), space);
    const absl::string_view name = line.substr(0, brace);
    const absl::string_view labels = line.substr(brace, space - brace);
    double value = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &value)) continue;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!absl::EndsWith(name, suffix)) continue;
      WaitHistogram* h = Which(&w, name.substr(0, name.size() - strlen(suffix)), labels);
      if (h == nullptr) break;
      if (absl::string_view(suffix) == "_sum") {
        h->sum_s = value;
      } else if (absl::string_view(suffix) == "_count") {
        h->count = static_cast<uint64_t>(value);
      } else {
        const size_t le = labels.find("le=\"");
        if (le == absl::string_view::npos) break;
        const absl::string_view bound_text =
            labels.substr(le + 4, labels.find('"', le + 4) - (le + 4));
        double bound = kInf;
        if (bound_text != "+Inf" && !absl::SimpleAtod(bound_text, &bound)) break;
        h->cumulative[bound] = static_cast<uint64_t>(value);
      }
      break;
    }
  }
  return w;
}

absl::StatusOr<AgentWaits> ScrapeAgentWaits(int http_port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(http_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, absl::StrCat("connect to agent metrics port ", http_port));
  }
  const std::string request =
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    const int e = errno;
    close(fd);
    return absl::ErrnoToStatus(e, "send /metrics request");
  }
  std::string response;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.1 200") || body == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("agent metrics port ", http_port, ": no 200 answer to GET /metrics"));
  }
  return ParseAgentWaits(absl::string_view(response).substr(body + 4));
}

}  // namespace psync::bench
