/* A stand-in for libibverbs with the same versioned registration symbols and ABI (real
 * struct ibv_mr from <infiniband/verbs.h>), so that the MR probes can be tested on a host
 * without RDMA hardware. Call structure mirrors rdma-core: every registration funnels into
 * ibv_reg_mr_iova2, and the IBVERBS_1.0 compatibility entry points wrap the 1.1 ones. The
 * control path (CQ, QP, SRQ, async events) is in fake_control_path.c. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default"), noinline, used))

static atomic_uint next_key = 1;

/* Test hook (FAKEVERBS_MR_TEST): called inside the registration calls at the points below, so
 * that a test can longjmp out of a call or run another thread's call at the worst moment. */
enum { FAKEVERBS_MR_REGISTERED = 1, FAKEVERBS_MR_BEFORE_FREE = 2, FAKEVERBS_MR_AFTER_FREE = 3 };
typedef void (*fakeverbs_mr_hook)(int point, struct ibv_mr* mr);
static _Atomic(fakeverbs_mr_hook) mr_hook;

EXPORT void fakeverbs_set_mr_hook(fakeverbs_mr_hook hook) { atomic_store(&mr_hook, hook); }

static void call_mr_hook(int point, struct ibv_mr* mr) {
  fakeverbs_mr_hook hook = atomic_load(&mr_hook);
  if (hook) hook(point, mr);
}

/* Registration fails for a zero length, as ibv_reg_mr does (EINVAL). */
EXPORT struct ibv_mr* fake_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                        unsigned int access) {
  (void)iova;
  (void)access;
  if (length == 0) {
    errno = EINVAL;
    return NULL;
  }
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  if (!mr) return NULL;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = mr->rkey = atomic_fetch_add(&next_key, 1);
  call_mr_hook(FAKEVERBS_MR_REGISTERED, mr);
  return mr;
}

EXPORT struct ibv_mr* fake_reg_mr_iova(struct ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                       int access) {
  return fake_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

EXPORT struct ibv_mr* fake_reg_mr_1_1(struct ibv_pd* pd, void* addr, size_t length, int access) {
  return fake_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

EXPORT int fake_dereg_mr_1_1(struct ibv_mr* mr) {
  call_mr_hook(FAKEVERBS_MR_BEFORE_FREE, mr);
  free(mr); /* as rdma-core does before returning: the pointer may be reused at once */
  call_mr_hook(FAKEVERBS_MR_AFTER_FREE, NULL);
  return 0;
}

/* The IBVERBS_1.0 ABI hands out its own struct whose first fields have the same layout. */
struct mr_1_0 {
  void* context;
  void* pd;
  void* addr;
  size_t length;
  uint32_t handle, lkey, rkey;
  struct ibv_mr* real_mr;
};

EXPORT struct mr_1_0* fake_reg_mr_1_0(struct ibv_pd* pd, void* addr, size_t length, int access) {
  struct ibv_mr* real = fake_reg_mr_1_1(pd, addr, length, access);
  if (!real) return NULL;
  struct mr_1_0* mr = calloc(1, sizeof(*mr));
  mr->addr = real->addr;
  mr->length = real->length;
  mr->lkey = real->lkey;
  mr->real_mr = real;
  return mr;
}

EXPORT int fake_dereg_mr_1_0(struct mr_1_0* mr) {
  int rc = fake_dereg_mr_1_1(mr->real_mr);
  if (rc == 0) free(mr);
  return rc;
}

__asm__(".symver fake_reg_mr_1_0, ibv_reg_mr@IBVERBS_1.0");
__asm__(".symver fake_reg_mr_1_1, ibv_reg_mr@@IBVERBS_1.1");
__asm__(".symver fake_dereg_mr_1_0, ibv_dereg_mr@IBVERBS_1.0");
__asm__(".symver fake_dereg_mr_1_1, ibv_dereg_mr@@IBVERBS_1.1");
__asm__(".symver fake_reg_mr_iova, ibv_reg_mr_iova@@IBVERBS_1.7");
__asm__(".symver fake_reg_mr_iova2, ibv_reg_mr_iova2@@IBVERBS_1.8");

/* ibv_rereg_mr: with IBV_REREG_MR_CHANGE_TRANSLATION the region moves in place. */
EXPORT int fake_rereg_mr(struct ibv_mr* mr, int flags, struct ibv_pd* pd, void* addr, size_t length,
                         int access) {
  (void)pd;
  (void)access;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = addr;
    mr->length = length;
  }
  return 0;
}

/* ibv_import_mr: an MR registered by another process; here a 2 MiB-aligned 2 MiB region. */
EXPORT struct ibv_mr* fake_import_mr(struct ibv_pd* pd, uint32_t mr_handle) {
  struct ibv_mr* mr = calloc(1, sizeof(*mr));
  if (!mr) return NULL;
  mr->pd = pd;
  mr->handle = mr_handle;
  mr->addr = (void*)(uintptr_t)(2u << 20);
  mr->length = 2u << 20;
  return mr;
}

EXPORT void fake_unimport_mr(struct ibv_mr* mr) { free(mr); }

__asm__(".symver fake_rereg_mr, ibv_rereg_mr@@IBVERBS_1.1");
__asm__(".symver fake_import_mr, ibv_import_mr@@IBVERBS_1.10");
__asm__(".symver fake_unimport_mr, ibv_unimport_mr@@IBVERBS_1.10");
