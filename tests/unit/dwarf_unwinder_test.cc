// sys::DwarfUnwinder without a live process: a fake procfs maps this test binary at a fixed
// address, and stacks are built word by word against functions written in assembly below (so
// that their code and CFI are known whatever the compiler flags). Real stacks of real programs
// are the host test's (tests/host/dwarf_unwind.py). The fake processes' PID/root is a link to
// "/", through which the ELF cache (sys/elf_cache) finds the binary; without it, libdwfl opens
// the file by its path in the maps.
#include "sys/dwarf_unwinder.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>

// alpha, beta, gamma: `nop; ret` with CFI (at the entry, CFA = rsp + 8 and the return address
// at [rsp]); framed: an rbp frame (after its prologue, CFA = rbp + 16); no_cfi: no FDE at all.
asm(R"(
  .text
  .p2align 4
  .globl rdmascope_unwind_alpha
  .type rdmascope_unwind_alpha, @function
rdmascope_unwind_alpha:
  .cfi_startproc
  nop
  ret
  .cfi_endproc
  .size rdmascope_unwind_alpha, .-rdmascope_unwind_alpha
  .p2align 4
  .globl rdmascope_unwind_beta
  .type rdmascope_unwind_beta, @function
rdmascope_unwind_beta:
  .cfi_startproc
  nop
  ret
  .cfi_endproc
  .size rdmascope_unwind_beta, .-rdmascope_unwind_beta
  .p2align 4
  .globl rdmascope_unwind_gamma
  .type rdmascope_unwind_gamma, @function
rdmascope_unwind_gamma:
  .cfi_startproc
  nop
  ret
  .cfi_endproc
  .size rdmascope_unwind_gamma, .-rdmascope_unwind_gamma
  .p2align 4
  .globl rdmascope_unwind_framed
  .type rdmascope_unwind_framed, @function
rdmascope_unwind_framed:
  .cfi_startproc
  pushq %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  movq %rsp, %rbp
  .cfi_def_cfa_register %rbp
  nop
  nop
  popq %rbp
  .cfi_def_cfa %rsp, 8
  ret
  .cfi_endproc
  .size rdmascope_unwind_framed, .-rdmascope_unwind_framed
  .p2align 4
  .globl rdmascope_unwind_no_cfi
  .type rdmascope_unwind_no_cfi, @function
rdmascope_unwind_no_cfi:
  nop
  nop
  nop
  nop
  ret
  .size rdmascope_unwind_no_cfi, .-rdmascope_unwind_no_cfi
)");

#include "unit/unwind_fixture.h"

