#include "util/proc_maps.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace memtrack {
namespace {

TEST(ProcMaps, ParsesAFileMapping) {
  auto e = parse_maps_line("7f12a0000000-7f12a0021000 r-xp 00002000 fd:01 1311768    /usr/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->start, 0x7f12a0000000u);
  EXPECT_EQ(e->end, 0x7f12a0021000u);
  EXPECT_EQ(e->offset, 0x2000u);
  EXPECT_EQ(e->perms, "r-xp");
  EXPECT_TRUE(e->readable());
  EXPECT_TRUE(e->executable());
  EXPECT_EQ(e->dev_major, 0xfdu);
  EXPECT_EQ(e->dev_minor, 0x01u);
  EXPECT_EQ(e->kernel_dev(), (uint64_t{0xfd} << 20) | 1);
  EXPECT_EQ(e->ino, 1311768u);
  EXPECT_EQ(e->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(e->contains(0x7f12a0000000));
  EXPECT_FALSE(e->contains(0x7f12a0021000));
}

TEST(ProcMaps, KeepsSpacesAndTheDeletedSuffixInPaths) {
  auto e = parse_maps_line("1000-2000 r--p 00000000 08:02 42 /tmp/a b/lib.so (deleted)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "/tmp/a b/lib.so (deleted)");
  EXPECT_FALSE(e->executable());
}

TEST(ProcMaps, AnonymousAndSpecialMappings) {
  auto anon = parse_maps_line("1000-2000 rw-p 00000000 00:00 0 ");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->path, "");
  EXPECT_EQ(anon->ino, 0u);
  auto bare = parse_maps_line("1000-2000 rw-p 00000000 00:00 0");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->path, "");
  auto stack = parse_maps_line("7ffd0000-7ffd1000 rw-p 00000000 00:00 0                          [stack]");
  ASSERT_TRUE(stack);
  EXPECT_EQ(stack->path, "[stack]");
}

TEST(ProcMaps, RefusesMalformedLines) {
  EXPECT_FALSE(parse_maps_line(""));
  EXPECT_FALSE(parse_maps_line("garbage"));
  EXPECT_FALSE(parse_maps_line("1000-2000 r-xp 00000000 fd:01"));  // no inode
}

TEST(ProcMaps, ReadsThisProcessAndFindsItsOwnCode) {
  const auto self = read_maps(getpid());
  ASSERT_FALSE(self.empty());
  const auto here = reinterpret_cast<uint64_t>(&parse_maps_line);
  bool found = false;
  for (const MapEntry& e : self)
    if (e.contains(here)) {
      found = true;
      EXPECT_TRUE(e.executable()) << e.perms;
      EXPECT_NE(e.ino, 0u);
      EXPECT_EQ(e.path, std::filesystem::canonical("/proc/self/exe").string());
    }
  EXPECT_TRUE(found);
  EXPECT_FALSE(read_maps_file("/proc/self/maps").empty());
}

TEST(ProcMaps, AGoneProcessHasNoMappings) { EXPECT_TRUE(read_maps_file("/nonexistent/maps").empty()); }

}  // namespace
}  // namespace memtrack
