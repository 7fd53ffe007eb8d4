/* Benchmark helper: times N ibv_reg_mr + ibv_dereg_mr pairs and prints nanoseconds per pair.
 * usage: mr_pairs N */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 100000;
  static char buffer[4096];
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < n; i++) {
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE);
    if (!mr || ibv_dereg_mr(mr) != 0) return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double ns =
      (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  printf("%.1f\n", ns / (double)n);
  return 0;
}
