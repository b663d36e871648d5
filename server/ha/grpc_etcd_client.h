// GrpcEtcdClient: EtcdClient over etcd's v3 gRPC API (KV and Lease services, generated from the
// .proto files Debian ships; see third_party/etcd). Several endpoints: calls go to one of them and
// move to the next when a call finds it unreachable. Every call is bounded by `call_timeout`.
// Thread-safe.
#ifndef PSYNC_SERVER_HA_GRPC_ETCD_CLIENT_H_
#define PSYNC_SERVER_HA_GRPC_ETCD_CLIENT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "server/ha/etcd_client.h"

namespace psync::server::ha {

class GrpcEtcdClient final : public EtcdClient {
 public:
  // `endpoints`: "host:port[,host:port...]" of etcd's client URLs (plain HTTP/2). INVALID_ARGUMENT
  // when empty or an entry is not host:port.
  static absl::StatusOr<std::unique_ptr<GrpcEtcdClient>> Create(
      const std::string& endpoints, absl::Duration call_timeout = absl::Seconds(1));

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override;
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::StatusOr<KeyValue> CreateIfAbsent(const std::string& key, const std::string& value,
                                          int64_t lease) override;
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease) override;
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key) override;
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override;
  absl::StatusOr<bool> DeleteIfCreatedAt(const std::string& key, int64_t create_revision) override;
  absl::StatusOr<bool> PutIfCreatedAt(const std::string& key, const std::string& value,
                                      int64_t create_revision) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

 private:
  // Runs a transaction; returns whether its comparison held (its success operations ran).
  absl::StatusOr<bool> Succeeded(const etcdserverpb::TxnRequest& request);

  struct Endpoint {
    std::string target;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  explicit GrpcEtcdClient(absl::Duration call_timeout) : call_timeout_(call_timeout) {}
  // The endpoint calls go to now.
  Endpoint& Current();
  // Maps a finished call's status; an unreachable endpoint makes the next one current.
  absl::Status Done(const grpc::Status& status, const char* what);
  void SetDeadline(grpc::ClientContext* context) const;

  // Constant after construction.
  const absl::Duration call_timeout_;
  std::vector<Endpoint> endpoints_;

  std::atomic<size_t> current_{0};
};

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_GRPC_ETCD_CLIENT_H_
