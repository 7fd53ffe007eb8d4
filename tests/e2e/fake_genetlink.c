// A test seam (LD_PRELOAD into the ethtool tool, tests/e2e/ethtool_differential.py): its
// NETLINK_GENERIC sockets get canned answers from a capture's files instead of the kernel, so
// that ethtool decodes the very bytes rdmascope replays. Every other socket, and every call on
// a descriptor that is not a faked socket, goes to libc (dlsym RTLD_NEXT).
//
// The handshake, as ethtool 6.1 makes it (netlink/netlink.c, nlsock.c, strset.c; libmnl's
// mnl_socket_open/bind/sendto/recvfrom are socket(2), bind(2) + getsockname(2), sendto(2) and
// recvmsg(2)):
//  - CTRL_CMD_GETFAMILY "ethtool" (get_genl_family): the family id, version, the ops with their
//    GENL_CMD_CAP_* flags (netlink_cmd_check refuses a command the list lacks) and the
//    "monitor" multicast group, as net/netlink/genetlink.c ctrl_fill_info puts them; an ack;
//  - CTRL_CMD_GETPOLICY (read_flags_policy, for --include-statistics): the op's policy index,
//    its header attribute's nested policy and ETHTOOL_A_HEADER_FLAGS' mask (ctrl_dumppolicy),
//    ETHTOOL_FLAG_STATS included for FEC_GET and LINKSTATE_GET (ethnl_header_policy_stats);
//  - an ethtool request: the reply messages of netlink/ethtool/CMD-IF.bin, else CMD.bin (a
//    capture's dump: the message whose header DEV_NAME is the interface asked; a request
//    without a name, STRSET_GET's, takes every message), family id, sequence and port id
//    rewritten to the request's, then the ack (NLM_F_ACK) or NLMSG_DONE (a dump). No file:
//    EOPNOTSUPP, as a driver without the operation; a file without that interface: ENODEV;
//    a recorded NLMSG_ERROR is answered as recorded;
//  - MODULE_EEPROM_GET: the bytes asked, from the capture's half pages
//    (ethtool/IF/module/i2c-0x50.page-0x00.bank-0.lower, docs/capture.md "Module EEPROM"),
//    refused as net/ethtool/eeprom.c refuses a read across 127/128 (EINVAL); a half the
//    capture lacks is EIO, a `.errno` half its errno.
// Configuration: FAKE_GENETLINK_DIRS, directories searched in turn (a capture's sample, then
// one with replies a capture does not hold, such as the link mode names of STRSET_GET);
// FAKE_GENETLINK_LOG, a file that gets one line per ethtool request ("fec_get eth0 flags=0x4
// -> 1 messages"), so a test can check what ethtool asked. Bounded: files of at most 1 MiB,
// 16 faked sockets, 1 MiB of queued answers per socket.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kFamilyId = 0x1c, kMaxSockets = 16, kMaxQueue = 1 << 20, kMaxFile = 1 << 20 };

struct fake_socket {
  int fd;  // an eventfd: a real descriptor, so that close(2) and dup(2) stay sane
  uint32_t portid;
  char* queue;  // answers: [u32 length][bytes] per datagram
  size_t queued, read_at;
};
static struct fake_socket sockets[kMaxSockets];

static struct fake_socket* find(int fd) {
  for (int i = 0; i < kMaxSockets; ++i)
    if (sockets[i].queue != NULL && sockets[i].fd == fd) return &sockets[i];
  return NULL;
}

// ---- building answers: one datagram at a time in `out`, messages appended to it

struct datagram {
  char bytes[65536];  // ethtool receives into 64 KiB (NLSOCK_RECV_BUFFSIZE)
  size_t len;
  int overflow;
};

