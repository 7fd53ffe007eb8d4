/* Lab helper: a completion queue smaller than the work that can complete into it, on a real
 * device, then the asynchronous events of the device until it is killed.
 *
 * usage: cq_undersized DEVICE
 *   creates a CQ of 16 entries and an RC QP with 64 send and 64 receive WRs completing into
 *   it (moved to INIT), prints "READY <pid> <cqe>" (the CQ's actual capacity), then prints
 *   "EVENT <name>" for each asynchronous event (e.g. PORT_ERR when the netdev goes down). */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char* what) {
  perror(what);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
    return 2;
  }
  int count = 0;
  struct ibv_device** devices = ibv_get_device_list(&count);
  struct ibv_context* context = NULL;
  for (int i = 0; devices && i < count && !context; i++) {
    if (strcmp(ibv_get_device_name(devices[i]), argv[1]) == 0)
      context = ibv_open_device(devices[i]);
  }
  if (!context) die("ibv_open_device");
  struct ibv_pd* pd = ibv_alloc_pd(context);
  if (!pd) die("ibv_alloc_pd");
  struct ibv_cq* cq = ibv_create_cq(context, 16, NULL, NULL, 0);
  if (!cq) die("ibv_create_cq");
  struct ibv_qp_init_attr attr = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(pd, &attr);
  if (!qp) die("ibv_create_qp");
  struct ibv_qp_attr init = {
      .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = 0};
  if (ibv_modify_qp(qp, &init,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    die("ibv_modify_qp");
  }
  printf("READY %d %d %u %u\n", getpid(), cq->cqe, attr.cap.max_send_wr, attr.cap.max_recv_wr);
  fflush(stdout);
  for (;;) {
    struct ibv_async_event event;
    if (ibv_get_async_event(context, &event) != 0) die("ibv_get_async_event");
    printf("EVENT %s\n", ibv_event_type_str(event.event_type));
    fflush(stdout);
    ibv_ack_async_event(&event);
  }
}
