/* The libibverbs stand-in's control path: CQ, QP and SRQ lifecycle and asynchronous events,
 * with the real structs of <infiniband/verbs.h> and rdma-core's symbol versions. Like real
 * providers, creation rounds queue sizes up and writes the actual capabilities back into the
 * caller's attributes; ibv_destroy_cq fails with EBUSY while QPs use the CQ. Asynchronous
 * events are queued by the test program with fakeverbs_inject_async_event(). */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define EXPORT __attribute__((visibility("default"), noinline, used))

static atomic_uint next_handle = 1;
static atomic_uint next_qp_num = 0x100;

/* Address reuse on demand (fake_internal.h). */
static void (*after_destroy_hook)(void);
static int recycle_kind = -1;
static void* recycled_object[4];

EXPORT void fakeverbs_reuse_next_destroyed(int kind, void (*hook)(void)) {
  recycle_kind = kind;
  after_destroy_hook = hook;
}

void* fake_recycled(int kind) {
  void* object = recycled_object[kind];
  recycled_object[kind] = NULL;
  return object;
}

/* 1 if the object was kept (and the hook ran), 0 if the caller frees it as usual. */
int fake_recycle(int kind, void* object) {
  if (recycle_kind != kind) return 0;
  recycle_kind = -1;
  recycled_object[kind] = object;
  void (*hook)(void) = after_destroy_hook;
  after_destroy_hook = NULL;
  if (hook) hook();
  return 1;
}

static void* fake_alloc(int kind, size_t size) {
  void* object = fake_recycled(kind);
  if (!object) return calloc(1, size);
  memset(object, 0, size);
  return object;
}

/* n rounded up to 2^k - 1 entries (mlx5's CQ sizing), or 2^k work requests. */
static uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

EXPORT struct ibv_cq* fake_create_cq(struct ibv_context* context, int cqe, void* cq_context,
                                     struct ibv_comp_channel* channel, int comp_vector) {
  (void)comp_vector;
  if (cqe <= 0) {
    errno = EINVAL;
    return NULL;
  }
  struct fake_cq* fake = fake_alloc(FAKE_KIND_CQ, sizeof(*fake));
  if (!fake) return NULL;
  fake->cq.context = context;
  fake->cq.channel = channel;
  fake->cq.cq_context = cq_context;
  fake->cq.handle = atomic_fetch_add(&next_handle, 1);
  fake->cq.cqe = (int)pow2_at_least((uint32_t)cqe + 1) - 1;
  return &fake->cq;
}

EXPORT int fake_resize_cq(struct ibv_cq* cq, int cqe) {
  if (cqe <= 0) return EINVAL;
  cq->cqe = (int)pow2_at_least((uint32_t)cqe + 1) - 1;
  return 0;
}

EXPORT int fake_destroy_cq(struct ibv_cq* cq) {
  struct fake_cq* fake = (struct fake_cq*)cq;
  if (atomic_load(&fake->users) > 0) return EBUSY;
  if (!fake_recycle(FAKE_KIND_CQ, fake)) free(fake);
  return 0;
}

/* The IBVERBS_1.0 ABI hands out its own CQ struct wrapping the real one. */
struct cq_1_0 {
  struct ibv_context* context;
  void* cq_context;
  uint32_t handle;
  int cqe;
  struct ibv_cq* real_cq;
};

EXPORT struct cq_1_0* fake_create_cq_1_0(struct ibv_context* context, int cqe, void* cq_context,
                                         struct ibv_comp_channel* channel, int comp_vector) {
  struct ibv_cq* real = fake_create_cq(context, cqe, cq_context, channel, comp_vector);
  if (!real) return NULL;
  struct cq_1_0* cq = calloc(1, sizeof(*cq));
  cq->context = context;
  cq->cqe = real->cqe;
  cq->real_cq = real;
  return cq;
}

EXPORT int fake_destroy_cq_1_0(struct cq_1_0* cq) {
  int rc = fake_destroy_cq(cq->real_cq);
  if (rc == 0) free(cq);
  return rc;
}

