/* Registers, leaks and deregisters known amounts of memory regions from several threads,
 * then waits for a line on stdin before exiting (so that the exporter can be scraped while
 * the leaks are outstanding, and again after the exit).
 *
 * usage: mr_workload THREADS REGIONS SIZE LEAKED FAILURES OLD_ABI [EXTRAS]
 *   per thread: REGIONS ibv_reg_mr of SIZE bytes, all but LEAKED deregistered; FAILURES
 *   failing registrations; OLD_ABI registrations through ibv_reg_mr@IBVERBS_1.0, deregistered
 *   through ibv_dereg_mr@IBVERBS_1.0. With EXTRAS=1, each thread also grows its first
 *   leaked region to 2 x SIZE with ibv_rereg_mr, and imports then unimports one MR.
 *   Prints "READY <pid>" when done. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long regions, size, leaked, failures, old_abi, extras;
static struct ibv_mr* (*reg_1_0)(struct ibv_pd*, void*, size_t, int);
static int (*dereg_1_0)(struct ibv_mr*);

static void* work(void* arg) {
  (void)arg;
  char* buffer = malloc((size_t)size);
  struct ibv_mr** mrs = calloc((size_t)regions, sizeof(*mrs));
  for (long i = 0; i < regions; i++) {
    mrs[i] = ibv_reg_mr(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
    if (!mrs[i]) abort();
  }
  for (long i = leaked; i < regions; i++) {
    if (ibv_dereg_mr(mrs[i]) != 0) abort();
  }
  for (long i = 0; i < failures; i++) {
    if (ibv_reg_mr(NULL, buffer, 0, IBV_ACCESS_LOCAL_WRITE) != NULL) abort();
  }
  if (extras && leaked > 0) {
    char* bigger = malloc((size_t)size * 2);
    if (ibv_rereg_mr(mrs[0], IBV_REREG_MR_CHANGE_TRANSLATION, NULL, bigger, (size_t)size * 2,
                     IBV_ACCESS_LOCAL_WRITE) != 0)
      abort();
    struct ibv_mr* imported = ibv_import_mr(NULL, 7);
    if (!imported) abort();
    ibv_unimport_mr(imported);
  }
  for (long i = 0; i < old_abi; i++) {
    struct ibv_mr* mr = reg_1_0(NULL, buffer, (size_t)size, IBV_ACCESS_LOCAL_WRITE);
    if (!mr || dereg_1_0(mr) != 0) abort();
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: %s THREADS REGIONS SIZE LEAKED FAILURES OLD_ABI [EXTRAS]\n", argv[0]);
    return 2;
  }
  long threads = atol(argv[1]);
  regions = atol(argv[2]);
  size = atol(argv[3]);
  leaked = atol(argv[4]);
  failures = atol(argv[5]);
  old_abi = atol(argv[6]);
  extras = argc == 8 ? atol(argv[7]) : 0;
  reg_1_0 = dlvsym(RTLD_DEFAULT, "ibv_reg_mr", "IBVERBS_1.0");
  dereg_1_0 = dlvsym(RTLD_DEFAULT, "ibv_dereg_mr", "IBVERBS_1.0");
  if (!reg_1_0 || !dereg_1_0) {
    fprintf(stderr, "no IBVERBS_1.0 symbols\n");
    return 1;
  }
  pthread_t tids[64];
  if (threads < 1 || threads > 64) return 2;
  for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, work, NULL);
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  printf("READY %d\n", getpid());
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 0;
  return 0;
}
