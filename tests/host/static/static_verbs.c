/* A statically linked program that carries its own registration entry point, as a program
 * linked against a static libibverbs would: --probe.binary must find it in .symtab. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct fake_mr {
  void *context, *pd, *addr;
  size_t length;
  uint32_t handle, lkey, rkey;
};

__attribute__((noinline, used)) struct fake_mr* ibv_reg_mr_iova2(void* pd, void* addr,
                                                                 size_t length, uint64_t iova,
                                                                 unsigned int access) {
  (void)iova;
  (void)access;
  struct fake_mr* mr = calloc(1, sizeof(*mr));
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  return mr;
}

int main(void) {
  static char buffer[4096];
  struct fake_mr* mr = ibv_reg_mr_iova2(NULL, buffer, sizeof buffer, 0, 1);
  printf("%zu\n", mr->length);
  return 0;
}
