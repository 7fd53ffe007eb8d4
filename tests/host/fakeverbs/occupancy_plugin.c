/* A plugin (think of a Python extension) that links libibverbs, here the stand-in, and is
 * loaded by plugin_host with dlopen(RTLD_LOCAL): its ibv_* references bind to the preload
 * library, which must find the plugin's libibverbs although RTLD_NEXT cannot see it. */
#include <infiniband/verbs.h>
#include <string.h>

/* Opens a device, posts 3 signalled sends and polls them: returns the completions polled
 * (3), or a negative step number where a call failed. */
__attribute__((visibility("default"))) int plugin_run(void) {
  static struct ibv_device device = {.name = "fakedev0"};
  struct ibv_context* context = ibv_open_device(&device);
  if (!context) return -1;
  static struct ibv_pd pd;
  pd.context = context;
  struct ibv_cq* cq = ibv_create_cq(context, 15, NULL, NULL, 0);
  if (!cq) return -2;
  struct ibv_qp_init_attr attr = {
      .send_cq = cq, .recv_cq = cq, .cap = {16, 16, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(&pd, &attr);
  if (!qp) return -3;
  struct ibv_sge sge = {.length = 8};
  struct ibv_send_wr wr[3];
  memset(wr, 0, sizeof wr);
  for (int i = 0; i < 3; i++) {
    wr[i].sg_list = &sge;
    wr[i].num_sge = 1;
    wr[i].send_flags = IBV_SEND_SIGNALED;
    wr[i].next = i < 2 ? &wr[i + 1] : NULL;
  }
  struct ibv_send_wr* bad;
  if (ibv_post_send(qp, wr, &bad) != 0) return -4;
  struct ibv_wc wc[8];
  return ibv_poll_cq(cq, 8, wc);
}
