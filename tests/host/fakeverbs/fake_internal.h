/* The stand-in's objects: the application holds a pointer to the first member. */
#ifndef FAKEVERBS_INTERNAL_H
#define FAKEVERBS_INTERNAL_H

#include <infiniband/verbs.h>
#include <stdatomic.h>

#define FAKE_CQ_RING 4096

struct fake_cq {
  struct ibv_cq cq;
  atomic_int users;
  /* Completions waiting to be polled (data path of contexts from ibv_open_device). */
  struct ibv_wc ring[FAKE_CQ_RING];
  unsigned head, tail;
  atomic_flag ring_lock; /* posters and pollers of several threads, as a provider's CQ lock */
};

void fake_ring_lock(struct fake_cq* cq);
void fake_ring_unlock(struct fake_cq* cq);
/* Set by fakeverbs_reuse_next_destroyed(): the next destroyed object of a kind is kept for the
 * next create of that kind (same address), and the hook runs right after the destroy freed
 * it, as another thread's create could. */
void* fake_recycled(int kind);
int fake_recycle(int kind, void* object);
enum { FAKE_KIND_CQ, FAKE_KIND_QP, FAKE_KIND_SRQ, FAKE_KIND_CONTEXT };

struct fake_qp {
  struct ibv_qp qp;
  int sq_sig_all;
  int recvs_posted; /* posted to its own receive queue, not yet consumed */
};

struct fake_srq {
  struct ibv_srq srq;
  int posted;
};

#endif