EXPORT struct ibv_qp* fake_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  if (!attr->send_cq || !attr->recv_cq) {
    errno = EINVAL;
    return NULL;
  }
  struct fake_qp* fake = fake_alloc(FAKE_KIND_QP, sizeof(*fake));
  if (!fake) return NULL;
  struct ibv_qp* qp = &fake->qp;
  fake->sq_sig_all = attr->sq_sig_all;
  attr->cap.max_send_wr = pow2_at_least(attr->cap.max_send_wr);
  if (!attr->srq) attr->cap.max_recv_wr = pow2_at_least(attr->cap.max_recv_wr);
  qp->context = pd ? pd->context : NULL;
  qp->pd = pd;
  qp->send_cq = attr->send_cq;
  qp->recv_cq = attr->recv_cq;
  qp->srq = attr->srq;
  qp->handle = atomic_fetch_add(&next_handle, 1);
  qp->qp_num = atomic_fetch_add(&next_qp_num, 1);
  qp->state = IBV_QPS_RESET;
  qp->qp_type = attr->qp_type;
  atomic_fetch_add(&((struct fake_cq*)attr->send_cq)->users, 1);
  atomic_fetch_add(&((struct fake_cq*)attr->recv_cq)->users, 1);
  return qp;
}

EXPORT int fake_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* attr, int mask) {
  if ((mask & IBV_QP_STATE) && attr->qp_state > IBV_QPS_ERR) return EINVAL;
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}

EXPORT int fake_destroy_qp(struct ibv_qp* qp) {
  atomic_fetch_sub(&((struct fake_cq*)qp->send_cq)->users, 1);
  atomic_fetch_sub(&((struct fake_cq*)qp->recv_cq)->users, 1);
  if (!fake_recycle(FAKE_KIND_QP, qp)) free(qp);
  return 0;
}

EXPORT struct ibv_srq* fake_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* attr) {
  struct fake_srq* fake = fake_alloc(FAKE_KIND_SRQ, sizeof(*fake));
  if (!fake) return NULL;
  struct ibv_srq* srq = &fake->srq;
  attr->attr.max_wr = pow2_at_least(attr->attr.max_wr);
  srq->context = pd ? pd->context : NULL;
  srq->pd = pd;
  srq->handle = atomic_fetch_add(&next_handle, 1);
  return srq;
}

/* The limit must be below the depth (EINVAL otherwise, as on mlx5). */
EXPORT int fake_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr, int mask) {
  (void)srq;
  if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit == 0xffffffffu) return EINVAL;
  return 0;
}

EXPORT int fake_destroy_srq(struct ibv_srq* srq) {
  if (!fake_recycle(FAKE_KIND_SRQ, srq)) free(srq);
  return 0;
}

/* A small queue of injected events; ibv_get_async_event returns -1 when it is empty. */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_async_event events[64];
static unsigned events_head, events_tail;

EXPORT void fakeverbs_inject_async_event(enum ibv_event_type type, void* element) {
  pthread_mutex_lock(&events_lock);
  events[events_tail % 64].event_type = type;
  events[events_tail % 64].element.srq = element;
  events_tail++;
  pthread_mutex_unlock(&events_lock);
}

EXPORT int fake_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
  (void)context;
  int rc = -1;
  pthread_mutex_lock(&events_lock);
  if (events_head != events_tail) {
    *event = events[events_head % 64];
    events_head++;
    rc = 0;
  }
  pthread_mutex_unlock(&events_lock);
  return rc;
}

EXPORT void fake_ack_async_event(struct ibv_async_event* event) { (void)event; }

__asm__(".symver fake_create_cq_1_0, ibv_create_cq@IBVERBS_1.0");
__asm__(".symver fake_create_cq, ibv_create_cq@@IBVERBS_1.1");
__asm__(".symver fake_destroy_cq_1_0, ibv_destroy_cq@IBVERBS_1.0");
__asm__(".symver fake_destroy_cq, ibv_destroy_cq@@IBVERBS_1.1");
__asm__(".symver fake_resize_cq, ibv_resize_cq@@IBVERBS_1.1");
__asm__(".symver fake_create_qp, ibv_create_qp@@IBVERBS_1.1");
__asm__(".symver fake_modify_qp, ibv_modify_qp@@IBVERBS_1.1");
__asm__(".symver fake_destroy_qp, ibv_destroy_qp@@IBVERBS_1.1");
__asm__(".symver fake_create_srq, ibv_create_srq@@IBVERBS_1.1");
__asm__(".symver fake_modify_srq, ibv_modify_srq@@IBVERBS_1.1");
__asm__(".symver fake_destroy_srq, ibv_destroy_srq@@IBVERBS_1.1");
__asm__(".symver fake_get_async_event, ibv_get_async_event@@IBVERBS_1.1");
__asm__(".symver fake_ack_async_event, ibv_ack_async_event@@IBVERBS_1.1");