static struct nlmsghdr* put_message(struct datagram* d, uint16_t type, uint16_t flags,
                                    const struct nlmsghdr* request) {
  if (d->len + NLMSG_HDRLEN > sizeof d->bytes) {
    d->overflow = 1;
    return NULL;
  }
  struct nlmsghdr* m = (struct nlmsghdr*)(d->bytes + d->len);
  memset(m, 0, NLMSG_HDRLEN);
  m->nlmsg_len = NLMSG_HDRLEN;
  m->nlmsg_type = type;
  m->nlmsg_flags = flags;
  m->nlmsg_seq = request->nlmsg_seq;
  m->nlmsg_pid = request->nlmsg_pid;
  return m;
}

static void put_bytes(struct datagram* d, struct nlmsghdr* m, const void* data, size_t len) {
  const size_t at = (size_t)((char*)m - d->bytes) + m->nlmsg_len;
  if (at + NLMSG_ALIGN(len) > sizeof d->bytes) {
    d->overflow = 1;
    return;
  }
  memcpy(d->bytes + at, data, len);
  memset(d->bytes + at + len, 0, NLMSG_ALIGN(len) - len);
  m->nlmsg_len += NLMSG_ALIGN(len);
}

static void end_message(struct datagram* d, struct nlmsghdr* m) {
  d->len = (size_t)((char*)m - d->bytes) + m->nlmsg_len;
}

static void put_genl(struct datagram* d, struct nlmsghdr* m, uint8_t cmd, uint8_t version) {
  struct genlmsghdr g = {.cmd = cmd, .version = version};
  put_bytes(d, m, &g, sizeof g);
}

static struct nlattr* attr_start(struct datagram* d, struct nlmsghdr* m, uint16_t type) {
  const size_t at = (size_t)((char*)m - d->bytes) + m->nlmsg_len;
  struct nlattr a = {.nla_len = NLA_HDRLEN, .nla_type = type};
  put_bytes(d, m, &a, sizeof a);
  return d->overflow ? NULL : (struct nlattr*)(d->bytes + at);
}

static void attr_end(struct nlmsghdr* m, struct nlattr* a) {
  if (a != NULL) a->nla_len = (uint16_t)((char*)m + m->nlmsg_len - (char*)a);
}

static void put_attr(struct datagram* d, struct nlmsghdr* m, uint16_t type, const void* data,
                     size_t len) {
  struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + len), .nla_type = type};
  put_bytes(d, m, &a, sizeof a);
  put_bytes(d, m, data, len);
}

static void put_u32(struct datagram* d, struct nlmsghdr* m, uint16_t type, uint32_t value) {
  put_attr(d, m, type, &value, sizeof value);
}

// NLMSG_ERROR with `error` (0: the ack), the request's header as the kernel echoes it.
static void put_error(struct datagram* d, const struct nlmsghdr* request, int error) {
  // Only the request's header is echoed (NLM_F_CAPPED), as with NETLINK_CAP_ACK.
  struct nlmsghdr* m = put_message(d, NLMSG_ERROR, NLM_F_CAPPED, request);
  if (m == NULL) return;
  struct nlmsgerr e = {.error = error, .msg = *request};
  put_bytes(d, m, &e, sizeof e);
  end_message(d, m);
}

static void put_done(struct datagram* d, const struct nlmsghdr* request) {
  struct nlmsghdr* m = put_message(d, NLMSG_DONE, NLM_F_MULTI, request);
  if (m == NULL) return;
  int zero = 0;
  put_bytes(d, m, &zero, sizeof zero);
  end_message(d, m);
}

static void enqueue(struct fake_socket* s, const struct datagram* d) {
  if (d->overflow || d->len == 0) return;
  if (s->queued + sizeof(uint32_t) + d->len > kMaxQueue) return;
  const uint32_t len = (uint32_t)d->len;
  memcpy(s->queue + s->queued, &len, sizeof len);
  memcpy(s->queue + s->queued + sizeof len, d->bytes, d->len);
  s->queued += sizeof len + d->len;
}

// ---- reading requests

