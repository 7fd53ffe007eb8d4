/* librdmascope_preload.so: exact CQ and SRQ occupancy of one application, opt-in with
 * LD_PRELOAD. It interposes the libibverbs control path (ibv_open_device, create/destroy of
 * CQs, QPs and SRQs) and, in each device context the application opens, replaces the data
 * path operations (poll_cq, post_send, post_recv, post_srq_recv: <infiniband/verbs.h> calls
 * them through context->ops) with wrappers that count into a shared stats file (stats_file.h).
 *
 * Hot path: a pointer compare to find the context's original operations, one probe of an
 * open-addressing table to find the CQ's slot, plain loads and stores; no locks, no atomic
 * read-modify-write. Counts are exact when each queue is posted and polled by one thread at a
 * time (what the verbs API requires of applications that do not lock); concurrent posters to
 * one QP may lose increments, never corrupt memory. See docs/preload.md for coverage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_file.h"
#include "tables.h"

#define EXPORT __attribute__((visibility("default")))
#define VERSION "IBVERBS_1.1"

/* The data path operations of one opened context, as the provider set them. */
struct context_ops {
  struct ibv_context* context;
  int (*poll_cq)(struct ibv_cq*, int, struct ibv_wc*);
  int (*post_send)(struct ibv_qp*, struct ibv_send_wr*, struct ibv_send_wr**);
  int (*post_recv)(struct ibv_qp*, struct ibv_recv_wr*, struct ibv_recv_wr**);
  int (*post_srq_recv)(struct ibv_srq*, struct ibv_recv_wr*, struct ibv_recv_wr**);
};

#define MAX_CONTEXTS 64
static struct context_ops contexts[MAX_CONTEXTS];
static int context_count; /* published after the entry is filled */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

/* What the data path needs to know about a QP. */
struct qp_info {
  struct occ_cq* send_cq;
  struct occ_cq* recv_cq; /* NULL-safe: receives from an SRQ are counted on the SRQ */
  struct occ_srq* srq;
  int sq_sig_all;
};

static struct occ_table cq_slots;  /* ibv_cq* -> struct occ_cq* */
static struct occ_table srq_slots; /* ibv_srq* -> struct occ_srq* */
static struct occ_table qps;       /* ibv_qp* -> struct qp_info* */
static struct occ_table qp_nums;   /* (context, qp_num) -> struct qp_info* */

static __attribute__((always_inline)) inline const struct context_ops* ops_of(
    struct ibv_context* context) {
  int n = __atomic_load_n(&context_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++) {
    if (contexts[i].context == context) return &contexts[i];
  }
  return NULL;
}

static uint64_t qp_num_key(struct ibv_context* context, uint32_t qp_num) {
  return (uint64_t)(uintptr_t)context ^ ((uint64_t)qp_num << 1) ^ 1;
}

static void device_name(struct ibv_context* context, char* out) {
  if (context && context->device) {
    snprintf(out, OCC_DEVICE_LEN, "%.*s", OCC_DEVICE_LEN - 1, context->device->name);
  }
}

static void* real(const char* name) {
  void* fn = dlvsym(RTLD_NEXT, name, VERSION);
  return fn ? fn : dlsym(RTLD_NEXT, name);
}
/* The next definition of `name` (libibverbs'), resolved on first use; racing first calls all
 * store the same pointer. */
#define REAL(name)                                                                         \
  static __typeof__(&name) real_##name##_cache;                                            \
  __typeof__(&name) real_##name = __atomic_load_n(&real_##name##_cache, __ATOMIC_RELAXED); \
  if (!real_##name) {                                                                      \
    real_##name = (__typeof__(&name))real(#name);                                          \
    __atomic_store_n(&real_##name##_cache, real_##name, __ATOMIC_RELAXED);                 \
  }

/* --- Data path wrappers ------------------------------------------------------------------- */

static void note_posted(struct occ_cq* cq, uint64_t count) {
  if (!cq || count == 0) return;
  uint64_t expected = cq->expected + count;
  cq->expected = expected;
  uint64_t outstanding = expected - cq->completed;
  if (outstanding > cq->peak && outstanding <= expected) cq->peak = outstanding;
}

static int wrap_poll_cq(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc) {
  const struct context_ops* ops = ops_of(cq->context);
  int n = ops->poll_cq(cq, num_entries, wc);
  struct occ_cq* slot = occ_table_find(&cq_slots, (uintptr_t)cq);
  if (!slot) return n;
  slot->polls++;
  slot->requested_entries += (uint64_t)(num_entries > 0 ? num_entries : 0);
  if (n <= 0) {
    slot->empty_polls++;
    return n;
  }
  slot->polled_entries += (uint64_t)n;
  if (!slot->srq_fed) {
    slot->completed += (uint64_t)n;
    return n;
  }
  /* Receives of QPs on an SRQ were posted to the SRQ, not to this CQ: count them there. */
  uint64_t direct = 0;
  for (int i = 0; i < n; i++) {
    if (wc[i].opcode & IBV_WC_RECV) {
      struct qp_info* qp = occ_table_find(&qp_nums, qp_num_key(cq->context, wc[i].qp_num));
      if (qp && qp->srq) {
        qp->srq->consumed++;
        continue;
      }
    }
    direct++;
  }
  slot->completed += direct;
  return n;
}

static int wrap_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
  const struct context_ops* ops = ops_of(qp->context);
  int rc = ops->post_send(qp, wr, bad);
  struct qp_info* info = occ_table_find(&qps, (uintptr_t)qp);
  if (!info) return rc;
  uint64_t signalled = 0;
  for (struct ibv_send_wr* w = wr; w && !(rc && w == *bad); w = w->next) {
    if (info->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED)) signalled++;
  }
  note_posted(info->send_cq, signalled);
  return rc;
}

