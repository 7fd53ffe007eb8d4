/* Lab helper: THREADS threads loop ibv_reg_mr/ibv_dereg_mr on a real device (so that the
 * exporter can be started, and its probes attached, in the middle of the loop); once
 * STOP_FILE exists each thread registers HOLD regions of SIZE bytes and keeps them, then
 * READY_FILE is created and the program sleeps until killed. The MR probes must then show
 * exactly THREADS x HOLD outstanding regions (issue #11, item 8).
 *
 * usage: mr_churn DEVICE THREADS HOLD SIZE STOP_FILE READY_FILE */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ibv_pd* pd;
static long hold;
static size_t size;
static const char* stop_file;

static void* churn(void* arg) {
  (void)arg;
  void* buffer = aligned_alloc(4096, size);
  if (!buffer) exit(1);
  memset(buffer, 0, size);
  for (unsigned long i = 0;; i++) {
    /* access() per iteration would dominate: look every 64 registrations. */
    if ((i & 63) == 0 && access(stop_file, F_OK) == 0) break;
    struct ibv_mr* mr = ibv_reg_mr(pd, buffer, size, IBV_ACCESS_LOCAL_WRITE);
    if (!mr || ibv_dereg_mr(mr) != 0) {
      perror("reg/dereg");
      exit(1);
    }
  }
  for (long i = 0; i < hold; i++) {
    if (!ibv_reg_mr(pd, buffer, size, IBV_ACCESS_LOCAL_WRITE)) {
      perror("ibv_reg_mr");
      exit(1);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s DEVICE THREADS HOLD SIZE STOP_FILE READY_FILE\n", argv[0]);
    return 2;
  }
  const long threads = atol(argv[2]);
  hold = atol(argv[3]);
  size = (size_t)atol(argv[4]);
  stop_file = argv[5];
  int count = 0;
  struct ibv_device** list = ibv_get_device_list(&count);
  struct ibv_context* context = NULL;
  for (int i = 0; list && i < count; i++) {
    if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) context = ibv_open_device(list[i]);
  }
  if (!context || !(pd = ibv_alloc_pd(context)) || threads < 1 || threads > 64) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  pthread_t tids[64];
  for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, churn, NULL);
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  FILE* ready = fopen(argv[6], "w");
  if (ready) fclose(ready);
  for (;;) pause();
}
