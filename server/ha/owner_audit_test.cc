#include "server/ha/owner_audit.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace psync::server {
namespace {

observe::AuditTotals Totals(uint64_t released, uint64_t resumed, uint64_t complete) {
  observe::AuditTotals t;
  t.released = released;
  t.resumed = resumed;
  t.complete = complete;
  return t;
}

TEST(OwnerAuditTest, ARecordDecodesToWhatWasEncoded) {
  observe::AuditTotals t = Totals(120, 4, 118);
  t.double_releases = 1;
  t.checksum_mismatches = 2;
  t.early_syncs = 3;
  t.repeated_syncs = 5;
  const std::string record = EncodeOwnerAudit("10.0.0.7:50051", 42, t);
  absl::StatusOr<v1::OwnerAudit> decoded = DecodeOwnerAudit(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->replica(), "10.0.0.7:50051");
  EXPECT_EQ(decoded->epoch(), 42u);
  EXPECT_EQ(decoded->totals().released(), 120u);
  EXPECT_EQ(decoded->totals().resumed(), 4u);
  EXPECT_EQ(decoded->totals().complete(), 118u);
  EXPECT_EQ(decoded->totals().double_releases(), 1u);
  EXPECT_EQ(decoded->totals().checksum_mismatches(), 2u);
  EXPECT_EQ(decoded->totals().early_syncs(), 3u);
  EXPECT_EQ(decoded->totals().repeated_syncs(), 5u);
  EXPECT_EQ(DecodeOwnerAudit("not json").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OwnerAuditTest, WithoutEarlierOwnersTheJobTotalsAreThisOwnersEvenItsResumed) {
  v1::GetAuditResponse response;
  AuditTotalsToProto(Totals(50, 3, 50), response.mutable_totals());  // after a restart
  AddEarlierOwners({}, &response);
  EXPECT_EQ(response.earlier_owners_size(), 0);
  EXPECT_EQ(response.job_totals().released(), 50u);
  EXPECT_EQ(response.job_totals().resumed(), 3u);
}

TEST(OwnerAuditTest, AReleaseReAnnouncedToALaterOwnerIsCountedOnceAcrossTheOwners) {
  // 200 (step, chunk)s: the first owner released 80 (the last 2 not complete when it was lost),
  // the second 2 again for the ranks that had not synced them plus 70 new, the third 2 + 50.
  observe::AuditTotals first = Totals(80, 0, 78);
  observe::AuditTotals second = Totals(72, 2, 70);
  second.early_syncs = 1;
  v1::GetAuditResponse response;
  AuditTotalsToProto(Totals(52, 2, 52), response.mutable_totals());
  AddEarlierOwners(
      {EncodeOwnerAudit("a:1", 7, first), "garbage", EncodeOwnerAudit("b:1", 9, second)},
      &response);
  ASSERT_EQ(response.earlier_owners_size(), 2);  // the record that does not decode is left out
  EXPECT_EQ(response.earlier_owners(0).replica(), "a:1");
  EXPECT_EQ(response.earlier_owners(1).epoch(), 9u);
  EXPECT_EQ(response.job_totals().released(), 200u);
  EXPECT_EQ(response.job_totals().resumed(), 4u);
  EXPECT_EQ(response.job_totals().complete(), 200u);
  EXPECT_EQ(response.job_totals().early_syncs(), 1u);
  EXPECT_EQ(response.job_totals().double_releases(), 0u);
}

}  // namespace
}  // namespace psync::server
