/* Host helper for host_mr_start_churn (issue 27): loops ibv_reg_mr/ibv_dereg_mr of one region
 * until STOP_FILE exists (the exporter is started during the loop), then registers HOLD
 * regions, creates READY_FILE and waits until killed. usage: mr_start_churn HOLD STOP READY */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s HOLD STOP_FILE READY_FILE\n", argv[0]);
    return 2;
  }
  const long hold = atol(argv[1]);
  static char buffer[8192];
  unsigned long pairs = 0;
  for (;; pairs++) {
    /* access() every time would dominate the loop. */
    if ((pairs & 255) == 0 && access(argv[2], F_OK) == 0) break;
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE);
    if (!mr || ibv_dereg_mr(mr) != 0) return 1;
  }
  for (long i = 0; i < hold; i++) {
    if (!ibv_reg_mr(NULL, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE)) return 1;
  }
  printf("pairs %lu\n", pairs);
  fflush(stdout);
  FILE* ready = fopen(argv[3], "w");
  if (ready) fclose(ready);
  for (;;) pause();
}
