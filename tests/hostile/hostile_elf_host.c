/* Host of the hostile_elf test: dlopens each library given (copies of hostile_elf_lib, made
 * hostile by the test), calls hostile_register() of each once (a registration whose stack goes
 * through that library), prints "ready" and waits to be killed.
 * usage: hostile_elf_host SIZE LIBRARY... */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SIZE LIBRARY...\n", argv[0]);
    return 2;
  }
  const size_t size = (size_t)atol(argv[1]);
  for (int i = 2; i < argc; i++) {
    void* library = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    int (*reg)(size_t) = library ? (int (*)(size_t))dlsym(library, "hostile_register") : NULL;
    if (!reg) {
      fprintf(stderr, "%s: %s\n", argv[i], dlerror());
      return 1;
    }
    if (reg(size) != 0) return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}
