/* A capture inside a signal handler (-O2, no frame pointers). */
#include <signal.h>

#include "fx_unwind.h"

static struct fx_capture* signal_out;
static uintptr_t signal_stack_end;
static volatile int signal_frames;

static void on_signal(int signo) {
  (void)signo;
  /* Stored, not returned: the call is not a tail call, the handler keeps its frame. */
  signal_frames = fx_capture_stack(signal_out, signal_stack_end);
}

int fx_capture_in_signal_handler(struct fx_capture* out, uintptr_t stack_end) {
  struct sigaction action = {0}, previous;
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  signal_out = out;
  signal_stack_end = stack_end;
  signal_frames = 0;
  if (sigaction(SIGUSR1, &action, &previous) != 0) return -1;
  raise(SIGUSR1);
  sigaction(SIGUSR1, &previous, 0);
  return signal_frames;
}
