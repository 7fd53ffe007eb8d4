// SPDX-License-Identifier: GPL-2.0
/* Memory-region registrations of every user-space RDMA program, from fentry/fexit
 * (BPF trampolines: no trap, tens of ns) on the kernel's uverbs and ib_core, whatever
 * library or copy of libibverbs the program uses.
 *
 * Linux 6.1 paths (drivers/infiniband/core/):
 *  - uverbs_cmd.c ib_uverbs_reg_mr(): IB_USER_VERBS_CMD_REG_MR, reached by write() and by
 *    the ioctl UVERBS_METHOD_INVOKE_WRITE that rdma-core uses for ibv_reg_mr. It calls the
 *    driver's reg_user_mr (which pins the pages with umem.c ib_umem_get(device, addr, size,
 *    access)), fills mr->iova/length, then restrack.c rdma_restrack_add(&mr->res).
 *  - uverbs_std_types_mr.c UVERBS_HANDLER(UVERBS_METHOD_REG_DMABUF_MR): ibv_reg_dmabuf_mr,
 *    the same steps (6.10+ also has UVERBS_METHOD_REG_MR there).
 *  - uverbs_cmd.c ib_uverbs_rereg_mr(): may get a new MR from the driver; the old one is then
 *    destroyed inside the call.
 *  - verbs.c ib_dereg_mr_user(mr, udata): every user MR's end: ibv_dereg_mr (write or the
 *    ioctl UVERBS_METHOD_MR_DESTROY -> uverbs_free_mr()), and the release of what is left
 *    at close of the uverbs file or at exit (uverbs_destroy_ufile_hw() ->
 *    uverbs_destroy_uobject() -> uverbs_free_mr()).
 *
 * It writes into the maps of probes/mr.bpf.c (user space hands their fds over): regions
 * keyed {owner tgid, struct ib_mr *}, the per-process totals, the stacks; mr.bpf.c's
 * sched_process_exit handler and user space do the rest exactly as for the uprobes.
 * The kernel types are declared here (the build host's vmlinux.h has no InfiniBand):
 * CO-RE relocates them against the module BTF (/sys/kernel/btf/ib_core) at load. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "mr_kernel.h"

char LICENSE[] SEC("license") = "GPL";

/* include/rdma/restrack.h, include/rdma/ib_verbs.h: only the fields read. */
enum rdma_restrack_type___kmr { RDMA_RESTRACK_MR___kmr = 4 };

struct rdma_restrack_entry___kmr {
  enum rdma_restrack_type___kmr type;
} __attribute__((preserve_access_index));

struct ib_mr___kmr {
  __u32 lkey;
  __u32 rkey;
  __u64 iova;
  __u64 length;
  struct rdma_restrack_entry___kmr res;
} __attribute__((preserve_access_index));

/* include/linux/sched.h */
#define PF_EXITING 0x00000004

/* --- the maps of probes/mr.bpf.c (same definitions; user space reuses their fds) --- */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 262144);
  __type(key, struct mr_region_key);
  __type(value, struct mr_region);
} regions SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(max_entries, 16384);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, MR_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct mr_proc_key);
  __type(value, struct mr_proc);
} procs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mr_globals);
} globals SEC(".maps");

/* --- this path's own state --- */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct kmr_call);
} kcalls SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct kmr_dereg);
} kderegs SEC(".maps");

/* Sized like regions by user space. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 262144);
  __type(key, __u64); /* struct ib_mr * */
  __type(value, struct kmr_owner);
} owners SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct mr_proc);
} proc_scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct kmr_globals);
} kglobals SEC(".maps");

/* --- helpers; the accounting mirrors probes/mr.bpf.c so both paths mean the same --- */

/* floor(log2(v)) for v > 0, 0 for 0. */
static __always_inline __u32 log2_u64(__u64 v) {
  __u32 r = 0;
  if (v >> 32) {
    v >>= 32;
    r += 32;
  }
  if (v >> 16) {
    v >>= 16;
    r += 16;
  }
  if (v >> 8) {
    v >>= 8;
    r += 8;
  }
  if (v >> 4) {
    v >>= 4;
    r += 4;
  }
  if (v >> 2) {
    v >>= 2;
    r += 2;
  }
  if (v >> 1) r += 1;
  return r;
}

/* The histogram bucket of v: ceil(log2(v)), see mr.h. */
static __always_inline __u32 bucket_of(__u64 v, __u32 buckets) {
  __u32 b = v <= 1 ? 0 : log2_u64(v - 1) + 1;
  return b >= buckets ? buckets - 1 : b;
}

static __always_inline struct mr_globals* global_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&globals, &zero);
}

