#include "server/http/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/request_parser.h"

namespace psync::http {
namespace {

constexpr size_t kReadChunk = 4096;
// Bodies up to this size are sent in the same write as the head.
constexpr size_t kCoalesceLimit = 64 * 1024;
// Input discarded while lingering before the socket is closed regardless.
constexpr size_t kMaxLingerBytes = 256 * 1024;
// Pause before retrying accept() after a resource error.
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

std::string HttpDate(absl::Time now) {
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", now, absl::UTCTimeZone());
}

bool HasLineBreak(absl::string_view text) {
  return text.find_first_of("\r\n") != absl::string_view::npos;
}

// Header fields the server sets itself; a handler's copies are dropped.
bool IsServerOwnedHeader(absl::string_view name) {
  return absl::EqualsIgnoreCase(name, "content-length") ||
         absl::EqualsIgnoreCase(name, "content-type") ||
         absl::EqualsIgnoreCase(name, "connection") || absl::EqualsIgnoreCase(name, "date") ||
         absl::EqualsIgnoreCase(name, "transfer-encoding");
}

// RFC 9110 section 6.4.1: these statuses never carry content.
bool StatusHasBody(int status) { return status >= 200 && status != 204 && status != 304; }

std::string SerializeHead(const Response& response, size_t body_size) {
  std::string head =
      absl::StrCat("HTTP/1.1 ", response.status, " ", ReasonPhrase(response.status), "\r\n");
  if (StatusHasBody(response.status)) {
    if (!HasLineBreak(response.content_type) && !response.content_type.empty()) {
      absl::StrAppend(&head, "Content-Type: ", response.content_type, "\r\n");
    }
    absl::StrAppend(&head, "Content-Length: ", body_size, "\r\n");
  }
  absl::StrAppend(&head, "Date: ", HttpDate(absl::Now()), "\r\n", "Connection: close\r\n");
  for (const auto& [name, value] : response.headers) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value) ||
        name.find(':') != std::string::npos || IsServerOwnedHeader(name)) {
      continue;
    }
    absl::StrAppend(&head, name, ": ", value, "\r\n");
  }
  head += "\r\n";
  return head;
}

// Waits up to `timeout` for `wake_fd` to become readable; true if it did.
bool WokenWithin(int wake_fd, absl::Duration timeout) {
  return WaitReady(wake_fd, POLLIN, absl::Now() + timeout, -1).ok();
}

// The 503 sent by the accept thread when the queue is full: best effort,
// never blocks.
void RejectBusy(int fd) {
  Response response = Response::Error(503);
  response.headers.emplace_back("Retry-After", "1");
  std::string message = SerializeHead(response, response.body.size()) + response.body;
  (void)send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Shutdown(); }

absl::Status Server::Handle(absl::string_view path, Handler handler) {
  return AddRoute(path, std::move(handler), /*prefix=*/false);
}

absl::Status Server::HandlePrefix(absl::string_view prefix, Handler handler) {
  return AddRoute(prefix, std::move(handler), /*prefix=*/true);
}

absl::Status Server::AddRoute(absl::string_view path, Handler handler, bool prefix) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("route \"", path, "\" must start with '/'"));
  }
  if (!handler) {
    return absl::InvalidArgumentError(absl::StrCat("route \"", path, "\" has an empty handler"));
  }
  absl::MutexLock lock(&mu_);
  if (routes_frozen_) {
    return absl::FailedPreconditionError(absl::StrCat("route \"", path, "\" added after Start"));
  }
  if (prefix) {
    auto& prefixes = pending_routes_.prefixes;
    for (const auto& entry : prefixes) {
      if (entry.first == path) {
        return absl::AlreadyExistsError(absl::StrCat("prefix route \"", path, "\" already exists"));
      }
    }
    prefixes.emplace_back(std::string(path), std::move(handler));
    std::stable_sort(prefixes.begin(), prefixes.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  } else if (!pending_routes_.exact.try_emplace(path, std::move(handler)).second) {
    return absl::AlreadyExistsError(absl::StrCat("route \"", path, "\" already exists"));
  }
  return absl::OkStatus();
}

absl::Status Server::Start(absl::string_view host, int port) {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (started_ || stopped_) {
    return absl::FailedPreconditionError("server was already started");
  }
  if (options_.num_workers < 1 || options_.max_pending_connections < 1 ||
      options_.max_header_bytes < 16) {
    return absl::InvalidArgumentError(
        "ServerOptions: num_workers and max_pending_connections must be >= 1 "
        "and max_header_bytes >= 16");
  }
  absl::StatusOr<UniqueFd> listener =
      Listen(host, port, /*backlog=*/options_.max_pending_connections + 64);
  if (!listener.ok()) return listener.status();
  absl::StatusOr<int> bound_port = LocalPort(listener->get());
  if (!bound_port.ok()) return bound_port.status();
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", strerror(errno)));
  }
  UniqueFd wake_read(pipe_fds[0]);
  UniqueFd wake_write(pipe_fds[1]);
  for (int fd : pipe_fds) {
    if (absl::Status status = SetNonBlocking(fd); !status.ok()) return status;
  }

  {
    absl::MutexLock lock(&mu_);
    routes_frozen_ = true;
    routes_ = std::move(pending_routes_);
  }
  listen_fd_ = *std::move(listener);
  wake_read_fd_ = std::move(wake_read);
  wake_write_fd_ = std::move(wake_write);
  port_.store(*bound_port, std::memory_order_release);
  started_ = true;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  workers_.reserve(options_.num_workers);
  for (int i = 0; i < options_.num_workers; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  return absl::OkStatus();
}

