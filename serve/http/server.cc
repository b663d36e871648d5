#include "serve/http/server.h"

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace psync::http {
namespace {

// Connections the kernel completes before the accept thread takes them (capped by somaxconn).
constexpr int kListenBacklog = 1024;

// Seconds and microseconds, as cpp-httplib's timeout setters take them.
std::pair<time_t, time_t> SecondsAndMicros(absl::Duration d) {
  const int64_t micros = absl::ToInt64Microseconds(d);
  return {static_cast<time_t>(micros / 1000000), static_cast<time_t>(micros % 1000000)};
}

// Loads a PEM certificate chain and its private key into `ctx`. Returns false (leaving `ctx`
// unusable) when either does not parse or the key does not match the certificate.
bool LoadPem(const std::string& cert_pem, const std::string& key_pem, SSL_CTX* ctx) {
  BIO* certs = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  if (certs == nullptr) return false;
  X509* leaf = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  while (ok) {
    X509* intermediate = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
    if (intermediate == nullptr) break;
    // On success the context owns `intermediate`.
    if (SSL_CTX_add_extra_chain_cert(ctx, intermediate) != 1) {
      X509_free(intermediate);
      ok = false;
    }
  }
  BIO_free(certs);
  if (!ok) return false;
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  if (key_bio == nullptr) return false;
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
       SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  // TLS 1.2 and later only.
  return ok && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1;
}

Request ToRequest(const httplib::Request& in) {
  Request out;
  out.method = in.method;
  out.target = in.target;
  out.path = in.path;
  out.version = in.version;
  for (const auto& [name, value] : in.params) out.query.try_emplace(name, value);
  for (const auto& [name, value] : in.headers) {
    auto [it, inserted] = out.headers.try_emplace(absl::AsciiStrToLower(name), value);
    if (!inserted) absl::StrAppend(&it->second, ", ", value);
  }
  return out;
}

void FromResponse(const Response& in, httplib::Response* out) {
  out->status = in.status;
  for (const auto& [name, value] : in.headers) {
    if (absl::StrContains(name, '\r') || absl::StrContains(name, '\n') ||
        absl::StrContains(value, '\r') || absl::StrContains(value, '\n')) {
      continue;
    }
    out->set_header(name, value);
  }
  out->set_content(in.body, in.content_type);
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
  if (started_ || stopped_) {
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
  absl::MutexLock lock(&mu_);
  if (started_ || stopped_) return absl::FailedPreconditionError("server was already started");
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is out of range 0..65535"));
  }
  if (options_.num_threads < 1 || options_.max_requests_per_connection < 1 ||
      options_.idle_timeout < absl::Seconds(1) || options_.read_timeout <= absl::ZeroDuration() ||
      options_.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "HTTP server options: num_threads and max_requests_per_connection must be >= 1, "
        "idle_timeout >= 1s, read_timeout and write_timeout > 0");
  }
  if (options_.tls_cert_pem.empty() != options_.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("HTTPS needs both a certificate and a private key");
  }

  std::unique_ptr<httplib::Server> impl;
  if (tls()) {
    bool loaded = false;
    auto ssl = std::make_unique<httplib::SSLServer>([this, &loaded](SSL_CTX& ctx) {
      loaded = LoadPem(options_.tls_cert_pem, options_.tls_key_pem, &ctx);
      return loaded;
    });
    if (!loaded || !ssl->is_valid()) {
      return absl::InvalidArgumentError(
          "HTTPS: the certificate or private key does not load, or they do not match");
    }
    impl = std::move(ssl);
  } else {
    impl = std::make_unique<httplib::Server>();
  }

  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // and silently take half the connections; a taken port must be an error instead.
  // The callback is kept by cpp-httplib, so it records the listening socket in shared state.
  auto listen_fd = std::make_shared<int>(-1);
  impl->set_socket_options([listen_fd](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listen_fd = sock;
  });
  const int num_threads = options_.num_threads;
  impl->new_task_queue = [num_threads] { return new httplib::ThreadPool(num_threads); };
  impl->set_keep_alive_timeout(static_cast<time_t>(absl::ToInt64Seconds(options_.idle_timeout)));
  impl->set_keep_alive_max_count(static_cast<size_t>(options_.max_requests_per_connection));
  const auto [read_s, read_us] = SecondsAndMicros(options_.read_timeout);
  impl->set_read_timeout(read_s, read_us);
  const auto [write_s, write_us] = SecondsAndMicros(options_.write_timeout);
  impl->set_write_timeout(write_s, write_us);
  // Handlers take no body; a larger one is refused (413) without being read.
  impl->set_payload_max_length(64 << 10);

  routes_ = std::move(pending_routes_);
  pending_routes_ = Routes();
  auto serve = [this](const httplib::Request& in, httplib::Response& out) {
    FromResponse(Dispatch(ToRequest(in)), &out);
  };
  impl->Get(".*", serve);
  auto refuse = [](const httplib::Request&, httplib::Response& out) {
    Response response = Response::Error(405);
    response.headers.emplace_back("Allow", "GET, HEAD");
    FromResponse(response, &out);
  };
  impl->Post(".*", refuse);
  impl->Put(".*", refuse);
  impl->Patch(".*", refuse);
  impl->Delete(".*", refuse);
  impl->Options(".*", refuse);
  impl->set_exception_handler([](const httplib::Request&, httplib::Response& out,
                                 std::exception_ptr) { FromResponse(Response::Error(500), &out); });

  int bound = 0;
  const std::string host_string(host);
  if (port == 0) {
    bound = impl->bind_to_any_port(host_string);
  } else if (impl->bind_to_port(host_string, port)) {
    bound = port;
  } else {
    bound = -1;
  }
  if (bound <= 0) {
    pending_routes_ = std::move(routes_);
    routes_ = Routes();
    return absl::UnavailableError(absl::StrCat("cannot bind HTTP to ", host, ":", port));
  }
  // cpp-httplib listens with a backlog of 5: a burst of connections (64 opened at once in the
  // tests) then loses SYNs while the accept thread is busy, and each loss costs the client a 1 s
  // retransmission. Listening again on the bound socket raises the backlog (Linux).
  if (*listen_fd >= 0) listen(*listen_fd, kListenBacklog);
  httplib::Server* raw = impl.get();
  listener_ = std::thread([raw] { raw->listen_after_bind(); });
  // stop() only takes effect once the listener runs; wait for it so Shutdown cannot be lost.
  while (!raw->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_ = std::move(impl);
  started_ = true;
  port_.store(bound, std::memory_order_release);
  return absl::OkStatus();
}

void Server::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (!started_) return;
  impl_->stop();
  listener_.join();
  impl_.reset();
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
  try {
    return (*handler)(request);
  } catch (...) {
    return Response::Error(500);
  }
}

}  // namespace psync::http
