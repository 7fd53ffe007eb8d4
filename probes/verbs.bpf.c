// SPDX-License-Identifier: GPL-2.0
/* The verbs control path of RDMA applications, from uprobes on libibverbs: completion queues
 * (capacity), queue pairs (depth, the CQs they complete into, their SRQ, state), shared
 * receive queues (depth, limit) and asynchronous events. These calls happen at set-up and
 * tear-down, never per message, so their probes cost nothing on the data path.
 *
 * Entry probes stash the arguments per thread; return probes record the object under the
 * pointer the application holds once the call succeeded. Objects of exited processes are
 * removed by user space, which tells a reused pid apart by the owner's start time; those of
 * an image that exec'd once the exec program below has removed their owner. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "verbs.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct verbs_call);
} calls SEC(".maps");

/* Sizes are set by user space before load. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct verbs_key);
  __type(value, struct verbs_cq);
} cqs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct verbs_key);
  __type(value, struct verbs_qp);
} qps SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct verbs_key);
  __type(value, struct verbs_srq);
} srqs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct verbs_proc_key);
  __type(value, struct verbs_proc);
} procs SEC(".maps");

/* Where a new owner's entry is built before it is inserted whole. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct verbs_proc);
} proc_scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct verbs_globals);
} globals SEC(".maps");

static __always_inline struct verbs_globals* global_counters(void) {
  __u32 zero = 0;
  return bpf_map_lookup_elem(&globals, &zero);
}

/* The thread-group leader's start, in the clock /proc/PID/stat's starttime uses. */
static __always_inline __u64 owner_start(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return BPF_CORE_READ(task, group_leader, start_boottime);
}

/* Counted after the insert it follows: user space reads the count before it walks, so a
 * count it has seen is never ahead of the maps. */
static __always_inline void inserted(void) {
  struct verbs_globals* g = global_counters();
  if (g) __sync_fetch_and_add(&g->inserts, 1);
}

/* The current image's exec generation (see verbs_proc_key in verbs.h). */
static __always_inline __u32 owner_exec_id(void) {
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  return (__u32)BPF_CORE_READ(task, self_exec_id);
}

/* The key of an object of the current image. */
static __always_inline struct verbs_key object_key(__u32 tgid, __u64 object) {
  struct verbs_key key = {.tgid = tgid, .exec_id = owner_exec_id(), .object = object};
  return key;
}

/* A user-space pointer or u32 at an offset of a user struct; 0 if unreadable. */
static __always_inline __u64 user_u64(__u64 base, __u32 offset) {
  __u64 value = 0;
  if (base) bpf_probe_read_user(&value, sizeof(value), (void*)(base + offset));
  return value;
}
static __always_inline __u32 user_u32(__u64 base, __u32 offset) {
  __u32 value = 0;
  if (base) bpf_probe_read_user(&value, sizeof(value), (void*)(base + offset));
  return value;
}

/* object->context->device->name, for any object whose first field is its ibv_context. */
static __always_inline void device_name(__u64 object, char* name) {
  __u64 context = user_u64(object, 0);
  __u64 device = user_u64(context, VERBS_CONTEXT_DEVICE);
  if (device)
    bpf_probe_read_user_str(name, VERBS_DEVICE_NAME_LEN, (void*)(device + VERBS_DEVICE_NAME));
}

/* The owner's entry (comm, async events), created on first use: built whole and inserted
 * with BPF_NOEXIST, so that one of the threads racing here wins and all count into it. A
 * reused pid has another start, hence another key: nothing is reset in place (a reset would
 * wipe what the new process's other threads count meanwhile), as in mr.bpf.c. */
static __always_inline struct verbs_proc* owner(__u32 tgid, __u64 start) {
  struct verbs_proc_key key = {.tgid = tgid, .exec_id = owner_exec_id(), .proc_start = start};
  struct verbs_proc* proc = bpf_map_lookup_elem(&procs, &key);
  if (proc) return proc;
  __u32 zero = 0;
  struct verbs_proc* fresh = bpf_map_lookup_elem(&proc_scratch, &zero);
  if (!fresh) return NULL;
  __builtin_memset(fresh, 0, sizeof(*fresh));
  fresh->proc_start = start;
  bpf_get_current_comm(fresh->comm, sizeof(fresh->comm));
  /* -EEXIST: a sibling won */
  if (bpf_map_update_elem(&procs, &key, fresh, BPF_NOEXIST) == 0) inserted();
  proc = bpf_map_lookup_elem(&procs, &key);
  if (!proc) {
    struct verbs_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_procs, 1);
  }
  return proc;
}

