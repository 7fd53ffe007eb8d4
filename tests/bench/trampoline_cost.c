// Benchmark helper (issue #17): what each MR-tracking mechanism costs per traced call on this
// machine, in the same run. The kernel path attaches BPF trampolines (fentry + fexit) to
// uverbs/ib_core functions; the uprobe path traps on entry and return of libibverbs functions.
// This host has no RDMA stack, so the same two mechanisms are timed on stand-ins: fentry +
// fexit on ksys_lseek (one lseek(2) per call) and uprobe + uretprobe on traced_function() of
// this program, each with the same do-nothing body (trampoline_cost.bpf.c). Every round times
// the bare call, then the traced call, alternating; the figure is the fastest round. The BPF
// run count is checked against the calls made: a mechanism that did not fire is an error, not
// a cheap result.
//
// Usage: trampoline_cost OBJECT [ROUNDS]   (root; default 7 rounds)
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kSyscalls = 200000, kUserCalls = 4000 };

static volatile int sink;

// Kept out of line and visible to the symbol table, so that a uprobe can land on it.
__attribute__((noinline, used)) int traced_function(int x) {
  sink = x;
  return x + 1;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double time_syscalls(int fd) {
  const double start = now_ns();
  for (int i = 0; i < kSyscalls; ++i) (void)lseek(fd, 0, SEEK_CUR);
  return (now_ns() - start) / kSyscalls;
}

static double time_user_calls(void) {
  const double start = now_ns();
  for (int i = 0; i < kUserCalls; ++i) (void)traced_function(i);
  return (now_ns() - start) / kUserCalls;
}

static double min(double a, double b) { return a < b ? a : b; }

struct Mechanism {
  const char* name;
  const char* entry;
  const char* exit;
  long calls;
  double bare;
  double traced;
};

static int attach(struct bpf_object* object, const struct Mechanism* m, struct bpf_link* links[2]) {
  const char* names[2] = {m->entry, m->exit};
  for (int i = 0; i < 2; ++i) {
    struct bpf_program* program = bpf_object__find_program_by_name(object, names[i]);
    if (program == NULL) return -ENOENT;
    if (strncmp(names[i], "user", 4) == 0) {
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "traced_function", .retprobe = i == 1);
      links[i] = bpf_program__attach_uprobe_opts(program, 0, "/proc/self/exe", 0, &opts);
    } else {
      links[i] = bpf_program__attach(program);
    }
    if (links[i] == NULL) return -errno;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s OBJECT [ROUNDS]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? atoi(argv[2]) : 7;
  if (geteuid() != 0) {
    printf("SKIP: BPF needs root\n");
    return 77;
  }
  struct bpf_object* object = bpf_object__open_file(argv[1], NULL);
  if (object == NULL) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  int mechanisms_run = 2;
  if (bpf_object__load(object) != 0) {
    // A kernel that refuses fentry programs (no trampolines, or a policy): the uprobes alone,
    // and the run is a skip, with the reason, not a result.
    const int err = errno;
    bpf_object__close(object);
    object = bpf_object__open_file(argv[1], NULL);
    if (object == NULL) return 1;
    bpf_program__set_autoload(bpf_object__find_program_by_name(object, "kernel_entry"), false);
    bpf_program__set_autoload(bpf_object__find_program_by_name(object, "kernel_exit"), false);
    if (bpf_object__load(object) != 0) {
      fprintf(stderr, "cannot load %s: %s\n", argv[1], strerror(errno));
      return 1;
    }
    printf("This kernel refuses the fentry programs (%s): uprobes timed alone.\n\n", strerror(err));
    mechanisms_run = 1;
  }
  struct bpf_map* bss = bpf_object__find_map_by_name(object, ".bss");
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (bss == NULL || fd < 0) {
    fprintf(stderr, "no .bss map or no /dev/null\n");
    return 1;
  }
  struct Mechanism mechanisms[2] = {
      {"fentry + fexit (kernel path)", "kernel_entry", "kernel_exit", kSyscalls, 1e18, 1e18},
      {"uprobe + uretprobe (libibverbs path)", "user_entry", "user_exit", kUserCalls, 1e18, 1e18},
  };
  const int first = 2 - mechanisms_run;
  for (int round = 0; round < rounds; ++round) {
    for (int k = first; k < 2; ++k) {
      struct Mechanism* m = &mechanisms[k];
      const int kernel = k == 0;
      m->bare = min(m->bare, kernel ? time_syscalls(fd) : time_user_calls());
      struct bpf_link* links[2] = {NULL, NULL};
      const int err = attach(object, m, links);
      if (err != 0) {
        fprintf(stderr, "cannot attach %s: %s\n", m->name, strerror(-err));
        return 1;
      }
      uint64_t before = 0;
      uint64_t after = 0;
      const uint32_t zero = 0;
      bpf_map__lookup_elem(bss, &zero, sizeof zero, &before, sizeof before, 0);
      m->traced = min(m->traced, kernel ? time_syscalls(fd) : time_user_calls());
      bpf_map__lookup_elem(bss, &zero, sizeof zero, &after, sizeof after, 0);
      bpf_link__destroy(links[0]);
      bpf_link__destroy(links[1]);
      // Two runs per call, at least (other processes' lseek calls count too).
      if (after - before < 2 * (uint64_t)m->calls) {
        fprintf(stderr, "%s fired %llu times for %ld calls: not traced\n", m->name,
                (unsigned long long)(after - before), m->calls);
        return 1;
      }
    }
  }
  printf("| mechanism | calls per round | bare ns/call | traced ns/call | overhead ns/call |\n");
  printf("|---|---|---|---|---|\n");
  for (int k = first; k < 2; ++k) {
    const struct Mechanism* m = &mechanisms[k];
    printf("| %s | %ld | %.1f | %.1f | %.1f |\n", m->name, m->calls, m->bare, m->traced,
           m->traced - m->bare);
  }
  close(fd);
  bpf_object__close(object);
  if (mechanisms_run < 2) {
    printf("\nFastest of %d rounds. No ratio: the kernel path cannot be timed on this kernel.\n",
           rounds);
    return 77;
  }
  const double kernel = mechanisms[0].traced - mechanisms[0].bare;
  const double user = mechanisms[1].traced - mechanisms[1].bare;
  printf(
      "\nFastest of %d rounds. uprobe pair / trampoline pair overhead: %.0fx (target of the "
      "kernel path: >= 10x cheaper than uprobes).\n",
      rounds, kernel > 0 ? user / kernel : 0.0);
  return 0;
}
