/* The stand-in's device contexts and data path: ibv_open_device returns a context whose
 * operations table (what ibv_poll_cq, ibv_post_send, ibv_post_recv and ibv_post_srq_recv call
 * through, as with a real provider) queues completions in memory: a signalled send completes
 * at once on the send CQ; receives complete when the test delivers messages with
 * fakeverbs_deliver(). Single-threaded use per queue, like the tests. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define EXPORT __attribute__((visibility("default"), noinline, used))

void fake_ring_lock(struct fake_cq* cq) {
  while (atomic_flag_test_and_set_explicit(&cq->ring_lock, memory_order_acquire)) {
  }
}

void fake_ring_unlock(struct fake_cq* cq) {
  atomic_flag_clear_explicit(&cq->ring_lock, memory_order_release);
}

/* Error completions (fakeverbs_fail_next) carry an opcode a provider leaves undefined. */
static atomic_int failing;

static void complete(struct ibv_cq* cq, enum ibv_wc_opcode opcode, uint32_t qp_num,
                     uint64_t wr_id) {
  struct fake_cq* fake = (struct fake_cq*)cq;
  fake_ring_lock(fake);
  if (fake->tail - fake->head < FAKE_CQ_RING) { /* overrun: dropped, as hardware would */
    struct ibv_wc* wc = &fake->ring[fake->tail % FAKE_CQ_RING];
    memset(wc, 0, sizeof(*wc));
    wc->wr_id = wr_id;
    wc->status = IBV_WC_SUCCESS;
    wc->opcode = opcode;
    wc->qp_num = qp_num;
    if (atomic_load(&failing) > 0) {
      atomic_fetch_sub(&failing, 1);
      wc->status = IBV_WC_WR_FLUSH_ERR;
      wc->opcode = opcode == IBV_WC_RECV ? IBV_WC_SEND : IBV_WC_RECV; /* garbage, on purpose */
    }
    fake->tail++;
  }
  fake_ring_unlock(fake);
}

/* Test hook: the next n completions are flush errors whose opcode is wrong. */
EXPORT void fakeverbs_fail_next(int n) { atomic_store(&failing, n); }

static int fake_poll_cq(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc) {
  struct fake_cq* fake = (struct fake_cq*)cq;
  int n = 0;
  fake_ring_lock(fake);
  while (n < num_entries && fake->head != fake->tail) {
    wc[n++] = fake->ring[fake->head % FAKE_CQ_RING];
    fake->head++;
  }
  fake_ring_unlock(fake);
  return n;
}

/* A send with no length fails, so that tests can check partial posts (bad_wr). */
static int fake_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  struct fake_qp* fake = (struct fake_qp*)qp;
  for (; wr; wr = wr->next) {
    if (wr->num_sge == 0) {
      *bad = wr;
      return EINVAL;
    }
    if (fake->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
      complete(qp->send_cq, IBV_WC_SEND, qp->qp_num, wr->wr_id);
    }
  }
  return 0;
}

static int fake_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  (void)bad;
  for (; wr; wr = wr->next) ((struct fake_qp*)qp)->recvs_posted++;
  return 0;
}

static int fake_post_srq_recv(struct ibv_srq* srq, struct ibv_recv_wr* wr,
                              struct ibv_recv_wr** bad) {
  (void)bad;
  for (; wr; wr = wr->next) ((struct fake_srq*)srq)->posted++;
  return 0;
}

/* Test hook: n messages arrive on qp, each consuming a receive (from its SRQ if it has one). */
EXPORT int fakeverbs_deliver(struct ibv_qp* qp, int n) {
  int delivered = 0;
  for (; delivered < n; delivered++) {
    int* available =
        qp->srq ? &((struct fake_srq*)qp->srq)->posted : &((struct fake_qp*)qp)->recvs_posted;
    if (*available == 0) break;
    (*available)--;
    complete(qp->recv_cq, IBV_WC_RECV, qp->qp_num, 0);
  }
  return delivered;
}

/* A second provider, for devices named "fakealt*": its poll_cq marks every completion with
 * vendor_err FAKE_ALT_VENDOR_ERR, so a test sees which provider served a call. */
#define FAKE_ALT_VENDOR_ERR 0xa17
static int fake_alt_poll_cq(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc) {
  int n = fake_poll_cq(cq, num_entries, wc);
  for (int i = 0; i < n; i++) wc[i].vendor_err = FAKE_ALT_VENDOR_ERR;
  return n;
}

EXPORT struct ibv_context* fake_open_device(struct ibv_device* device) {
  struct ibv_context* context = fake_recycled(FAKE_KIND_CONTEXT);
  if (context) {
    memset(context, 0, sizeof(*context));
  } else {
    context = calloc(1, sizeof(*context));
  }
  if (!context) return NULL;
  context->device = device;
  context->ops.poll_cq = strncmp(device->name, "fakealt", 7) ? fake_poll_cq : fake_alt_poll_cq;
  context->ops.post_send = fake_post_send;
  context->ops.post_recv = fake_post_recv;
  context->ops.post_srq_recv = fake_post_srq_recv;
  return context;
}

EXPORT int fake_close_device(struct ibv_context* context) {
  if (!fake_recycle(FAKE_KIND_CONTEXT, context)) free(context);
  return 0;
}

__asm__(".symver fake_open_device, ibv_open_device@@IBVERBS_1.1");
__asm__(".symver fake_close_device, ibv_close_device@@IBVERBS_1.1");