// The attribute `type` among those at [start, end), or NULL.
static const struct nlattr* find_attr(const char* start, const char* end, uint16_t type) {
  while (start + NLA_HDRLEN <= end) {
    const struct nlattr* a = (const struct nlattr*)start;
    if (a->nla_len < NLA_HDRLEN || start + a->nla_len > end) return NULL;
    if ((a->nla_type & NLA_TYPE_MASK) == type) return a;
    start += NLA_ALIGN(a->nla_len);
  }
  return NULL;
}

static const char* payload(const struct nlattr* a) { return (const char*)a + NLA_HDRLEN; }
static size_t payload_len(const struct nlattr* a) { return a->nla_len - NLA_HDRLEN; }

static int read_u32(const struct nlattr* a, uint32_t* out) {
  if (a == NULL || payload_len(a) < sizeof *out) return 0;
  memcpy(out, payload(a), sizeof *out);
  return 1;
}

// A NUL-terminated string attribute of at most `size` - 1 characters.
static int read_string(const struct nlattr* a, char* out, size_t size) {
  if (a == NULL) return 0;
  const size_t len = strnlen(payload(a), payload_len(a));
  if (len == payload_len(a) || len >= size) return 0;
  memcpy(out, payload(a), len + 1);
  return 1;
}

// The genetlink message's attributes: [*start, *end).
static void genl_attrs(const struct nlmsghdr* m, const char** start, const char** end) {
  *start = (const char*)m + NLMSG_HDRLEN + GENL_HDRLEN;
  *end = (const char*)m + m->nlmsg_len;
}

// ETHTOOL_A_HEADER_DEV_NAME of a message's header nest (attribute 1 in every ethtool
// message: ETHTOOL_A_*_HEADER); "" when there is none.
static void header_name(const struct nlmsghdr* m, char* name, size_t size, uint32_t* flags) {
  const char *start, *end;
  genl_attrs(m, &start, &end);
  name[0] = '\0';
  if (flags != NULL) *flags = 0;
  const struct nlattr* header = find_attr(start, end, 1);
  if (header == NULL) return;
  const char* nest_end = payload(header) + payload_len(header);
  if (!read_string(find_attr(payload(header), nest_end, ETHTOOL_A_HEADER_DEV_NAME), name, size))
    name[0] = '\0';
  if (flags != NULL) read_u32(find_attr(payload(header), nest_end, ETHTOOL_A_HEADER_FLAGS), flags);
}

// ---- the capture's files

