// Test helpers for the readiness core: terse builders of plans and items, and stable one-line
// renderings of notices, events and the observable state of a JobTracker, so that tests compare
// exact decisions and assert "state unchanged" by comparing renderings. Test-only.
#ifndef PSYNC_SERVER_CORE_TEST_UTIL_H_
#define PSYNC_SERVER_CORE_TEST_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"

namespace psync::core::testing {

GroupDecl Group(std::string name, std::vector<RankId> ranks);
ChunkPart Part(ChunkId chunk, std::vector<std::string> optimizers, std::vector<GroupDecl> groups);
RankPlan Plan(RankId rank, uint32_t world_size, uint32_t num_chunks, std::vector<ChunkPart> parts,
              std::string incarnation = "i0", Step first_step = 0, std::string job_id = "job");

StagedItem Item(Step step, ChunkId chunk, std::string optimizer,
                std::optional<uint64_t> checksum = std::nullopt);
SyncDoneItem Done(Step step, ChunkId chunk, std::vector<GroupChecksum> checksums = {});

// "directive g1 s0 c2 seq3", "skipped g1 s4", "abort g1 s0".
std::string NoticeText(const Notice& notice);
// "r1 directive g1 s0 c2 seq3".
std::string DeliveryText(const Delivery& delivery);
std::vector<std::string> DeliveryTexts(const Decisions& decisions);
// "release g1 s0 c2 r1 expert seq3": kind, generation, then the fields that are set.
std::string EventText(const Event& event);
std::vector<std::string> EventTexts(const Decisions& decisions);
// The events of `kind`, in order.
std::vector<Event> EventsOf(const Decisions& decisions, EventKind kind);

// Everything a caller can observe of `tracker` at `now`: generation, state, the snapshot, and for
// every rank in [0, world_size) its step and its NoticesToHold() notices.
std::string StateText(const JobTracker& tracker, absl::Time now);

}  // namespace psync::core::testing

#endif  // PSYNC_SERVER_CORE_TEST_UTIL_H_
