/* Benchmark helper: times N ibv_reg_mr + ibv_dereg_mr pairs and prints nanoseconds per pair.
 * usage: mr_pairs N [thread]
 * With "thread" the pairs run on a new thread: its stack is a mapping of 8 MiB, so the probes'
 * user stack copy is always full size (the main thread's copy ends at the top of its stack,
 * a few KiB above main). */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long pairs;
static double ns_per_pair = -1;

static void* run(void* arg) {
  (void)arg;
  static char buffer[4096];
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < pairs; i++) {
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE);
    if (!mr || ibv_dereg_mr(mr) != 0) return NULL;
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  ns_per_pair =
      ((double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec)) /
      (double)pairs;
  return NULL;
}

int main(int argc, char** argv) {
  pairs = argc > 1 ? atol(argv[1]) : 100000;
  if (pairs < 1) return 2;
  if (argc > 2 && strcmp(argv[2], "thread") == 0) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, run, NULL) != 0) return 1;
    pthread_join(thread, NULL);
  } else {
    run(NULL);
  }
  if (ns_per_pair < 0) return 1;
  printf("%.1f\n", ns_per_pair);
  return 0;
}
