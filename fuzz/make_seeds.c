/* Writes the binary seeds of the fuzz corpora (fuzz/make_corpus.sh runs it): RDMA netlink and
 * DCB netlink replies built with libmnl as the kernel builds them (drivers/infiniband/core/
 * nldev.c: fill_res_info, fill_res_cq_entry...; net/dcb/dcbnl.c: dcbnl_ieee_fill), mlx5 raw CQ
 * dumps (mlx5_ifc.h layout, as tests/unit/mlx5_dump_builder.cc), x86-64 forwarders and PLT
 * stubs, a preload stats file (preload/stats_file.h) and captured stacks for the unwinder
 * (dwarf_unwinder_fuzzer.cc's layout). Usage: make_seeds CORPUS_DIR */
#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <rdma/rdma_netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_file.h"

static const char* dir;

static void Save(const char* target, const char* name, const void* data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/%s", dir, target, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* Netlink buffers: a selector byte (which parser, as rdma_netlink_fuzzer.cc reads it), then
 * messages one after the other, built here in an aligned buffer. */
static char nl[16384];
static size_t nl_used;
static void SaveNl(const char* name, uint8_t selector) {
  char out[16385];
  out[0] = (char)selector;
  memcpy(out + 1, nl, nl_used);
  Save("rdma_netlink", name, out, nl_used + 1);
}
static struct nlmsghdr* NlMsg(uint16_t command) {
  struct nlmsghdr* m = mnl_nlmsg_put_header(nl + nl_used);
  m->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command);
  m->nlmsg_flags = NLM_F_MULTI;
  m->nlmsg_seq = 1;
  return m;
}
static void NlEnd(struct nlmsghdr* m) { nl_used += m->nlmsg_len; }
static void NlDone(void) {
  struct nlmsghdr* m = mnl_nlmsg_put_header(nl + nl_used);
  m->nlmsg_type = NLMSG_DONE;
  m->nlmsg_flags = NLM_F_MULTI;
  m->nlmsg_seq = 1;
  mnl_nlmsg_put_extra_header(m, sizeof(int));
  NlEnd(m);
}
static void NlError(int err) {
  struct nlmsghdr* m = mnl_nlmsg_put_header(nl + nl_used);
  m->nlmsg_type = NLMSG_ERROR;
  m->nlmsg_seq = 1;
  struct nlmsgerr* e = mnl_nlmsg_put_extra_header(m, sizeof *e);
  e->error = -err;
  NlEnd(m);
}
static void Device(struct nlmsghdr* m, uint32_t index, const char* name) {
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, index);
  mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_DEV_NAME, name);
}