static int wrap_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
  const struct context_ops* ops = ops_of(qp->context);
  int rc = ops->post_recv(qp, wr, bad);
  struct qp_info* info = occ_table_find(&qps, (uintptr_t)qp);
  if (!info) return rc;
  uint64_t posted = 0;
  for (struct ibv_recv_wr* w = wr; w && !(rc && w == *bad); w = w->next) posted++;
  note_posted(info->recv_cq, posted);
  return rc;
}

static int wrap_post_srq_recv(struct ibv_srq* srq, struct ibv_recv_wr* wr,
                              struct ibv_recv_wr** bad) {
  const struct context_ops* ops = ops_of(srq->context);
  int rc = ops->post_srq_recv(srq, wr, bad);
  struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)srq);
  if (!slot) return rc;
  uint64_t posted = 0;
  for (struct ibv_recv_wr* w = wr; w && !(rc && w == *bad); w = w->next) posted++;
  slot->posted += posted;
  return rc;
}

/* --- Control path interposers ------------------------------------------------------------- */

EXPORT struct ibv_context* ibv_open_device(struct ibv_device* device) {
  REAL(ibv_open_device);
  struct ibv_context* context = real_ibv_open_device(device);
  if (!context || !occ_file_open()) return context;
  pthread_mutex_lock(&control_lock);
  if (context_count < MAX_CONTEXTS) {
    struct context_ops* ops = &contexts[context_count];
    ops->context = context;
    ops->poll_cq = context->ops.poll_cq;
    ops->post_send = context->ops.post_send;
    ops->post_recv = context->ops.post_recv;
    ops->post_srq_recv = context->ops.post_srq_recv;
    __atomic_store_n(&context_count, context_count + 1, __ATOMIC_RELEASE);
    if (ops->poll_cq) context->ops.poll_cq = wrap_poll_cq;
    if (ops->post_send) context->ops.post_send = wrap_post_send;
    if (ops->post_recv) context->ops.post_recv = wrap_post_recv;
    if (ops->post_srq_recv) context->ops.post_srq_recv = wrap_post_srq_recv;
  }
  pthread_mutex_unlock(&control_lock);
  return context;
}

EXPORT struct ibv_cq* ibv_create_cq(struct ibv_context* context, int cqe, void* cq_context,
                                    struct ibv_comp_channel* channel, int comp_vector) {
  REAL(ibv_create_cq);
  struct ibv_cq* cq = real_ibv_create_cq(context, cqe, cq_context, channel, comp_vector);
  if (!cq || !ops_of(context)) return cq;
  pthread_mutex_lock(&control_lock);
  struct occ_cq* slot = occ_cq_alloc();
  if (slot) {
    slot->handle = cq->handle;
    slot->entries = (uint32_t)cq->cqe;
    device_name(context, slot->device);
    __atomic_store_n(&slot->in_use, 1, __ATOMIC_RELEASE);
    occ_table_insert(&cq_slots, (uintptr_t)cq, slot);
  }
  pthread_mutex_unlock(&control_lock);
  return cq;
}

EXPORT int ibv_resize_cq(struct ibv_cq* cq, int cqe) {
  REAL(ibv_resize_cq);
  int rc = real_ibv_resize_cq(cq, cqe);
  struct occ_cq* slot = occ_table_find(&cq_slots, (uintptr_t)cq);
  if (rc == 0 && slot) slot->entries = (uint32_t)cq->cqe;
  return rc;
}