static __always_inline struct kmr_globals* kernel_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&kglobals, &zero);
}

/* The thread-group leader's start (/proc/PID/stat starttime clock), as mr.bpf.c keys it. */
static __always_inline __u64 leader_start_ns(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return BPF_CORE_READ(task, group_leader, start_boottime);
}

/* The exec generation of the current image, as mr.bpf.c keys it. */
static __always_inline __u32 current_exec_id(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return (__u32)BPF_CORE_READ(task, self_exec_id);
}

/* The process's totals, created whole on first use (see mr.bpf.c proc_stats). */
static __always_inline struct mr_proc* proc_stats(__u32 tgid, __u32 exec_id, __u64 start_ns) {
  struct mr_proc_key key = {.tgid = tgid, .exec_id = exec_id, .start_ns = start_ns};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (proc) return proc;
  __u32 zero = 0;
  struct mr_proc* fresh = bpf_map_lookup_elem(&proc_scratch, &zero);
  if (!fresh) return NULL;
  __builtin_memset(fresh, 0, sizeof(*fresh));
  fresh->start_ns = start_ns;
  bpf_get_current_comm(fresh->comm, sizeof(fresh->comm));
  bpf_map_update_elem(&procs, &key, fresh, BPF_NOEXIST); /* -EEXIST: a sibling won */
  proc = bpf_map_lookup_elem(&procs, &key);
  if (!proc) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_procs, 1);
  }
  return proc;
}

static __always_inline __u64 region_bytes(const struct mr_region* region) {
  return (region->flags & MR_REGION_IMPLICIT_ODP) ? 0 : region->length;
}

/* A region is gone: count it out of its owner. */
static __always_inline void count_release(const struct kmr_owner* owner,
                                          const struct mr_region* region) {
  struct mr_proc_key key = {
      .tgid = owner->tgid, .exec_id = owner->exec_id, .start_ns = region->proc_start_ns};
  struct mr_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (!proc) return;
  __sync_fetch_and_add(&proc->deregistrations, 1);
  __sync_fetch_and_add(&proc->outstanding_regions, -1);
  __sync_fetch_and_add(&proc->outstanding_bytes, -(__s64)region_bytes(region));
  if (region->flags & MR_REGION_IMPLICIT_ODP) {
    __sync_fetch_and_add(&proc->outstanding_implicit_odp, -1);
  }
}

/* --- registration handlers --- */

static __always_inline int begin(enum kmr_call_kind kind, void* ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  struct kmr_call fresh = {
      .start_ns = bpf_ktime_get_ns(),
      .kind = kind,
      /* In the registering task, inside its system call: the user stack of the caller of
       * write()/ioctl() (frame pointers needed in the libraries to get past them). */
      .stack_id =
          kind == KMR_CALL_REG ? (__s32)bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK) : -1,
  };
  if (bpf_map_update_elem(&kcalls, &id, &fresh, BPF_ANY) != 0) {
    struct mr_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_calls, 1);
  }
  return 0;
}

/* Records the MR created by a successful registration under its owner. */
static __always_inline void commit_region(const struct kmr_owner* owner, struct mr_proc* proc,
                                          struct mr_region* region, __u64 mr) {
  struct mr_region_key key = {.tgid = owner->tgid, .exec_id = owner->exec_id, .mr = mr};
  if (bpf_map_update_elem(&owners, &mr, owner, BPF_ANY) != 0) {
    struct kmr_globals* k = kernel_counters();
    if (k) __sync_fetch_and_add(&k->lost_owners, 1);
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return;
  }
  /* BPF_ANY: a region still recorded under this pointer was freed unseen. */
  if (bpf_map_update_elem(&regions, &key, region, BPF_ANY) != 0) {
    bpf_map_delete_elem(&owners, &mr);
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return;
  }
  __sync_fetch_and_add(&proc->outstanding_regions, 1);
  __sync_fetch_and_add(&proc->outstanding_bytes, (__s64)region_bytes(region));
  if (region->flags & MR_REGION_IMPLICIT_ODP) {
    __sync_fetch_and_add(&proc->outstanding_implicit_odp, 1);
  }
}