static void RdmaNetlinkSeeds(void) {
  /* selector 0: RES_GET summary (nldev.c fill_res_info). */
  nl_used = 0;
  struct nlmsghdr* m = NlMsg(RDMA_NLDEV_CMD_RES_GET);
  Device(m, 1, "mlx5_0");
  struct nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_SUMMARY);
  const char* names[] = {"pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"};
  for (int i = 0; i < 7; ++i) {
    struct nlattr* e = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY);
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, names[i]);
    mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, (uint64_t)(i + 3));
    mnl_attr_nest_end(m, e);
  }
  mnl_attr_nest_end(m, table);
  NlEnd(m);
  NlDone();
  SaveNl("summary", 0);
  /* selector 1: devices; 2: ports with their netdev. */
  nl_used = 0;
  m = NlMsg(RDMA_NLDEV_CMD_GET);
  Device(m, 1, "mlx5_0");
  NlEnd(m);
  m = NlMsg(RDMA_NLDEV_CMD_GET);
  Device(m, 2, "rxe0");
  NlEnd(m);
  NlDone();
  SaveNl("devices", 1);
  nl_used = 0;
  m = NlMsg(RDMA_NLDEV_CMD_PORT_GET);
  Device(m, 1, "mlx5_0");
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_NDEV_INDEX, 4);
  mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_NDEV_NAME, "ens1f0np0");
  NlEnd(m);
  NlDone();
  SaveNl("ports", 2);
  /* selector 3: a raw CQ reply (nldev.c res_get_common_doit with RES_RAW). */
  nl_used = 0;
  m = NlMsg(RDMA_NLDEV_CMD_RES_CQ_GET_RAW);
  Device(m, 1, "mlx5_0");
  const uint8_t raw[32] = {0, 4, 0xff, 0xfc, 0, 0, 0, 1};
  mnl_attr_put(m, RDMA_NLDEV_ATTR_RES_RAW, sizeof raw, raw);
  NlEnd(m);
  SaveNl("raw_cq", 3);
  nl_used = 0;
  NlError(95 /* EOPNOTSUPP */);
  SaveNl("raw_cq_error", 3);
  /* selectors 4..10: the kinds in kAllRdmaResourceKinds order (pd, cq, qp, mr, srq, ctx,
   * cm_id), one entry each with a user pid and one of a kernel owner. */
  const struct {
    uint16_t cmd, table, entry, id;
  } kinds[] = {
      {RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD, RDMA_NLDEV_ATTR_RES_PD_ENTRY,
       RDMA_NLDEV_ATTR_RES_PDN},
      {RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ, RDMA_NLDEV_ATTR_RES_CQ_ENTRY,
       RDMA_NLDEV_ATTR_RES_CQN},
      {RDMA_NLDEV_CMD_RES_QP_GET, RDMA_NLDEV_ATTR_RES_QP, RDMA_NLDEV_ATTR_RES_QP_ENTRY,
       RDMA_NLDEV_ATTR_RES_LQPN},
      {RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR, RDMA_NLDEV_ATTR_RES_MR_ENTRY,
       RDMA_NLDEV_ATTR_RES_MRN},
      {RDMA_NLDEV_CMD_RES_SRQ_GET, RDMA_NLDEV_ATTR_RES_SRQ, RDMA_NLDEV_ATTR_RES_SRQ_ENTRY,
       RDMA_NLDEV_ATTR_RES_SRQN},
      {RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX, RDMA_NLDEV_ATTR_RES_CTX_ENTRY,
       RDMA_NLDEV_ATTR_RES_CTXN},
      {RDMA_NLDEV_CMD_RES_CM_ID_GET, RDMA_NLDEV_ATTR_RES_CM_ID, RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY,
       RDMA_NLDEV_ATTR_RES_CM_IDN},
  };
  for (int k = 0; k < 7; ++k) {
    nl_used = 0;
    m = NlMsg(kinds[k].cmd);
    Device(m, 1, "mlx5_0");
    table = mnl_attr_nest_start(m, kinds[k].table);
    struct nlattr* e = mnl_attr_nest_start(m, kinds[k].entry);
    mnl_attr_put_u32(m, kinds[k].id, 17);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 4242);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_CQE, 4095);
    mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_MRLEN, 1 << 20);
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_TYPE, 2);
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_STATE, 3);
    mnl_attr_nest_end(m, e);
    e = mnl_attr_nest_start(m, kinds[k].entry);
    mnl_attr_put_u32(m, kinds[k].id, 18);
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core");
    mnl_attr_nest_end(m, e);
    mnl_attr_nest_end(m, table);
    NlEnd(m);
    NlDone();
    char name[32];
    snprintf(name, sizeof name, "kind%d", k);
    SaveNl(name, (uint8_t)(4 + k));
  }
}

static void DcbSeeds(void) {
  char dcb[2048];
  struct nlmsghdr* m = mnl_nlmsg_put_header(dcb);
  m->nlmsg_type = RTM_GETDCB;
  struct dcbmsg* d = mnl_nlmsg_put_extra_header(m, sizeof *d);
  d->dcb_family = 0; /* AF_UNSPEC */
  d->cmd = DCB_CMD_IEEE_GET;
  mnl_attr_put_strz(m, DCB_ATTR_IFNAME, "ens1f0np0");
  struct nlattr* ieee = mnl_attr_nest_start(m, DCB_ATTR_IEEE);
  struct ieee_ets ets = {.ets_cap = 8};
  mnl_attr_put(m, DCB_ATTR_IEEE_ETS, sizeof ets, &ets);
  struct ieee_pfc pfc = {.pfc_cap = 8, .pfc_en = 0x08};
  for (int i = 0; i < 8; ++i) pfc.requests[i] = (uint64_t)i * 10, pfc.indications[i] = i;
  mnl_attr_put(m, DCB_ATTR_IEEE_PFC, sizeof pfc, &pfc);
  mnl_attr_nest_end(m, ieee);
  Save("dcb_netlink", "pfc", dcb, m->nlmsg_len);
  /* A driver without DCB: the kernel answers EOPNOTSUPP. */
  m = mnl_nlmsg_put_header(dcb);
  m->nlmsg_type = NLMSG_ERROR;
  struct nlmsgerr* e = mnl_nlmsg_put_extra_header(m, sizeof *e);
  e->error = -95;
  Save("dcb_netlink", "eopnotsupp", dcb, m->nlmsg_len);
}

