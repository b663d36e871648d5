#include "serve/http/testing/test_certificate.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace psync::http::testing {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return !out->empty();
}

}  // namespace

absl::StatusOr<TestCertificate> MakeTestCertificate(const std::string& dir) {
  TestCertificate out;
  out.cert_path = dir + "/test_cert.pem";
  out.key_path = dir + "/test_key.pem";
  const std::string command =
      absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost",
                   " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout '", out.key_path,
                   "' -out '", out.cert_path, "' 2>/dev/null");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("openssl failed: ", command));
  }
  if (!ReadFile(out.cert_path, &out.cert_pem) || !ReadFile(out.key_path, &out.key_pem)) {
    return absl::InternalError(absl::StrCat("cannot read ", out.cert_path, " or ", out.key_path));
  }
  return out;
}

}  // namespace psync::http::testing
