/* The one test every wait of the interposer makes between its polls (a free
 * chunk, room in a chunk or in a stack ring, an unwind rule): whether
 * recording is over, because the recorder ended it or is gone (killed: then
 * nobody drains, learns or ever sets `ended`, and a thread that waited on
 * would delay the command for nothing). A kill() syscall, so never asked on
 * the path of a call that does not wait. Async-signal-safe, and errno is left
 * as it was (the wrappers run in signal handlers, and free keeps errno). */
#ifndef MEMTRACK_RECORDING_OVER_H
#define MEMTRACK_RECORDING_OVER_H

#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include "wire/shared_memory.h"

static inline int mt_recording_over(const struct mt_shm_header* shm) {
  if (__atomic_load_n(&shm->ended, __ATOMIC_ACQUIRE)) return 1;
  /* ESRCH only: EPERM (a command run as another user) means it is alive. */
  int saved = errno;
  int gone = kill((pid_t)shm->recorder_pid, 0) != 0 && errno == ESRCH;
  errno = saved;
  return gone;
}

#endif
