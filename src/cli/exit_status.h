// memtrack's exit statuses (README.md, "Exit statuses"). report, dump, info
// and export-modules follow grep and diff: 0 success, 1 a result with a
// reservation, 2 usage errors, and 3 for no result at all. record runs a
// command and exits with its status, so its own failures use the statuses
// env, nice and timeout use for theirs (125, 126, 127).
#pragma once

namespace memtrack::exit_status {

inline constexpr int kOk = 0;
// The output was produced from what could be read, but the artifact is
// damaged or incomplete (truncated, not finalized, corrupt frames), or
// export-modules could not export every file.
inline constexpr int kDamagedInput = 1;
// A command line memtrack does not understand: nothing was read or written.
inline constexpr int kUsage = 2;
// No output: an input cannot be read (missing, not a regular file, not an
// artifact, a bad --suppressions or --modules) or the output cannot be written.
inline constexpr int kNoOutput = 3;
// diff and check: the output was written and a budget (--fail-if, --max)
// broke. A budget that cannot be evaluated is a usage error (kUsage).
inline constexpr int kBudgetBroken = 4;
// record: memtrack failed (usage error included) — not the command's status.
inline constexpr int kRecordFailed = 125;
// record: the command was found but could not be executed.
inline constexpr int kCannotExecute = 126;
// record: the command was not found.
inline constexpr int kCommandNotFound = 127;

}  // namespace memtrack::exit_status
