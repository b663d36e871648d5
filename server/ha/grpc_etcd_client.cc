#include "server/ha/grpc_etcd_client.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"

namespace psync::server::ha {
namespace {

// A transaction whose operations run only if `key` is the creation at `create_revision`.
etcdserverpb::TxnRequest IfCreatedAt(const std::string& key, int64_t create_revision) {
  etcdserverpb::TxnRequest request;
  etcdserverpb::Compare* same = request.add_compare();
  same->set_result(etcdserverpb::Compare::EQUAL);
  same->set_target(etcdserverpb::Compare::CREATE);
  same->set_key(key);
  same->set_create_revision(create_revision);
  return request;
}

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.lease()};
}

// The end of the range of keys starting with `prefix` (etcd's range_end).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcEtcdClient>> GrpcEtcdClient::Create(
    const std::string& endpoints, absl::Duration call_timeout) {
  std::unique_ptr<GrpcEtcdClient> client(new GrpcEtcdClient(call_timeout));
  for (absl::string_view entry : absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
    absl::ConsumePrefix(&entry, "http://");
    const size_t colon = entry.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(entry.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd: '", entry, "' is not host:port (expected HOST:PORT[,HOST:PORT...])"));
    }
    auto channel = grpc::CreateChannel(std::string(entry), grpc::InsecureChannelCredentials());
    client->endpoints_.push_back(Endpoint{std::string(entry), etcdserverpb::KV::NewStub(channel),
                                          etcdserverpb::Lease::NewStub(channel)});
  }
  if (client->endpoints_.empty()) {
    return absl::InvalidArgumentError("etcd: no endpoint (expected HOST:PORT[,HOST:PORT...])");
  }
  return client;
}

GrpcEtcdClient::Endpoint& GrpcEtcdClient::Current() {
  return endpoints_[current_.load() % endpoints_.size()];
}

void GrpcEtcdClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(call_timeout_));
}

absl::Status GrpcEtcdClient::Done(const grpc::Status& status, const char* what) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded) {
    current_.fetch_add(1);
  }
  return absl::Status(code, absl::StrCat("etcd ", what, ": ", status.error_message()));
}

absl::StatusOr<int64_t> GrpcEtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().lease->LeaseGrant(&context, request, &response), "LeaseGrant");
      !st.ok()) {
    return st;
  }
  if (!response.error().empty())
    return absl::UnavailableError("etcd LeaseGrant: " + response.error());
  return response.id();
}

absl::StatusOr<absl::Duration> GrpcEtcdClient::KeepAlive(int64_t lease) {
  grpc::ClientContext context;
  SetDeadline(&context);
  auto stream = Current().lease->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool exchanged = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  if (!exchanged) {
    context.TryCancel();
    if (auto st = Done(stream->Finish(), "LeaseKeepAlive"); !st.ok()) return st;
    return absl::UnavailableError("etcd LeaseKeepAlive: the stream ended without an answer");
  }
  context.TryCancel();
  stream->Finish();
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd LeaseKeepAlive: lease ", lease, " expired"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status GrpcEtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  absl::Status st = Done(Current().lease->LeaseRevoke(&context, request, &response), "LeaseRevoke");
  if (absl::IsNotFound(st)) return absl::OkStatus();
  return st;
}

absl::StatusOr<KeyValue> GrpcEtcdClient::CreateIfAbsent(const std::string& key,
                                                        const std::string& value, int64_t lease) {
  etcdserverpb::TxnRequest request;
  etcdserverpb::Compare* absent = request.add_compare();
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_key(key);
  absent->set_create_revision(0);
  etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  request.add_success()->mutable_request_range()->set_key(key);
  request.add_failure()->mutable_request_range()->set_key(key);
  etcdserverpb::TxnResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().kv->Txn(&context, request, &response), "Txn"); !st.ok()) return st;
  for (const etcdserverpb::ResponseOp& op : response.responses()) {
    if (op.has_response_range() && op.response_range().kvs_size() == 1) {
      return FromProto(op.response_range().kvs(0));
    }
  }
  return absl::UnavailableError(
      absl::StrCat("etcd Txn: key '", key, "' absent right after its transaction"));
}

absl::Status GrpcEtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  return Done(Current().kv->Put(&context, request, &response), "Put");
}

absl::StatusOr<std::optional<KeyValue>> GrpcEtcdClient::Get(const std::string& key) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().kv->Range(&context, request, &response), "Range"); !st.ok()) {
    return st;
  }
  if (response.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromProto(response.kvs(0)));
}

absl::StatusOr<std::vector<KeyValue>> GrpcEtcdClient::GetPrefix(const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  request.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  request.set_sort_target(etcdserverpb::RangeRequest::KEY);
  etcdserverpb::RangeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().kv->Range(&context, request, &response), "Range"); !st.ok()) {
    return st;
  }
  std::vector<KeyValue> out;
  out.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) out.push_back(FromProto(kv));
  return out;
}

absl::StatusOr<bool> GrpcEtcdClient::DeleteIfCreatedAt(const std::string& key,
                                                       int64_t create_revision) {
  etcdserverpb::TxnRequest request = IfCreatedAt(key, create_revision);
  request.add_success()->mutable_request_delete_range()->set_key(key);
  return Succeeded(request);
}

absl::StatusOr<bool> GrpcEtcdClient::PutIfCreatedAt(const std::string& key,
                                                    const std::string& value,
                                                    int64_t create_revision) {
  etcdserverpb::TxnRequest request = IfCreatedAt(key, create_revision);
  etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  return Succeeded(request);
}

absl::StatusOr<bool> GrpcEtcdClient::Succeeded(const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().kv->Txn(&context, request, &response), "Txn"); !st.ok()) return st;
  return response.succeeded();
}

absl::StatusOr<int64_t> GrpcEtcdClient::DeletePrefix(const std::string& prefix) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::DeleteRangeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context);
  if (auto st = Done(Current().kv->DeleteRange(&context, request, &response), "DeleteRange");
      !st.ok()) {
    return st;
  }
  return response.deleted();
}

}  // namespace psync::server::ha
