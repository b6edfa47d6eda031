// python_line against CPython 3.11's own answers: a function's co_linetable
// and the line co_positions() gives each code unit (Debian's python3.11),
// and damaged tables, which must end in "unknown", never in a crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "symbolize/python_lines.h"
#include "util/hex.h"

namespace memtrack {
namespace {

// def sample(a, b):              (line 2: blank lines, a multi-line dict,
//     x = [a] * b                 a loop, try/except, a return over two
//     ...                         lines)
// sample.__code__.co_linetable.hex(), co_firstlineno 2.
constexpr const char* kSampleTable =
    "8000d8090a8803886189078041f006000e0fe00c0dd80c0df005020e0ff005050906f0000509068041f50c000e13903189588c58f0000205"
    "18f0000205188801d80b0cf000010918d80c0d8f488a489051894b8c4b884bf8f002030511d80c0d9001894588018801f8dd0b1cf0000105"
    "11f000010511f000010511d80c10880188018801f003010511f8f8f8e00c0d8871d80c0df003010c0ff00001050f";
// [pos[0] or 0 for pos in sample.__code__.co_positions()]
const std::vector<uint32_t> kSampleLines = {
    2,  3,  3,  3,  3,  3,  3,  6,  8,  9,  7,  5,  5,  5,  11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11,
    11, 11, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 0,  14, 15, 15,
    15, 15, 15, 15, 0,  16, 16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 16, 0,  0,  0,  18, 18, 19, 18, 18};

TEST(PythonLines, EveryCodeUnitAsCPythonSaysIt) {
  std::vector<uint8_t> table = bytes_of_hex(kSampleTable);
  for (uint32_t unit = 0; unit < kSampleLines.size(); ++unit) {
    std::optional<uint32_t> line = python_line(table, 2, unit);
    EXPECT_EQ(line.value_or(0), kSampleLines[unit]) << "code unit " << unit;
  }
  EXPECT_EQ(python_line(table, 2, static_cast<uint32_t>(kSampleLines.size())), std::nullopt) << "past the code";
}

TEST(PythonLines, BeforeTheFirstInstructionIsTheFirstLine) {
  EXPECT_EQ(python_line(bytes_of_hex(kSampleTable), 2, 0xffffffffu), 2u);
  EXPECT_EQ(python_line({}, 40, 0xffffffffu), 40u);
}

TEST(PythonLines, DamagedTablesAreUnknownNotWrong) {
  std::vector<uint8_t> table = bytes_of_hex(kSampleTable);
  // Cut inside the entries: units past the cut are unknown.
  std::vector<uint8_t> cut(table.begin(), table.begin() + 20);
  EXPECT_EQ(python_line(cut, 2, 0).value_or(0), 2u);
  EXPECT_EQ(python_line(cut, 2, 80), std::nullopt);
  // A table that does not start an entry.
  EXPECT_EQ(python_line(std::vector<uint8_t>{0x01, 0x02}, 2, 0), std::nullopt);
  // A long-form entry whose varint runs past the end.
  EXPECT_EQ(python_line(std::vector<uint8_t>{0xf0, 0x41}, 2, 0), std::nullopt);
  // A varint longer than 32 bits.
  EXPECT_EQ(python_line(std::vector<uint8_t>{0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x01}, 2, 0), std::nullopt);
  // Lines below 1 (a delta past the first line) are no lines.
  EXPECT_EQ(python_line(std::vector<uint8_t>{0xe8, 0x0b}, 2, 0), std::nullopt);  // delta -5
}

}  // namespace
}  // namespace memtrack
