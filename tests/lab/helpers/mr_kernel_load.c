/* Lab helper for the kernel MR path (tests/lab/scenarios/mr_kernel.sh): on DEVICE, PAIRS
 * ibv_reg_mr + ibv_dereg_mr pairs of SIZE bytes, timed in batches of BATCH pairs (prints
 * "pair_ns N": the mean cost of one pair in the fastest batch, which filters out the
 * scheduling noise of an emulated guest; "pair_ns_mean N": over all pairs), then FAILURES
 * registrations the kernel rejects (an unmapped address: ib_umem_get fails with EFAULT, rdma-core
 * passes it through), then LEAKS regions of SIZE bytes never deregistered; creates READY_FILE and
 * sleeps until killed.
 *
 * usage: mr_kernel_load DEVICE PAIRS SIZE FAILURES LEAKS READY_FILE */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
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

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: %s DEVICE PAIRS SIZE FAILURES LEAKS READY_FILE\n", argv[0]);
    return 2;
  }
  const long pairs = atol(argv[2]);
  const size_t size = (size_t)atol(argv[3]);
  const long failures = atol(argv[4]);
  const long leaks = atol(argv[5]);
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
  void* buffer = aligned_alloc(4096, size);
  if (!pd || !buffer) return 1;
  memset(buffer, 0, size); /* paged in: the pairs time registration, not page faults */

  enum { BATCH = 100 };
  const long long start = now_ns();
  long long best = -1;
  for (long done = 0; done < pairs;) {
    const long long batch_start = now_ns();
    long n = 0;
    for (; n < BATCH && done < pairs; n++, done++) {
      struct ibv_mr* mr = ibv_reg_mr(pd, buffer, size, IBV_ACCESS_LOCAL_WRITE);
      if (!mr || ibv_dereg_mr(mr) != 0) {
        perror("ibv_reg_mr/ibv_dereg_mr");
        return 1;
      }
    }
    const long long per_pair = (now_ns() - batch_start) / n;
    if (best < 0 || per_pair < best) best = per_pair;
  }
  if (pairs > 0) {
    printf("pair_ns %lld\n", best);
    printf("pair_ns_mean %lld\n", (now_ns() - start) / pairs);
  }

  /* An address range with nothing mapped: reserve it, then unmap it. */
  void* hole = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (hole == MAP_FAILED) return 1;
  munmap(hole, size);
  for (long i = 0; i < failures; i++) {
    if (ibv_reg_mr(pd, hole, size, IBV_ACCESS_LOCAL_WRITE) != NULL) {
      fprintf(stderr, "registration of an unmapped range succeeded\n");
      return 1;
    }
  }
  for (long i = 0; i < leaks; i++) {
    if (!leak_one_region(pd, size)) {
      perror("ibv_reg_mr");
      return 1;
    }
  }
  fflush(stdout);
  FILE* ready = fopen(argv[6], "w");
  if (ready) fclose(ready);
  for (;;) pause();
}
