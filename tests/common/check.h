/* CHECK for the C test programs: a condition that fails prints where and what, and aborts (a
 * signal the harness reports), rather than carrying on from a broken premise. */
#ifndef RDMASCOPE_TESTS_COMMON_CHECK_H
#define RDMASCOPE_TESTS_COMMON_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #cond); \
      abort();                                                          \
    }                                                                   \
  } while (0)

#endif /* RDMASCOPE_TESTS_COMMON_CHECK_H */
