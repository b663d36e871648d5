#include "server/ha/audit_ledger.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace psync::server::ha {

AuditLedger::AuditLedger(AuditLedgerOptions options, EtcdClient* etcd, serve::Clock* clock)
    : options_(options), etcd_(etcd), clock_(clock) {}

std::string AuditLedger::KeyOf(const std::string& job, uint64_t epoch) {
  return absl::StrCat(JobPrefix(job), epoch);
}

std::string AuditLedger::JobPrefix(const std::string& job) {
  return absl::StrCat(kAuditPrefix, job, "/");
}

AuditLedger::Records AuditLedger::ParseRecords(std::vector<KeyValue> kvs) {
  Records records;
  for (KeyValue& kv : kvs) {
    absl::string_view rest = absl::string_view(kv.key).substr(sizeof(kAuditPrefix) - 1);
    const size_t slash = rest.rfind('/');
    uint64_t epoch = 0;
    if (slash == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(slash + 1), &epoch)) {
      continue;  // not a record of this layout
    }
    records[std::string(rest.substr(0, slash))][epoch] = std::move(kv.value);
  }
  return records;
}

bool AuditLedger::Write(const std::string& job, const std::string& value, Mine* mine) {
  const std::string key = KeyOf(job, mine->epoch);
  if (mine->created == 0) {
    absl::StatusOr<KeyValue> created = etcd_->CreateIfAbsent(key, value, /*lease=*/0);
    if (!created.ok()) return false;
    mine->created = created->create_revision;
    if (created->value != value) {  // a record of this epoch was already there (a last word)
      absl::StatusOr<bool> put = etcd_->PutIfCreatedAt(key, value, mine->created);
      if (!put.ok()) return false;
    }
  } else {
    absl::StatusOr<bool> put = etcd_->PutIfCreatedAt(key, value, mine->created);
    if (!put.ok()) return false;
    if (!*put) mine->created = -1;  // deleted since (the job ended): never written again
  }
  mine->written = value;
  return true;
}

int AuditLedger::Round(const absl::flat_hash_map<std::string, uint64_t>& owned,
                       const absl::flat_hash_set<std::string>& jobs_with_owner) {
  int failures = 0;
  absl::flat_hash_set<std::string> ended;
  absl::flat_hash_map<std::string, LastWord> last_words;
  const absl::Time now = clock_->Now();
  const bool publish = now >= next_publish_;
  TakeClaims();
  {
    absl::MutexLock lock(&mu_);
    owned_ = owned;
    ended.swap(ended_);
    if (publish) last_words.swap(last_words_);
  }
  for (const std::string& job : ended) {
    if (etcd_->DeletePrefix(JobPrefix(job)).ok()) {
      mine_.erase(job);
      last_words.erase(job);
    } else {
      ++failures;
      absl::MutexLock lock(&mu_);
      ended_.insert(job);  // tried again next round
    }
  }
  if (!publish) return failures;
  next_publish_ = now + options_.publish_interval;

  for (const auto& [job, epoch] : owned) {
    Mine& mine = mine_[job];
    if (mine.epoch != epoch) mine = Mine{epoch, 0, ""};
    if (mine.created < 0) continue;
    std::optional<std::string> value = source_ ? source_(job, epoch) : std::nullopt;
    if (!value.has_value() || *value == mine.written) continue;
    if (!Write(job, *value, &mine)) ++failures;
  }

  failures += WriteLastWords(std::move(last_words));
  {
    // Jobs no longer owned here and with no last word to write: they moved on.
    absl::MutexLock lock(&mu_);
    for (auto it = mine_.begin(); it != mine_.end();) {
      auto next = std::next(it);
      if (!owned.contains(it->first) && !last_words_.contains(it->first)) mine_.erase(it);
      it = next;
    }
  }

  return failures + ReadBackAndSweep(jobs_with_owner, now);
}

