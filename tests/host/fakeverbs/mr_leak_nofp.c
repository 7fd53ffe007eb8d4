/* Host helper for host_mr_dwarf_stacks (issue 27): built -O2 -fomit-frame-pointer, no -g, not
 * stripped, as most programs are. main -> register_batch -> leak_one_region -> ibv_reg_mr,
 * LEAKS times, prints "ready", and again LEAKS times at each line read on stdin (printing
 * "again"), until killed. A frame-pointer walk cannot get past leak_one_region; DWARF CFI
 * (.eh_frame) names every frame.
 * usage: mr_leak_nofp LEAKS SIZE */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Kept out of line and not tail-called (the volatile sum after the call), so that each is a
 * frame of its own whatever the optimiser does. */
volatile long sink;

__attribute__((noinline)) static struct ibv_mr* leak_one_region(void* buffer, size_t size) {
  struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, size, IBV_ACCESS_LOCAL_WRITE);
  sink += (long)size;
  return mr;
}

__attribute__((noinline)) static int register_batch(long leaks, size_t size) {
  for (long i = 0; i < leaks; i++) {
    void* buffer = malloc(size);
    if (!buffer || !leak_one_region(buffer, size)) return 1;
  }
  sink += leaks;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LEAKS SIZE\n", argv[0]);
    return 2;
  }
  /* One call site of register_batch for every batch: the same stack each time. */
  const char* say = "ready";
  char line[64];
  for (;;) {
    if (register_batch(atol(argv[1]), (size_t)atol(argv[2])) != 0) return 1;
    printf("%s\n", say);
    fflush(stdout);
    say = "again";
    if (!fgets(line, sizeof line, stdin)) break;
  }
  for (;;) pause();
}