/* mlx5 resource dump: info, command, data (QUERY_CQ output), terminate segments. */
static void Put32(uint8_t* out, size_t* n, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out[(*n)++] = (uint8_t)(v >> s);
}
static void SetBits(uint8_t* b, size_t base, uint32_t bit, uint32_t size, uint32_t value) {
  const size_t at = base + bit / 32 * 4;
  uint32_t w =
      (uint32_t)b[at] << 24 | (uint32_t)b[at + 1] << 16 | (uint32_t)b[at + 2] << 8 | b[at + 3];
  const uint32_t shift = 32 - bit % 32 - size;
  const uint32_t mask = ((size == 32 ? 0xffffffffu : (1u << size) - 1)) << shift;
  w = (w & ~mask) | ((value << shift) & mask);
  for (int i = 0; i < 4; ++i) b[at + i] = (uint8_t)(w >> (24 - 8 * i));
}
static void Mlx5Seeds(void) {
  uint8_t out[1024] = {0};
  size_t n = 0;
  Put32(out, &n, 4095); /* the capacity (2^12 - 1) mlx5_cq_dump_fuzzer.cc reads first */
  Put32(out, &n, (4u << 16) | 0xfffc);
  Put32(out, &n, 1), Put32(out, &n, 0), Put32(out, &n, 0);
  Put32(out, &n, (5u << 16) | 0xfffa);
  Put32(out, &n, 0x1203u << 16);
  Put32(out, &n, 0x4b1), Put32(out, &n, 0), Put32(out, &n, 1u << 16);
  const size_t data = n;
  const uint32_t words = 4 + 64;
  Put32(out, &n, ((words + 1) << 16) | 0x1203);
  n += words * 4;
  const size_t cqc = data + 4 + 16;
  SetBits(out, cqc, 0x63, 5, 12);
  SetBits(out, cqc, 0x148, 24, 100);
  SetBits(out, cqc, 0x168, 24, 130);
  SetBits(out, cqc, 0x14, 4, 6);
  Put32(out, &n, (1u << 16) | 0xfffb);
  Save("mlx5_cq_dump", "cq_30_outstanding", out, n);
}

static void X86Seeds(void) {
  /* 8 bytes of load address, then code. */
  const uint8_t forwarder[] = {0,    0,    0,    0,    0,   0x40, 0x10, 0, /* 0x401000 */
                               0xf3, 0x0f, 0x1e, 0xfa,                     /* endbr64 */
                               0x48, 0x89, 0xf7,                           /* mov %rsi,%rdi */
                               0x89, 0xd6,                                 /* mov %edx,%esi */
                               0xe9, 0x10, 0x00, 0x00, 0x00};              /* jmp +0x10 */
  Save("x86_tail_jump", "forwarder", forwarder, sizeof forwarder);
  const uint8_t plt_sec[] = {0,    0,    0,    0,    0,    0x40, 0x20,
                             0,    0xf3, 0x0f, 0x1e, 0xfa,             /* endbr64 */
                             0xf2, 0xff, 0x25, 0x20, 0x30, 0x00, 0x00, /* bnd jmp *x(%rip) */
                             0x0f, 0x1f, 0x44, 0x00, 0x00};
  Save("x86_tail_jump", "plt_sec", plt_sec, sizeof plt_sec);
  const uint8_t short_jmp[] = {0, 0, 0, 0, 0, 0x40, 0x30, 0, 0x48, 0x89, 0xc8, 0xeb, 0xf0};
  Save("x86_tail_jump", "short_jmp", short_jmp, sizeof short_jmp);
}