int AuditLedger::ReadBackAndSweep(const absl::flat_hash_set<std::string>& jobs_with_owner,
                                  absl::Time now) {
  absl::StatusOr<std::vector<KeyValue>> read = etcd_->GetPrefix(kAuditPrefix);
  if (!read.ok()) return 1;
  int failures = 0;
  Records records = ParseRecords(std::move(*read));
  std::vector<std::string> orphans;
  for (const auto& [job, unused] : records) {
    if (jobs_with_owner.contains(job)) {
      unowned_since_.erase(job);
      continue;
    }
    auto since = unowned_since_.try_emplace(job, now).first;
    if (now - since->second >= options_.orphan_ttl) orphans.push_back(job);
  }
  for (auto it = unowned_since_.begin(); it != unowned_since_.end();) {
    auto next = std::next(it);
    if (!records.contains(it->first)) unowned_since_.erase(it);
    it = next;
  }
  for (const std::string& job : orphans) {
    if (etcd_->DeletePrefix(JobPrefix(job)).ok()) {
      records.erase(job);
      unowned_since_.erase(job);
    } else {
      ++failures;
    }
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& job : ended_) records.erase(job);  // ended during this round
  records_ = std::move(records);
  return failures;
}

int AuditLedger::WriteLastWords(absl::flat_hash_map<std::string, LastWord> words) {
  int failures = 0;
  for (auto& [job, word] : words) {
    auto it = mine_.find(job);
    // Never created here: a last word must not create a record after the job ended elsewhere.
    if (word.record.has_value() && it != mine_.end() && it->second.epoch == word.epoch &&
        it->second.created > 0 && !Write(job, *word.record, &it->second)) {
      ++failures;
    }
    mine_.erase(job);
  }
  return failures;
}

int AuditLedger::FlushLastWords() {
  TakeClaims();
  absl::flat_hash_map<std::string, LastWord> words;
  {
    absl::MutexLock lock(&mu_);
    words.swap(last_words_);
  }
  return WriteLastWords(std::move(words));
}

int AuditLedger::Claimed(const std::string& job, uint64_t epoch) {
  int failures = 0;
  Mine mine{epoch, 0, empty_ ? empty_(job, epoch) : std::string()};
  absl::StatusOr<KeyValue> created = etcd_->CreateIfAbsent(KeyOf(job, epoch), mine.written, 0);
  if (created.ok()) {
    mine.created = created->create_revision;
  } else {
    ++failures;  // the owner's rounds create it
    mine.written.clear();
  }
  absl::StatusOr<std::vector<KeyValue>> read = etcd_->GetPrefix(JobPrefix(job));
  std::map<uint64_t, std::string> records;
  if (read.ok()) {
    records = std::move(ParseRecords(std::move(*read))[job]);
  } else {
    ++failures;
  }
  absl::MutexLock lock(&mu_);
  owned_[job] = epoch;
  claimed_[job] = std::move(mine);
  if (read.ok()) {
    if (records.empty()) {
      records_.erase(job);
    } else {
      records_[job] = std::move(records);
    }
  }
  return failures;
}

void AuditLedger::TakeClaims() {
  absl::flat_hash_map<std::string, Mine> claimed;
  {
    absl::MutexLock lock(&mu_);
    claimed.swap(claimed_);
  }
  for (auto& [job, mine] : claimed) mine_[job] = std::move(mine);
}

void AuditLedger::Lost(const std::string& job) {
  uint64_t epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = owned_.find(job);
    if (it == owned_.end()) return;  // lost before its first round: it wrote nothing
    epoch = it->second;
  }
  std::optional<std::string> record = source_ ? source_(job, epoch) : std::nullopt;
  absl::MutexLock lock(&mu_);
  last_words_[job] = LastWord{epoch, std::move(record)};
}

void AuditLedger::Ended(const std::string& job) {
  absl::MutexLock lock(&mu_);
  ended_.insert(job);
  records_.erase(job);
  last_words_.erase(job);
}

std::vector<std::string> AuditLedger::Others(const std::string& job, uint64_t epoch) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  auto it = records_.find(job);
  if (it == records_.end()) return out;
  for (const auto& [e, record] : it->second) {
    if (e != epoch) out.push_back(record);
  }
  return out;
}

}  // namespace psync::server::ha
