// demangle(): libiberty's Itanium and Rust demanglers, plain names unchanged.
#include <gtest/gtest.h>

#include "symbolize/symbolizer.h"

namespace memtrack {
namespace {

TEST(Demangle, Itanium) {
  EXPECT_EQ(demangle("_ZN2fx8overloadEdPKc"), "fx::overload(double, char const*)");
  EXPECT_EQ(demangle("_ZN2fx5scaleIiEET_S1_i"), "int fx::scale<int>(int, int)");
  EXPECT_EQ(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"), "std::vector<int, std::allocator<int> >::push_back(int const&)");
  EXPECT_EQ(demangle("_Z3foov.cold"), "foo() [clone .cold]");
}

TEST(Demangle, RustLegacyDropsTheHash) {
  EXPECT_EQ(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
}

TEST(Demangle, RustV0) { EXPECT_EQ(demangle("_RNvCs15kBYyAo9fc_7mycrate4main"), "mycrate::main"); }

TEST(Demangle, PlainAndInvalidNamesUnchanged) {
  EXPECT_EQ(demangle("malloc"), "malloc");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle(""), "");
  EXPECT_EQ(demangle("_Z"), "_Z");
  EXPECT_EQ(demangle("_ZN3foo"), "_ZN3foo");  // truncated
  EXPECT_EQ(demangle("_Rxyz"), "_Rxyz");
}

}  // namespace
}  // namespace memtrack
