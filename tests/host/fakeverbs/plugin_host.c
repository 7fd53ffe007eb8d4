/* Loads a plugin that links libibverbs with dlopen(RTLD_LOCAL), as Python does with its
 * extensions; this program does not link libibverbs. Prints "RESULT <plugin_run()>" and
 * "READY <pid>", then waits for a line on stdin (so that its stats file can be scraped).
 * usage: plugin_host PLUGIN.so
 *        plugin_host --no-verbs: calls ibv_open_device as found in the global scope (the
 *        preload library's) with no libibverbs loaded at all; prints "OPEN <ptr> <errno>". */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "--no-verbs")) {
    void* (*open_device)(void*) = (void* (*)(void*))dlsym(RTLD_DEFAULT, "ibv_open_device");
    if (!open_device) return 2;
    char device[1024] = "fakedev0";
    errno = 0;
    void* context = open_device(device);
    printf("OPEN %p %d\n", context, errno);
    return 0;
  }
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  int (*run)(void) = (int (*)(void))dlsym(plugin, "plugin_run");
  if (!run) return 2;
  printf("RESULT %d\nREADY %d\n", run(), getpid());
  fflush(stdout);
  char line[16];
  while (fgets(line, sizeof line, stdin)) {
  }
  return 0;
}