static size_t read_file(const char* relative, char* out, size_t size, int* found) {
  const char* dirs = getenv("FAKE_GENETLINK_DIRS");
  *found = 0;
  if (dirs == NULL) return 0;
  char list[4096];
  snprintf(list, sizeof list, "%s", dirs);
  char* save = NULL;
  for (char* dir = strtok_r(list, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char path[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", dir, relative);
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= size) {
      ssize_t n;
      while (got < size && (n = read(fd, out + got, size - got)) > 0) got += (size_t)n;
      *found = 1;
    }
    close(fd);
    if (*found) return got;
  }
  return 0;
}

static void log_line(const char* format, ...) {
  const char* path = getenv("FAKE_GENETLINK_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "ae");
  if (f == NULL) return;
  va_list args;
  va_start(args, format);
  vfprintf(f, format, args);
  va_end(args);
  fputc('\n', f);
  fclose(f);
}

// ---- the controller

// The ops ethtool may ask here, with the flags ctrl_fill_info reports for ethtool's genl_ops
// (net/ethtool/netlink.c: each GET has doit, dumpit and a policy; MODULE_EEPROM_GET is
// GENL_UNS_ADMIN_PERM and has no dumpit).
static const struct {
  uint8_t cmd;
  const char* name;  // the capture's key (sys/netlink_capture.cc) and the log's name
  uint32_t flags;
  uint64_t header_flags;  // ETHTOOL_A_HEADER_FLAGS' policy mask
} kOps[] = {
    {ETHTOOL_MSG_STRSET_GET, "strset_get", 0x0e, 0x3},
    {ETHTOOL_MSG_LINKINFO_GET, "linkinfo_get", 0x0e, 0x3},
    {ETHTOOL_MSG_LINKMODES_GET, "linkmodes_get", 0x0e, 0x3},
    {ETHTOOL_MSG_LINKSTATE_GET, "linkstate_get", 0x0e, 0x7},  // stats: Linux 6.2
    {ETHTOOL_MSG_DEBUG_GET, "debug_get", 0x0e, 0x3},
    {ETHTOOL_MSG_WOL_GET, "wol_get", 0x0e, 0x3},
    {ETHTOOL_MSG_FEC_GET, "fec_get", 0x0e, 0x7},                      // stats: Linux 5.13
    {ETHTOOL_MSG_MODULE_EEPROM_GET, "module_eeprom_get", 0x0b, 0x3},  // admin, do, policy
};
enum { kOpCount = sizeof kOps / sizeof kOps[0] };

static void answer_family(struct fake_socket* s, const struct nlmsghdr* request) {
  const char *start, *end;
  genl_attrs(request, &start, &end);
  char name[GENL_NAMSIZ];
  struct datagram* d = calloc(1, sizeof *d);
  if (d == NULL) return;
  if (!read_string(find_attr(start, end, CTRL_ATTR_FAMILY_NAME), name, sizeof name) ||
      strcmp(name, ETHTOOL_GENL_NAME) != 0) {
    put_error(d, request, -ENOENT);  // only ethtool's family is faked
    enqueue(s, d);
    free(d);
    return;
  }
  struct nlmsghdr* m = put_message(d, GENL_ID_CTRL, 0, request);
  if (m != NULL) {
    put_genl(d, m, CTRL_CMD_NEWFAMILY, 2);
    put_attr(d, m, CTRL_ATTR_FAMILY_NAME, ETHTOOL_GENL_NAME, sizeof ETHTOOL_GENL_NAME);
    const uint16_t id = kFamilyId;
    put_attr(d, m, CTRL_ATTR_FAMILY_ID, &id, sizeof id);
    put_u32(d, m, CTRL_ATTR_VERSION, ETHTOOL_GENL_VERSION);
    put_u32(d, m, CTRL_ATTR_HDRSIZE, 0);
    put_u32(d, m, CTRL_ATTR_MAXATTR, 0);
    struct nlattr* ops = attr_start(d, m, CTRL_ATTR_OPS);
    for (int i = 0; i < kOpCount; ++i) {
      struct nlattr* op = attr_start(d, m, (uint16_t)(i + 1));
      put_u32(d, m, CTRL_ATTR_OP_ID, kOps[i].cmd);
      put_u32(d, m, CTRL_ATTR_OP_FLAGS, kOps[i].flags);
      attr_end(m, op);
    }
    attr_end(m, ops);
    struct nlattr* groups = attr_start(d, m, CTRL_ATTR_MCAST_GROUPS);
    struct nlattr* group = attr_start(d, m, 1);
    put_u32(d, m, CTRL_ATTR_MCAST_GRP_ID, 9);
    put_attr(d, m, CTRL_ATTR_MCAST_GRP_NAME, ETHTOOL_MCGRP_MONITOR_NAME,
             sizeof ETHTOOL_MCGRP_MONITOR_NAME);
    attr_end(m, group);
    attr_end(m, groups);
    end_message(d, m);
  }
  enqueue(s, d);
  d->len = 0;
  if (request->nlmsg_flags & NLM_F_ACK) put_error(d, request, 0);
  enqueue(s, d);
  free(d);
}

// CTRL_CMD_GETPOLICY of one op: policy 0 is the op's, whose attribute 1 (the header) nests
// policy 1, ethnl_header_policy(_stats), whose ETHTOOL_A_HEADER_FLAGS has the op's mask.
static void answer_policy(struct fake_socket* s, const struct nlmsghdr* request) {
  const char *start, *end;
  genl_attrs(request, &start, &end);
  uint32_t op = 0;
  int known = -1;
  if (read_u32(find_attr(start, end, CTRL_ATTR_OP), &op)) {
    for (int i = 0; i < kOpCount; ++i)
      if (kOps[i].cmd == op) known = i;
  }
  struct datagram* d = calloc(1, sizeof *d);
  if (d == NULL) return;
  if (known < 0) {
    put_error(d, request, -EOPNOTSUPP);
    enqueue(s, d);
    free(d);
    return;
  }
  const uint16_t id = kFamilyId;
  struct nlmsghdr* m = put_message(d, GENL_ID_CTRL, NLM_F_MULTI, request);
  if (m != NULL) {
    put_genl(d, m, CTRL_CMD_GETPOLICY, 2);
    put_attr(d, m, CTRL_ATTR_FAMILY_ID, &id, sizeof id);
    struct nlattr* map = attr_start(d, m, CTRL_ATTR_OP_POLICY);
    struct nlattr* entry = attr_start(d, m, (uint16_t)op);
    put_u32(d, m, CTRL_ATTR_POLICY_DO, 0);
    put_u32(d, m, CTRL_ATTR_POLICY_DUMP, 0);
    attr_end(m, entry);
    attr_end(m, map);
    end_message(d, m);
  }
  // (policy, attribute, what it says)
  for (int which = 0; which < 2; ++which) {
    m = put_message(d, GENL_ID_CTRL, NLM_F_MULTI, request);
    if (m == NULL) break;
    put_genl(d, m, CTRL_CMD_GETPOLICY, 2);
    put_attr(d, m, CTRL_ATTR_FAMILY_ID, &id, sizeof id);
    struct nlattr* policy = attr_start(d, m, CTRL_ATTR_POLICY);
    struct nlattr* index = attr_start(d, m, (uint16_t)which);
    struct nlattr* attr = attr_start(d, m, which == 0 ? 1 : ETHTOOL_A_HEADER_FLAGS);
    if (which == 0) {
      put_u32(d, m, NL_POLICY_TYPE_ATTR_TYPE, NL_ATTR_TYPE_NESTED);
      put_u32(d, m, NL_POLICY_TYPE_ATTR_POLICY_IDX, 1);
    } else {
      put_u32(d, m, NL_POLICY_TYPE_ATTR_TYPE, NL_ATTR_TYPE_U32);
      put_attr(d, m, NL_POLICY_TYPE_ATTR_MASK, &kOps[known].header_flags, sizeof(uint64_t));
    }
    attr_end(m, attr);
    attr_end(m, index);
    attr_end(m, policy);
    end_message(d, m);
  }
  put_done(d, request);
  enqueue(s, d);
  free(d);
}

// ---- ethtool requests

static void answer_module(struct fake_socket* s, const struct nlmsghdr* request, const char* ifname,
                          struct datagram* d) {
  const char *start, *end;
  genl_attrs(request, &start, &end);
  uint32_t offset = 0, length = 0;
  uint8_t page = 0, bank = 0, i2c = 0;
  const struct nlattr* a;
  int ok = read_u32(find_attr(start, end, ETHTOOL_A_MODULE_EEPROM_OFFSET), &offset) &&
           read_u32(find_attr(start, end, ETHTOOL_A_MODULE_EEPROM_LENGTH), &length);
  if ((a = find_attr(start, end, ETHTOOL_A_MODULE_EEPROM_PAGE)) && payload_len(a) >= 1)
    page = (uint8_t)payload(a)[0];
  if ((a = find_attr(start, end, ETHTOOL_A_MODULE_EEPROM_BANK)) && payload_len(a) >= 1)
    bank = (uint8_t)payload(a)[0];
  if ((a = find_attr(start, end, ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS)) && payload_len(a) >= 1)
    i2c = (uint8_t)payload(a)[0];
  // net/ethtool/eeprom.c eeprom_parse_request: a read across the halves, or past 256.
  if (!ok || length == 0 || offset + length > 256 || (offset < 128 && offset + length > 128)) {
    log_line("MODULE_EEPROM_GET %s offset=%u length=%u -> EINVAL", ifname, offset, length);
    put_error(d, request, -EINVAL);
    return;
  }
  const int upper = offset >= 128;
  char relative[256], half[128], errno_name[32];
  // The lower half is the same for every page: the capture keys it as page 0, bank 0.
  snprintf(relative, sizeof relative, "ethtool/%s/module/i2c-0x%02x.page-0x%02x.bank-%u.%s", ifname,
           i2c, upper ? page : 0, upper ? bank : 0, upper ? "upper" : "lower");
  int found = 0;
  const size_t got = read_file(relative, half, sizeof half, &found);
  if (!found || got != sizeof half) {
    char errno_path[300];
    snprintf(errno_path, sizeof errno_path, "%s.errno", relative);
    int error = EIO;  // nothing recorded: as a module that did not answer
    const size_t n = read_file(errno_path, errno_name, sizeof errno_name - 1, &found);
    if (found) {
      errno_name[n] = '\0';
      if (strncmp(errno_name, "EOPNOTSUPP", 10) == 0) error = EOPNOTSUPP;
      if (strncmp(errno_name, "ENODEV", 6) == 0) error = ENODEV;
    }
    log_line("MODULE_EEPROM_GET %s i2c=0x%02x page=0x%02x bank=%u offset=%u length=%u -> %s",
             ifname, i2c, page, bank, offset, length, strerrorname_np(error));
    put_error(d, request, -error);
    return;
  }
  struct nlmsghdr* m = put_message(d, kFamilyId, 0, request);
  if (m == NULL) return;
  put_genl(d, m, ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY, ETHTOOL_GENL_VERSION);
  struct nlattr* header = attr_start(d, m, ETHTOOL_A_MODULE_EEPROM_HEADER);
  put_u32(d, m, ETHTOOL_A_HEADER_DEV_INDEX, 2);
  put_attr(d, m, ETHTOOL_A_HEADER_DEV_NAME, ifname, strlen(ifname) + 1);
  attr_end(m, header);
  put_attr(d, m, ETHTOOL_A_MODULE_EEPROM_DATA, half + offset % 128, length);
  end_message(d, m);
  enqueue(s, d);
  d->len = 0;
  log_line("MODULE_EEPROM_GET %s i2c=0x%02x page=0x%02x bank=%u offset=%u length=%u -> %u bytes",
           ifname, i2c, page, bank, offset, length, length);
  if (request->nlmsg_flags & NLM_F_ACK) put_error(d, request, 0);
}

static void answer_ethtool(struct fake_socket* s, const struct nlmsghdr* request) {
  const struct genlmsghdr* genl = (const struct genlmsghdr*)NLMSG_DATA(request);
  char ifname[128];  // ALTIFNAMSIZ
  uint32_t flags = 0;
  header_name(request, ifname, sizeof ifname, &flags);
  const int dump = (request->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
  struct datagram* d = calloc(1, sizeof *d);
  char* file = malloc(kMaxFile);
  if (d == NULL || file == NULL) goto out;
  int op = -1;
  for (int i = 0; i < kOpCount; ++i)
    if (kOps[i].cmd == genl->cmd) op = i;
  if (op < 0) {
    log_line("cmd %u %s -> EOPNOTSUPP", genl->cmd, ifname);
    put_error(d, request, -EOPNOTSUPP);
    goto send;
  }
  if (genl->cmd == ETHTOOL_MSG_MODULE_EEPROM_GET) {
    answer_module(s, request, ifname, d);
    goto send;
  }
  char relative[256];
  int found = 0;
  size_t len = 0;
  if (ifname[0] != '\0') {
    snprintf(relative, sizeof relative, "netlink/ethtool/%s-%s.bin", kOps[op].name, ifname);
    len = read_file(relative, file, kMaxFile, &found);
  }
  if (!found) {
    snprintf(relative, sizeof relative, "netlink/ethtool/%s.bin", kOps[op].name);
    len = read_file(relative, file, kMaxFile, &found);
  }
  if (!found) {
    log_line("%s %s flags=0x%x -> EOPNOTSUPP (no file)", kOps[op].name, ifname, flags);
    put_error(d, request, -EOPNOTSUPP);
    goto send;
  }
  int replies = 0, recorded_error = 0;
  for (size_t at = 0; at + NLMSG_HDRLEN <= len;) {
    struct nlmsghdr* m = (struct nlmsghdr*)(file + at);
    if (m->nlmsg_len < NLMSG_HDRLEN || m->nlmsg_len > len - at) break;  // not whole: stop
    if (m->nlmsg_type == NLMSG_ERROR && m->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
      memcpy(&recorded_error, NLMSG_DATA(m), sizeof recorded_error);
    } else if (m->nlmsg_type >= NLMSG_MIN_TYPE && m->nlmsg_len >= NLMSG_HDRLEN + GENL_HDRLEN) {
      char name[64];
      header_name(m, name, sizeof name, NULL);
      if (ifname[0] == '\0' || strcmp(name, ifname) == 0) {
        struct nlmsghdr* out = put_message(d, kFamilyId, dump ? NLM_F_MULTI : 0, request);
        if (out != NULL) {
          put_bytes(d, out, (char*)m + NLMSG_HDRLEN, m->nlmsg_len - NLMSG_HDRLEN);
          end_message(d, out);
          ++replies;
        }
      }
    }
    at += NLMSG_ALIGN(m->nlmsg_len);
  }
  if (replies == 0) {
    const int error = recorded_error < 0 ? recorded_error : -ENODEV;
    log_line("%s %s flags=0x%x -> %s", kOps[op].name, ifname, flags, strerrorname_np(-error));
    put_error(d, request, error);
    goto send;
  }
  log_line("%s %s flags=0x%x -> %d messages", kOps[op].name, ifname, flags, replies);
  enqueue(s, d);
  d->len = 0;
  if (dump) {
    put_done(d, request);
  } else if (request->nlmsg_flags & NLM_F_ACK) {
    put_error(d, request, 0);
  }
send:
  enqueue(s, d);
out:
  free(d);
  free(file);
}

// ---- the interposed calls

int socket(int domain, int type, int protocol) {
  static int (*real)(int, int, int);
  if (real == NULL) real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  if (domain != AF_NETLINK || protocol != NETLINK_GENERIC) return real(domain, type, protocol);
  for (int i = 0; i < kMaxSockets; ++i) {
    if (sockets[i].queue != NULL) continue;
    const int fd = eventfd(0, (type & SOCK_CLOEXEC) ? EFD_CLOEXEC : 0);
    if (fd < 0) return -1;
    sockets[i] = (struct fake_socket){.fd = fd, .portid = (uint32_t)getpid() + (uint32_t)i};
    sockets[i].queue = malloc(kMaxQueue);
    if (sockets[i].queue == NULL) {
      close(fd);
      errno = ENOMEM;
      return -1;
    }
    return fd;
  }
  errno = EMFILE;
  return -1;
}

int close(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
  struct fake_socket* s = find(fd);
  if (s != NULL) {
    free(s->queue);
    memset(s, 0, sizeof *s);
  }
  return real(fd);
}

int bind(int fd, const struct sockaddr* addr, socklen_t len) {
  static int (*real)(int, const struct sockaddr*, socklen_t);
  if (real == NULL)
    real = (int (*)(int, const struct sockaddr*, socklen_t))dlsym(RTLD_NEXT, "bind");
  return find(fd) != NULL ? 0 : real(fd, addr, len);
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  static int (*real)(int, int, int, const void*, socklen_t);
  if (real == NULL)
    real = (int (*)(int, int, int, const void*, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
  return find(fd) != NULL ? 0 : real(fd, level, name, value, len);
}

int getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  static int (*real)(int, struct sockaddr*, socklen_t*);
  if (real == NULL)
    real = (int (*)(int, struct sockaddr*, socklen_t*))dlsym(RTLD_NEXT, "getsockname");
  struct fake_socket* s = find(fd);
  if (s == NULL) return real(fd, addr, len);
  struct sockaddr_nl nl = {.nl_family = AF_NETLINK, .nl_pid = s->portid};
  memcpy(addr, &nl, *len < sizeof nl ? *len : sizeof nl);
  *len = sizeof nl;
  return 0;
}

ssize_t sendto(int fd, const void* buf, size_t len, int flags, const struct sockaddr* to,
               socklen_t to_len) {
  static ssize_t (*real)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
  if (real == NULL)
    real = (ssize_t(*)(int, const void*, size_t, int, const struct sockaddr*, socklen_t))dlsym(
        RTLD_NEXT, "sendto");
  struct fake_socket* s = find(fd);
  if (s == NULL) return real(fd, buf, len, flags, to, to_len);
  const struct nlmsghdr* request = buf;
  if (len < NLMSG_HDRLEN + GENL_HDRLEN || request->nlmsg_len > len ||
      request->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) {
    errno = EINVAL;
    return -1;
  }
  // The kernel fills in the sender's port id; ethtool's requests carry 0.
  struct nlmsghdr* copy = malloc(request->nlmsg_len);
  if (copy == NULL) {
    errno = ENOMEM;
    return -1;
  }
  memcpy(copy, request, request->nlmsg_len);
  copy->nlmsg_pid = s->portid;
  const struct genlmsghdr* genl = (const struct genlmsghdr*)NLMSG_DATA(copy);
  if (copy->nlmsg_type == GENL_ID_CTRL && genl->cmd == CTRL_CMD_GETFAMILY) {
    answer_family(s, copy);
  } else if (copy->nlmsg_type == GENL_ID_CTRL && genl->cmd == CTRL_CMD_GETPOLICY) {
    answer_policy(s, copy);
  } else if (copy->nlmsg_type == kFamilyId) {
    answer_ethtool(s, copy);
  } else {
    struct datagram* d = calloc(1, sizeof *d);
    if (d != NULL) {
      put_error(d, copy, -EOPNOTSUPP);
      enqueue(s, d);
      free(d);
    }
  }
  free(copy);
  return (ssize_t)len;
}

ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  static ssize_t (*real)(int, struct msghdr*, int);
  if (real == NULL) real = (ssize_t(*)(int, struct msghdr*, int))dlsym(RTLD_NEXT, "recvmsg");
  struct fake_socket* s = find(fd);
  if (s == NULL) return real(fd, msg, flags);
  if (s->read_at >= s->queued) {
    // Nothing asked is left to answer: the kernel would block; a test must not hang.
    errno = EAGAIN;
    return -1;
  }
  uint32_t len;
  memcpy(&len, s->queue + s->read_at, sizeof len);
  const char* bytes = s->queue + s->read_at + sizeof len;
  s->read_at += sizeof len + len;
  if (s->read_at == s->queued) s->read_at = s->queued = 0;
  msg->msg_flags = 0;
  size_t copied = 0;
  for (size_t i = 0; i < msg->msg_iovlen && copied < len; ++i) {
    const size_t n =
        len - copied < msg->msg_iov[i].iov_len ? len - copied : msg->msg_iov[i].iov_len;
    memcpy(msg->msg_iov[i].iov_base, bytes + copied, n);
    copied += n;
  }
  if (copied < len) msg->msg_flags |= MSG_TRUNC;
  if (msg->msg_name != NULL && msg->msg_namelen >= sizeof(struct sockaddr_nl)) {
    struct sockaddr_nl from = {.nl_family = AF_NETLINK};  // the kernel: port 0
    memcpy(msg->msg_name, &from, sizeof from);
    msg->msg_namelen = sizeof from;
  }
  return (ssize_t)((flags & MSG_TRUNC) ? len : copied);
}
