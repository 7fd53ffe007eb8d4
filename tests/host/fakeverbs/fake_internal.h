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
};

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
