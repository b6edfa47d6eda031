/* What a hold mode costs the recorded program's own operations (bench/
 * hold_modes.sh): under `--hold ptrace` every new thread, new process and
 * signal passes through memtrack's tracer. Prints the median µs per
 * operation over 5 rounds.
 * Usage: hold_costs threads|forks|signals N */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static void on_signal(int sig) { (void)sig; ++handled; }
static void* thread_body(void* arg) { return arg; }

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: hold_costs threads|forks|signals N\n");
    return 2;
  }
  const char* what = argv[1];
  long n = atol(argv[2]);
  signal(SIGUSR1, on_signal);
  double rounds[5];
  for (int r = 0; r < 5; ++r) {
    double start = now_us();
    for (long i = 0; i < n; ++i) {
      if (!strcmp(what, "threads")) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_body, NULL) != 0) return 1;
        pthread_join(t, NULL);
      } else if (!strcmp(what, "forks")) {
        pid_t child = fork();
        if (child == 0) _exit(0);
        waitpid(child, NULL, 0);
      } else {
        raise(SIGUSR1);
      }
    }
    rounds[r] = (now_us() - start) / (n ? n : 1);
  }
  qsort(rounds, 5, sizeof(double), compare);
  printf("%.2f\n", rounds[2]);
  return 0;
}
