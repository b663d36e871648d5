// GrpcEtcdClient against a real etcd: the calls replicas make, with etcd's own answers.
#include "server/ha/grpc_etcd_client.h"

#include "gtest/gtest.h"
#include "tests/ha/etcd_process.h"
#include "tests/worker/processes.h"

namespace psync::server::ha {
namespace {

TEST(GrpcEtcdClientTest, LeasesCreateIfAbsentAndGuardedDelete) {
  testing::EtcdProcess etcd(testing::TempPath("etcd"));
  ASSERT_TRUE(etcd.Start().ok());
  auto client = GrpcEtcdClient::Create(etcd.endpoint());
  ASSERT_TRUE(client.ok()) << client.status();
  EtcdClient& c = **client;

  absl::StatusOr<int64_t> lease = c.GrantLease(absl::Seconds(10));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::StatusOr<absl::Duration> ttl = c.KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, absl::Seconds(10));

  absl::StatusOr<KeyValue> first = c.CreateIfAbsent("/psync/jobs/j", "a:1", *lease);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->value, "a:1");
  EXPECT_EQ(first->lease, *lease);
  EXPECT_GT(first->create_revision, 0);
  // A second creation finds the first: same value, lease and revision.
  absl::StatusOr<KeyValue> second = c.CreateIfAbsent("/psync/jobs/j", "b:1", 0);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->value, "a:1");
  EXPECT_EQ(second->create_revision, first->create_revision);

  ASSERT_TRUE(c.Put("/psync/replicas/a:1", "a:1", *lease).ok());
  absl::StatusOr<std::vector<KeyValue>> listed = c.GetPrefix("/psync/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "/psync/jobs/j");
  EXPECT_EQ((*listed)[1].key, "/psync/replicas/a:1");

  // The guarded delete only deletes the same creation.
  EXPECT_FALSE(*c.DeleteIfCreatedAt("/psync/jobs/j", first->create_revision + 100));
  EXPECT_TRUE(*c.DeleteIfCreatedAt("/psync/jobs/j", first->create_revision));
  EXPECT_FALSE(c.Get("/psync/jobs/j")->has_value());

  // Revoking the lease deletes its keys; a revoked lease's keepalive is NOT_FOUND, and a claim
  // under it is refused.
  ASSERT_TRUE(c.RevokeLease(*lease).ok());
  EXPECT_FALSE(c.Get("/psync/replicas/a:1")->has_value());
  EXPECT_EQ(c.KeepAlive(*lease).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.CreateIfAbsent("/psync/jobs/k", "a:1", *lease).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(c.RevokeLease(*lease).ok());  // again: OK
}

// The audit records' calls: a write guarded by the creation, and a delete by prefix.
TEST(GrpcEtcdClientTest, GuardedPutAndPrefixDelete) {
  testing::EtcdProcess etcd(testing::TempPath("etcd"));
  ASSERT_TRUE(etcd.Start().ok());
  auto client = GrpcEtcdClient::Create(etcd.endpoint());
  ASSERT_TRUE(client.ok()) << client.status();
  EtcdClient& c = **client;

  absl::StatusOr<KeyValue> a = c.CreateIfAbsent("/psync/audit/j/4", "a 0", 0);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(c.CreateIfAbsent("/psync/audit/j/6", "b 0", 0).ok());
  ASSERT_TRUE(c.CreateIfAbsent("/psync/audit/jj/2", "other job", 0).ok());
  EXPECT_TRUE(*c.PutIfCreatedAt("/psync/audit/j/4", "a 7", a->create_revision));
  EXPECT_EQ((*c.Get("/psync/audit/j/4"))->value, "a 7");
  EXPECT_EQ((*c.Get("/psync/audit/j/4"))->create_revision, a->create_revision);
  EXPECT_FALSE(*c.PutIfCreatedAt("/psync/audit/j/4", "stale", a->create_revision + 100));

  absl::StatusOr<int64_t> deleted = c.DeletePrefix("/psync/audit/j/");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  // Deleted: the old creation is never written back, and the other job's record stays.
  EXPECT_FALSE(*c.PutIfCreatedAt("/psync/audit/j/4", "a 9", a->create_revision));
  EXPECT_FALSE(c.Get("/psync/audit/j/4")->has_value());
  EXPECT_EQ((*c.Get("/psync/audit/jj/2"))->value, "other job");
  EXPECT_EQ(*c.DeletePrefix("/psync/audit/j/"), 0);
}

TEST(GrpcEtcdClientTest, BadEndpointsAreInvalidArgument) {
  for (const char* bad : {"", "localhost", "host:port", ":2379", "a:0"}) {
    auto client = GrpcEtcdClient::Create(bad);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  auto dead = GrpcEtcdClient::Create("127.0.0.1:1", absl::Milliseconds(200));
  ASSERT_TRUE(dead.ok());
  const absl::StatusCode code = (*dead)->GrantLease(absl::Seconds(2)).status().code();
  EXPECT_TRUE(code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded)
      << code;
}

}  // namespace
}  // namespace psync::server::ha