static __always_inline int finish_reg(int ret) {
  __u64 id = bpf_get_current_pid_tgid();
  struct kmr_call* found = bpf_map_lookup_elem(&kcalls, &id);
  if (!found) return 0; /* attached while the thread was inside */
  struct kmr_call call = *found;
  bpf_map_delete_elem(&kcalls, &id);
  struct kmr_owner owner = {.tgid = id >> 32, .exec_id = current_exec_id()};
  __u64 start_ns = leader_start_ns();
  struct mr_proc* proc = proc_stats(owner.tgid, owner.exec_id, start_ns);
  if (!proc) return 0;
  /* A failed registration (a failed rereg is not one), or no MR seen (a driver that does
   * not use restrack: nothing to key it by). */
  if (ret != 0 || !call.mr) {
    if (ret != 0 && call.kind == KMR_CALL_REG) __sync_fetch_and_add(&proc->failures, 1);
    return 0;
  }
  struct ib_mr___kmr* mr = (struct ib_mr___kmr*)call.mr;
  __u64 length = BPF_CORE_READ(mr, length);
  __u64 iova = BPF_CORE_READ(mr, iova);
  __u32 lkey = BPF_CORE_READ(mr, lkey);
  /* The kernel keeps the length asked for: U64_MAX for implicit ODP (see mr.h). */
  int implicit_odp = length == ~0ULL;
  __u64 addr = call.addr ? call.addr : iova;
  __u64 latency_ns = bpf_ktime_get_ns() - call.start_ns;
  struct mr_region region = {
      .addr = addr,
      .length = implicit_odp ? 0 : length,
      .registered_ns = bpf_ktime_get_ns(),
      .proc_start_ns = start_ns,
      .lkey = lkey,
      .access = call.access,
      .stack_id = call.stack_id,
      .flags = implicit_odp ? MR_REGION_IMPLICIT_ODP : 0,
  };
  if (call.kind == KMR_CALL_REREG) {
    /* The driver replaced the MR: the old region (released inside the call) moves under
     * the new pointer with the new translation; not a new registration. */
    if (!call.moved) return 0;
    region.registered_ns = call.old.registered_ns;
    region.stack_id = call.old.stack_id;
    region.access = call.old.access;
    /* The release counted the old region out: count the moved one back in. */
    __sync_fetch_and_add(&proc->deregistrations, -1);
    commit_region(&owner, proc, &region, call.mr);
    return 0;
  }
  __sync_fetch_and_add(&proc->registrations, 1);
  __sync_fetch_and_or(&proc->access_seen, (__u64)call.access);
  __u32 bucket = bucket_of(latency_ns, MR_LATENCY_BUCKETS);
  __sync_fetch_and_add(&proc->latency[bucket & (MR_LATENCY_BUCKETS - 1)], 1);
  __sync_fetch_and_add(&proc->latency_sum_ns, latency_ns);
  if (!implicit_odp) {
    if ((addr | length) & (MR_HUGE_PAGE_BYTES - 1)) {
      __sync_fetch_and_add(&proc->not_huge_aligned_bytes, length);
    }
    if (length & (MR_PAGE_BYTES - 1)) __sync_fetch_and_add(&proc->length_not_page_multiple, 1);
    bucket = bucket_of(length, MR_SIZE_BUCKETS);
    if (bucket < MR_SIZE_BUCKETS) __sync_fetch_and_add(&proc->size[bucket], 1);
    __sync_fetch_and_add(&proc->size_sum_bytes, length);
  }
  commit_region(&owner, proc, &region, call.mr);
  return 0;
}

SEC("fentry/ib_uverbs_reg_mr")
int BPF_PROG(reg_mr_entry) { return begin(KMR_CALL_REG, ctx); }

SEC("fexit/ib_uverbs_reg_mr")
int BPF_PROG(reg_mr_exit, void* attrs, int ret) { return finish_reg(ret); }

/* Optional (user space disables what the running kernel lacks). */
SEC("fentry/ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR")
int BPF_PROG(reg_dmabuf_mr_entry) { return begin(KMR_CALL_REG, ctx); }

SEC("fexit/ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR")
int BPF_PROG(reg_dmabuf_mr_exit, void* attrs, int ret) { return finish_reg(ret); }

SEC("fentry/ib_uverbs_handler_UVERBS_METHOD_REG_MR")
int BPF_PROG(reg_mr_ioctl_entry) { return begin(KMR_CALL_REG, ctx); }

SEC("fexit/ib_uverbs_handler_UVERBS_METHOD_REG_MR")
int BPF_PROG(reg_mr_ioctl_exit, void* attrs, int ret) { return finish_reg(ret); }

SEC("fentry/ib_uverbs_rereg_mr")
int BPF_PROG(rereg_mr_entry) { return begin(KMR_CALL_REREG, ctx); }

SEC("fexit/ib_uverbs_rereg_mr")
int BPF_PROG(rereg_mr_exit, void* attrs, int ret) { return finish_reg(ret); }

/* umem.c: ib_umem_get(device, addr, size, access): the user address and the access flags
 * of the registration in progress on this thread (drivers pin user memory with it). */
