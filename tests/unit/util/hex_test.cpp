#include "util/hex.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace memtrack {
namespace {

TEST(Hex, LowercaseTwoDigitsPerByteNoSeparators) {
  const std::vector<uint8_t> bytes = {0x00, 0x0f, 0xa0, 0xff, 0x12};
  EXPECT_EQ(hex(bytes), "000fa0ff12");
  EXPECT_EQ(hex(std::vector<uint8_t>{}), "");
}

TEST(Hex, DecodesWhatItEncodesInEitherCase) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(bytes_of_hex(hex(all)), all);
  EXPECT_EQ(bytes_of_hex("DEADbeef"), (std::vector<uint8_t>{0xde, 0xad, 0xbe, 0xef}));
}

TEST(Hex, IgnoresATrailingOddDigit) { EXPECT_EQ(bytes_of_hex("abc"), (std::vector<uint8_t>{0xab})); }

TEST(Hex, RefusesNonHexNamingTheText) {
  try {
    bytes_of_hex("12zz");
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("12zz"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bytes_of_hex("+1"), std::invalid_argument);  // a sign is not a hex digit
}

}  // namespace
}  // namespace memtrack
