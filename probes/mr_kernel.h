/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between probes/mr_kernel.bpf.c and the exporter: MR tracking from fentry/fexit on
 * the kernel's uverbs and ib_core (BPF trampolines, no trap). It fills the maps of
 * probes/mr.bpf.c (regions, procs, stacks, globals: user space hands their fds over), so
 * that one set of MR metrics comes out whichever path feeds them. Only its own bookkeeping
 * is declared here; the shared layouts are in mr.h. */
#ifndef RDMASCOPE_PROBES_MR_KERNEL_H
#define RDMASCOPE_PROBES_MR_KERNEL_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "mr.h"

/* Which uverbs handler a thread is inside. */
enum kmr_call_kind {
  KMR_CALL_REG = 1,   /* ib_uverbs_reg_mr, UVERBS_METHOD_REG_DMABUF_MR (and REG_MR, 6.10+) */
  KMR_CALL_REREG = 2, /* ib_uverbs_rereg_mr: the driver may replace the MR by a new one */
};

/* Per-thread state between a registration handler's entry and its exit. */
struct kmr_call {
  __u64 start_ns;
  __u64 mr;     /* the struct ib_mr * created in the call (rdma_restrack_add), or 0 */
  __u64 addr;   /* the user address pinned (ib_umem_get), or 0 if not seen */
  __u32 access; /* IB_ACCESS_* as passed to ib_umem_get (same bits as IBV_ACCESS_*) */
  __u32 kind;   /* enum kmr_call_kind */
  __s32 stack_id;
  __u32 moved;          /* rereg: the old MR's region was released into `old` */
  __u64 site;           /* the user stack captured at entry (mr_region.site), or 0 */
  struct mr_region old; /* rereg: the replaced MR's region, to move under the new MR */
};

/* The owner of a tracked MR, by its kernel pointer: the release (ib_dereg_mr_user) may run
 * in another task (the last holder of the uverbs file), which must still find the
 * region's key {owner tgid, MR pointer} in the shared regions map. */
struct kmr_owner {
  __u32 tgid;
  __u32 exec_id; /* the registering image's exec generation (mr_proc_key in mr.h) */
};

/* Per-thread state of ib_dereg_mr_user between entry and exit: the region taken out of the
 * map at entry, before the driver frees the MR (a registration reusing the pointer before
 * the exit can then never be taken for it), committed or put back by the return value. */
struct kmr_dereg {
  __u64 mr;
  struct kmr_owner owner;
  struct mr_region region;
};

/* Counters of the kernel path only (one array slot). */
struct kmr_globals {
  __u64 released_at_exit; /* regions left to user space's exit or exec accounting */
  __u64 lost_owners;      /* owners map full: the region's release cannot be matched */
  /* regions whose struct ib_mr was handed out again before their release was seen */
  __u64 released_unseen;
};

#endif /* RDMASCOPE_PROBES_MR_KERNEL_H */
