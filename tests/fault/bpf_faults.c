// LD_PRELOAD shim for fault_bpf_calls.py (issue 18 item 3): makes the exporter's libbpf calls
// fail on demand. The file named by RDMASCOPE_BPF_FAULTS holds the calls to fail, one word
// each, read again at every call (the test changes it while the exporter runs):
//   lookup    bpf_map_lookup_elem        -1, errno EIO
//   next_key  bpf_map_get_next_key       -1, errno EIO
//   next_key@N  bpf_map_get_next_key: the first N calls since the word appeared go through,
//             the later ones fail (-1, errno EFAULT): a walk cut short midway
//   load      bpf_object__load_skeleton  -EPERM (the skeletons' __load), errno EPERM
//   attach    bpf_program__attach*       NULL, errno EPERM
// Anything else goes to the real libbpf (RTLD_NEXT).
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The control file's words ("" when there is none or it cannot be read).
static void ReadControl(char* text, size_t size) {
  text[0] = '\0';
  const char* control = getenv("RDMASCOPE_BPF_FAULTS");
  if (control == NULL) return;
  const int saved = errno;
  const int fd = open(control, O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd < 0 ? -1 : read(fd, text, size - 1);
  if (fd >= 0) close(fd);
  errno = saved;
  text[n > 0 ? n : 0] = '\0';
}

static bool Failing(const char* call) {
  char text[256];
  ReadControl(text, sizeof text);
  const size_t length = strlen(call);
  for (const char* at = strstr(text, call); at != NULL; at = strstr(at + 1, call)) {
    const bool starts = at == text || at[-1] == ' ' || at[-1] == '\n';
    const char end = at[length];
    if (starts && (end == '\0' || end == ' ' || end == '\n')) return true;
  }
  return false;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int bpf_map_lookup_elem(int fd, const void* key, void* value) {
  if (Failing("lookup")) {
    errno = EIO;
    return -1;
  }
  return REAL(bpf_map_lookup_elem)(fd, key, value);
}

// next_key@N: calls counted since the word appeared (the exporter scrapes one at a time).
static unsigned long next_key_calls;

static bool NextKeyCutShort(void) {
  char text[256];
  ReadControl(text, sizeof text);
  const char* at = strstr(text, "next_key@");
  if (at == NULL || (at != text && at[-1] != ' ' && at[-1] != '\n')) {
    next_key_calls = 0;
    return false;
  }
  const unsigned long allowed = strtoul(at + strlen("next_key@"), NULL, 10);
  return ++next_key_calls > allowed;
}

int bpf_map_get_next_key(int fd, const void* key, void* next_key) {
  if (Failing("next_key")) {
    errno = EIO;
    return -1;
  }
  if (NextKeyCutShort()) {
    errno = EFAULT;
    return -1;
  }
  return REAL(bpf_map_get_next_key)(fd, key, next_key);
}

int bpf_object__load_skeleton(struct bpf_object_skeleton* s) {
  if (Failing("load")) {
    errno = EPERM;
    return -EPERM;
  }
  return REAL(bpf_object__load_skeleton)(s);
}

struct bpf_link* bpf_program__attach(const struct bpf_program* prog) {
  if (Failing("attach")) {
    errno = EPERM;
    return NULL;
  }
  return REAL(bpf_program__attach)(prog);
}

struct bpf_link* bpf_program__attach_uprobe(const struct bpf_program* prog, bool retprobe,
                                            pid_t pid, const char* binary_path,
                                            size_t func_offset) {
  if (Failing("attach")) {
    errno = EPERM;
    return NULL;
  }
  return REAL(bpf_program__attach_uprobe)(prog, retprobe, pid, binary_path, func_offset);
}

struct bpf_link* bpf_program__attach_uprobe_opts(const struct bpf_program* prog, pid_t pid,
                                                 const char* binary_path, size_t func_offset,
                                                 const struct bpf_uprobe_opts* opts) {
  if (Failing("attach")) {
    errno = EPERM;
    return NULL;
  }
  return REAL(bpf_program__attach_uprobe_opts)(prog, pid, binary_path, func_offset, opts);
}