static __always_inline int enter(enum verbs_call_kind kind, __u64 object, __u64 attr, __u32 value) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = {.object = object, .attr = attr, .kind = kind, .value = value};
  if (bpf_map_update_elem(&calls, &id, &call, BPF_ANY) != 0) {
    struct verbs_globals* g = global_counters();
    if (g) __sync_fetch_and_add(&g->lost_calls, 1);
  }
  return 0;
}

/* The call this return ends, copied out and removed; kind 0 if there is none. */
static __always_inline struct verbs_call leave(__u64 id, enum verbs_call_kind kind) {
  struct verbs_call out = {};
  struct verbs_call* call = bpf_map_lookup_elem(&calls, &id);
  if (!call || call->kind != kind) return out;
  out = *call;
  bpf_map_delete_elem(&calls, &id);
  return out;
}

static __always_inline void lost_object(void) {
  struct verbs_globals* g = global_counters();
  if (g) __sync_fetch_and_add(&g->lost_objects, 1);
}

/* --- Completion queues ------------------------------------------------------------------ */

/* ibv_create_cq(context, cqe, cq_context, channel, comp_vector) */
SEC("uprobe")
int BPF_KPROBE(create_cq_entry, void* context, int cqe) {
  return enter(VERBS_CALL_CREATE_CQ, (__u64)context, 0, (__u32)cqe);
}

SEC("uretprobe")
int BPF_KRETPROBE(create_cq_return, void* cq) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_CREATE_CQ);
  if (!call.kind || !cq) return 0;
  __u32 tgid = id >> 32;
  __u64 start = owner_start();
  if (!owner(tgid, start)) return 0;
  struct verbs_key key = object_key(tgid, (__u64)cq);
  struct verbs_cq value = {
      .proc_start = start,
      .requested_entries = call.value,
      .entries = user_u32((__u64)cq, VERBS_CQ_CQE),
      .handle = user_u32((__u64)cq, VERBS_CQ_HANDLE),
  };
  device_name((__u64)cq, value.device);
  if (bpf_map_update_elem(&cqs, &key, &value, BPF_ANY) != 0)
    lost_object();
  else
    inserted();
  return 0;
}

/* ibv_resize_cq(cq, cqe): the provider updates cq->cqe on success. */
SEC("uprobe")
int BPF_KPROBE(resize_cq_entry, void* cq, int cqe) {
  return enter(VERBS_CALL_RESIZE_CQ, (__u64)cq, 0, (__u32)cqe);
}

SEC("uretprobe")
int BPF_KRETPROBE(resize_cq_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_RESIZE_CQ);
  if (!call.kind || rc != 0) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  struct verbs_cq* value = bpf_map_lookup_elem(&cqs, &key);
  if (!value) return 0;
  value->requested_entries = call.value;
  value->entries = user_u32(call.object, VERBS_CQ_CQE);
  return 0;
}

/* ibv_destroy_cq(cq): fails with EBUSY while QPs still use the CQ, which then stays. */
SEC("uprobe")
int BPF_KPROBE(destroy_cq_entry, void* cq) { return enter(VERBS_CALL_DESTROY_CQ, (__u64)cq, 0, 0); }

SEC("uretprobe")
int BPF_KRETPROBE(destroy_cq_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_DESTROY_CQ);
  if (!call.kind || rc != 0) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  bpf_map_delete_elem(&cqs, &key);
  return 0;
}

/* --- Queue pairs ------------------------------------------------------------------------ */

