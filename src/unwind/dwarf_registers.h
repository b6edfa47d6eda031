// DWARF register numbers of the x86-64 psABI, as the unwinders of this folder
// name rsp, rbp and the return-address column.
#pragma once

namespace memtrack {

inline constexpr int kDwarfRbp = 6;
inline constexpr int kDwarfRsp = 7;
inline constexpr int kDwarfRip = 16;  // the return-address column

}  // namespace memtrack
