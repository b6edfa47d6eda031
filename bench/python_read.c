/* Reading CPython's frames (src/interpose/python_frames.c) in python3's own
 * process, without a recording: python3 loads this library with ctypes
 * (bench/python_read.py) and calls read_frames() at a chosen Python depth;
 * bench/python_read.sh counts the instructions of each read with callgrind. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "python_frames.h"

static struct mt_stacks_header counters;
static struct mt_python_stack* stack;
static __u64 stack_low, stack_high;

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
  return mt_python_on();
}

/* The calling thread's frames, read as at an allocation: how many. */
__attribute__((visibility("default"))) int read_frames(void) {
  mt_python_read(stack, stack_low, stack_high, (__u32)getpid());
  return (int)stack->frames;
}
