#include "server/ha/audit_ledger.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ha/fake_etcd_client.h"

namespace psync::server::ha {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A coordinator's side of the ledger: the record it holds for each (job, epoch).
struct Records {
  absl::flat_hash_map<std::string, std::string> by_key;
  AuditLedger::Source AsSource() {
    return [this](const std::string& job, uint64_t epoch) -> std::optional<std::string> {
      auto it = by_key.find(absl::StrCat(job, "@", epoch));
      if (it == by_key.end()) return std::nullopt;
      return it->second;
    };
  }
};

class AuditLedgerTest : public ::testing::Test {
 protected:
  std::optional<std::string> ValueAt(const std::string& key) {
    absl::StatusOr<std::optional<KeyValue>> kv = etcd_.Get(key);
    EXPECT_TRUE(kv.ok()) << kv.status();
    if (!kv.ok() || !kv->has_value()) return std::nullopt;
    EXPECT_EQ((*kv)->lease, 0) << key << " must outlive its owner's lease";
    return (*kv)->value;
  }

  serve::FakeClock clock_{absl::FromUnixSeconds(1000)};
  FakeEtcd etcd_{&clock_};
  Records a_records_;
  Records b_records_;
  AuditLedger a_{{}, &etcd_, &clock_};
  AuditLedger b_{{}, &etcd_, &clock_};
  const absl::flat_hash_set<std::string> owned_job_{"job"};