static void OccupancySeeds(void) {
  static struct occ_file f;
  f.header.magic = OCC_MAGIC;
  f.header.version = OCC_VERSION;
  f.header.pid = 4242;
  f.header.start_ticks = 123456;
  f.header.max_cqs = OCC_MAX_CQS;
  f.header.max_srqs = OCC_MAX_SRQS;
  f.header.pid_ns = 4026531836u;
  f.header.sample_period = 64;
  memcpy(f.header.comm, "ib_write_bw", 11);
  f.cqs[0].in_use = 1;
  f.cqs[0].handle = 7;
  f.cqs[0].entries = 4095;
  memcpy(f.cqs[0].device, "mlx5_0", 6);
  f.cqs[0].expected = 100;
  f.cqs[0].peak = 64;
  f.srqs[0].in_use = 1;
  f.srqs[0].max_wr = 512;
  f.srqs[0].posted = 500;
  memcpy(f.srqs[0].device, "mlx5_0", 6);
  f.shards[0].send.bytes = 4096;
  f.shards[0].send.buckets[12] = 1;
  Save("occupancy", "one_cq_one_srq", &f, sizeof f);
  /* The same file as occupancy_fuzzer.cc's sparse form: the header, then kind, index, slot. */
  static uint8_t
      sparse[sizeof f.header + 3 * 3 + sizeof f.cqs[0] + sizeof f.srqs[0] + sizeof f.shards[0]];
  size_t used = 0;
  memcpy(sparse, &f.header, sizeof f.header);
  used += sizeof f.header;
  const struct {
    uint8_t kind;
    const void* slot;
    size_t size;
  } slots[] = {{0, &f.cqs[0], sizeof f.cqs[0]},
               {1, &f.srqs[0], sizeof f.srqs[0]},
               {2, &f.shards[0], sizeof f.shards[0]}};
  for (size_t i = 0; i < sizeof slots / sizeof slots[0]; ++i) {
    sparse[used] = slots[i].kind;
    sparse[used + 1] = sparse[used + 2] = 0;
    memcpy(sparse + used + 3, slots[i].slot, slots[i].size);
    used += 3 + slots[i].size;
  }
  Save("occupancy", "one_cq_one_srq_sparse", sparse, used);
}

/* Captured stacks as dwarf_unwinder_fuzzer.cc reads them: flags, max_frames, 17 big-endian
 * registers, then stack words (little-endian, as copied from an x86-64 stack), tagged in
 * their top byte to be relocated into the fuzzer's fake process (flag 8). */
static uint8_t unwind[2 + 17 * 8 + 64 * 8];
static size_t UnwindHeader(uint8_t flags, uint8_t max_frames, uint64_t rip, uint64_t rsp,
                           uint64_t rbp) {
  memset(unwind, 0, sizeof unwind);
  unwind[0] = flags;
  unwind[1] = max_frames;
  const uint64_t regs[17] = {[6] = rbp, [7] = rsp, [16] = rip};
  for (int r = 0; r < 17; ++r) {
    for (int b = 0; b < 8; ++b) unwind[2 + r * 8 + b] = (uint8_t)(regs[r] >> (56 - 8 * b));
  }
  return 2 + 17 * 8;
}
static void UnwindWord(size_t header, size_t index, uint64_t word) {
  memcpy(unwind + header + index * 8, &word, 8);
}
static void UnwindSeeds(void) {
  /* rip anywhere in the executable, the stack full of its addresses: CFI walks. */
  size_t h = UnwindHeader(1 | 2 | 4 | 8, 127, 0x1a2b0, 0, 0x20);
  for (size_t i = 0; i < 64; ++i) UnwindWord(h, i, 0xee00000000000000 | (0x1000 + i * 0x731));
  Save("dwarf_unwinder", "executable_words", unwind, h + 64 * 8);
  /* An rbp chain through the stack (0x57: stack-relative), return addresses into libc. */
  h = UnwindHeader(1 | 2 | 4 | 8, 127, 0x2000, 0, 0x20);
  for (size_t i = 0; i < 8; ++i) {
    UnwindWord(h, 4 + i * 4, 0x5700000000000000 | (0x40 + i * 0x20)); /* next rbp */
    UnwindWord(h, 5 + i * 4, 0xef00000000000000 | (0x29d90 + i * 0x100));
  }
  Save("dwarf_unwinder", "rbp_chain", unwind, h + 64 * 8);
  /* Garbage, raw: SP 0, an unmapped rip. */
  h = UnwindHeader(0, 64, 0xdeadbeef, 0, 0xfffffffffffffff0);
  memset(unwind + h, 0xa5, 256);
  Save("dwarf_unwinder", "garbage", unwind, h + 256);
  /* No stack bytes at all; a process that is gone; one frame allowed. */
  h = UnwindHeader(1 | 2, 127, 0x1000, 0, 0);
  Save("dwarf_unwinder", "empty_copy", unwind, h);
  h = UnwindHeader(1 | 2 | 16, 127, 0x1000, 0, 0);
  Save("dwarf_unwinder", "process_gone", unwind, h + 64);
  h = UnwindHeader(1 | 2 | 8, 0, 0x1000, 0, 0);
  UnwindWord(h, 0, 0xee00000000002000);
  Save("dwarf_unwinder", "one_frame", unwind, h + 8);
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  dir = argv[1];
  RdmaNetlinkSeeds();
  DcbSeeds();
  Mlx5Seeds();
  X86Seeds();
  OccupancySeeds();
  UnwindSeeds();
  return 0;
}
