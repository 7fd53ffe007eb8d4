/* Lab helper: opens an RDMA device with real libibverbs, registers REGIONS memory regions of
 * SIZE bytes and never deregisters them (a leak), creates the file READY_FILE, then sleeps
 * until killed. Used to prove MR-leak tracking against a real RDMA stack (soft-RoCE).
 *
 * usage: mr_leaker DEVICE REGIONS SIZE READY_FILE [INTERVAL_MS]
 * With INTERVAL_MS, READY_FILE is created after the first region and the others follow one
 * every INTERVAL_MS: a leak that grows steadily, as the alert rules expect to see one. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Named, not inlined, so that leak-suspect stacks can point at it. */
__attribute__((noinline)) static struct ibv_mr* leak_one_region(struct ibv_pd* pd, size_t size) {
  void* buffer = aligned_alloc(4096, size);
  if (!buffer) return NULL;
  memset(buffer, 0, size);
  struct ibv_mr* mr = ibv_reg_mr(pd, buffer, size, IBV_ACCESS_LOCAL_WRITE);
  /* Not a tail call: a `jmp` into ibv_reg_mr would leave no frame of this function. */
  __asm__ volatile("" ::: "memory");
  return mr;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s DEVICE REGIONS SIZE READY_FILE [INTERVAL_MS]\n", argv[0]);
    return 2;
  }
  const long regions = atol(argv[2]);
  const size_t size = (size_t)atol(argv[3]);
  int count = 0;
  struct ibv_device** list = ibv_get_device_list(&count);
  struct ibv_context* context = NULL;
  for (int i = 0; list && i < count; i++) {
    if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) context = ibv_open_device(list[i]);
  }
  if (!context) {
    fprintf(stderr, "cannot open %s\n", argv[1]);
    return 1;
  }
  struct ibv_pd* pd = ibv_alloc_pd(context);
  if (!pd) return 1;
  const long interval_ms = argc == 6 ? atol(argv[5]) : 0;
  for (long i = 0; i < regions; i++) {
    if (!leak_one_region(pd, size)) {
      perror("ibv_reg_mr");
      return 1;
    }
    if (interval_ms > 0) {
      if (i == 0) {
        FILE* ready = fopen(argv[4], "w");
        if (ready) fclose(ready);
      }
      usleep((useconds_t)interval_ms * 1000);
    }
  }
  FILE* ready = fopen(argv[4], "w");
  if (ready) fclose(ready);
  for (;;) pause();
}