  void SetUp() override {
    a_.SetSource(a_records_.AsSource(), Empty("a"));
    b_.SetSource(b_records_.AsSource(), Empty("b"));
  }
  static AuditLedger::EmptyRecord Empty(const std::string& replica) {
    return [replica](const std::string& job, uint64_t epoch) {
      return absl::StrCat(replica, " released nothing of ", job, " at ", epoch);
    };
  }
};

TEST_F(AuditLedgerTest, AnOwnerWritesItsRecordOnlyWhenItChangedAndAtMostEveryInterval) {
  a_records_.by_key["job@5"] = "released 1";
  EXPECT_EQ(a_.Round({{"job", 5}}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "released 1");

  a_records_.by_key["job@5"] = "released 2";
  int calls = etcd_.calls();
  EXPECT_EQ(a_.Round({{"job", 5}}, owned_job_), 0);  // within the interval: nothing
  EXPECT_EQ(etcd_.calls(), calls);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "released 1");

  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(a_.Round({{"job", 5}}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "released 2");

  clock_.Advance(absl::Seconds(1));
  calls = etcd_.calls();
  EXPECT_EQ(a_.Round({{"job", 5}}, owned_job_), 0);  // unchanged: only the read-back
  EXPECT_EQ(etcd_.calls(), calls + 1);
}

TEST_F(AuditLedgerTest, AClaimCreatesTheOwnersRecordAtOnceAndReadsTheEarlierOnes) {
  a_records_.by_key["job@5"] = "a's part";
  a_.Round({{"job", 5}}, owned_job_);
  EXPECT_EQ(b_.Round({}, owned_job_), 0);  // b publishes (nothing) now: its next at +1 s
  clock_.Advance(absl::Milliseconds(200));
  EXPECT_EQ(b_.Claimed("job", 9), 0);  // between b's publications
  EXPECT_EQ(ValueAt("/psync/audit/job/9"), "b released nothing of job at 9");
  EXPECT_THAT(b_.Others("job", 9), ElementsAre("a's part"));
  // Drained before its first publication: its last word goes to the record the claim created.
  b_records_.by_key["job@9"] = "b released 9";
  b_.Lost("job");
  EXPECT_EQ(b_.FlushLastWords(), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/9"), "b released 9");
}

TEST_F(AuditLedgerTest, ALastWordNeverCreatesARecordDeletedSinceTheClaim) {
  EXPECT_EQ(a_.Claimed("job", 5), 0);
  b_.Ended("job");  // the job moved to b and ended there
  b_.Round({}, owned_job_);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
  a_records_.by_key["job@5"] = "a released 9";
  a_.Lost("job");  // a, paused meanwhile, finds its lease lapsed
  EXPECT_EQ(a_.FlushLastWords(), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
}

TEST_F(AuditLedgerTest, TheNewOwnerReadsTheEarlierOwnersRecordsButNotItsOwn) {
  a_records_.by_key["job@5"] = "a's part";
  a_.Round({{"job", 5}}, owned_job_);
  b_records_.by_key["job@9"] = "b's part";
  b_.Round({{"job", 9}}, owned_job_);
  EXPECT_THAT(b_.Others("job", 9), ElementsAre("a's part"));
  EXPECT_THAT(b_.Others("other", 9), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  a_.Round({}, owned_job_);
  EXPECT_THAT(a_.Others("job", 0), ElementsAre("a's part", "b's part"));  // oldest epoch first
}

TEST_F(AuditLedgerTest, ALostJobsLastWordIsWrittenAtTheNextRound) {
  a_records_.by_key["job@5"] = "released 1";
  a_.Round({{"job", 5}}, owned_job_);
  a_records_.by_key["job@5"] = "released 3";
  a_.Lost("job");                    // the coordinator still holds the job here
  a_records_.by_key.erase("job@5");  // then drops it
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(a_.Round({}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "released 3");
}

TEST_F(AuditLedgerTest, AnEndedJobsRecordsAreDeletedAndNeverWrittenBackByAnEarlierOwner) {
  a_records_.by_key["job@5"] = "a's part";
  a_.Round({{"job", 5}}, owned_job_);
  b_records_.by_key["job@9"] = "b's part";
  b_.Round({{"job", 9}}, owned_job_);

  b_.Ended("job");
  EXPECT_THAT(b_.Others("job", 9), IsEmpty());  // at once, before the round
  EXPECT_EQ(b_.Round({}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
  EXPECT_EQ(ValueAt("/psync/audit/job/9"), std::nullopt);

  // The deposed owner, not yet aware, has a newer part and loses the job: neither its periodic
  // write nor its last word brings the record back.
  a_records_.by_key["job@5"] = "a's later part";
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(a_.Round({{"job", 5}}, owned_job_), 0);
  a_.Lost("job");
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(a_.Round({}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
}

TEST_F(AuditLedgerTest, RecordsOfAJobOwnedByNobodyForTheOrphanTtlAreDeleted) {
  a_records_.by_key["job@5"] = "a's part";
  a_.Round({{"job", 5}}, owned_job_);
  // The owner and every rank went away: the job key is gone.
  clock_.Advance(absl::Seconds(1));
  b_.Round({}, {});
  clock_.Advance(absl::Minutes(10) - absl::Seconds(1));
  b_.Round({}, {});
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "a's part");
  // Owned again for a moment (a rank came back): the wait starts over.
  clock_.Advance(absl::Seconds(1));
  b_.Round({}, owned_job_);
  clock_.Advance(absl::Seconds(1));
  b_.Round({}, {});
  clock_.Advance(absl::Minutes(10) - absl::Seconds(1));
  b_.Round({}, {});
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "a's part");
  clock_.Advance(absl::Seconds(1));
  b_.Round({}, {});
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
  EXPECT_THAT(b_.Others("job", 0), IsEmpty());
}

TEST_F(AuditLedgerTest, AnEndThatEtcdRefusedIsTriedAgainNextRound) {
  a_records_.by_key["job@5"] = "a's part";
  a_.Round({{"job", 5}}, owned_job_);
  a_.Ended("job");
  etcd_.SetReachable(false);
  EXPECT_EQ(a_.Round({}, owned_job_), 1);
  etcd_.SetReachable(true);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), "a's part");
  EXPECT_EQ(a_.Round({}, owned_job_), 0);
  EXPECT_EQ(ValueAt("/psync/audit/job/5"), std::nullopt);
}

}  // namespace
}  // namespace psync::server::ha