/* ibv_create_qp(pd, init_attr): the provider writes the actual capabilities back. */
SEC("uprobe")
int BPF_KPROBE(create_qp_entry, void* pd, void* init_attr) {
  return enter(VERBS_CALL_CREATE_QP, (__u64)pd, (__u64)init_attr, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(create_qp_return, void* qp) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_CREATE_QP);
  if (!call.kind || !qp) return 0;
  __u32 tgid = id >> 32;
  __u64 start = owner_start();
  if (!owner(tgid, start)) return 0;
  struct verbs_key key = object_key(tgid, (__u64)qp);
  struct verbs_qp value = {
      .proc_start = start,
      .send_cq = user_u64(call.attr, VERBS_QP_INIT_SEND_CQ),
      .recv_cq = user_u64(call.attr, VERBS_QP_INIT_RECV_CQ),
      .srq = user_u64(call.attr, VERBS_QP_INIT_SRQ),
      .max_send_wr = user_u32(call.attr, VERBS_QP_INIT_MAX_SEND_WR),
      .max_recv_wr = user_u32(call.attr, VERBS_QP_INIT_MAX_RECV_WR),
      .qp_num = user_u32((__u64)qp, VERBS_QP_NUM),
      .handle = user_u32((__u64)qp, VERBS_QP_HANDLE),
      .type = user_u32(call.attr, VERBS_QP_INIT_QP_TYPE),
      .state = 0, /* IBV_QPS_RESET */
      .max_send_sge = user_u32(call.attr, VERBS_QP_INIT_MAX_SEND_SGE),
      .max_recv_sge = user_u32(call.attr, VERBS_QP_INIT_MAX_RECV_SGE),
  };
  if (bpf_map_update_elem(&qps, &key, &value, BPF_ANY) != 0)
    lost_object();
  else
    inserted();
  return 0;
}

/* ibv_modify_qp(qp, attr, attr_mask) */
SEC("uprobe")
int BPF_KPROBE(modify_qp_entry, void* qp, void* attr, int mask) {
  return enter(VERBS_CALL_MODIFY_QP, (__u64)qp, (__u64)attr, (__u32)mask);
}

SEC("uretprobe")
int BPF_KRETPROBE(modify_qp_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_MODIFY_QP);
  if (!call.kind || rc != 0 || !(call.value & VERBS_QP_STATE_MASK)) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  struct verbs_qp* value = bpf_map_lookup_elem(&qps, &key);
  if (value) value->state = user_u32(call.attr, VERBS_QP_ATTR_STATE);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_qp_entry, void* qp) { return enter(VERBS_CALL_DESTROY_QP, (__u64)qp, 0, 0); }

SEC("uretprobe")
int BPF_KRETPROBE(destroy_qp_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_DESTROY_QP);
  if (!call.kind || rc != 0) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  bpf_map_delete_elem(&qps, &key);
  return 0;
}

/* --- Shared receive queues ---------------------------------------------------------------- */

/* ibv_create_srq(pd, init_attr): the limit given at creation is ignored (ibv_create_srq(3));
 * an SRQ starts disarmed until ibv_modify_srq sets IBV_SRQ_LIMIT. */
SEC("uprobe")
int BPF_KPROBE(create_srq_entry, void* pd, void* init_attr) {
  return enter(VERBS_CALL_CREATE_SRQ, (__u64)pd, (__u64)init_attr, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(create_srq_return, void* srq) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_CREATE_SRQ);
  if (!call.kind || !srq) return 0;
  __u32 tgid = id >> 32;
  __u64 start = owner_start();
  if (!owner(tgid, start)) return 0;
  struct verbs_key key = object_key(tgid, (__u64)srq);
  struct verbs_srq value = {
      .proc_start = start,
      .max_wr = user_u32(call.attr, VERBS_SRQ_INIT_MAX_WR),
      .handle = user_u32((__u64)srq, VERBS_SRQ_HANDLE),
  };
  device_name((__u64)srq, value.device);
  if (bpf_map_update_elem(&srqs, &key, &value, BPF_ANY) != 0)
    lost_object();
  else
    inserted();
  return 0;
}

/* ibv_modify_srq(srq, attr, attr_mask): IBV_SRQ_LIMIT arms the limit, IBV_SRQ_MAX_WR resizes. */
SEC("uprobe")
int BPF_KPROBE(modify_srq_entry, void* srq, void* attr, int mask) {
  return enter(VERBS_CALL_MODIFY_SRQ, (__u64)srq, (__u64)attr, (__u32)mask);
}

