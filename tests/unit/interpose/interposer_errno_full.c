/* Frees made while the thread's chunk is full (interposer_test.cpp): each
 * must leave errno as it was, as glibc's free does, although the interposer
 * waits for the recorder then. Allocates, says "allocated" and waits for a
 * byte on stdin (the recorder has drained everything by then), frees every
 * block with errno set beforehand, and says how many frees changed it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* More than a chunk holds (MT_SHM_CHUNK_EVENTS): the frees fill it. */
#define BLOCKS 40000

static void* blocks[BLOCKS];

int main(void) {
  for (int i = 0; i < BLOCKS; ++i)
    if (!(blocks[i] = malloc(16))) return 1;
  /* Neither stdio (its buffer is allocated on first use) nor anything
   * else allocates from here on: the frees are the only events. */
  static const char allocated[] = "allocated\n";
  if (write(STDOUT_FILENO, allocated, sizeof(allocated) - 1) < 0) return 1;
  char go;
  if (read(STDIN_FILENO, &go, 1) != 1) return 1;
  int changed = 0, last = 0;
  for (int i = 0; i < BLOCKS; ++i) {
    errno = EILSEQ;
    free(blocks[i]);
    if (errno != EILSEQ) {
      ++changed;
      last = errno;
    }
  }
  printf("errno changed by %d frees (last to %d)\n", changed, last);
  return 0;
}
