// Call trees merged from the sites of a Profile, weighted by one cost:
// top-down (from the process entry towards the allocations) or bottom-up
// (from the allocating functions towards their callers). Each source frame
// (inline levels included) is a node; siblings with the same label merge.
// Also how every output names frames, and the sites grouped by allocating
// function (docs/REPORT.md defines both).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/cost_kind.h"
#include "analyze/profile.h"

namespace memtrack {

struct CallTreeNode {
  std::string label;  // function, or "[module+0xoffset]" / "[0xaddress]" when unknown
  uint64_t cost = 0;  // of every site through this node
  std::vector<CallTreeNode> children;  // by cost, largest first (ties by label)
};

enum class TreeDirection { TopDown, BottomUp };

// The outermost frame given to a call path that did not reach the process
// or thread entry, so that cut paths hang under one node instead of
// becoming roots of their own in trees and flame graphs.
inline constexpr const char* kTruncatedLabel = "[truncated]";
// True when the site has frames but its path was cut short.
bool site_is_truncated(const ProfileSite& site);

// The root (label "all") holds the total of the chosen cost over every site.
CallTreeNode build_call_tree(const Profile& profile, CostKind cost, TreeDirection direction);

// How a frame is named. Function: its function (call sites of a function
// merge: trees, flame graphs, grouping). CallSite: the same, but a function
// without line information is "function+0xOFFSET" (the return address's
// offset in its symbol), so that two call sites never print alike.
// A Python frame is "qualname (file.py)", and as a call site
// "qualname (file.py:line)" when its line is known.
// Unknown functions are "[module+0xOFFSET]" (file offset) or "[0xADDRESS]"
// either way.
enum class FrameNaming { Function, CallSite };

// A location's frames as labels, innermost first (one per inline level).
std::vector<std::string> frame_labels(const Profile& profile, const ProfileLocation& location,
                                      FrameNaming naming = FrameNaming::CallSite);

// The one frame of a site without frames: "[no stack]", or "[stack record
// missing]" when its allocations named a Stack record the artifact lacks.
std::string_view stackless_label(const ProfileSite& site);
// How every output names a site's path: its frames' labels, innermost first
// (inline levels expanded), then kTruncatedLabel when the path was cut
// short; a site without frames is its stackless_label. Throws
// std::runtime_error when the site refers to a location or module the
// profile lacks.
std::vector<std::string> site_labels(const Profile& profile, const ProfileSite& site, FrameNaming naming);

// One source frame of a site: a location and its inline level (frame is
// null for a location with nothing known).
struct SiteFrame {
  const ProfileLocation* location = nullptr;
  const SourceFrame* frame = nullptr;
};
// The site's frames, innermost first, inline levels expanded.
std::vector<SiteFrame> site_frames(const Profile& profile, const ProfileSite& site);
std::string frame_label(const Profile& profile, const SiteFrame& frame, FrameNaming naming);

// True for a function that allocates on behalf of its caller: operator new,
// the C++ standard library (std::, __gnu_cxx::), and any function whose
// unqualified name contains "alloc", "strdup", "strndup" or "memdup"
// (malloc, xmalloc, g_malloc, sqlite3Malloc, PyMem_RawMalloc, ...).
bool is_allocation_wrapper(std::string_view function);
// Index in site_frames() of the site's allocating function: its innermost
// Python frame when it has one (the native frames inside it are the
// interpreter's work for that line, as tracemalloc counts it); else past the
// leading run of wrappers and unnamed frames, the frame after the run's
// outermost wrapper (the innermost frame when the run has no wrapper).
size_t allocating_frame_index(const std::vector<SiteFrame>& frames);

// Sites grouped by allocating function (named as FrameNaming::Function),
// with their summed costs; sites without frames form the group "[no stack]".
struct FunctionGroup {
  std::string function;
  SiteCosts costs;
  std::vector<size_t> sites;  // indexes in Profile::sites with a cost, costliest first
};
// Groups with a non-zero cost, costliest first (ties by name), at most `top` (0: all).
std::vector<FunctionGroup> group_by_allocating_function(const Profile& profile, CostKind cost, size_t top);
// The allocating function's name of one site (its group).
std::string allocating_function(const Profile& profile, const ProfileSite& site);

// Indexes of the sites with a non-zero cost, costliest first (ties: the
// order of the sites), at most `top` (0: all).
std::vector<size_t> ranked_sites(const Profile& profile, CostKind cost, size_t top);

}  // namespace memtrack
