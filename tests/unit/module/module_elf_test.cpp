// The symbols.map rules (perf's) and the load-bias rule on synthetic input.
#include "module/module_elf.h"

#include <elf.h>
#include <gtest/gtest.h>

namespace memtrack {
namespace {

TEST(SymbolMap, SortsByAddressThenName) {
  auto map = symbol_map({{0x300, 4, "c"}, {0x100, 4, "b"}, {0x100, 4, "a"}, {0x200, 4, "z"}});
  EXPECT_EQ(map, (std::vector<FunctionSymbol>{{0x100, 4, "a"}, {0x100, 4, "b"}, {0x200, 4, "z"}, {0x300, 4, "c"}}));
}

// .symtab and .dynsym both list exported functions: one line each, with the
// size of the entry that has one.
TEST(SymbolMap, MergesDuplicatesKeepingTheLargestSize) {
  auto map = symbol_map({{0x100, 0, "f"}, {0x100, 0x20, "f"}, {0x100, 0x20, "f"}, {0x120, 8, "g"}});
  EXPECT_EQ(map, (std::vector<FunctionSymbol>{{0x100, 0x20, "f"}, {0x120, 8, "g"}}));
}

// A zero-size symbol reaches the next symbol at a higher address; an alias
// at its own address does not stop it.
TEST(SymbolMap, ExtendsZeroSizeToTheNextHigherSymbol) {
  auto map = symbol_map({{0x100, 0, "a"}, {0x100, 0x10, "alias"}, {0x140, 8, "b"}});
  EXPECT_EQ(map, (std::vector<FunctionSymbol>{{0x100, 0x40, "a"}, {0x100, 0x10, "alias"}, {0x140, 8, "b"}}));
}

// The last symbol, zero-sized, reaches the next 4 KiB boundary plus 4 KiB.
TEST(SymbolMap, ExtendsTheLastZeroSizeSymbolPastTheNextPage) {
  EXPECT_EQ(symbol_map({{0x2010, 0, "last"}}), (std::vector<FunctionSymbol>{{0x2010, 0x1ff0, "last"}}));
  EXPECT_EQ(symbol_map({{0x10, 8, "a"}, {0x4000, 0, "aligned"}}),
            (std::vector<FunctionSymbol>{{0x10, 8, "a"}, {0x4000, 0x1000, "aligned"}}));
}

TEST(SymbolMap, SizedSymbolsKeepTheirSize) {
  // Overlapping sizes are the file's business: nothing is clipped.
  auto map = symbol_map({{0x100, 0x100, "big"}, {0x110, 4, "inner"}});
  EXPECT_EQ(map, (std::vector<FunctionSymbol>{{0x100, 0x100, "big"}, {0x110, 4, "inner"}}));
}

constexpr uint64_t kPage = 4096;

// The usual GNU ld layout: page-aligned segments, code in the second one.
TEST(LoadBias, FromTheSegmentHoldingTheFileOffset) {
  std::vector<LoadSegment> segments = {
      {0x0, 0x0, 0x800, 0x800, PF_R}, {0x1000, 0x1000, 0x3000, 0x3000, PF_R | PF_X}, {0x5000, 0x4000, 0x100, 0x200, PF_R | PF_W}};
  EXPECT_EQ(load_bias(segments, 0x7f0000001000, 0x1000, true, kPage), uint64_t{0x7f0000000000});
  // A mapping that starts in the middle of the segment (a partial overmap).
  EXPECT_EQ(load_bias(segments, 0x7f0000003000, 0x3000, true, kPage), uint64_t{0x7f0000000000});
  // The data segment's vaddr - offset differs from the code's.
  EXPECT_EQ(load_bias(segments, 0x7f0000005000, 0x4000, false, kPage), uint64_t{0x7f0000000000});
}

// lld packs segments: the code segment starts mid-page, in the page that
// also holds the end of the read-only one. The kernel maps the code from the
// page's start; an executable mapping is the code segment's.
TEST(LoadBias, AnExecutableMappingPrefersTheCodeSegmentSharingItsPage) {
  std::vector<LoadSegment> segments = {{0x0, 0x0, 0x5b0, 0x5b0, PF_R}, {0x15b0, 0x5b0, 0x200, 0x200, PF_R | PF_X}};
  // Code at bias + 0x1000 (page of 0x15b0), file offset 0 (page of 0x5b0).
  EXPECT_EQ(load_bias(segments, 0x7f0000001000, 0, true, kPage), uint64_t{0x7f0000000000});
  EXPECT_EQ(load_bias(segments, 0x7f0000000000, 0, false, kPage), uint64_t{0x7f0000000000});
}

TEST(LoadBias, NoneWhenNoSegmentHoldsTheOffset) {
  std::vector<LoadSegment> segments = {{0x1000, 0x1000, 0x1000, 0x1000, PF_R | PF_X}};
  EXPECT_EQ(load_bias(segments, 0x7f0000000000, 0x3000, true, kPage), std::nullopt);
  EXPECT_EQ(load_bias({}, 0x7f0000000000, 0, true, kPage), std::nullopt);
}

// A non-PIE executable: mapped at its link-time address, bias 0; linked
// above where it is mapped, the bias wraps (the metadata prints it signed).
TEST(LoadBias, ZeroAndNegative) {
  std::vector<LoadSegment> segments = {{0x401000, 0x1000, 0x1000, 0x1000, PF_R | PF_X}};
  EXPECT_EQ(load_bias(segments, 0x401000, 0x1000, true, kPage), uint64_t{0});
  EXPECT_EQ(static_cast<int64_t>(*load_bias(segments, 0x400000, 0x1000, true, kPage)), -0x1000);
}

}  // namespace
}  // namespace memtrack