SEC("uretprobe")
int BPF_KRETPROBE(modify_srq_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_MODIFY_SRQ);
  if (!call.kind || rc != 0) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  struct verbs_srq* value = bpf_map_lookup_elem(&srqs, &key);
  if (!value) return 0;
  if (call.value & VERBS_SRQ_LIMIT_MASK) value->limit = user_u32(call.attr, VERBS_SRQ_ATTR_LIMIT);
  if (call.value & VERBS_SRQ_MAX_WR_MASK)
    value->max_wr = user_u32(call.attr, VERBS_SRQ_ATTR_MAX_WR);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_srq_entry, void* srq) {
  return enter(VERBS_CALL_DESTROY_SRQ, (__u64)srq, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(destroy_srq_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_DESTROY_SRQ);
  if (!call.kind || rc != 0) return 0;
  struct verbs_key key = object_key(id >> 32, call.object);
  bpf_map_delete_elem(&srqs, &key);
  return 0;
}

/* --- Asynchronous events ------------------------------------------------------------------ */

/* ibv_get_async_event(context, event) blocks until the device reports one. */
SEC("uprobe")
int BPF_KPROBE(get_async_event_entry, void* context, void* event) {
  return enter(VERBS_CALL_GET_ASYNC_EVENT, (__u64)context, (__u64)event, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(get_async_event_return, int rc) {
  __u64 id = bpf_get_current_pid_tgid();
  struct verbs_call call = leave(id, VERBS_CALL_GET_ASYNC_EVENT);
  if (!call.kind || rc != 0) return 0;
  __u32 tgid = id >> 32;
  struct verbs_proc* proc = owner(tgid, owner_start());
  if (!proc) return 0;
  __u32 type = user_u32(call.attr, VERBS_ASYNC_EVENT_TYPE);
  if (type >= VERBS_ASYNC_EVENT_TYPES) type = VERBS_ASYNC_EVENT_TYPES - 1; /* "other" */
  __sync_fetch_and_add(&proc->async_events[type & (VERBS_ASYNC_EVENT_TYPES - 1)], 1);
  if (type == VERBS_EVENT_SRQ_LIMIT_REACHED) {
    /* The device disarms the limit when it fires: it reads 0 until the next ibv_modify_srq. */
    struct verbs_key key = object_key(tgid, user_u64(call.attr, VERBS_ASYNC_EVENT_ELEMENT));
    struct verbs_srq* srq = bpf_map_lookup_elem(&srqs, &key);
    if (srq) {
      srq->limit = 0;
      __sync_fetch_and_add(&srq->limit_events, 1);
    }
  }
  return 0;
}

/* A thread that dies inside a call leaves no state behind. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(verbs_exit, struct task_struct* task) {
  __u64 id = ((__u64)BPF_CORE_READ(task, tgid) << 32) | BPF_CORE_READ(task, pid);
  bpf_map_delete_elem(&calls, &id);
  return 0;
}

/* An exec destroys the old image's objects in the kernel (its uverbs fds are O_CLOEXEC:
 * ib_uverbs_close -> uverbs_destroy_ufile_hw), while tgid and start time survive it. The old
 * image's owner entry goes now; user space then deletes its objects (owner no longer in the
 * map) at the next scrape. fs/exec.c (6.1): exec_binprm() fires
 * sched_process_exec(current, old_pid, bprm) after begin_new_exec() has run de_thread() and
 * self_exec_id + 1, so the old image is generation - 1. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(verbs_exec, struct task_struct* task, pid_t old_pid) {
  __u32 tgid = BPF_CORE_READ(task, tgid);
  __u64 old_id = ((__u64)tgid << 32) | (__u32)old_pid; /* the exec'ing thread before de_thread */
  bpf_map_delete_elem(&calls, &old_id);
  struct verbs_proc_key key = {.tgid = tgid,
                               .exec_id = (__u32)(BPF_CORE_READ(task, self_exec_id) - 1),
                               .proc_start = BPF_CORE_READ(task, group_leader, start_boottime)};
  bpf_map_delete_elem(&procs, &key);
  return 0;
}
