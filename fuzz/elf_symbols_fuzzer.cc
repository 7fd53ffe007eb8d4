// ELF files (sys/elf_symbols): dynamic and static symbol tables, symbol versions, and the
// forwarders found by decoding .text and .plt. ReadFunctionSymbols takes a path: the input is
// written to a memfd and read back through /proc/self/fd, with no disk and no seam needed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "sys/elf_symbols.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("rdmascope-fuzz-elf", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  rdmascope::sys::ReadFunctionSymbols(path);
  return 0;
}
