// The conditions of record --snapshot-when and how they re-arm
// (record/snapshots.h).
#include "record/snapshots.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "format/artifact.h"

namespace memtrack {
namespace {

TEST(SnapshotCondition, ParsesFiguresUnitsAndPercentages) {
  SnapshotCondition heap = parse_snapshot_condition("heap>=512MiB");
  EXPECT_EQ(heap.figure, SnapshotCondition::Figure::Heap);
  EXPECT_EQ(heap.bytes, 512ull << 20);
  EXPECT_EQ(heap.text, "heap>=512MiB");
  SnapshotCondition rss = parse_snapshot_condition("rss>=1.5GiB");
  EXPECT_EQ(rss.figure, SnapshotCondition::Figure::Rss);
  EXPECT_EQ(rss.bytes, 3ull << 29);
  EXPECT_EQ(parse_snapshot_condition("heap>=100B").bytes, 100u);
  EXPECT_EQ(parse_snapshot_condition("heap>=2KiB").bytes, 2048u);
  EXPECT_EQ(parse_snapshot_condition("heap>=1TiB").bytes, 1ull << 40);
  SnapshotCondition cgroup = parse_snapshot_condition("cgroup>=90%");
  EXPECT_EQ(cgroup.figure, SnapshotCondition::Figure::Cgroup);
  EXPECT_DOUBLE_EQ(cgroup.fraction, 0.9);
}

TEST(SnapshotCondition, RefusesWhatItCannotRead) {
  for (const char* bad : {"", "heap", "heap>1MiB", "heap>=", "heap>=1", "heap>=MiB", "heap>=0MiB", "heap>=-1MiB",
                          "heap>=1 MiB", "memory>=1MiB", "cgroup>=90", "cgroup>=0%", "cgroup>=101%",
                          "cgroup>=1GiB", "heap>=90%", "heap>=1e30TiB"}) {
    EXPECT_THROW(parse_snapshot_condition(bad), std::invalid_argument) << bad;
  }
}

TEST(ConditionArming, FiresOncePerCrossingAndAgainEachTenPercentMore) {
  ConditionArming arming(1000);
  EXPECT_FALSE(arming.fires(999));
  EXPECT_TRUE(arming.fires(1000));
  EXPECT_FALSE(arming.fires(1000));
  EXPECT_FALSE(arming.fires(1099));
  EXPECT_TRUE(arming.fires(1100));  // 10% past the last snapshot's 1000
  EXPECT_FALSE(arming.fires(1200));
  EXPECT_TRUE(arming.fires(1210));
  // Back below the threshold: the next crossing fires again.
  EXPECT_FALSE(arming.fires(500));
  EXPECT_TRUE(arming.fires(1001));
  EXPECT_FALSE(arming.fires(1050));
}

TEST(SnapshotTaker, NamesSnapshotsAfterTheArtifact) {
  EXPECT_EQ(SnapshotTaker::file_name("/srv/app.zst", 3), "/srv/app.snapshot-3.pb.gz");
  EXPECT_EQ(SnapshotTaker::file_name("app.rec", 1), "app.rec.snapshot-1.pb.gz");
}

// The recording's end waits for no tick of the snapshot thread, which polls
// its conditions every 100 ms: stop() wakes it (before, every recording's
// end waited for the tick, 50 ms on average).
TEST(SnapshotTaker, StopsWithoutWaitingForItsNextTick) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("memtrack-snapshots-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string artifact = (dir / "a.zst").string();
  {
    ArtifactWriter writer(artifact, ArtifactHeader{});
    SnapshotTaker taker(SnapshotOptions{}, {writer, artifact, 0, getpid(), [] { return uint64_t{0}; }});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread waits for its tick now
    const auto started = std::chrono::steady_clock::now();
    taker.stop();
    const auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_LT(waited, std::chrono::milliseconds(60))
        << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms";
    writer.finish(ArtifactTrailer{});
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memtrack