SEC("fentry/ib_umem_get")
int BPF_PROG(umem_get, void* device, unsigned long addr, size_t size, int access) {
  __u64 id = bpf_get_current_pid_tgid();
  struct kmr_call* call = bpf_map_lookup_elem(&kcalls, &id);
  if (call && !call->addr) {
    call->addr = addr;
    call->access = (__u32)access;
  }
  return 0;
}

/* restrack.c: rdma_restrack_add(res): the MR is complete (keys, iova, length set). */
SEC("fentry/rdma_restrack_add")
int BPF_PROG(restrack_add, struct rdma_restrack_entry___kmr* res) {
  __u64 id = bpf_get_current_pid_tgid();
  struct kmr_call* call = bpf_map_lookup_elem(&kcalls, &id);
  if (!call) return 0;
  if (BPF_CORE_READ(res, type) !=
      bpf_core_enum_value(enum rdma_restrack_type___kmr, RDMA_RESTRACK_MR___kmr)) {
    return 0;
  }
  call->mr = (__u64)res - bpf_core_field_offset(struct ib_mr___kmr, res);
  return 0;
}

/* --- deregistration and release --- */

SEC("fentry/ib_dereg_mr_user")
int BPF_PROG(dereg_mr_entry, void* mr) {
  __u64 key_mr = (__u64)mr;
  struct kmr_owner* found = bpf_map_lookup_elem(&owners, &key_mr);
  if (!found) return 0; /* a kernel MR, or registered before we attached */
  struct kmr_owner owner = *found;
  struct mr_region_key key = {.tgid = owner.tgid, .exec_id = owner.exec_id, .mr = key_mr};
  __u64 id = bpf_get_current_pid_tgid();
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  if ((id >> 32) == owner.tgid &&
      ((BPF_CORE_READ(task, flags) & PF_EXITING) || current_exec_id() != owner.exec_id)) {
    /* The owner's exit, or its exec (the uverbs fd is O_CLOEXEC), closes its uverbs file
     * (fput -> task_work -> ib_uverbs_close -> uverbs_destroy_ufile_hw): the region stays
     * for user space's accounting of that exit (mr.bpf.c sched_process_exit) or exec
     * (sched_process_exec), exactly as on the uprobe path. */
    bpf_map_delete_elem(&owners, &key_mr);
    struct kmr_globals* k = kernel_counters();
    if (k) __sync_fetch_and_add(&k->released_at_exit, 1);
    return 0;
  }
  struct mr_region* region = bpf_map_lookup_elem(&regions, &key);
  if (!region) {
    bpf_map_delete_elem(&owners, &key_mr); /* dropped by user space with its process */
    return 0;
  }
  struct kmr_dereg pending = {.mr = key_mr, .owner = owner, .region = *region};
  if (bpf_map_update_elem(&kderegs, &id, &pending, BPF_ANY) != 0) return 0;
  /* Out before the driver frees the MR; only the caller whose delete succeeds settles it. */
  if (bpf_map_delete_elem(&regions, &key) != 0) {
    bpf_map_delete_elem(&kderegs, &id);
    return 0;
  }
  bpf_map_delete_elem(&owners, &key_mr);
  return 0;
}

SEC("fexit/ib_dereg_mr_user")
int BPF_PROG(dereg_mr_exit, void* mr, void* udata, int ret) {
  __u64 id = bpf_get_current_pid_tgid();
  struct kmr_dereg* found = bpf_map_lookup_elem(&kderegs, &id);
  if (!found) return 0;
  struct kmr_dereg pending = *found;
  bpf_map_delete_elem(&kderegs, &id);
  if (pending.mr != (__u64)mr) return 0;
  struct mr_region_key key = {
      .tgid = pending.owner.tgid, .exec_id = pending.owner.exec_id, .mr = pending.mr};
  if (ret != 0) {
    /* Still registered (e.g. -EBUSY: memory windows bound): put it back. */
    if (bpf_map_update_elem(&regions, &key, &pending.region, BPF_NOEXIST) == 0) {
      bpf_map_update_elem(&owners, &pending.mr, &pending.owner, BPF_NOEXIST);
      return 0;
    }
  }
  /* ibv_dereg_mr, a close of the uverbs file while the owner lives (counted as a
   * deregistration: the region is gone), or a rereg replacing the MR. */
  count_release(&pending.owner, &pending.region);
  struct kmr_call* call = bpf_map_lookup_elem(&kcalls, &id);
  if (call && call->kind == KMR_CALL_REREG && (id >> 32) == pending.owner.tgid) {
    /* rereg replaced this MR: its region moves to the new one at the handler's exit. */
    call->old = pending.region;
    call->moved = 1;
  }
  return 0;
}
