/* The free that comes after the interposer's (interposer_next_free.c). */
#ifndef INTERPOSER_NEXT_FREE_H
#define INTERPOSER_NEXT_FREE_H

/* Called by `free` once the block is back in the allocator, before it
 * returns; NULL: nothing. Volatile: a compiler may assume free reads no
 * global, and drop a store made just before it. */
extern void (*volatile next_free_then)(void* block);

#endif
