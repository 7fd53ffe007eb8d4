/* Benchmark helper: registers and holds REGIONS memory regions from each of 2^DEPTH distinct
 * call paths (a binary tree of calls through left() and right()), then prints "READY <pid>"
 * and waits for a line on stdin. Built -O2 without frame pointers: the call sites are told
 * apart by DWARF unwinding only.
 * usage: mr_sites DEPTH REGIONS */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char buffer[4096];
static long regions;
static volatile unsigned long registered;

__attribute__((noinline)) static void leaf(void) {
  for (long i = 0; i < regions; i++) {
    if (!ibv_reg_mr(NULL, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE)) abort();
    registered++;
  }
}

static void step(unsigned path, int depth);

/* The stores after each call keep the calls from becoming jumps (no frame, no site). */
__attribute__((noinline)) static void left(unsigned path, int depth) {
  step(path, depth);
  registered += 0;
}

__attribute__((noinline)) static void right(unsigned path, int depth) {
  step(path, depth);
  registered += 0;
}

__attribute__((noinline)) static void step(unsigned path, int depth) {
  if (depth == 0) {
    leaf();
  } else if (path & 1) {
    left(path >> 1, depth - 1);
  } else {
    right(path >> 1, depth - 1);
  }
  registered += 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DEPTH REGIONS\n", argv[0]);
    return 2;
  }
  const int depth = atoi(argv[1]);
  regions = atol(argv[2]);
  if (depth < 0 || depth > 16 || regions < 0) return 2;
  for (unsigned path = 0; path < (1U << depth); path++) step(path, depth);
  printf("READY %d %lu\n", getpid(), registered);
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 0;
  return 0;
}
