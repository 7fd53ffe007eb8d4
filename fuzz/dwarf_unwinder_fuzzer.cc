// The DWARF unwinder (sys/dwarf_unwinder) and the symboliser it feeds (sys/symbolizer): a
// captured stack is registers and bytes from the event, i.e. from the traced program, which may
// be anything. Unwound against a fake process, deterministic: a procfs of our own (the
// DwarfUnwinder seam) whose maps put this fuzzer's executable and its libc at fixed addresses,
// so that CFI, symbols and debug info (inline frames, demangling) are real.
//
// Input: a flags byte, a max_frames byte, 17 registers (8 bytes each, big-endian), then the
// stack bytes. Flags make the values plausible, so that libFuzzer reaches deep walks quickly:
//   1   rip = the executable's base + rip % its span
//   2   rsp = a fixed stack address (else as given, 0 included)
//   4   rbp = rsp + rbp % (stack size + 64)
//   8   stack words tagged in their top byte are relocated: 0xee -> executable + low 24 bits,
//       0xef -> libc + low 24 bits, 0x57 -> rsp + low 16 bits
//   16  the pid of no process (the "process gone" path)
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "fuzz_input.h"
#include "sys/dwarf_unwinder.h"

namespace {

using rdmascope::sys::CapturedStack;
using rdmascope::sys::DwarfUnwinder;
using rdmascope::sys::UnwindMethod;

constexpr uint64_t kExecutable = 0x555500000000;
constexpr uint64_t kExecutableSpan = 0x8000000;  // 128 MiB: more than the binary's segments
constexpr uint64_t kLibc = 0x7f0000000000;
constexpr uint64_t kLibcSpan = 0x1000000;
constexpr uint64_t kStack = 0x7ffc00000000;
constexpr uint32_t kPid = 1;

// <tmp>/1/{maps,stat}, removed at exit.
std::filesystem::path MakeProcfs() {
  char dir[] = "/tmp/rdmascope-fuzz-unwind.XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  static std::filesystem::path root = dir;
  std::atexit([] { std::filesystem::remove_all(root); });
  std::filesystem::create_directories(root / "1");
  // libc's own fprintf, by lookup in libc: &std::fprintf may be the executable's (clang's
  // -fsanitize=fuzzer runtime defines a weak fprintf), and two ranges of one file would be one
  // module spanning both, whose offsets are absolute-sized.
  void* libc_handle = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void* libc_symbol = libc_handle != nullptr ? dlsym(libc_handle, "fprintf") : nullptr;
  Dl_info libc{};
  if (libc_symbol == nullptr || dladdr(libc_symbol, &libc) == 0) std::abort();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string libc_path = std::filesystem::canonical(libc.dli_fname).string();
  if (std::filesystem::equivalent(self, libc_path)) std::abort();
  // The files' real device and inode, and a root to open them through: the unwinder opens a
  // mapping only inside the process's root and only if it is the inode the maps line names.
  std::filesystem::create_directory_symlink("/", root / "1" / "root");
  struct stat self_status {};
  struct stat libc_status {};
  if (stat(self.c_str(), &self_status) != 0 || stat(libc_path.c_str(), &libc_status) != 0) {
    std::abort();
  }
  char maps[8192];
  std::snprintf(
      maps, sizeof maps,
      "%llx-%llx r-xp 00000000 %x:%x %llu %s\n%llx-%llx r-xp 00000000 %x:%x %llu %s\n",
      static_cast<unsigned long long>(kExecutable),
      static_cast<unsigned long long>(kExecutable + kExecutableSpan), major(self_status.st_dev),
      minor(self_status.st_dev), static_cast<unsigned long long>(self_status.st_ino), self.c_str(),
      static_cast<unsigned long long>(kLibc), static_cast<unsigned long long>(kLibc + kLibcSpan),
      major(libc_status.st_dev), minor(libc_status.st_dev),
      static_cast<unsigned long long>(libc_status.st_ino), libc_path.c_str());
  std::ofstream(root / "1" / "maps") << maps;
  std::ofstream(root / "1" / "stat")
      << "1 (fuzz) S 0 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 42 1000000 200 0\n";
  return root;
}

uint64_t Relocated(uint64_t word, uint64_t sp) {
  switch (word >> 56) {
    case 0xee:
      return kExecutable + (word & 0xffffff);
    case 0xef:
      return kLibc + (word & 0xffffff);
    case 0x57:
      return sp + (word & 0xffff);
    default:
      return word;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static DwarfUnwinder unwinder(MakeProcfs());
  rdmascope::fuzz::Input input(data, size);
  const uint8_t flags = input.Byte();
  const size_t max_frames = 1 + input.Byte() % 128;
  // The fake process's image (its stat's start time, 42), or a pid that has none.
  CapturedStack captured{.image = rdmascope::sys::ImageOfStartTicks(
                             (flags & 16) != 0 ? kPid + 1 : kPid, 42, flags >> 5)};
  for (uint64_t& reg : captured.regs) reg = input.U64();
  std::vector<uint8_t> stack(input.Rest().begin(), input.Rest().end());
  uint64_t& rip = captured.regs[rdmascope::sys::kDwarfRip];
  uint64_t& rsp = captured.regs[rdmascope::sys::kDwarfRsp];
  uint64_t& rbp = captured.regs[rdmascope::sys::kDwarfRbp];
  if ((flags & 1) != 0) rip = kExecutable + rip % kExecutableSpan;
  if ((flags & 2) != 0) rsp = kStack;
  if ((flags & 4) != 0) rbp = rsp + rbp % (stack.size() + 64);
  if ((flags & 8) != 0) {
    for (size_t at = 0; at + 8 <= stack.size(); at += 8) {
      uint64_t word = 0;
      std::memcpy(&word, stack.data() + at, 8);
      word = Relocated(word, rsp);
      std::memcpy(stack.data() + at, &word, 8);
    }
  }
  captured.stack = stack;

  const rdmascope::sys::UnwindLimits limits{.max_frames = max_frames,
                                            .budget = std::chrono::seconds(10)};
  const rdmascope::sys::UnwoundStack unwound = unwinder.Unwind(captured, limits);
  // What the unwinder promises, whatever the input.
  if (unwound.pcs.empty() || unwound.pcs[0] != rip || unwound.pcs.size() > max_frames ||
      (unwound.method == UnwindMethod::kNone) != (unwound.pcs.size() == 1) ||
      (unwound.truncated && unwound.stop_reason.empty())) {
    std::abort();
  }
  if (unwinder.UnwindFramePointers(captured, limits).pcs.size() > max_frames) std::abort();
  const auto frames = unwinder.Symbolize(captured.image, unwound);
  if (frames.size() < unwound.pcs.size()) std::abort();
  for (const auto& frame : frames) {
    // Names and module offsets only (at most 8 hex digits here: the spans above), never an
    // absolute address of the (fake) process (12 digits).
    const std::string text = frame.Describe();
    for (size_t at = text.find("0x"); at != std::string::npos; at = text.find("0x", at + 2)) {
      size_t digits = 0;
      while (at + 2 + digits < text.size() && std::isxdigit(text[at + 2 + digits])) ++digits;
      if (digits > 8) std::abort();
    }
  }
  return 0;
}