void Server::Shutdown() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (!started_ || stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  char byte = 1;
  while (write(wake_write_fd_.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  accept_thread_.join();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  {
    absl::MutexLock lock(&mu_);
    for (int fd : queue_) close(fd);
    queue_.clear();
  }
  listen_fd_.reset();
  wake_read_fd_.reset();
  wake_write_fd_.reset();
}

void Server::AcceptLoop() {
  const int listen_fd = listen_fd_.get();
  const int wake_fd = wake_read_fd_.get();
  while (true) {
    absl::Status ready = WaitReady(listen_fd, POLLIN, absl::InfiniteFuture(), wake_fd);
    if (absl::IsCancelled(ready)) return;
    if (!ready.ok()) {
      // poll() itself failed; back off instead of spinning.
      if (WokenWithin(wake_fd, kAcceptBackoff)) return;
      continue;
    }
    int fd = accept(listen_fd, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: the listener stays readable, so wait
        // a little (or for shutdown) before trying again.
        if (WokenWithin(wake_fd, kAcceptBackoff)) return;
      }
      continue;  // EAGAIN, EINTR, ECONNABORTED, ...: try again.
    }
    if (!SetNonBlocking(fd).ok()) {
      close(fd);
      continue;
    }
    bool queued = false;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.size() < static_cast<size_t>(options_.max_pending_connections)) {
        queue_.push_back(fd);
        queued = true;
      }
    }
    if (!queued) {
      RejectBusy(fd);
      close(fd);
    }
  }
}

bool Server::HasWorkOrStopping() const { return stopping_ || !queue_.empty(); }

void Server::WorkerLoop() {
  while (true) {
    int fd;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Server::HasWorkOrStopping));
      if (stopping_) return;
      fd = queue_.front();
      queue_.pop_front();
    }
    ServeConnection(fd);
    close(fd);
  }
}

void Server::ServeConnection(int fd) const {
  const int wake_fd = wake_read_fd_.get();
  const absl::Time read_deadline = absl::Now() + options_.read_timeout;
  std::string buffer;
  size_t head_end = absl::string_view::npos;
  while (true) {
    head_end = FindHeadEnd(buffer);
    if (head_end != absl::string_view::npos) break;
    if (buffer.size() > options_.max_header_bytes) break;
    size_t old_size = buffer.size();
    buffer.resize(old_size + kReadChunk);
    absl::StatusOr<size_t> n = ReadSome(fd, &buffer[old_size], kReadChunk, read_deadline, wake_fd);
    buffer.resize(old_size + (n.ok() ? *n : 0));
    if (n.ok() && *n > 0) {
      if (!CouldStartRequest(buffer)) {
        Response response = Response::Error(400);
        response.body += "not an HTTP request\n";
        if (SendResponse(fd, response, true)) Linger(fd);
        return;
      }
      continue;
    }
    // Nothing was sent, or the client vanished, or the server is stopping:
    // close without an answer.
    if (buffer.empty() || absl::IsCancelled(n.status())) return;
    if (n.ok()) {  // End of input inside the head.
      SendResponse(fd, Response::Error(400), true);
      return;
    }
    if (absl::IsDeadlineExceeded(n.status())) {
      SendResponse(fd, Response::Error(408), true);
    }
    return;
  }
  Response response;
  bool is_head = false;
  if (head_end == absl::string_view::npos || head_end > options_.max_header_bytes) {
    response = Response::Error(431);
  } else {
    absl::StatusOr<Request> request =
        ParseRequestHead(absl::string_view(buffer).substr(0, head_end));
    if (!request.ok()) {
      response = Response::Error(absl::IsUnimplemented(request.status()) ? 505 : 400);
      absl::StrAppend(&response.body, request.status().message(), "\n");
    } else {
      is_head = request->method == "HEAD";
      response = Dispatch(*request);
    }
  }
  if (SendResponse(fd, response, !is_head)) Linger(fd);
}

Response Server::Dispatch(const Request& request) const {
  const Handler* handler = nullptr;
  auto exact = routes_.exact.find(request.path);
  if (exact != routes_.exact.end()) {
    handler = &exact->second;
  } else {
    for (const auto& [prefix, prefix_handler] : routes_.prefixes) {
      if (absl::StartsWith(request.path, prefix)) {
        handler = &prefix_handler;
        break;
      }
    }
  }
  if (handler == nullptr) return Response::Error(404);
  if (request.method != "GET" && request.method != "HEAD") {
    Response response = Response::Error(405);
    response.headers.emplace_back("Allow", "GET, HEAD");
    return response;
  }
  try {
    return (*handler)(request);
  } catch (...) {
    return Response::Error(500);
  }
}

bool Server::SendResponse(int fd, const Response& response, bool include_body) const {
  const absl::Time deadline = absl::Now() + options_.write_timeout;
  const int wake_fd = wake_read_fd_.get();
  const bool send_body = include_body && StatusHasBody(response.status);
  std::string head = SerializeHead(response, response.body.size());
  if (send_body && response.body.size() <= kCoalesceLimit) {
    head += response.body;
    return WriteAll(fd, head, deadline, wake_fd).ok();
  }
  if (!WriteAll(fd, head, deadline, wake_fd).ok()) return false;
  return !send_body || WriteAll(fd, response.body, deadline, wake_fd).ok();
}

void Server::Linger(int fd) const {
  if (shutdown(fd, SHUT_WR) != 0) return;
  const absl::Time deadline = absl::Now() + options_.linger_timeout;
  char discard[kReadChunk];
  size_t total = 0;
  while (total < kMaxLingerBytes) {
    absl::StatusOr<size_t> n =
        ReadSome(fd, discard, sizeof(discard), deadline, wake_read_fd_.get());
    if (!n.ok() || *n == 0) return;
    total += *n;
  }
}

}  // namespace psync::http
