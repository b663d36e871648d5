// A fresh self-signed certificate for "localhost" and 127.0.0.1, for tests of HTTPS. Made with the
// openssl command-line tool (Debian "openssl", installed by tools/bootstrap) in `dir`.
// Errors: INTERNAL when openssl fails or the files cannot be read.
#ifndef PSYNC_SERVE_HTTP_TESTING_TEST_CERTIFICATE_H_
#define PSYNC_SERVE_HTTP_TESTING_TEST_CERTIFICATE_H_

#include <string>

#include "absl/status/statusor.h"

namespace psync::http::testing {

struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
  std::string cert_path;  // the certificate's file: the CA to trust in clients
  std::string key_path;
};

absl::StatusOr<TestCertificate> MakeTestCertificate(const std::string& dir);

}  // namespace psync::http::testing

#endif  // PSYNC_SERVE_HTTP_TESTING_TEST_CERTIFICATE_H_
