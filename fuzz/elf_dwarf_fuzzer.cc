// The unwinder worker's parsing (sys/unwind_worker.h runs exactly this code: DwarfUnwinder over
// sys/module_files, sys/elf_checks, sys/elf_cache, the symbolizer) fed a mutated ELF file: its
// program headers, sections, .eh_frame and .debug_frame CFI, symbol tables, .debug_info and
// friends (inline frames are asked for), build id and debuglink, compressed sections. The file
// reaches the unwinder as in the worker: a descriptor of the "mapped" file, handed over by a
// ProcessAccess (here a fake: a memfd holding the input, at a fixed address, with its device
// and inode in the maps line), never by path.
//
// Input: 8 bytes of an offset into the module for the instruction pointer, 8 of a return
// address offset for the stack, then the ELF file.
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_input.h"
#include "sys/dwarf_unwinder.h"
#include "sys/process_access.h"

namespace {

using namespace rdmascope::sys;

constexpr uint32_t kPid = 7;
constexpr uint64_t kBase = 0x400000;
constexpr uint64_t kSpan = 0x1000000;
constexpr uint64_t kStack = 0x7ffd00000000;
constexpr ImageKey kImage{.tgid = kPid, .exec_id = 1, .start_ns = 1};

// One process mapping one file: the input.
class FileAccess final : public ProcessAccess {
 public:
  FileAccess(int fd, const struct stat& status) : fd_(fd), status_(status) {}
  std::optional<uint64_t> StartTicks(uint32_t pid) override {
    return pid == kPid ? std::optional<uint64_t>(1) : std::nullopt;
  }
  bool StillRunning(uint32_t pid, uint64_t start) override { return pid == kPid && start == 1; }
  std::expected<std::string, int> Maps(const ImageKey& image) override {
    if (image != kImage) return std::unexpected(ENOENT);
    char line[256];
    std::snprintf(line, sizeof line, "%llx-%llx r-xp 00000000 %x:%x %llu /fuzz/lib.so\n",
                  static_cast<unsigned long long>(kBase),
                  static_cast<unsigned long long>(kBase + kSpan), major(status_.st_dev),
                  minor(status_.st_dev), static_cast<unsigned long long>(status_.st_ino));
    return line;
  }
  std::expected<OpenedFile, std::string> OpenMapping(uint32_t, const MappedFile& mapping) override {
    if (mapping.inode != status_.st_ino) return std::unexpected("not the mapped inode");
    OpenedFile file;
    file.fd = UniqueFd(dup(fd_));
    file.status = status_;
    return file;
  }
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t, std::string_view) override {
    return std::unexpected("no debug files here");  // the worker's debug files: same parsing
  }

 private:
  const int fd_;
  const struct stat status_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  const uint64_t ip_offset = input.U64() % kSpan;
  const uint64_t return_offset = input.U64() % kSpan;
  const auto file = input.Rest();
  // A new inode per input: the ELF cache (keyed by device and inode) never mixes two inputs.
  const int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  if (!file.empty() && write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size())) {
    std::abort();
  }
  struct stat status {};
  if (fstat(fd, &status) != 0) std::abort();
  {
    DwarfUnwinder unwinder(std::make_shared<FileAccess>(fd, status),
                           std::make_shared<ElfCache>(/*max_unused=*/0));
    CapturedStack captured{.image = kImage};
    captured.regs[kDwarfRip] = kBase + ip_offset;
    captured.regs[kDwarfRsp] = kStack;
    captured.regs[kDwarfRbp] = kStack + 16;
    const uint64_t words[4] = {kBase + return_offset, kStack + 32, kBase + return_offset / 2, 0};
    captured.stack = {reinterpret_cast<const uint8_t*>(words), sizeof words};
    const UnwindLimits limits{.max_frames = 16, .budget = std::chrono::seconds(5)};
    const UnwoundStack unwound = unwinder.Unwind(captured, limits);
    if (unwound.pcs.empty() || unwound.pcs[0] != captured.regs[kDwarfRip] ||
        unwound.pcs.size() > limits.max_frames) {
      std::abort();
    }
    std::string missing;
    const auto frames = unwinder.Symbolize(
        kImage, unwound.pcs, {.first = FirstAddress::kInstructionPointer, .inline_frames = true},
        &missing);
    if (frames.size() < unwound.pcs.size()) std::abort();
    for (const Frame& frame : frames) (void)frame.Describe();
  }
  close(fd);
  return 0;
}
