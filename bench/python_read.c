/* Reading CPython's frames (src/interpose/python_frames.c) in python3's own
 * process, without a recording: python3 loads this library with ctypes
 * (bench/python_read.py) and calls read_frames() at a chosen Python depth;
 * bench/python_read.sh counts the instructions of each read with callgrind.
 * Each read is mixed into a path hash as at an allocation, under a native
 * walk of one frame that holds every eval loop. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "python_frames.h"

static struct mt_stacks_header counters;
static struct mt_python_stack* stack;
static __u64 stack_low, stack_high;
static __u64 native_cfas[2];

/* 1 when the interpreter's frames can be read. */
__attribute__((visibility("default"))) int open_interpreter(void) {
  mt_python_open(&counters, "malloc", (__u32)getpid());
  stack = calloc(1, sizeof(*stack));
  pthread_attr_t attributes;
  void* low;
  size_t size;
  if (!stack || pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
  pthread_attr_getstack(&attributes, &low, &size);
  stack_low = (__u64)(uintptr_t)low;
  stack_high = stack_low + size;
  native_cfas[0] = stack_low;
  native_cfas[1] = stack_high;
  return mt_python_on();
}

/* The calling thread's frames, read and mixed as at an allocation whose
 * native path is `native_path`'s (two allocations of one line mostly come
 * from two native paths: an object and its buffer): how many. */
__attribute__((visibility("default"))) int read_frames(int native_path) {
  mt_python_read(stack, stack_low, stack_high, (__u32)getpid());
  if (stack->frames == 0) return 0;
  __u64 hash = 0xcbf29ce484222325ULL + (__u64)native_path;
  mt_python_mix(stack, (const __u8*)native_cfas, sizeof(native_cfas[0]), 2, 1, &hash);
  return (int)stack->frames;
}
