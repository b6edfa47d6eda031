/* Holding a task without a job-control stop (issue 9, item 10): the ways to
 * hold a running task for a while, how long holding and resuming take, and
 * whether the task's own parent sees a stop (waitpid(WUNTRACED)).
 *
 * Usage: task_hold sigstop|ptrace|freezer   (as root; freezer needs cgroup v2
 * at /sys/fs/cgroup/unified or /sys/fs/cgroup)
 *   sigstop  SIGSTOP, then SIGCONT: what memtrack does today.
 *   ptrace   the task is PTRACE_SEIZEd; the SIGSTOP (as a BPF program would
 *            send it) is caught in its signal-delivery-stop and suppressed
 *            when the hold ends.
 *   freezer  the task in a cgroup of its own; cgroup.freeze 1, then 0.
 * This process holds the task 200 times for 1 ms; the task's parent (a
 * second process) counts the stops it is told of. Prints medians and p90,
 * and the cost of one syscall (getppid) on this machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kHolds = 200 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static char state_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return '?';
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return '?';
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p ? p[2] : '?';
}

static void write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY);
  if (fd < 0 || write(fd, text, strlen(text)) < 0) {
    perror(path);
    exit(1);
  }
  close(fd);
}

static int frozen(const char* cgroup) {
  char path[256], buf[256];
  snprintf(path, sizeof path, "%s/cgroup.events", cgroup);
  int fd = open(path, O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  buf[n > 0 ? n : 0] = 0;
  return strstr(buf, "frozen 1") != NULL;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void report(const char* what, double* v) {
  qsort(v, kHolds, sizeof(double), by_value);
  printf("  %s: median %.1f us, p90 %.1f us\n", what, v[kHolds / 2], v[kHolds * 9 / 10]);
}

int main(int argc, char** argv) {
  const char* method = argc > 1 ? argv[1] : "";
  if (strcmp(method, "sigstop") && strcmp(method, "ptrace") && strcmp(method, "freezer")) {
    fprintf(stderr, "usage: task_hold sigstop|ptrace|freezer\n");
    return 2;
  }
  int to_holder[2], stops_back[2];
  if (pipe(to_holder) || pipe(stops_back)) return 1;
  pid_t parent = fork();
  if (parent == 0) {  // the task's own parent: counts the stops it sees
    pid_t task = fork();
    if (task == 0) {
      for (int i = 0; i < 3000; ++i) usleep(1000);
      _exit(0);
    }
    (void)!write(to_holder[1], &task, sizeof task);
    int stops = 0, status;
    for (;;) {
      pid_t r = waitpid(task, &status, WUNTRACED);
      if (r < 0 && errno == EINTR) continue;
      if (r > 0 && WIFSTOPPED(status)) {
        ++stops;
        continue;
      }
      break;
    }
    (void)!write(stops_back[1], &stops, sizeof stops);
    _exit(0);
  }
  pid_t task;
  if (read(to_holder[0], &task, sizeof task) != sizeof task) return 1;

  char cgroup[128] = "";
  if (!strcmp(method, "ptrace") && ptrace(PTRACE_SEIZE, task, 0, 0) != 0) {
    perror("PTRACE_SEIZE");
    return 1;
  }
  if (!strcmp(method, "freezer")) {
    const char* root = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0 ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
    snprintf(cgroup, sizeof cgroup, "%s/task-hold-%d", root, getpid());
    if (mkdir(cgroup, 0755) != 0) {
      perror(cgroup);
      return 1;
    }
    char path[256], pid_text[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", cgroup);
    snprintf(pid_text, sizeof pid_text, "%d", task);
    write_file(path, pid_text);
  }
  char freeze[256];
  snprintf(freeze, sizeof freeze, "%s/cgroup.freeze", cgroup);

  double hold[kHolds], resume[kHolds];
  for (int i = 0; i < kHolds; ++i) {
    double t0 = now_us();
    if (!strcmp(method, "sigstop")) {
      kill(task, SIGSTOP);
      while (state_of(task) != 'T') {
      }
    } else if (!strcmp(method, "ptrace")) {
      kill(task, SIGSTOP);
      int status;
      waitpid(task, &status, __WALL);  // signal-delivery-stop: held
    } else {
      write_file(freeze, "1");
      while (!frozen(cgroup)) {
      }
    }
    double t1 = now_us();
    usleep(1000);
    double t2 = now_us();
    if (!strcmp(method, "sigstop")) {
      kill(task, SIGCONT);
      while (state_of(task) == 'T') {
      }
    } else if (!strcmp(method, "ptrace")) {
      ptrace(PTRACE_CONT, task, 0, 0);  // the SIGSTOP is suppressed
    } else {
      write_file(freeze, "0");
      while (frozen(cgroup)) {
      }
    }
    hold[i] = t1 - t0;
    resume[i] = now_us() - t2;
  }
  if (!strcmp(method, "ptrace")) {  // detaching needs the tracee stopped
    int status;
    ptrace(PTRACE_INTERRUPT, task, 0, 0);
    waitpid(task, &status, __WALL);
    ptrace(PTRACE_DETACH, task, 0, 0);
  }
  int stops = -1;
  (void)!read(stops_back[0], &stops, sizeof stops);
  waitpid(parent, NULL, 0);
  if (cgroup[0]) rmdir(cgroup);

  double syscall_ns[kHolds];
  for (int i = 0; i < kHolds; ++i) {
    double t = now_us();
    for (int j = 0; j < 1000; ++j) syscall(SYS_getppid);
    syscall_ns[i] = (now_us() - t);  // us per 1000 calls = ns per call
  }
  qsort(syscall_ns, kHolds, sizeof(double), by_value);
  printf("%s: the parent's waitpid(WUNTRACED) saw %d stops of %d holds\n", method, stops, kHolds);
  report("hold (until the task is held)", hold);
  report("resume (until it runs again)", resume);
  printf("  one syscall (getppid): median %.0f ns\n", syscall_ns[kHolds / 2]);
  return 0;
}
