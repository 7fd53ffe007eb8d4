// The fake process of the DWARF unwinder's unit tests: a fake procfs maps this test binary at a
// fixed address, and stacks are built word by word against functions written in assembly
// (dwarf_unwinder_test.cc: alpha, beta, gamma with CFI, framed, no_cfi).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sys/dwarf_unwinder.h"
#include "unit/fixture_tree.h"

extern "C" void rdmascope_unwind_alpha();
extern "C" void rdmascope_unwind_beta();
extern "C" void rdmascope_unwind_gamma();
extern "C" void rdmascope_unwind_framed();
extern "C" void rdmascope_unwind_no_cfi();

namespace rdmascope::sys {

constexpr uint32_t kPid = 4242;
constexpr uint64_t kBase = 0x100000000;      // where the fake maps put this binary
constexpr uint64_t kSpan = 0x10000000;       // 256 MiB: more than its segments span
constexpr uint64_t kStack = 0x7ff000001000;  // the captured rsp
// Opening this 100-MB test binary the first time takes more than the default 2 ms on a busy
// machine: tests that are not about the time budget give plenty.
constexpr UnwindLimits kPatient{.budget = std::chrono::seconds(10)};

// Where the fake process has `function` (this binary at kBase).
inline uint64_t At(void (*function)()) {
  Dl_info info{};
  const auto address = reinterpret_cast<uintptr_t>(function);
  EXPECT_NE(dladdr(reinterpret_cast<void*>(address), &info), 0);
  return kBase + (address - reinterpret_cast<uintptr_t>(info.dli_fbase));
}

inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class DwarfUnwinderTest : public ::testing::Test {
 protected:
  void SetUp() override { MapAt(kPid, kBase, 12345); }

  void MapAt(uint32_t pid, uint64_t base, uint64_t start_ticks, bool root = true) {
    ticks_[pid] = start_ticks;
    const std::filesystem::path dir = procfs_.path() / std::to_string(pid);
    std::filesystem::create_directories(dir);
    if (root && !std::filesystem::is_symlink(dir / "root")) {
      std::filesystem::create_directory_symlink("/", dir / "root");
    }
    // The file's real device and inode: what the unwinder checks the opened file against.
    struct stat status {};
    EXPECT_EQ(stat(self_.c_str(), &status), 0);
    char line[4096];
    std::snprintf(line, sizeof line, "%llx-%llx r-xp 00000000 %x:%x %llu %s\n",
                  static_cast<unsigned long long>(base),
                  static_cast<unsigned long long>(base + kSpan), major(status.st_dev),
                  minor(status.st_dev), static_cast<unsigned long long>(status.st_ino),
                  self_.c_str());
    WriteFile(dir / "maps", line);
    WriteFile(dir / "stat", std::to_string(pid) +
                                " (unwind test) S 1 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 " +
                                std::to_string(start_ticks) + " 1000000 200 0\n");
  }

  // The image the fake procfs runs as `pid` now (exec generation `exec_id`); a pid never
  // mapped gets start time 0, which no stat file holds.
  ImageKey Image(uint32_t pid = kPid, uint32_t exec_id = 0) const {
    const auto it = ticks_.find(pid);
    return ImageOfStartTicks(pid, it != ticks_.end() ? it->second : 0, exec_id);
  }

  // A capture of kPid: rip, rbp, and the stack words from rsp = kStack.
  CapturedStack Capture(uint64_t rip, uint64_t rbp, const std::vector<uint64_t>& words) {
    return CaptureOf(kPid, rip, rbp, words);
  }
  CapturedStack CaptureOf(uint32_t pid, uint64_t rip, uint64_t rbp,
                          const std::vector<uint64_t>& words) {
    bytes_.resize(words.size() * 8);
    if (!words.empty()) std::memcpy(bytes_.data(), words.data(), bytes_.size());  // no null
    CapturedStack captured{.image = Image(pid)};
    captured.regs[kDwarfRip] = rip;
    captured.regs[kDwarfRsp] = kStack;
    captured.regs[kDwarfRbp] = rbp;
    captured.stack = bytes_;
    return captured;
  }

  std::vector<std::string> Names(const UnwoundStack& unwound, uint32_t pid = kPid) {
    std::vector<std::string> names;
    for (const Frame& frame : unwinder_.Symbolize(Image(pid), unwound)) {
      names.push_back(frame.Describe());
    }
    return names;
  }

  testing::TempDir procfs_;
  const std::string self_ = std::filesystem::read_symlink("/proc/self/exe").string();
  DwarfUnwinder unwinder_{procfs_.path()};
  std::vector<uint8_t> bytes_;
  std::map<uint32_t, uint64_t> ticks_;  // by pid: the start time its stat file holds
};

}  // namespace rdmascope::sys