namespace rdmascope::sys {
namespace {

// At alpha's entry the return address is at [rsp]; beta+1 and gamma+1 return right after their
// entries, where CFI says the same: each frame takes the next word.
TEST_F(DwarfUnwinderTest, FollowsCfiToTheOutermostFrame) {
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const uint64_t gamma = At(rdmascope_unwind_gamma);
  const UnwoundStack unwound =
      unwinder_.Unwind(Capture(alpha, 0, {beta + 1, gamma + 1, 0}), kPatient);
  EXPECT_EQ(unwound.pcs, (std::vector<uint64_t>{alpha, beta + 1, gamma + 1}));
  EXPECT_EQ(unwound.method, UnwindMethod::kDwarf);
  EXPECT_FALSE(unwound.truncated);
  EXPECT_EQ(unwound.stop_reason, "");
  // The first address is exact (not moved back into the function before alpha).
  EXPECT_EQ(Names(unwound),
            (std::vector<std::string>{"rdmascope_unwind_alpha+0x0", "rdmascope_unwind_beta+0x1",
                                      "rdmascope_unwind_gamma+0x1"}));
}

TEST_F(DwarfUnwinderTest, StopsWhereTheCopyEnds) {
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  // One word: beta's return address would be the second.
  const UnwoundStack unwound = unwinder_.Unwind(Capture(alpha, 0, {beta + 1}), kPatient);
  EXPECT_EQ(unwound.pcs, (std::vector<uint64_t>{alpha, beta + 1}));
  EXPECT_EQ(unwound.method, UnwindMethod::kDwarf);
  EXPECT_TRUE(unwound.truncated);
  EXPECT_EQ(unwound.stop_reason, "stack copy ends");
  // Nothing copied at all: only the instruction pointer.
  const UnwoundStack empty = unwinder_.Unwind(Capture(alpha, 0, {}), kPatient);
  EXPECT_EQ(empty.pcs, std::vector<uint64_t>{alpha});
  EXPECT_EQ(empty.method, UnwindMethod::kNone);
  EXPECT_TRUE(empty.truncated);
}

TEST_F(DwarfUnwinderTest, FrameLimitAndTimeBudget) {
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const uint64_t gamma = At(rdmascope_unwind_gamma);
  const CapturedStack captured = Capture(alpha, 0, {beta + 1, gamma + 1, 0});
  const UnwoundStack two = unwinder_.Unwind(captured, {.max_frames = 2, .budget = kPatient.budget});
  EXPECT_EQ(two.pcs, (std::vector<uint64_t>{alpha, beta + 1}));
  EXPECT_TRUE(two.truncated);
  EXPECT_EQ(two.stop_reason, "frame limit");
  EXPECT_EQ(two.outcome, UnwindOutcome::kFrameLimit);
  // Exactly as many frames as the stack has is no truncation.
  EXPECT_FALSE(unwinder_.Unwind(captured, {.max_frames = 3, .budget = kPatient.budget}).truncated);
  const UnwoundStack none = unwinder_.Unwind(captured, {.budget = std::chrono::microseconds(0)});
  EXPECT_EQ(none.pcs, std::vector<uint64_t>{alpha});
  EXPECT_TRUE(none.truncated);
  EXPECT_EQ(none.stop_reason, "time budget");
  EXPECT_EQ(none.outcome, UnwindOutcome::kTimeBudget);
  EXPECT_EQ(unwinder_.Unwind(captured, kPatient).outcome, UnwindOutcome::kStopped);
}

// After framed's prologue CFA = rbp + 16 and the caller's rbp is at [rbp]: an rbp that points
// to itself gives the same frame again, for ever, as far as libdwfl is concerned.
TEST_F(DwarfUnwinderTest, ARepeatedFrameStops) {
  const uint64_t body = At(rdmascope_unwind_framed) + 4;  // after push %rbp; mov %rsp,%rbp
  const uint64_t rbp = kStack + 16;
  const UnwoundStack unwound =
      unwinder_.Unwind(Capture(body, rbp, {0, 0, rbp, body + 1, 0, 0}), kPatient);
  EXPECT_EQ(unwound.pcs, (std::vector<uint64_t>{body, body + 1}));
  EXPECT_EQ(unwound.stop_reason, "repeated frame");
  EXPECT_FALSE(unwound.truncated);
}

// No FDE covers no_cfi: libdwfl falls back to rbp steps (the x86-64 backend's), and so does
// our own walk; each return address is checked to lie in a module.
TEST_F(DwarfUnwinderTest, FramePointersWithoutCfi) {
  const uint64_t no_cfi = At(rdmascope_unwind_no_cfi);
  const uint64_t first = kStack + 0x10;
  const uint64_t second = kStack + 0x30;
  std::vector<uint64_t> words(8, 0);
  words[2] = second;      // [first]: the caller's rbp
  words[3] = no_cfi + 2;  // [first + 8]: the return address
  words[6] = 0;           // [second]: the outermost frame
  words[7] = no_cfi + 3;
  const CapturedStack captured = Capture(no_cfi + 1, first, words);
  const std::vector<uint64_t> expected{no_cfi + 1, no_cfi + 2, no_cfi + 3};
  const UnwoundStack walked = unwinder_.UnwindFramePointers(captured, kPatient);
  EXPECT_EQ(walked.pcs, expected);
  EXPECT_EQ(walked.method, UnwindMethod::kFramePointer);
  EXPECT_EQ(walked.stop_reason, "");
  const UnwoundStack unwound = unwinder_.Unwind(captured, kPatient);
  EXPECT_EQ(unwound.pcs, expected);
  EXPECT_EQ(unwound.method, UnwindMethod::kFramePointer);
  EXPECT_TRUE(unwound.stop_reason.starts_with("no CFI for " +
                                              std::filesystem::path(self_).filename().string()))
      << unwound.stop_reason;

  // A chain that goes down, or that leaves the modules, stops there.
  words[2] = kStack;  // below `first`
  EXPECT_EQ(unwinder_.UnwindFramePointers(Capture(no_cfi + 1, first, words), kPatient).stop_reason,
            "frame pointer chain broken");
  words[2] = second;
  words[3] = 0x1234;
  const UnwoundStack outside =
      unwinder_.UnwindFramePointers(Capture(no_cfi + 1, first, words), kPatient);
  EXPECT_EQ(outside.pcs, std::vector<uint64_t>{no_cfi + 1});
  EXPECT_EQ(outside.stop_reason, "return address outside any module");
}

// At a function's entry (a uprobe) without CFI: rbp is still the caller's, the return address
// is at [rsp]. libdwfl's rbp step skips that caller; our walk does not, and is taken.
TEST_F(DwarfUnwinderTest, FramePointersAtAFunctionEntry) {
  const uint64_t no_cfi = At(rdmascope_unwind_no_cfi);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const uint64_t gamma = At(rdmascope_unwind_gamma);
  const uint64_t rbp = kStack + 0x10;
  const UnwoundStack unwound =
      unwinder_.Unwind(Capture(no_cfi, rbp, {beta + 1, 0, 0, gamma + 1}), kPatient);
  EXPECT_EQ(unwound.pcs, (std::vector<uint64_t>{no_cfi, beta + 1, gamma + 1}));
  EXPECT_EQ(unwound.method, UnwindMethod::kFramePointer);
  EXPECT_EQ(Names(unwound)[1], "rdmascope_unwind_beta+0x1");
}

TEST_F(DwarfUnwinderTest, ProcessGoneOrReplaced) {
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  CapturedStack captured = Capture(alpha, 0, {beta + 1, 0});
  captured.image = Image(kPid + 1);  // no such directory in the fake procfs
  const UnwoundStack gone = unwinder_.Unwind(captured, kPatient);
  EXPECT_EQ(gone.pcs, std::vector<uint64_t>{alpha});
  EXPECT_EQ(gone.method, UnwindMethod::kNone);
  EXPECT_EQ(gone.stop_reason, "process gone");
  EXPECT_EQ(gone.outcome, UnwindOutcome::kImageGone);
  EXPECT_EQ(unwinder_.Symbolize(Image(kPid + 1), gone).at(0).Describe(), "??");
  // A process without any file mapped (a zombie, a kernel thread) is as good as gone.
  WriteFile(procfs_.path() / "4244" / "maps", "");
  WriteFile(procfs_.path() / "4244" / "stat",
            "4244 (zombie) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 0\n");
  captured.image = ImageOfStartTicks(4244, 777);
  EXPECT_EQ(unwinder_.Unwind(captured, kPatient).outcome, UnwindOutcome::kImageGone);
  // The real procfs: a pid above any pid_max.
  DwarfUnwinder real;
  captured.image = Image(0x7fffffff);
  EXPECT_EQ(real.Unwind(captured, kPatient).stop_reason, "process gone");

  // The pid reused (another start time) by a process with this binary elsewhere: the session
  // of the old one must not be used, nor a new one made for the old image.
  captured.image = Image(kPid);
  EXPECT_EQ(unwinder_.Unwind(captured, kPatient).pcs.size(), 2U);
  constexpr uint64_t kMoved = 0x200000000;
  MapAt(kPid, kMoved, 99999);
  const UnwoundStack replaced = unwinder_.Unwind(captured, kPatient);
  EXPECT_EQ(replaced.pcs, std::vector<uint64_t>{alpha});
  EXPECT_EQ(replaced.outcome, UnwindOutcome::kImageGone);
  captured.image = Image(kPid);  // the new process's image
  captured.regs[kDwarfRip] = alpha - kBase + kMoved;
  std::vector<uint64_t> moved_words{beta - kBase + kMoved + 1, 0};
  std::memcpy(bytes_.data(), moved_words.data(), bytes_.size());
  EXPECT_EQ(unwinder_.Unwind(captured, kPatient).pcs.size(), 2U);
  // Retain() drops it; the next unwind makes a new session.
  unwinder_.Retain({});
  EXPECT_EQ(unwinder_.Unwind(captured, kPatient).pcs.size(), 2U);
}

// An exec keeps the pid, its start time and its pidfd, and replaces every mapping: each image
// is unwound and named with its own modules. Here the "exec" moves the program to another
// address: image 1's session keeps naming image 1's stacks, image 2 gets a session of its
// own from the new maps, and image 1, ended (the probes' answer), gets no new session from
// the maps of image 2.
TEST_F(DwarfUnwinderTest, AnExecIsANewImage) {
  std::set<ImageKey> ended;
  DwarfUnwinder unwinder(
      std::make_shared<LocalProcessAccess>(
          procfs_.path(), nullptr, [&](const ImageKey& image) { return !ended.contains(image); }),
      nullptr);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const ImageKey first = Image(kPid, 1);
  const ImageKey second = Image(kPid, 2);
  ASSERT_NE(first, second);
  ASSERT_EQ(first.start_ns, second.start_ns);
  CapturedStack before = Capture(alpha, 0, {beta + 1, 0});
  before.image = first;
  const UnwoundStack one = unwinder.Unwind(before, kPatient);
  EXPECT_EQ(one.pcs, (std::vector<uint64_t>{alpha, beta + 1}));

  // The exec: same pid, same start time, the program elsewhere.
  constexpr uint64_t kMoved = 0x200000000;
  const uint64_t moved = kMoved - kBase;
  MapAt(kPid, kMoved, 12345);
  ended.insert(first);
  std::vector<uint8_t> after_bytes(16);
  const uint64_t after_words[] = {beta + moved + 1, 0};
  std::memcpy(after_bytes.data(), after_words, sizeof after_words);
  CapturedStack after{.image = second, .regs = {}, .stack = after_bytes};
  after.regs[kDwarfRip] = alpha + moved;
  after.regs[kDwarfRsp] = kStack;
  const UnwoundStack two = unwinder.Unwind(after, kPatient);
  EXPECT_EQ(two.pcs, (std::vector<uint64_t>{alpha + moved, beta + moved + 1}));
  EXPECT_EQ(two.outcome, UnwindOutcome::kStopped);
  const auto names = [&](const ImageKey& image, const std::vector<uint64_t>& pcs) {
    std::vector<std::string> out;
    for (const Frame& frame :
         unwinder.Symbolize(image, pcs, {.first = FirstAddress::kInstructionPointer})) {
      out.push_back(frame.Describe());
    }
    return out;
  };
  const std::vector<std::string> expected{"rdmascope_unwind_alpha+0x0",
                                          "rdmascope_unwind_beta+0x1"};
  EXPECT_EQ(names(second, two.pcs), expected);
  // Image 1's stacks, after the exec, with image 1's modules (its session): never image 2's,
  // where these addresses are nothing.
  EXPECT_EQ(names(first, one.pcs), expected);
  EXPECT_EQ(unwinder.Unwind(before, kPatient).pcs, one.pcs);
  // Image 2's addresses are nothing in image 1.
  EXPECT_EQ(names(first, two.pcs).at(0), "??");

  // Image 1's session dropped: none is made again from image 2's maps.
  unwinder.Retain({second});
  const UnwoundStack late = unwinder.Unwind(before, kPatient);
  EXPECT_EQ(late.pcs, std::vector<uint64_t>{alpha});
  EXPECT_EQ(late.outcome, UnwindOutcome::kImageGone);
  EXPECT_EQ(late.stop_reason, "process gone");
  std::string missing;
  EXPECT_EQ(
      unwinder.Symbolize(first, one.pcs, {.first = FirstAddress::kInstructionPointer}, &missing)
          .at(0)
          .Describe(),
      "??");
  EXPECT_EQ(missing, "process gone");
  EXPECT_EQ(names(second, two.pcs), expected);
}

// One module cache per image serves both jobs, as /debug/mr/stacks uses them (no second
// libdwfl stack, no second reading of a file): naming an unwound stack opens nothing its unwind
// did not, and naming first (the probes' frame-pointer stacks) makes the session the unwind
// then uses.
TEST_F(DwarfUnwinderTest, OneSessionPerImageUnwindsAndNames) {
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const auto opens = [&] { return unwinder_.elf_stats().hits + unwinder_.elf_stats().misses; };
  const std::vector<std::string> expected{"rdmascope_unwind_alpha+0x0",
                                          "rdmascope_unwind_beta+0x1"};
  const UnwoundStack unwound = unwinder_.Unwind(Capture(alpha, 0, {beta + 1, 0}), kPatient);
  ASSERT_EQ(unwound.pcs.size(), 2U);
  EXPECT_EQ(opens(), 1U);
  EXPECT_EQ(Names(unwound), expected);
  EXPECT_EQ(opens(), 1U);

  constexpr uint32_t kOther = kPid + 9;
  MapAt(kOther, kBase, 4321);
  std::vector<std::string> named;
  const std::vector<uint64_t> pcs{alpha, beta + 1};
  for (const Frame& frame :
       unwinder_.Symbolize(Image(kOther), pcs, {.first = FirstAddress::kInstructionPointer})) {
    named.push_back(frame.Describe());
  }
  EXPECT_EQ(named, expected);
  EXPECT_EQ(opens(), 2U);
  EXPECT_EQ(unwinder_.Unwind(CaptureOf(kOther, alpha, 0, {beta + 1, 0}), kPatient).pcs, pcs);
  EXPECT_EQ(opens(), 2U);
}

// What ended a walk is typed for the code that acts on it, and its text is the stable one
// /debug/mr/stacks shows.
TEST(UnwindOutcome, NamesAreStable) {
  EXPECT_STREQ(OutcomeReason(UnwindOutcome::kStopped), "");
  EXPECT_STREQ(OutcomeReason(UnwindOutcome::kFrameLimit), "frame limit");
  EXPECT_STREQ(OutcomeReason(UnwindOutcome::kTimeBudget), "time budget");
  EXPECT_STREQ(OutcomeReason(UnwindOutcome::kImageGone), "process gone");
}

// Two processes of one program (this binary at two addresses): the second session's module
// gets the file the first one mapped, and each unwinds with its own layout.
TEST_F(DwarfUnwinderTest, TwoProcessesOfOneProgramShareItsFile) {
  constexpr uint32_t kTwin = kPid + 7;
  constexpr uint64_t kMoved = 0x300000000;
  MapAt(kTwin, kMoved, 777);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const UnwoundStack first = unwinder_.Unwind(Capture(alpha, 0, {beta + 1, 0}), kPatient);
  EXPECT_EQ(first.pcs, (std::vector<uint64_t>{alpha, beta + 1}));
  const ElfCacheStats after_first = unwinder_.elf_stats();
  EXPECT_EQ(after_first.entries, 1U);
  EXPECT_EQ(after_first.misses, 1U);
  EXPECT_EQ(after_first.hits, 0U);
  EXPECT_EQ(after_first.bytes, std::filesystem::file_size(self_));

  const uint64_t moved = kMoved - kBase;
  const UnwoundStack second =
      unwinder_.Unwind(CaptureOf(kTwin, alpha + moved, 0, {beta + moved + 1, 0}), kPatient);
  EXPECT_EQ(second.pcs, (std::vector<uint64_t>{alpha + moved, beta + moved + 1}));
  EXPECT_EQ(second.method, UnwindMethod::kDwarf);
  EXPECT_EQ(second.stop_reason, "");
  EXPECT_EQ(Names(second, kTwin),
            (std::vector<std::string>{"rdmascope_unwind_alpha+0x0", "rdmascope_unwind_beta+0x1"}));
  const ElfCacheStats after_second = unwinder_.elf_stats();
  EXPECT_EQ(after_second.entries, 1U);
  EXPECT_EQ(after_second.misses, 1U);
  EXPECT_EQ(after_second.hits, 1U);
  EXPECT_EQ(after_second.declined, 0U);
  EXPECT_EQ(after_second.unused, 0U);  // both sessions hold it

  // Sessions dropped: the file waits, unused, for the next process of the program.
  unwinder_.Retain({});
  EXPECT_EQ(unwinder_.elf_stats().unused, 1U);
  EXPECT_EQ(unwinder_.Unwind(Capture(alpha, 0, {beta + 1, 0}), kPatient).pcs.size(), 2U);
  EXPECT_EQ(unwinder_.elf_stats().hits, 2U);
  EXPECT_EQ(unwinder_.elf_stats().unused, 0U);
}

// One cache for two unwinders (one per exporter): the second finds the first's file.
TEST_F(DwarfUnwinderTest, UnwindersShareACache) {
  const auto cache = std::make_shared<ElfCache>();
  DwarfUnwinder one(procfs_.path(), cache);
  DwarfUnwinder two(procfs_.path(), cache);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const CapturedStack captured = Capture(alpha, 0, {beta + 1, 0});
  EXPECT_EQ(one.Unwind(captured, kPatient).pcs.size(), 2U);
  EXPECT_EQ(two.Unwind(captured, kPatient).pcs.size(), 2U);
  EXPECT_EQ(cache->stats().entries, 1U);
  EXPECT_EQ(cache->stats().hits, 1U);
  EXPECT_EQ(two.elf_stats().hits, 1U);
  EXPECT_EQ(unwinder_.elf_stats().entries, 0U);  // the fixture's unwinder has its own
}

// Processes of one program unwound from several threads at once (the sessions of different
// processes run concurrently): each session's own descriptor over the one mapped file.
TEST_F(DwarfUnwinderTest, ThreadsUnwindProcessesOfOneProgramAtOnce) {
  constexpr int kProcesses = 4;
  constexpr int kRounds = 50;
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  for (uint32_t i = 1; i < kProcesses; ++i) MapAt(kPid + 100 + i, kBase + i * kSpan, 1000 + i);
  std::atomic<int> wrong = 0;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < kProcesses; ++i) {
    threads.emplace_back([&, i] {
      const uint32_t pid = i == 0 ? kPid : kPid + 100 + i;
      const uint64_t moved = i * kSpan;
      const std::vector<uint64_t> words{beta + moved + 1, 0};
      std::vector<uint8_t> bytes(words.size() * 8);
      std::memcpy(bytes.data(), words.data(), bytes.size());
      CapturedStack captured{.image = Image(pid)};
      captured.regs[kDwarfRip] = alpha + moved;
      captured.regs[kDwarfRsp] = kStack;
      captured.stack = bytes;
      for (int round = 0; round < kRounds; ++round) {
        const UnwoundStack unwound = unwinder_.Unwind(captured, kPatient);
        const std::vector<Frame> frames = unwinder_.Symbolize(Image(pid), unwound);
        if (unwound.pcs != std::vector<uint64_t>{alpha + moved, beta + moved + 1} ||
            frames.size() != 2 || frames[1].Describe() != "rdmascope_unwind_beta+0x1") {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  const ElfCacheStats stats = unwinder_.elf_stats();
  EXPECT_EQ(stats.entries, 1U);
  // One open per session: a hit, or a miss when sessions map the file at the same moment.
  EXPECT_EQ(stats.hits + stats.misses, static_cast<uint64_t>(kProcesses));
}

// No PID/root to open the file through: no file, never the path of the maps opened in the
// exporter's own namespace (what dwfl_linux_proc_find_elf did). The stop reason says why.
TEST_F(DwarfUnwinderTest, WithoutTheProcessRootNoFileIsOpened) {
  constexpr uint32_t kRootless = kPid + 9;
  MapAt(kRootless, kBase, 888, /*root=*/false);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const UnwoundStack unwound =
      unwinder_.Unwind(CaptureOf(kRootless, alpha, 0, {beta + 1, 0}), kPatient);
  EXPECT_EQ(unwound.pcs, (std::vector<uint64_t>{alpha}));
  EXPECT_NE(unwound.stop_reason.find("file refused"), std::string::npos) << unwound.stop_reason;
  EXPECT_EQ(unwinder_.elf_stats().entries, 0U);
}

// A maps line whose device and inode are not the file's (replaced under its path, or a
// process that lies about nothing but whose file changed): refused, not parsed.
TEST_F(DwarfUnwinderTest, AFileThatIsNotTheMappedOneIsRefused) {
  constexpr uint32_t kLiar = kPid + 11;
  MapAt(kLiar, kBase, 999);
  const std::filesystem::path maps = procfs_.path() / std::to_string(kLiar) / "maps";
  char line[4096];
  std::snprintf(line, sizeof line, "%llx-%llx r-xp 00000000 08:01 4711 %s\n",
                static_cast<unsigned long long>(kBase),
                static_cast<unsigned long long>(kBase + kSpan), self_.c_str());
  WriteFile(maps, line);
  const uint64_t alpha = At(rdmascope_unwind_alpha);
  const uint64_t beta = At(rdmascope_unwind_beta);
  const UnwoundStack unwound =
      unwinder_.Unwind(CaptureOf(kLiar, alpha, 0, {beta + 1, 0}), kPatient);
  EXPECT_EQ(unwound.pcs.size(), 1U);
  EXPECT_NE(unwound.stop_reason.find("not the mapped file"), std::string::npos)
      << unwound.stop_reason;
  std::string missing;
  const std::vector<Frame> frames = unwinder_.Symbolize(
      Image(kLiar), unwound.pcs, {.first = FirstAddress::kInstructionPointer}, &missing);
  EXPECT_EQ(frames.at(0).function, "");
  EXPECT_NE(missing.find("file refused"), std::string::npos) << missing;
}

// Registers and bytes that are anything: no crash, every limit kept, and the first frame is
// always the instruction pointer. Half the words point into the mapped binary, so that CFI
// and the rbp walk get somewhere.
TEST_F(DwarfUnwinderTest, GarbageInputs) {
  std::mt19937_64 random(20261211);
  const auto word = [&](bool plausible) -> uint64_t {
    switch (random() % (plausible ? 4 : 8)) {
      case 0:
        return kBase + random() % 0x400000;
      case 1:
        return kStack + random() % 512;
      case 2:
        return 0;
      default:
        return random();
    }
  };
  size_t deepest = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint64_t> words(random() % 80);
    for (uint64_t& w : words) w = word(true);
    CapturedStack captured = Capture(word(true), word(true), words);
    for (size_t r = 0; r < kDwarfRegisters; ++r) {
      if (r != kDwarfRip && r != kDwarfRsp && r != kDwarfRbp) captured.regs[r] = word(false);
    }
    if (i % 10 == 0) captured.regs[kDwarfRsp] = word(false);  // SP anywhere, even 0
    if (i % 7 == 0) captured.stack = captured.stack.first(random() % (captured.stack.size() + 1));
    const UnwindLimits limits{.max_frames = 1 + random() % 40, .budget = kPatient.budget};
    const UnwoundStack unwound = unwinder_.Unwind(captured, limits);
    ASSERT_FALSE(unwound.pcs.empty());
    EXPECT_EQ(unwound.pcs[0], captured.regs[kDwarfRip]);
    EXPECT_LE(unwound.pcs.size(), limits.max_frames);
    EXPECT_EQ(unwound.method == UnwindMethod::kNone, unwound.pcs.size() == 1);
    if (unwound.truncated) {
      EXPECT_FALSE(unwound.stop_reason.empty());
    }
    EXPECT_EQ(unwound.stop_reason.find("0x7ff"), std::string::npos) << unwound.stop_reason;
    EXPECT_LE(unwinder_.UnwindFramePointers(captured, limits).pcs.size(), limits.max_frames);
    EXPECT_GE(unwinder_.Symbolize(Image(), unwound).size(), unwound.pcs.size());
    deepest = std::max(deepest, unwound.pcs.size());
  }
  EXPECT_GT(deepest, 2U) << "the inputs never got past the second frame: a weak test";
}

TEST(Symbolizer, Demangles) {
  EXPECT_EQ(Demangle("_ZN2ns3fooIiEEvT_"), "void ns::foo<int>(int)");
  EXPECT_EQ(Demangle("main"), "main");
  EXPECT_EQ(Demangle("_Z"), "_Z");  // not a valid mangled name: unchanged
  EXPECT_EQ(Demangle("_Z" + std::string(5000, 'N')), "_Z" + std::string(5000, 'N'));
  // The existing form of frames (function+0xoffset) holds with demangled names too.
  EXPECT_EQ((Frame{.function = "ns::foo<int>(int)", .offset = 0x1c}).Describe(),
            "ns::foo<int>(int)+0x1c");
}

}  // namespace
}  // namespace rdmascope::sys
