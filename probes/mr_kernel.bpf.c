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

#include "mr_common.bpf.h"
#include "mr_kernel.h"

char LICENSE[] SEC("license") = "GPL";

/* include/rdma/restrack.h, include/rdma/ib_verbs.h: only the fields read. */
enum rdma_restrack_type___kmr { RDMA_RESTRACK_MR___kmr = 4 };

struct rdma_restrack_entry___kmr {
  bool user; /* a user object (uverbs), not a kernel ULP's */
  enum rdma_restrack_type___kmr type;
  __u32 id; /* the MRN: set by rdma_restrack_add (xa_alloc_cyclic per device and type) */
} __attribute__((preserve_access_index));

struct ib_device___kmr {
  __u32 index; /* RDMA_NLDEV_ATTR_DEV_INDEX */
} __attribute__((preserve_access_index));

struct ib_mr___kmr {
  struct ib_device___kmr* device;
  __u32 lkey;
  __u32 rkey;
  __u64 iova;
  __u64 length;
  struct rdma_restrack_entry___kmr res;
} __attribute__((preserve_access_index));

/* include/uapi/linux/bpf.h: whether the running kernel has bpf_task_pt_regs() (5.15). */
enum bpf_func_id___kmr { BPF_FUNC_task_pt_regs___kmr = 175 };

/* include/linux/sched.h */
#define PF_EXITING 0x00000004

/* The maps of probes/mr.bpf.c come from mr_common.bpf.h (same definitions; user space
 * reuses their fds). */

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
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct kmr_globals);
} kglobals SEC(".maps");

/* Set by user space while the exporter starts (before the first trampoline goes live, cleared
 * a minute later): a user MR added to restrack on a thread with no call record is a
 * registration that entered its handler before the entry program was attached (pinning a
 * large buffer takes seconds). It is recorded at the handler's exit like any other, so that
 * a region registered across the attach is never missed; if the restrack dump taken after
 * attaching lists it too, user space counts it once (by its MRN). Off afterwards: a user
 * MR created through a handler not hooked here (device-memory MRs) would leave a record. */
volatile __u32 catch_in_flight = 0;

/* --- helpers: the accounting is mr_common.bpf.h's, shared with mr.bpf.c --- */

static __always_inline struct kmr_globals* kernel_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&kglobals, &zero);
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
  /* The user registers saved at the system call's entry, and the stack above them: DWARF
   * unwinding in user space goes through libibverbs and the provider without frame
   * pointers. bpf_task_pt_regs() is 5.15+; without it the frame-pointer stack only. */
  if (kind == KMR_CALL_REG &&
      bpf_core_enum_value_exists(enum bpf_func_id___kmr, BPF_FUNC_task_pt_regs___kmr)) {
    struct pt_regs* user = (struct pt_regs*)bpf_task_pt_regs(bpf_get_current_task_btf());
    if (user) {
      fresh.site =
          capture_stack(user, id >> 32, current_exec_id(), leader_start_ns(), fresh.stack_id);
    }
  }
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
  /* The driver handed out this struct ib_mr again (slab reuse): a region still recorded
   * under it was freed unseen, and is counted out now (as the uprobe path does when the
   * library reuses an ibv_mr pointer); else its owner's outstanding figures would keep it
   * for ever, whatever the map then holds. */
  struct kmr_owner* stale = bpf_map_lookup_elem(&owners, &mr);
  if (stale) {
    struct mr_region_key stale_key = {.tgid = stale->tgid, .exec_id = stale->exec_id, .mr = mr};
    struct mr_region* found = bpf_map_lookup_elem(&regions, &stale_key);
    if (found) {
      struct mr_region gone = *found;
      /* Only the caller whose delete succeeds counts it out. */
      if (bpf_map_delete_elem(&regions, &stale_key) == 0) {
        count_release(stale_key.tgid, stale_key.exec_id, &gone, 0);
        struct kmr_globals* k = kernel_counters();
        if (k) __sync_fetch_and_add(&k->released_unseen, 1);
      }
    }
  }
  if (bpf_map_update_elem(&owners, &mr, owner, BPF_ANY) != 0) {
    struct kmr_globals* k = kernel_counters();
    if (k) __sync_fetch_and_add(&k->lost_owners, 1);
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return;
  }
  if (bpf_map_update_elem(&regions, &key, region, BPF_ANY) != 0) {
    bpf_map_delete_elem(&owners, &mr);
    __sync_fetch_and_add(&proc->lost_regions, 1);
    return;
  }
  count_outstanding(proc, region);
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
  /* start_ns 0: the entry was not seen (catch_in_flight); its latency is unknown. */
  __u64 latency_ns = call.start_ns ? bpf_ktime_get_ns() - call.start_ns : 0;
  struct mr_region region = {
      .addr = addr,
      .length = implicit_odp ? 0 : length,
      .registered_ns = bpf_ktime_get_ns(),
      .proc_start_ns = start_ns,
      .lkey = lkey,
      .access = call.access,
      .stack_id = call.stack_id,
      .site = call.site,
      .flags = (implicit_odp ? MR_REGION_IMPLICIT_ODP : 0) | MR_REGION_RESTRACK_ID,
      /* rdma_restrack_add ran in this call: the id is the one restrack dumps list. */
      .restrack_id = BPF_CORE_READ(mr, res.id),
      .device_index = BPF_CORE_READ(mr, device, index),
  };
  if (call.kind == KMR_CALL_REREG) {
    /* The driver replaced the MR: the old region (released inside the call) moves under
     * the new pointer with the new translation; not a new registration. */
    if (!call.moved) return 0;
    region.registered_ns = call.old.registered_ns;
    region.stack_id = call.old.stack_id;
    region.site = call.old.site;
    region.access = call.old.access;
    /* The release counted the old region out: count the moved one back in. */
    __sync_fetch_and_add(&proc->deregistrations, -1);
    commit_region(&owner, proc, &region, call.mr);
    return 0;
  }
  count_registration(proc, owner.tgid, owner.exec_id, addr, length, call.access, implicit_odp,
                     latency_ns, call.start_ns != 0);
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
  if (BPF_CORE_READ(res, type) !=
      bpf_core_enum_value(enum rdma_restrack_type___kmr, RDMA_RESTRACK_MR___kmr)) {
    return 0;
  }
  __u64 id = bpf_get_current_pid_tgid();
  __u64 mr = (__u64)res - bpf_core_field_offset(struct ib_mr___kmr, res);
  struct kmr_call* call = bpf_map_lookup_elem(&kcalls, &id);
  if (call) {
    call->mr = mr;
    return 0;
  }
  if (!catch_in_flight || !BPF_CORE_READ(res, user)) return 0;
  /* A registration whose entry we missed (see catch_in_flight): no start time, no stack. */
  struct kmr_call in_flight = {.kind = KMR_CALL_REG, .mr = mr, .stack_id = -1};
  bpf_map_update_elem(&kcalls, &id, &in_flight, BPF_NOEXIST);
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
  struct kmr_call* call = bpf_map_lookup_elem(&kcalls, &id);
  const int rereg = call && call->kind == KMR_CALL_REREG && (id >> 32) == pending.owner.tgid;
  /* A rereg moves the region (not churn: the application did not give the range up). */
  count_release(pending.owner.tgid, pending.owner.exec_id, &pending.region, !rereg);
  if (rereg) {
    /* rereg replaced this MR: its region moves to the new one at the handler's exit. */
    call->old = pending.region;
    call->moved = 1;
  }
  return 0;
}
