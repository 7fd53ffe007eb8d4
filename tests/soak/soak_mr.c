/* Soak workloads for the MR probes, linked against the libibverbs stand-in
 * (tests/host/fakeverbs). The registration loops are in C so that a million of them cost the
 * probes' traps and little else.
 *
 * usage:
 *   soak_mr churn TOTAL HOLD
 *     as "soak_churn": TOTAL successful ibv_reg_mr calls of 4 KiB to 64 KiB over a 1 MiB
 *     buffer, keeping a ring of HOLD regions (each registration past HOLD deregisters the
 *     oldest first), plus one failing registration (length 0) per 1024; then deregisters the
 *     ring. Prints "DONE <registrations> <failures> <ns per registration>".
 *   soak_mr procs COUNT REGIONS LEAK PARALLEL
 *     starts COUNT children (fork, then exec of this program: each has its own address space
 *     layout, so its own call stacks), at most PARALLEL alive at once; each runs
 *     "soak_mr short INDEX REGIONS LEAK". Prints "DONE <children> <leakers>".
 *   soak_mr short INDEX REGIONS LEAK
 *     as "soak_short": registers REGIONS regions and deregisters them all but, when INDEX is
 *     odd, LEAK of them, then exits (the kernel releases the leaked ones).
 *
 * Built twice: soak_mr on the stand-in (registrations on a NULL protection domain, the failing
 * one of length 0), and soak_mr_verbs (SOAK_MR_REAL_VERBS) on the real libibverbs for the lab's
 * soak (tests/lab/scenarios/soak.sh), which needs SOAK_MR_DEVICE=NAME in the environment: every
 * process opens that device and allocates a protection domain, and the failing registration is
 * of an unmapped page (the kernel's ib_umem_get rejects it with EFAULT).
 * SOAK_MR_HOLD=1 (churn): after printing DONE, waits for a signal, so that the series of the
 * process can be read once all its regions are deregistered. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"

static char buffer[1 << 20] __attribute__((aligned(4096)));

static size_t length_of(long i) { return (size_t)4096 * (size_t)(1 + i % 16); }
static char* address_of(long i) { return buffer + (size_t)4096 * (size_t)(i % 64); }

/* The protection domain every registration uses, and the registration that must fail. */
static struct ibv_pd* pd;
static char* bad_address = buffer;
static size_t bad_length;

/* Opens SOAK_MR_DEVICE (real libibverbs only); 0, or 1 after saying why not. */
static int open_device(void) {
  const char* name = getenv("SOAK_MR_DEVICE");
#ifdef SOAK_MR_REAL_VERBS
  if (!name || !*name) {
    fprintf(stderr, "soak_mr: SOAK_MR_DEVICE must name an RDMA device\n");
    return 1;
  }
  int count = 0;
  struct ibv_device** list = ibv_get_device_list(&count);
  struct ibv_context* context = NULL;
  for (int i = 0; list && i < count && !context; i++) {
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) context = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  if (!context || !(pd = ibv_alloc_pd(context))) {
    fprintf(stderr, "soak_mr: cannot open %s and allocate a protection domain\n", name);
    return 1;
  }
  /* A page with nothing mapped: reserved, then unmapped. */
  void* hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (hole == MAP_FAILED || munmap(hole, 4096) != 0) {
    perror("soak_mr: mmap/munmap");
    return 1;
  }
  bad_address = hole;
  bad_length = 4096;
  memset(buffer, 0, sizeof buffer); /* paged in: the churn times registration, not faults */
#else
  if (name && *name) {
    fprintf(stderr, "soak_mr: built against the libibverbs stand-in, which has no %s\n", name);
    return 1;
  }
#endif
  return 0;
}

static int churn(long total, long hold) {
  CHECK(total > 0 && hold > 0);
  CHECK(prctl(PR_SET_NAME, "soak_churn") == 0);
  struct ibv_mr** ring = calloc((size_t)hold, sizeof(*ring));
  CHECK(ring);
  long failures = 0;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < total; i++) {
    struct ibv_mr** slot = &ring[i % hold];
    if (*slot) CHECK(ibv_dereg_mr(*slot) == 0);
    *slot = ibv_reg_mr(pd, address_of(i), length_of(i), IBV_ACCESS_LOCAL_WRITE);
    CHECK(*slot);
    if (i % 1024 == 1023) {
      CHECK(ibv_reg_mr(pd, bad_address, bad_length, IBV_ACCESS_LOCAL_WRITE) == NULL);
      failures++;
    }
  }
  for (long i = 0; i < hold; i++) {
    if (ring[i]) CHECK(ibv_dereg_mr(ring[i]) == 0);
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double ns =
      (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  printf("DONE %ld %ld %.0f\n", total, failures, ns / (double)total);
  free(ring);
  const char* hold_on = getenv("SOAK_MR_HOLD");
  if (hold_on && strcmp(hold_on, "1") == 0) {
    for (;;) pause(); /* until a signal ends the process */
  }
  return 0;
}

static int short_life(long index, long regions, long leak) {
  CHECK(prctl(PR_SET_NAME, "soak_short") == 0);
  struct ibv_mr* mrs[256];
  CHECK(regions <= 256 && leak <= regions);
  for (long i = 0; i < regions; i++) {
    mrs[i] = ibv_reg_mr(pd, address_of(i), length_of(i), IBV_ACCESS_LOCAL_WRITE);
    CHECK(mrs[i]);
  }
  const long kept = index % 2 == 1 ? leak : 0;
  for (long i = kept; i < regions; i++) CHECK(ibv_dereg_mr(mrs[i]) == 0);
  return 0;
}

static int procs(long count, long regions, long leak, long parallel) {
  CHECK(count > 0 && parallel > 0);
  long alive = 0;
  for (long i = 0; i < count; i++) {
    if (alive == parallel) {
      int status = 0;
      CHECK(wait(&status) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
      alive--;
    }
    const pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      char index[24], n[24], leaked[24];
      snprintf(index, sizeof index, "%ld", i);
      snprintf(n, sizeof n, "%ld", regions);
      snprintf(leaked, sizeof leaked, "%ld", leak);
      execl("/proc/self/exe", "soak_mr", "short", index, n, leaked, (char*)NULL);
      _exit(127);
    }
    alive++;
  }
  while (alive > 0) {
    int status = 0;
    CHECK(wait(&status) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    alive--;
  }
  printf("DONE %ld %ld\n", count, count / 2);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argc > 1 ? argv[1] : "";
  /* The parent of the short processes registers nothing: its children open their own. */
  if ((strcmp(mode, "churn") == 0 || strcmp(mode, "short") == 0) && open_device() != 0) return 1;
  if (strcmp(mode, "churn") == 0 && argc == 4) return churn(atol(argv[2]), atol(argv[3]));
  if (strcmp(mode, "procs") == 0 && argc == 6) {
    return procs(atol(argv[2]), atol(argv[3]), atol(argv[4]), atol(argv[5]));
  }
  if (strcmp(mode, "short") == 0 && argc == 5) {
    return short_life(atol(argv[2]), atol(argv[3]), atol(argv[4]));
  }
  fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__);
  return 2;
}
