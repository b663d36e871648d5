// The synthetic MoE model of psync-worker: its shape, its sync groups, and the byte layout of the
// param buffers that reuse the grad buffers.
//
// The model. W ranks, C chunks. Every chunk holds
//   - dense parameters: D elements, data-parallel over all W ranks (sync group "dp");
//   - expert parameters: X elements per expert-parallel (EP) rank, EP size E (E divides W). Rank r
//     holds the experts of EP rank k = r % E, replicated over the expert data-parallel group of
//     the W / E ranks with the same k (sync group "edp<k>").
// Two DistOpts per rank, "dense" and "expert", each own one shard of every chunk's buffer of
// their kind. Every chunk has both kinds, so every rank contributes both optimizers to every
// chunk and takes part in every chunk's sync.
//
// One buffer (BufferLayout) per chunk and kind: the grad buffer, fp32, that the param all-gather
// reuses (Megatron's reuse_grad_buf_for_mxfp8_param_ag). It is cut into B buckets of equal size;
// each bucket is sharded over the group (G ranks): group rank i owns elements
// [i * S, (i + 1) * S) of every bucket, S = shard_bucket_elements(). Sizes are padded so that S is
// a whole number of 32-element MXFP8 blocks; padding elements get zero gradients and stay zero.
//
// Byte layout of one bucket of 4 * G * S bytes (fp32 gradients during backward):
//   [0, G * T)            the all-gather's output: group rank i's staged shard at i * T,
//                         T = staged_shard_bytes() = StagedBytes(dtype, S);
//   [G * T, (G + 1) * T)  this rank's staged shard: the DistOpt writes it here, the all-gather
//                         sends it. It lies inside the shared buffer, so before the DistOpt has
//                         staged it holds gradient bytes, and after a sync it holds zeros.
// Both fit: (G + 1) * T <= 4 * G * S for bf16 (T = 2S) and MXFP8 (T = 33S/32) since G >= 1. The
// output and the send region do not overlap, as Collective::AllGather requires.
//
// Plain value types; thread-compatible.
#ifndef PSYNC_WORKER_MODEL_LAYOUT_H_
#define PSYNC_WORKER_MODEL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "worker/compute/formats.h"

namespace psync {
namespace worker {

enum class ParamKind : int { kDense = 0, kExpert = 1 };
inline constexpr ParamKind kParamKinds[] = {ParamKind::kDense, ParamKind::kExpert};

// "dense" / "expert": also the names of the two optimizers in the coordinator's plan.
absl::string_view ParamKindName(ParamKind kind);

// Largest world size for which sums of W synthetic gradients (multiples of 2^-10 in [-1, 1]) are
// exact in fp32: |sum| <= W and W * 2^10 <= 2^24.
inline constexpr int kMaxWorldSize = 16384;
// Elements per chunk and kind are below 2^40 (the synthetic index packs chunk and kind above).
inline constexpr int64_t kMaxElements = int64_t{1} << 36;

// Geometry of one chunk's buffer of one kind, for a sync group of `group_size` ranks.
class BufferLayout {
 public:
  // `real_elements` >= 1, `buckets` >= 1, `group_size` >= 1 (checked by ModelConfig::Validate).
  BufferLayout(int64_t real_elements, int buckets, int group_size, ParamDtype dtype);

  int64_t real_elements() const { return real_elements_; }
  int buckets() const { return buckets_; }
  int group_size() const { return group_size_; }
  ParamDtype dtype() const { return dtype_; }

  // Elements per bucket: ceil(real / buckets) rounded up to a multiple of 32 * group_size.
  int64_t bucket_elements() const { return bucket_elements_; }
  // All elements, padding included: buckets * bucket_elements.
  int64_t padded_elements() const { return bucket_elements_ * buckets_; }
  // Elements one group rank owns in one bucket (a multiple of 32), and in all buckets.
  int64_t shard_bucket_elements() const { return bucket_elements_ / group_size_; }
  int64_t shard_elements() const { return shard_bucket_elements() * buckets_; }
  // Bytes of one staged shard of one bucket.
  int64_t staged_shard_bytes() const { return StagedBytes(dtype_, shard_bucket_elements()); }
  // The shared param/grad buffer: 4 bytes per element.
  int64_t buffer_bytes() const { return 4 * padded_elements(); }

  // Offsets in bytes from the buffer's start.
  int64_t bucket_offset_bytes(int bucket) const { return 4 * bucket * bucket_elements_; }
  int64_t gather_offset_bytes(int bucket) const { return bucket_offset_bytes(bucket); }
  int64_t gather_bytes() const { return group_size_ * staged_shard_bytes(); }
  int64_t gathered_shard_offset_bytes(int bucket, int group_rank) const {
    return gather_offset_bytes(bucket) + group_rank * staged_shard_bytes();
  }
  int64_t send_offset_bytes(int bucket) const {
    return bucket_offset_bytes(bucket) + gather_bytes();
  }

  // Index in the buffer of element j of `group_rank`'s shard of `bucket`.
  int64_t ElementOf(int bucket, int group_rank, int64_t j) const {
    return bucket * bucket_elements_ + group_rank * shard_bucket_elements() + j;
  }
  // Index in a rank's main-param shard (all buckets, bucket-major) of element j of `bucket`.
  int64_t ShardIndexOf(int bucket, int64_t j) const { return bucket * shard_bucket_elements() + j; }

 private:
  int64_t real_elements_;
  int buckets_;
  int group_size_;
  ParamDtype dtype_;
  int64_t bucket_elements_;
};

struct ModelConfig {
  int world_size = 1;
  int rank = 0;
  int num_chunks = 4;
  int64_t dense_elements = 4096;   // D, per chunk
  int64_t expert_elements = 4096;  // X, per chunk and EP rank
  int expert_parallel = 1;         // E
  int buckets = 2;                 // per chunk and kind
  ParamDtype dtype = ParamDtype::kBf16;

  // OK, or INVALID_ARGUMENT naming the field and its allowed range.
  absl::Status Validate() const;

  // This rank's EP rank k, and its expert data-parallel group.
  int ep_rank() const { return rank % expert_parallel; }
  // The sync group of `kind` for this rank: its size, this rank's index in it, its members
  // (ascending global ranks) and its name ("dp" or "edp<k>").
  int GroupSize(ParamKind kind) const;
  int GroupRank(ParamKind kind) const;
  std::vector<int> GroupMembers(ParamKind kind) const;
  std::string GroupName(ParamKind kind) const;

  int64_t RealElements(ParamKind kind) const;
  BufferLayout Layout(ParamKind kind) const;

  // This rank's Join plan: every chunk with optimizers {"dense", "expert"} and groups
  // {"dp", "edp<k>"}. No incarnation (the client picks one).
  psync::v1::JoinRequest JoinRequestFor(const std::string& job_id) const;
};

// "edp<k>".
std::string ExpertGroupName(int ep_rank);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_MODEL_LAYOUT_H_
