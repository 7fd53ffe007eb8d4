/* Times the data path calls the preload library wraps, through the stand-in's operations
 * table: ibv_poll_cq on an empty CQ, and a signalled ibv_post_send followed by the
 * ibv_poll_cq that reaps it. Prints "poll_cq_empty_ns <x>" and "send_and_poll_ns <y>".
 * usage: preload_calls ITERATIONS */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The thread's CPU time, not the wall clock: on a machine shared with other jobs, time spent
 * descheduled is not the wrapper's. */
static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  static struct ibv_device device = {.name = "fakedev0"};
  struct ibv_context* context = ibv_open_device(&device);
  struct ibv_pd pd = {.context = context};
  struct ibv_cq* cq = ibv_create_cq(context, 255, NULL, NULL, 0);
  struct ibv_qp_init_attr attr = {
      .send_cq = cq, .recv_cq = cq, .cap = {64, 64, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp* qp = ibv_create_qp(&pd, &attr);
  if (!context || !cq || !qp) return 1;
  struct ibv_wc wc[16];
  long reaped = 0;
  double start = now_ns();
  for (long i = 0; i < n; i++) reaped += ibv_poll_cq(cq, 16, wc);
  double empty = (now_ns() - start) / (double)n;
  struct ibv_sge sge = {.length = 8};
  struct ibv_send_wr wr = {
      .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr* bad;
  start = now_ns();
  for (long i = 0; i < n; i++) {
    ibv_post_send(qp, &wr, &bad);
    reaped += ibv_poll_cq(cq, 16, wc);
  }
  double pair = (now_ns() - start) / (double)n;
  printf("poll_cq_empty_ns %.2f\nsend_and_poll_ns %.2f\nreaped %ld\n", empty, pair, reaped);
  return reaped == n ? 0 : 2;
}
