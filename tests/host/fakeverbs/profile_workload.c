/* The program `rdmascope profile` is tested on (tests/host/profile_cases.py): known
 * registrations, leaks from named functions, and known message sizes, on the libibverbs
 * stand-in. Exits with status 3.
 *
 * usage: profile_workload MODE
 *   linger: do the work, sleep 1.5 s (the profile samples the live process), leak_late(),
 *           exit at once (those 2 regions are seen only at exit).
 *   wait:   print "READY <pid>" and wait for a line on stdin before the work, print "DONE"
 *           after it, and wait for a second line before exiting (for --pid and Ctrl-C).
 *
 * Figures (the test's expectations):
 *   churn(): 20 x ibv_reg_mr + ibv_dereg_mr of 8192 bytes (the same buffer)
 *   one failing registration (length 0)
 *   leak_buffers(): 5 regions of 65536 bytes, never deregistered
 *   leak_late(): 2 regions of 4096 bytes, never deregistered
 *   shapes(): a 2 MiB region at a 2 MiB address (LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC)
 *     and 1000 bytes at a 4 KiB address + 100 (LOCAL_WRITE | RELAXED_ORDERING), each
 *     registered and deregistered
 *   registrations 29 (2597864 bytes), deregistrations 22, failures 1,
 *   outstanding at exit 7 regions, 335872 bytes
 *   alignment: 1 of 2 MiB (shapes), 27 of 4 KiB only (churn 20, leak_buffers 5, leak_late 2),
 *     1 unaligned (shapes)
 *   per flag: LOCAL_WRITE 29, REMOTE_READ 27, REMOTE_WRITE 1, REMOTE_ATOMIC 1,
 *     RELAXED_ORDERING 1
 *   churn: churn()'s range registered again 19 times after its deregistration (155648 bytes)
 *   perf: 1024 pages touched (at least 1024 page faults of its own), 2 sleeps in linger mode
 *   (at least 2 context switches)
 *   messages: 10 signalled sends of 2048 bytes (one SGE), 4 receives of 4096 bytes. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"

static const int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

/* noinline + frame pointers (CMake): each function is a frame of its registrations' stacks. */
__attribute__((noinline)) static void churn(char* buffer) {
  for (int i = 0; i < 20; i++) {
    struct ibv_mr* mr = ibv_reg_mr(NULL, buffer, 8192, kAccess);
    CHECK(mr && ibv_dereg_mr(mr) == 0);
  }
  CHECK(ibv_reg_mr(NULL, buffer, 0, kAccess) == NULL);
}

__attribute__((noinline)) void leak_buffers(void) {
  for (int i = 0; i < 5; i++) {
    void* buffer = aligned_alloc(4096, 65536);
    CHECK(buffer && ibv_reg_mr(NULL, buffer, 65536, kAccess));
  }
}

__attribute__((noinline)) void leak_late(void) {
  for (int i = 0; i < 2; i++) {
    void* buffer = aligned_alloc(4096, 4096);
    CHECK(buffer && ibv_reg_mr(NULL, buffer, 4096, kAccess));
  }
}

/* One registration of each alignment class not seen elsewhere, with other flags. */
__attribute__((noinline)) static void shapes(void) {
  const size_t huge = 2u << 20;
  char* aligned = aligned_alloc(huge, huge);
  CHECK(aligned);
  struct ibv_mr* mr =
      ibv_reg_mr(NULL, aligned, huge,
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  CHECK(mr && ibv_dereg_mr(mr) == 0);
  char* page = aligned_alloc(4096, 4096);
  CHECK(page);
  mr = ibv_reg_mr(NULL, page + 100, 1000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  CHECK(mr && ibv_dereg_mr(mr) == 0);
  free(aligned);
  free(page);
}

static void messages(void) {
  static struct ibv_device device = {.name = "fakedev0"};
  struct ibv_context* context = ibv_open_device(&device);
  CHECK(context);
  struct ibv_pd pd = {.context = context};
  struct ibv_cq* cq = ibv_create_cq(context, 63, NULL, NULL, 0);
  CHECK(cq);
  struct ibv_qp_init_attr attr = {
      .send_cq = cq, .recv_cq = cq, .cap = {16, 16, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(&pd, &attr);
  CHECK(qp);
  /* A second QP of other depths (profile_cases.py checks both exactly): the stand-in rounds
   * the WRs up to powers of two (128, 64) and keeps the SGEs. */
  struct ibv_qp_init_attr ud_attr = {
      .send_cq = cq, .recv_cq = cq, .cap = {100, 50, 3, 2, 0}, .qp_type = IBV_QPT_UD};
  CHECK(ibv_create_qp(&pd, &ud_attr));
  struct ibv_sge send_sge = {.length = 2048}, recv_sge = {.length = 4096};
  for (int i = 0; i < 10; i++) {
    struct ibv_send_wr wr = {
        .sg_list = &send_sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
    struct ibv_send_wr* bad = NULL;
    CHECK(ibv_post_send(qp, &wr, &bad) == 0);
  }
  for (int i = 0; i < 4; i++) {
    struct ibv_recv_wr wr = {.sg_list = &recv_sge, .num_sge = 1};
    struct ibv_recv_wr* bad = NULL;
    CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
  }
  struct ibv_wc wc[16];
  CHECK(ibv_poll_cq(cq, 16, wc) == 10);
}

/* 4 MiB written once: 1024 first-touch page faults of this process. */
__attribute__((noinline)) static void touch_pages(void) {
  const size_t bytes = 1024 * 4096;
  volatile char* memory = malloc(bytes);
  CHECK(memory);
  for (size_t i = 0; i < bytes; i += 4096) memory[i] = 1;
  free((void*)memory);
}

static void wait_line(void) {
  char line[64];
  if (!fgets(line, sizeof line, stdin)) exit(1);
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "linger") != 0 && strcmp(argv[1], "wait") != 0)) {
    fprintf(stderr, "usage: %s linger|wait\n", argv[0]);
    return 2;
  }
  const int wait = strcmp(argv[1], "wait") == 0;
  if (wait) {
    printf("READY %d\n", getpid());
    fflush(stdout);
    wait_line();
  }
  char* buffer = aligned_alloc(4096, 8192);
  CHECK(buffer);
  churn(buffer);
  leak_buffers();
  shapes();
  touch_pages();
  messages();
  if (wait) {
    leak_late();
    printf("DONE\n");
    fflush(stdout);
    wait_line();
  } else {
    sleep(1);
    usleep(500000);
    leak_late();
  }
  return 3;
}
