/* Drives known traffic through the stand-in's data path, for the preload library: run with
 * LD_PRELOAD=librdmascope_preload.so. Prints "READY <pid>", then on stdin:
 *   "destroy": destroys every queue, prints "DESTROYED"; "exit": exits.
 * Expected figures (tests/host/occupancy_tracking.py):
 *   CQ a (255 entries): 10 signalled sends (+5 unsignalled) and 20 receives posted: peak 30;
 *     polled 10 sends, an empty poll, 5 receives (3 polls of 16); then a chain of 3 signalled
 *     sends failing at the second: 1 more expected. Outstanding 31 - 15 = 16.
 *   CQ b (127 entries): fed by a QP on the SRQ: 20 SRQ receives polled (counted on the SRQ),
 *     then 3 signalled sends not polled: outstanding 3, peak 3, 1 poll of 32 returning 20.
 *   SRQ (128 WRs, limit 16): 50 posted, 20 consumed: fill 30. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fakeverbs_deliver(struct ibv_qp* qp, int n);

#include "common/check.h"

static struct ibv_sge sge = {.length = 64};

static int post_sends(struct ibv_qp* qp, int signalled, int unsignalled, int fail_at) {
  struct ibv_send_wr wrs[32];
  int n = signalled + unsignalled;
  memset(wrs, 0, sizeof wrs);
  for (int i = 0; i < n; i++) {
    wrs[i].sg_list = &sge;
    wrs[i].num_sge = i == fail_at ? 0 : 1;
    wrs[i].opcode = IBV_WR_SEND;
    wrs[i].send_flags = i < signalled ? IBV_SEND_SIGNALED : 0;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
  }
  struct ibv_send_wr* bad = NULL;
  return ibv_post_send(qp, wrs, &bad);
}

static void post_recvs(struct ibv_qp* qp, struct ibv_srq* srq, int n) {
  struct ibv_recv_wr wrs[64];
  memset(wrs, 0, sizeof wrs);
  for (int i = 0; i < n; i++) {
    wrs[i].sg_list = &sge;
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
  }
  struct ibv_recv_wr* bad = NULL;
  CHECK((srq ? ibv_post_srq_recv(srq, wrs, &bad) : ibv_post_recv(qp, wrs, &bad)) == 0);
}

static int poll(struct ibv_cq* cq, int n) {
  struct ibv_wc wc[64];
  return ibv_poll_cq(cq, n, wc);
}

int main(void) {
  static struct ibv_device device = {.name = "fakedev0"};
  struct ibv_context* context = ibv_open_device(&device);
  CHECK(context);
  struct ibv_pd pd = {.context = context};
  struct ibv_cq* a = ibv_create_cq(context, 255, NULL, NULL, 0);
  struct ibv_cq* b = ibv_create_cq(context, 100, NULL, NULL, 0);
  CHECK(a && b && a->cqe == 255 && b->cqe == 127);
  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 128, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(&pd, &srq_attr);
  CHECK(srq);
  struct ibv_srq_attr limit = {.srq_limit = 16};
  CHECK(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT) == 0);
  struct ibv_qp_init_attr attr1 = {
      .send_cq = a, .recv_cq = a, .cap = {64, 64, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp_init_attr attr2 = {
      .send_cq = b, .recv_cq = b, .srq = srq, .cap = {16, 0, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp1 = ibv_create_qp(&pd, &attr1);
  struct ibv_qp* qp2 = ibv_create_qp(&pd, &attr2);
  CHECK(qp1 && qp2);

  CHECK(post_sends(qp1, 10, 5, -1) == 0);
  post_recvs(qp1, NULL, 20);
  CHECK(poll(a, 16) == 10);
  CHECK(poll(a, 16) == 0);
  CHECK(fakeverbs_deliver(qp1, 5) == 5);
  CHECK(poll(a, 16) == 5);
  CHECK(post_sends(qp1, 3, 0, 1) != 0);

  post_recvs(NULL, srq, 50);
  CHECK(fakeverbs_deliver(qp2, 20) == 20);
  CHECK(poll(b, 32) == 20);
  CHECK(post_sends(qp2, 3, 0, -1) == 0);

  printf("READY %d\n", getpid());
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "destroy", 7) == 0) {
      CHECK(ibv_destroy_qp(qp1) == 0 && ibv_destroy_qp(qp2) == 0);
      CHECK(ibv_destroy_cq(a) == 0 && ibv_destroy_cq(b) == 0 && ibv_destroy_srq(srq) == 0);
      printf("DESTROYED\n");
      fflush(stdout);
    } else if (strncmp(line, "exit", 4) == 0) {
      break;
    }
  }
  return 0;
}
