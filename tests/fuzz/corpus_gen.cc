// Writes the seed corpus of the fuzz targets: corpus_gen OUT_DIR writes
// OUT_DIR/tracker_fuzzer/seed-* and OUT_DIR/proto_fuzzer/seed-*. Deterministic: running it again
// writes the same files. The seeds are whole honest runs (every rank joins, stages its steps,
// reports SyncDone for its directives) of a few job shapes, plus the faults a fuzzer takes long
// to find on its own: reconnects, restarts, skips, duplicates, stale generations, early syncs.
// The encodings follow tracker_fuzzer.cc and proto_fuzzer.cc.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace {

// ---- tracker_fuzzer inputs ----

enum Kind : uint8_t { kMixed = 0, kDense = 1, kExpert = 2 };

class TrackerSeed {
 public:
  // `edp` indexes the divisors of `world` (the expert data-parallel group size).
  TrackerSeed(uint8_t world, uint8_t chunks, uint8_t edp, uint8_t first_step, bool inconsistent) {
    Put(world - 1);
    Put((chunks - 1) | (inconsistent ? 0x80 : 0));
    Put(edp | (first_step << 4));
  }
  // `edp_mask`: which expert groups take part (expert-only chunks); `no_expert`: ranks without
  // expert parameters.
  TrackerSeed& Chunk(Kind kind, uint8_t edp_mask = 0xff, uint8_t no_expert = 0) {
    Put(kind | (edp_mask << 2));
    Put(no_expert);
    return *this;
  }
  TrackerSeed& Join(uint8_t rank, bool restart = false, uint8_t variant = 0, uint8_t which = 0) {
    Op(0, rank, {static_cast<uint8_t>((restart ? 1 : 0) | (variant << 1)), which});
    return *this;
  }
  // b: checksum choice (b % 4), first few only (0x80), reversed (0x40); g: generation choice.
  TrackerSeed& StageStep(uint8_t rank, uint8_t b = 1, uint8_t g = 0) { return Op(2, rank, {b, g}); }
  TrackerSeed& StageRandom(uint8_t rank, std::vector<uint8_t> item_bytes, uint8_t g = 0) {
    std::vector<uint8_t> bytes = {static_cast<uint8_t>(item_bytes.size() / 3 - 1)};
    bytes.insert(bytes.end(), item_bytes.begin(), item_bytes.end());
    bytes.push_back(g);
    return Op(5, rank, bytes);
  }
  TrackerSeed& Repeat(uint8_t b = 0) { return Op(7, 0, {b}); }
  TrackerSeed& SyncPending(uint8_t rank, uint8_t b = 0, uint8_t perturb = 0, uint8_t g = 0) {
    return Op(8, rank, {b, perturb, g});
  }
  TrackerSeed& SyncRandom(uint8_t rank, std::vector<uint8_t> item_bytes, uint8_t g = 0) {
    std::vector<uint8_t> bytes = {static_cast<uint8_t>(item_bytes.size() / 3 - 1), g};
    bytes.insert(bytes.end(), item_bytes.begin(), item_bytes.end());
    return Op(11, rank, bytes);
  }
  TrackerSeed& Skip(uint8_t rank, uint8_t b = 0, uint8_t g = 0) { return Op(12, rank, {b, g}); }
  TrackerSeed& Advance(uint8_t units) { return Op(13, 0, {units}); }
  TrackerSeed& Attach(uint8_t rank, uint8_t b = 0) { return Op(14, rank, {b}); }
  TrackerSeed& Abort() { return Op(15, 0, {0, 0, 0}); }
  TrackerSeed& Query(uint8_t rank, uint8_t step, uint8_t chunk) {
    return Op(15, rank, {1, step, chunk});
  }
  // Every rank stages its step, then reports SyncDone for its directives.
  TrackerSeed& Steps(uint8_t world, int steps) {
    for (int s = 0; s < steps; ++s) {
      for (uint8_t r = 0; r < world; ++r) StageStep(r, static_cast<uint8_t>(s % 4));
      Advance(3);
      for (uint8_t r = 0; r < world; ++r) SyncPending(r);
    }
    return *this;
  }
  TrackerSeed& JoinAll(uint8_t world) {
    for (uint8_t r = 0; r < world; ++r) Join(r);
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  TrackerSeed& Op(uint8_t code, uint8_t rank, std::vector<uint8_t> rest) {
    Put(code);
    Put(rank);
    for (uint8_t b : rest) Put(b);
    return *this;
  }
  void Put(uint8_t b) { bytes_.push_back(static_cast<char>(b)); }
  std::string bytes_;
};

std::vector<std::string> TrackerSeeds() {
  std::vector<std::string> seeds;
  auto add = [&](const TrackerSeed& s) { seeds.push_back(s.bytes()); };
  // Honest runs of a few shapes.
  add(TrackerSeed(1, 1, 0, 0, false).Chunk(kDense).JoinAll(1).Steps(1, 4));
  add(TrackerSeed(2, 2, 1, 0, false).Chunk(kMixed).Chunk(kExpert).JoinAll(2).Steps(2, 4));
  add(TrackerSeed(4, 3, 1, 1, false)
          .Chunk(kMixed, 0xff, 0b0010)
          .Chunk(kDense)
          .Chunk(kExpert, 0b01)
          .JoinAll(4)
          .Steps(4, 3));
  add(TrackerSeed(6, 4, 2, 2, false)
          .Chunk(kMixed)
          .Chunk(kExpert, 0b101, 0b000100)
          .Chunk(kDense)
          .Chunk(kMixed, 0xff, 0b100000)
          .JoinAll(6)
          .Steps(6, 2));
  add(TrackerSeed(3, 2, 0, 0, false)
          .Chunk(kDense)
          .Chunk(kExpert, 0xff, 0b111)
          .JoinAll(3)
          .Steps(3, 3));
  // Check-ins while the job is forming, released by the last join.
  add(TrackerSeed(3, 1, 0, 0, false)
          .Chunk(kMixed)
          .Join(0)
          .StageStep(0)
          .Join(1)
          .StageStep(1)
          .Join(2)
          .StageStep(2)
          .SyncPending(0)
          .SyncPending(1)
          .SyncPending(2)
          .Steps(3, 2));
  // Reconnects (same incarnation), attaches, queries.
  add(TrackerSeed(2, 2, 0, 0, false)
          .Chunk(kMixed)
          .Chunk(kDense)
          .JoinAll(2)
          .StageStep(0)
          .StageStep(1)
          .Join(0)
          .Attach(0)
          .Attach(1, 7)
          .Query(0, 0, 0)
          .Query(1, 0, 1)
          .SyncPending(0)
          .Join(1)
          .SyncPending(1)
          .Steps(2, 2));
  // A restart (new incarnation) mid-step: a new generation, then everyone rejoins.
  add(TrackerSeed(3, 2, 0, 0, false)
          .Chunk(kMixed)
          .Chunk(kExpert)
          .JoinAll(3)
          .Steps(3, 1)
          .StageStep(0)
          .Join(1, true)
          .StageStep(0)
          .SyncPending(2)
          .Join(0)
          .Join(2)
          .Steps(3, 2));
  // Skips: all ranks skip, and a disagreement (one stages, one skips).
  add(TrackerSeed(2, 1, 0, 0, false)
          .Chunk(kMixed)
          .JoinAll(2)
          .Steps(2, 1)
          .Skip(0)
          .Skip(1)
          .Skip(0)
          .Steps(2, 2));
  add(TrackerSeed(3, 2, 0, 0, false)
          .Chunk(kMixed)
          .Chunk(kDense)
          .JoinAll(3)
          .Skip(0)
          .StageStep(1)
          .JoinAll(3)
          .Steps(3, 1));
  add(TrackerSeed(2, 1, 0, 0, false).Chunk(kDense).JoinAll(2).StageStep(0).Skip(1).Skip(0, 255));
  // Duplicates: the same batch again, and with another checksum.
  add(TrackerSeed(2, 2, 0, 0, false)
          .Chunk(kMixed)
          .Chunk(kMixed)
          .JoinAll(2)
          .StageStep(0, 2)
          .Repeat()
          .Repeat(1)
          .StageStep(1, 3)
          .Repeat(3)
          .SyncPending(0, 0x20)
          .SyncPending(1, 0x40)
          .Steps(2, 2));
  // SyncDone faults: mismatching checksums, second executions, early and random ones.
  add(TrackerSeed(2, 1, 0, 0, false)
          .Chunk(kMixed)
          .JoinAll(2)
          .SyncRandom(0, {0, 0, 0})
          .StageStep(0)
          .StageStep(1)
          .SyncPending(0, 0, 10)
          .SyncPending(1)
          .StageStep(0)
          .StageStep(1)
          .SyncPending(0, 0, 14)
          .SyncPending(1, 0, 11)
          .SyncPending(1, 0, 12)
          .SyncPending(1, 0, 13)
          .SyncPending(1));
  // Random check-ins: other steps, chunks out of range, undeclared optimizers; stale generations.
  add(TrackerSeed(2, 2, 0, 0, false)
          .Chunk(kMixed)
          .Chunk(kExpert)
          .JoinAll(2)
          .StageRandom(0, {0, 0, 0, 5, 1, 1, 0, 2, 4})
          .StageRandom(1, {0, 0, 1, 0, 1, 0})
          .StageStep(0, 1, 14)
          .StageStep(0, 1, 15)
          .Skip(1, 0, 14)
          .Steps(2, 1));
  // Aborts (a lost rank), then everyone joins the next generation.
  add(TrackerSeed(2, 1, 0, 0, false)
          .Chunk(kMixed)
          .JoinAll(2)
          .StageStep(0)
          .Abort()
          .StageStep(1)
          .JoinAll(2)
          .Steps(2, 2));
  // Time passes between check-ins; history trimming over many steps.
  add(TrackerSeed(2, 1, 0, 0, false).Chunk(kMixed).JoinAll(2).Advance(200).Steps(2, 8));
  // Inconsistent plans: each mutation for rank 1 after rank 0 joined, then the right plan.
  for (uint8_t variant = 2; variant <= 8; ++variant) {
    add(TrackerSeed(3, 2, 0, 0, true)
            .Chunk(kMixed)
            .Chunk(kExpert)
            .Join(0)
            .Join(1, false, variant, 1)
            .Join(1)
            .Join(2)
            .Steps(3, 2));
  }
  // The mutated plan first: the others then conflict with it.
  add(TrackerSeed(2, 2, 0, 0, true)
          .Chunk(kMixed)
          .Chunk(kDense)
          .Join(0, false, 7, 1)
          .Join(1)
          .Steps(2, 2));
  // A few random inputs.
  std::mt19937 rng(5);
  for (int i = 0; i < 4; ++i) {
    std::string bytes(64 + 64 * i, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    seeds.push_back(bytes);
  }
  return seeds;
}

// ---- proto_fuzzer inputs ----

class ProtoSeed {
 public:
  ProtoSeed& Join(const psync::v1::JoinRequest& request) {
    return Record(0, request.SerializeAsString());
  }
  // Sends `up` as `rank` in generation `generation`, attaching the rank's slot first if needed.
  ProtoSeed& Up(const std::string& job, uint32_t rank, uint64_t generation,
                const std::string& session, psync::v1::SessionUp up) {
    const uint8_t slot = rank % 4;
    const std::string owner = absl::StrCat(job, "/", rank, "/", generation, "/", session);
    if (owner_[slot] != owner) {
      psync::v1::SessionUp attach;
      attach.mutable_attach()->set_job_id(job);
      attach.mutable_attach()->set_rank(rank);
      attach.mutable_attach()->set_generation(generation);
      attach.mutable_attach()->set_session_id(session);
      Record(2 + 8 * slot, attach.SerializeAsString());
      owner_[slot] = owner;
    }
    return Record(2 + 8 * slot, up.SerializeAsString());
  }
  ProtoSeed& Detach() {
    for (std::string& o : owner_) o.clear();
    return *this;
  }
  ProtoSeed& Advance(uint8_t units) { return Record(6, std::string(units, 'x')); }
  ProtoSeed& Abort() { return Record(7, ""); }
  ProtoSeed& Raw(uint8_t tag, const std::string& bytes) { return Record(tag, bytes); }
  const std::string& bytes() const { return bytes_; }

 private:
  ProtoSeed& Record(uint8_t tag, const std::string& msg) {
    bytes_.push_back(static_cast<char>(tag));
    bytes_.push_back(static_cast<char>(msg.size() & 0xff));
    bytes_.push_back(static_cast<char>(msg.size() >> 8));
    bytes_ += msg;
    return *this;
  }
  std::string bytes_;
  std::string owner_[4];  // the (job, rank, generation, session) each slot is attached as
};

// A job of `world` ranks and `chunks` chunks, all mixed (dense + expert), expert groups of 2.
struct ProtoJob {
  std::string id = "job";
  uint32_t world = 2;
  uint32_t chunks = 1;
  uint64_t first_step = 0;

  psync::v1::JoinRequest Request(uint32_t rank, const std::string& incarnation) const {
    psync::v1::JoinRequest r;
    r.set_job_id(id);
    r.set_world_size(world);
    r.set_rank(rank);
    r.set_num_chunks(chunks);
    r.set_first_step(first_step);
    r.set_incarnation(incarnation);
    const uint32_t num_edp = world >= 2 && world % 2 == 0 ? world / 2 : world;
    for (uint32_t c = 0; c < chunks; ++c) {
      psync::v1::ChunkPlan* part = r.add_chunks();
      part->set_chunk(c);
      part->add_optimizers("dense");
      part->add_optimizers("expert");
      psync::v1::SyncGroup* dp = part->add_groups();
      dp->set_name("dp");
      for (uint32_t x = 0; x < world; ++x) dp->add_ranks(x);
      psync::v1::SyncGroup* edp = part->add_groups();
      edp->set_name(absl::StrCat("edp", rank % num_edp));
      for (uint32_t x = rank % num_edp; x < world; x += num_edp) edp->add_ranks(x);
    }
    return r;
  }
  psync::v1::SessionUp Staged(uint64_t generation, uint64_t step, uint32_t rank,
                              bool checksum = true) const {
    psync::v1::SessionUp up;
    up.set_request_id(step);
    psync::v1::StagedBatch* b = up.mutable_staged();
    b->set_generation(generation);
    for (uint32_t c = 0; c < chunks; ++c) {
      for (const char* opt : {"dense", "expert"}) {
        psync::v1::Staged* s = b->add_items();
        s->set_step(step);
        s->set_chunk(c);
        s->set_optimizer(opt);
        if (checksum) s->set_shard_checksum(step * 31 + c + rank);
      }
    }
    return up;
  }
  psync::v1::SessionUp Done(uint64_t generation, uint64_t step, uint32_t rank,
                            uint32_t executions = 1, uint64_t checksum = 7) const {
    psync::v1::SessionUp up;
    psync::v1::SyncDoneBatch* b = up.mutable_sync_done();
    b->set_generation(generation);
    const uint32_t num_edp = world >= 2 && world % 2 == 0 ? world / 2 : world;
    for (uint32_t c = 0; c < chunks; ++c) {
      psync::v1::SyncDone* d = b->add_items();
      d->set_step(step);
      d->set_chunk(c);
      d->set_executions(executions);
      psync::v1::GroupChecksum* dp = d->add_checksums();
      dp->set_group("dp");
      dp->set_checksum(checksum);
      psync::v1::GroupChecksum* edp = d->add_checksums();
      edp->set_group(absl::StrCat("edp", rank % num_edp));
      edp->set_checksum(checksum + 1);
    }
    return up;
  }
  psync::v1::SessionUp Skip(uint64_t generation, uint64_t step) const {
    psync::v1::SessionUp up;
    up.mutable_skip()->set_generation(generation);
    up.mutable_skip()->set_step(step);
    up.mutable_skip()->set_reason("found_inf");
    return up;
  }
  // Session ids the tracker issues (no secret): g<generation>-r<rank>-s<n>.
  static std::string Session(uint64_t generation, uint32_t rank, uint64_t n) {
    return absl::StrCat("g", generation, "-r", rank, "-s", n);
  }
};

// Joins every rank (sessions issued from `first_session`), then runs `steps` steps.
void HonestRun(const ProtoJob& job, ProtoSeed* seed, uint64_t generation, uint64_t first_session,
               uint64_t from_step, int steps, const std::string& incarnation = "i0") {
  for (uint32_t r = 0; r < job.world; ++r) seed->Join(job.Request(r, incarnation));
  auto session = [&](uint32_t r) { return ProtoJob::Session(generation, r, first_session + r); };
  for (uint64_t s = from_step; s < from_step + steps; ++s) {
    for (uint32_t r = 0; r < job.world; ++r) {
      seed->Up(job.id, r, generation, session(r), job.Staged(generation, s, r));
    }
    for (uint32_t r = 0; r < job.world; ++r) {
      seed->Up(job.id, r, generation, session(r), job.Done(generation, s, r));
    }
  }
}

std::vector<std::string> ProtoSeeds() {
  std::vector<std::string> seeds;
  {
    ProtoJob job;
    job.world = 1;
    ProtoSeed seed;
    HonestRun(job, &seed, 1, 1, 0, 3);
    seeds.push_back(seed.bytes());
  }
  for (uint32_t world : {2u, 3u, 4u}) {
    ProtoJob job;
    job.world = world;
    job.chunks = world - 1;
    job.first_step = world % 2;
    ProtoSeed seed;
    HonestRun(job, &seed, 1, 1, job.first_step, 3);
    seeds.push_back(seed.bytes());
  }
  // More shapes, each with an all-rank skip of its second step now and then.
  for (uint32_t world = 1; world <= 4; ++world) {
    for (uint32_t chunks = 1; chunks <= 3; ++chunks) {
      ProtoJob job;
      job.id = absl::StrCat("job-w", world, "-c", chunks);
      job.world = world;
      job.chunks = chunks;
      ProtoSeed seed;
      HonestRun(job, &seed, 1, 1, 0, 1);
      if ((world + chunks) % 2 == 0) {
        for (uint32_t r = 0; r < world; ++r) {
          seed.Up(job.id, r, 1, ProtoJob::Session(1, r, 1 + r), job.Skip(1, 1));
        }
      }
      seeds.push_back(seed.bytes());
    }
  }
  ProtoJob job;  // 2 ranks, 1 chunk
  {
    // A restart: new incarnation of rank 1, a new generation, everyone joins again.
    ProtoSeed seed;
    HonestRun(job, &seed, 1, 1, 0, 1);
    seed.Join(job.Request(1, "i1")).Detach();
    seed.Up(job.id, 0, 1, ProtoJob::Session(1, 0, 1), job.Staged(1, 1, 0));  // stale
    seed.Join(job.Request(0, "i0"));
    seed.Up(job.id, 1, 2, ProtoJob::Session(2, 1, 3), job.Staged(2, 0, 1));
    seed.Up(job.id, 0, 2, ProtoJob::Session(2, 0, 4), job.Staged(2, 0, 0));
    seed.Up(job.id, 0, 2, ProtoJob::Session(2, 0, 4), job.Done(2, 0, 0));
    seed.Up(job.id, 1, 2, ProtoJob::Session(2, 1, 3), job.Done(2, 0, 1));
    seeds.push_back(seed.bytes());
  }
  {
    // Skips, then an abort and a new generation.
    ProtoSeed seed;
    HonestRun(job, &seed, 1, 1, 0, 1);
    seed.Up(job.id, 0, 1, ProtoJob::Session(1, 0, 1), job.Skip(1, 1));
    seed.Up(job.id, 1, 1, ProtoJob::Session(1, 1, 2), job.Skip(1, 1));
    seed.Up(job.id, 0, 1, ProtoJob::Session(1, 0, 1), job.Staged(1, 2, 0));
    seed.Up(job.id, 1, 1, ProtoJob::Session(1, 1, 2), job.Skip(1, 2));
    seed.Abort().Detach();
    HonestRun(job, &seed, 2, 3, 0, 1);
    seeds.push_back(seed.bytes());
  }
  {
    // Duplicates and conflicts, early and repeated syncs, checksum mismatches.
    ProtoSeed seed;
    for (uint32_t r = 0; r < 2; ++r) seed.Join(job.Request(r, "i0"));
    seed.Join(job.Request(0, "i0"));  // reconnect
    const std::string s0 = ProtoJob::Session(1, 0, 1), s1 = ProtoJob::Session(1, 1, 2);
    seed.Up(job.id, 0, 1, s0, job.Done(1, 0, 0));  // early
    seed.Up(job.id, 0, 1, s0, job.Staged(1, 0, 0));
    seed.Up(job.id, 0, 1, s0, job.Staged(1, 0, 0));
    seed.Up(job.id, 0, 1, s0, job.Staged(1, 0, 0, false));
    seed.Up(job.id, 1, 1, s1, job.Staged(1, 0, 1));
    seed.Up(job.id, 0, 1, s0, job.Done(1, 0, 0, 2));
    seed.Up(job.id, 1, 1, s1, job.Done(1, 0, 1, 1, 8));
    seed.Up(job.id, 1, 1, s1, job.Done(1, 0, 1, 1, 9));
    seeds.push_back(seed.bytes());
  }
  {
    // Bad input: an invalid plan, a conflicting plan, a wrong session, two jobs.
    ProtoSeed seed;
    psync::v1::JoinRequest bad = job.Request(0, "i0");
    bad.set_world_size(0);
    seed.Join(bad);
    seed.Join(job.Request(0, "i0"));
    ProtoJob other = job;
    other.chunks = 2;
    seed.Join(other.Request(1, "i0"));
    seed.Up(job.id, 0, 1, "wrong", job.Staged(1, 0, 0));
    ProtoJob second = job;
    second.id = "job2";
    second.world = 1;
    HonestRun(second, &seed, 1, 1, 0, 1);
    seed.Advance(100);
    seeds.push_back(seed.bytes());
  }
  {
    // Messages before attach, an attach to an unknown job, an empty SessionUp.
    ProtoSeed seed;
    seed.Raw(2, job.Staged(1, 0, 0).SerializeAsString());
    psync::v1::SessionUp attach;
    attach.mutable_attach()->set_job_id("nope");
    attach.mutable_attach()->set_session_id("x");
    seed.Raw(2, attach.SerializeAsString());
    seed.Raw(2, "");
    HonestRun(job, &seed, 1, 1, 0, 1);
    seeds.push_back(seed.bytes());
  }
  return seeds;
}

bool Write(const std::filesystem::path& dir, const std::vector<std::string>& seeds) {
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < seeds.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "seed-%02zu", i);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(seeds[i].data(), static_cast<std::streamsize>(seeds[i].size()));
    if (!out) return false;
  }
  std::printf("%s: %zu seeds\n", dir.string().c_str(), seeds.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out(argv[1]);
  if (!Write(out / "tracker_fuzzer", TrackerSeeds()) ||
      !Write(out / "proto_fuzzer", ProtoSeeds())) {
    std::fprintf(stderr, "cannot write under %s\n", argv[1]);
    return 1;
  }
  return 0;
}
