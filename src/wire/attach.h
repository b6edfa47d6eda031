/* What `memtrack record --pid` asks of an interposer it loaded into a running
 * process (src/record/process/remote_call.cpp calls it through ptrace,
 * src/interpose/interpose.c answers): MT_ATTACH_FUNCTION(events path, call
 * paths' table path or NULL) starts recording and returns an
 * enum mt_attach_result. */
#ifndef MEMTRACK_WIRE_ATTACH_H
#define MEMTRACK_WIRE_ATTACH_H

#define MT_ATTACH_FUNCTION "memtrack_attach"
/* Called the same way at the end for a process that made no allocator call
 * since the recording ended (the call that would have detached it). */
#define MT_DETACH_FUNCTION "memtrack_detach"

#define MT_ATTACH_RESULTS(X)                                                                     \
  X(MT_ATTACH_OK, "attached")                                                                    \
  X(MT_ATTACH_NO_RECORDING, "the interposer cannot open the recording's shared memory")          \
  X(MT_ATTACH_ADDRESS_LIMITED, "an address-space limit (RLIMIT_AS) is set")                      \
  X(MT_ATTACH_OTHER_MALLOC, "malloc is not glibc's (an allocator linked into the program or preloaded)") \
  X(MT_ATTACH_NO_STACKS, "the interposer cannot open the call paths' table")                     \
  X(MT_ATTACH_NO_KEY, "no thread-specific key left for the interposer")                          \
  X(MT_ATTACH_BUSY, "the previous recording's interposer is still detaching")

#define MT_ATTACH_ENUM(name, text) name,
enum mt_attach_result { MT_ATTACH_RESULTS(MT_ATTACH_ENUM) MT_ATTACH_RESULT_COUNT };
#undef MT_ATTACH_ENUM

#endif
