// JobRankMap: values keyed by (job id, rank), held by job and then by rank, so that the many ranks
// of one message (a batch's, a notice's) cost one lookup of the job's id and then one of a number
// each, instead of hashing and comparing the id again with every rank; a job's ranks are held in
// pages of consecutive ranks (serve/rank_table.h), so a message's runs of neighbouring ranks read
// one page each. A job's entry goes with its last rank. Thread-compatible; owns its values.
#ifndef PSYNC_SERVE_JOB_RANK_MAP_H_
#define PSYNC_SERVE_JOB_RANK_MAP_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "serve/rank_table.h"

namespace psync::serve {

template <typename V>
class JobRankMap {
 public:
  using Ranks = RankTable<V>;

  // The ranks of `job` with their values; nullptr when it has none.
  const Ranks* RanksOf(absl::string_view job) const {
    auto it = jobs_.find(job);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  // The value of `rank` among `ranks` (what RanksOf answered, perhaps nullptr); nullptr when
  // there is none. For the ranks of one message: its job looked up once.
  static const V* Find(const Ranks* ranks, uint32_t rank) {
    return ranks == nullptr ? nullptr : ranks->Find(rank);
  }
  // Starts loading where Find(ranks, rank) will look, for a message of many ranks to look up all
  // of them without waiting on each in turn. A hint only.
  static void Prefetch(const Ranks* ranks, uint32_t rank) {
    if (ranks != nullptr) ranks->Prefetch(rank);
  }
  // The value of (job, rank); nullptr when there is none.
  const V* Find(absl::string_view job, uint32_t rank) const { return Find(RanksOf(job), rank); }
  // The value of (job, rank), made (value-initialized) when there is none.
  V& operator()(absl::string_view job, uint32_t rank) {
    auto it = jobs_.find(job);
    if (it == jobs_.end()) it = jobs_.try_emplace(std::string(job)).first;
    return it->second[rank];
  }
  // Removes (job, rank) when it is there and `pred(value)` holds (pred may move the value out,
  // since it is then removed); true when it was removed.
  template <typename Pred>
  bool EraseIf(absl::string_view job, uint32_t rank, Pred pred) {
    auto it = jobs_.find(job);
    if (it == jobs_.end()) return false;
    V* value = it->second.Find(rank);
    if (value == nullptr || !pred(*value)) return false;
    it->second.erase(rank);
    if (it->second.empty()) jobs_.erase(it);
    return true;
  }
  // fn(job, rank, value) for each, in no particular order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& entry : jobs_) {
      const std::string& job = entry.first;
      entry.second.ForEach([&](uint32_t rank, const V& value) { fn(job, rank, value); });
    }
  }
  bool empty() const { return jobs_.empty(); }
  void swap(JobRankMap& other) { jobs_.swap(other.jobs_); }

 private:
  absl::flat_hash_map<std::string, Ranks> jobs_;
};

}  // namespace psync::serve

#endif  // PSYNC_SERVE_JOB_RANK_MAP_H_
