/* Lab helper: a plugin linking the real libibverbs, loaded by plugin_host with
 * dlopen(RTLD_LOCAL) under the preload library (issue #11: the library must find this
 * libibverbs, which RTLD_NEXT cannot see, instead of calling NULL).
 * plugin_run(): on rxe0, an RC QP moved to INIT with 10 receives posted, and one empty poll of
 * its CQ; returns the receives posted (10), or a negative step number on failure. */
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

__attribute__((visibility("default"))) int plugin_run(void) {
  int count = 0;
  struct ibv_device** devices = ibv_get_device_list(&count);
  struct ibv_context* context = NULL;
  for (int i = 0; devices && i < count && !context; i++) {
    if (strcmp(ibv_get_device_name(devices[i]), "rxe0") == 0) context = ibv_open_device(devices[i]);
  }
  if (!context) return -1;
  struct ibv_pd* pd = ibv_alloc_pd(context);
  static char buffer[4096];
  struct ibv_mr* mr = pd ? ibv_reg_mr(pd, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_cq* cq = ibv_create_cq(context, 64, NULL, NULL, 0);
  if (!mr || !cq) return -2;
  struct ibv_qp_init_attr attr = {
      .send_cq = cq,
      .recv_cq = cq,
      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(pd, &attr);
  if (!qp) return -3;
  struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1};
  if (ibv_modify_qp(qp, &init,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    return -4;
  }
  struct ibv_sge sge = {.addr = (uintptr_t)buffer, .length = 64, .lkey = mr->lkey};
  for (int i = 0; i < 10; i++) {
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr* bad;
    if (ibv_post_recv(qp, &wr, &bad) != 0) return -5;
  }
  struct ibv_wc wc;
  if (ibv_poll_cq(cq, 1, &wc) != 0) return -6;
  return 10;
}
