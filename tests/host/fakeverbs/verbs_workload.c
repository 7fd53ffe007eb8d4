/* Creates CQs, QPs and an SRQ of known sizes through the libibverbs stand-in, changes them,
 * receives injected asynchronous events, then waits for commands on stdin:
 *   "teardown": destroys every QP, CQ and the SRQ; prints "TORNDOWN"
 *   "exit": exits.
 * Prints "READY <pid>" once set up. The expected figures are in tests/host/verbs_tracking.py.
 *
 *   CQ a: ibv_create_cq(100) -> 127 entries; feeds: QP1 send 64 + QP1 recv 64 + QP3 send 8
 *   CQ b: ibv_create_cq(50) -> 63, resized to 1000 -> 1023; feeds: QP2 send 16 + SRQ 256
 *         (shared by QP2 and QP3, counted once)
 *   CQ c: ibv_create_cq@IBVERBS_1.0(10) -> 15, no QP
 *   SRQ: 200 -> 256 WRs, limit armed at 32, then SRQ_LIMIT_REACHED (disarmed: 0)
 *   QP1 moved RESET -> INIT -> RTR -> RTS; ibv_destroy_cq(a) fails with EBUSY (QPs use it)
 *   events: SRQ_LIMIT_REACHED x1, QP_FATAL x1, PORT_ERR x2 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fakeverbs_inject_async_event(enum ibv_event_type type, void* element);

#include "common/check.h"

static struct ibv_qp* create_qp(struct ibv_pd* pd, struct ibv_cq* send_cq, struct ibv_cq* recv_cq,
                                struct ibv_srq* srq, enum ibv_qp_type type, uint32_t send_wr,
                                uint32_t recv_wr) {
  struct ibv_qp_init_attr attr = {.send_cq = send_cq,
                                  .recv_cq = recv_cq,
                                  .srq = srq,
                                  .cap = {.max_send_wr = send_wr, .max_recv_wr = recv_wr},
                                  .qp_type = type};
  struct ibv_qp* qp = ibv_create_qp(pd, &attr);
  CHECK(qp);
  return qp;
}

static void move_qp(struct ibv_qp* qp, enum ibv_qp_state state) {
  struct ibv_qp_attr attr = {.qp_state = state};
  CHECK(ibv_modify_qp(qp, &attr, IBV_QP_STATE) == 0);
}

int main(void) {
  static struct ibv_device device = {.name = "fakedev0"};
  static struct ibv_context context = {.device = &device};
  static struct ibv_pd pd = {.context = &context};

  struct ibv_cq* a = ibv_create_cq(&context, 100, NULL, NULL, 0);
  struct ibv_cq* b = ibv_create_cq(&context, 50, NULL, NULL, 0);
  CHECK(a && b && a->cqe == 127 && b->cqe == 63);
  typedef void* (*create_cq_1_0_fn)(struct ibv_context*, int, void*, void*, int);
  typedef int (*destroy_cq_1_0_fn)(void*);
  create_cq_1_0_fn create_cq_1_0 =
      (create_cq_1_0_fn)dlvsym(RTLD_DEFAULT, "ibv_create_cq", "IBVERBS_1.0");
  destroy_cq_1_0_fn destroy_cq_1_0 =
      (destroy_cq_1_0_fn)dlvsym(RTLD_DEFAULT, "ibv_destroy_cq", "IBVERBS_1.0");
  CHECK(create_cq_1_0 && destroy_cq_1_0);
  void* c = create_cq_1_0(&context, 10, NULL, NULL, 0);
  CHECK(c);

  struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = 200, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(&pd, &srq_attr);
  CHECK(srq && srq_attr.attr.max_wr == 256);

  struct ibv_qp* qp1 = create_qp(&pd, a, a, NULL, IBV_QPT_RC, 64, 64);
  struct ibv_qp* qp2 = create_qp(&pd, b, b, srq, IBV_QPT_UD, 16, 0);
  struct ibv_qp* qp3 = create_qp(&pd, a, b, srq, IBV_QPT_RC, 8, 0);
  move_qp(qp1, IBV_QPS_INIT);
  move_qp(qp1, IBV_QPS_RTR);
  move_qp(qp1, IBV_QPS_RTS);
  CHECK(ibv_resize_cq(b, 1000) == 0 && b->cqe == 1023);
  CHECK(ibv_destroy_cq(a) == EBUSY);

  struct ibv_srq_attr limit = {.srq_limit = 32};
  CHECK(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT) == 0);
  fakeverbs_inject_async_event(IBV_EVENT_SRQ_LIMIT_REACHED, srq);
  fakeverbs_inject_async_event(IBV_EVENT_QP_FATAL, qp1);
  fakeverbs_inject_async_event(IBV_EVENT_PORT_ERR, NULL);
  fakeverbs_inject_async_event(IBV_EVENT_PORT_ERR, NULL);
  for (int i = 0; i < 4; i++) {
    struct ibv_async_event event;
    CHECK(ibv_get_async_event(&context, &event) == 0);
    ibv_ack_async_event(&event);
  }

  printf("READY %d\n", getpid());
  fflush(stdout);
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strncmp(line, "teardown", 8) == 0) {
      CHECK(ibv_destroy_qp(qp1) == 0 && ibv_destroy_qp(qp2) == 0 && ibv_destroy_qp(qp3) == 0);
      CHECK(ibv_destroy_cq(a) == 0 && ibv_destroy_cq(b) == 0 && destroy_cq_1_0(c) == 0);
      CHECK(ibv_destroy_srq(srq) == 0);
      printf("TORNDOWN\n");
      fflush(stdout);
    } else if (strncmp(line, "exit", 4) == 0) {
      break;
    }
  }
  return 0;
}
