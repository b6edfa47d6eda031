/* A block freed by one thread that another thread's malloc gets back while
 * the free is still returning (interposer_test.cpp): run with one arena and
 * no thread caches, so the other thread's malloc of the same size is served
 * the freed block. Prints both addresses (the first as a number: it is not
 * used after the free). */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "interposer_next_free.h"

#define BLOCK 4000

static sem_t ready, go, done;
static void* taken;

static void* taker(void* unused) {
  (void)unused;
  /* A thread's first malloc allocates its cache's bookkeeping: not from the
   * block it is to get. */
  void* volatile first = malloc(1);  /* volatile: not elided */
  free(first);
  sem_post(&ready);
  sem_wait(&go);
  taken = malloc(BLOCK);
  sem_post(&done);
  return NULL;
}

/* In the main thread's free, after glibc has the block back. */
static void let_the_taker_malloc(void* block) {
  (void)block;
  sem_post(&go);
  sem_wait(&done);
}

int main(void) {
  sem_init(&ready, 0, 0);
  sem_init(&go, 0, 0);
  sem_init(&done, 0, 0);
  pthread_t thread;
  if (pthread_create(&thread, NULL, taker, NULL) != 0) return 1;
  sem_wait(&ready);
  void* block = malloc(BLOCK);
  if (!block) return 1;
  next_free_then = let_the_taker_malloc;
  uintptr_t freed = (uintptr_t)block;
  free(block);
  next_free_then = NULL;
  pthread_join(thread, NULL);
  printf("freed %p taken %p\n", (void*)freed, taken);
  fflush(stdout);
  free(taken);
  return 0;
}