EXPORT int ibv_destroy_cq(struct ibv_cq* cq) {
  REAL(ibv_destroy_cq);
  int rc = real_ibv_destroy_cq(cq);
  if (rc != 0) return rc;
  pthread_mutex_lock(&control_lock);
  struct occ_cq* slot = occ_table_remove(&cq_slots, (uintptr_t)cq);
  if (slot) occ_cq_free(slot);
  pthread_mutex_unlock(&control_lock);
  return rc;
}

EXPORT struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* attr) {
  REAL(ibv_create_qp);
  struct ibv_qp* qp = real_ibv_create_qp(pd, attr);
  if (!qp) return qp;
  struct qp_info* info = calloc(1, sizeof(*info));
  if (!info) return qp;
  pthread_mutex_lock(&control_lock);
  info->send_cq = occ_table_find(&cq_slots, (uintptr_t)attr->send_cq);
  info->recv_cq = occ_table_find(&cq_slots, (uintptr_t)attr->recv_cq);
  info->srq = attr->srq ? occ_table_find(&srq_slots, (uintptr_t)attr->srq) : NULL;
  info->sq_sig_all = attr->sq_sig_all;
  if (info->srq && info->recv_cq) info->recv_cq->srq_fed = 1;
  occ_table_insert(&qps, (uintptr_t)qp, info);
  occ_table_insert(&qp_nums, qp_num_key(qp->context, qp->qp_num), info);
  pthread_mutex_unlock(&control_lock);
  return qp;
}

EXPORT int ibv_destroy_qp(struct ibv_qp* qp) {
  REAL(ibv_destroy_qp);
  struct ibv_context* context = qp->context;
  uint32_t qp_num = qp->qp_num;
  int rc = real_ibv_destroy_qp(qp);
  if (rc != 0) return rc;
  pthread_mutex_lock(&control_lock);
  /* Kept allocated: a poller may still hold it; a few bytes per destroyed QP. */
  occ_table_remove(&qps, (uintptr_t)qp);
  occ_table_remove(&qp_nums, qp_num_key(context, qp_num));
  pthread_mutex_unlock(&control_lock);
  return rc;
}

EXPORT struct ibv_srq* ibv_create_srq(struct ibv_pd* pd, struct ibv_srq_init_attr* attr) {
  REAL(ibv_create_srq);
  struct ibv_srq* srq = real_ibv_create_srq(pd, attr);
  if (!srq || !ops_of(pd->context)) return srq;
  pthread_mutex_lock(&control_lock);
  struct occ_srq* slot = occ_srq_alloc();
  if (slot) {
    slot->handle = srq->handle;
    slot->max_wr = attr->attr.max_wr;
    slot->limit = 0; /* ibv_create_srq ignores the limit: armed by ibv_modify_srq */
    device_name(pd->context, slot->device);
    __atomic_store_n(&slot->in_use, 1, __ATOMIC_RELEASE);
    occ_table_insert(&srq_slots, (uintptr_t)srq, slot);
  }
  pthread_mutex_unlock(&control_lock);
  return srq;
}

EXPORT int ibv_modify_srq(struct ibv_srq* srq, struct ibv_srq_attr* attr, int mask) {
  REAL(ibv_modify_srq);
  int rc = real_ibv_modify_srq(srq, attr, mask);
  struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)srq);
  if (rc == 0 && slot) {
    if (mask & IBV_SRQ_LIMIT) slot->limit = attr->srq_limit;
    if (mask & IBV_SRQ_MAX_WR) slot->max_wr = attr->max_wr;
  }
  return rc;
}

EXPORT int ibv_destroy_srq(struct ibv_srq* srq) {
  REAL(ibv_destroy_srq);
  int rc = real_ibv_destroy_srq(srq);
  if (rc != 0) return rc;
  pthread_mutex_lock(&control_lock);
  struct occ_srq* slot = occ_table_remove(&srq_slots, (uintptr_t)srq);
  if (slot) occ_srq_free(slot);
  pthread_mutex_unlock(&control_lock);
  return rc;
}

/* The device disarms an SRQ's limit when SRQ_LIMIT_REACHED fires. */
EXPORT int ibv_get_async_event(struct ibv_context* context, struct ibv_async_event* event) {
  REAL(ibv_get_async_event);
  int rc = real_ibv_get_async_event(context, event);
  if (rc == 0 && event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
    struct occ_srq* slot = occ_table_find(&srq_slots, (uintptr_t)event->element.srq);
    if (slot) slot->limit = 0;
  }
  return rc;
}
