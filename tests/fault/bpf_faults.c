// LD_PRELOAD shim for fault_bpf_calls.py (issue 18 item 3): makes the exporter's libbpf calls
// fail on demand. The file named by RDMASCOPE_BPF_FAULTS holds the calls to fail, one word
// each, read again at every call (the test changes it while the exporter runs):
//   lookup    bpf_map_lookup_elem        -1, errno EIO
//   next_key  bpf_map_get_next_key       -1, errno EIO
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

static bool Failing(const char* call) {
  const char* control = getenv("RDMASCOPE_BPF_FAULTS");
  if (control == NULL) return false;
  const int saved = errno;
  const int fd = open(control, O_RDONLY | O_CLOEXEC);
  char text[256];
  ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
  if (fd >= 0) close(fd);
  errno = saved;
  if (n <= 0) return false;
  text[n] = '\0';
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

int bpf_map_get_next_key(int fd, const void* key, void* next_key) {
  if (Failing("next_key")) {
    errno = EIO;
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
