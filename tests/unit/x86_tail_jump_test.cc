#include "sys/x86_tail_jump.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmascope::sys {
namespace {

// libibverbs 44's ibv_reg_mr@@IBVERBS_1.1 at 0x17a00: mov %ecx,%r8d; mov %rsi,%rcx;
// jmp 0x7320 <ibv_reg_mr_iova2@plt>.
const std::vector<uint8_t> kRegMrForwarder = {0x41, 0x89, 0xc8, 0x48, 0x89, 0xf1,
                                              0xe9, 0x15, 0xf9, 0xfe, 0xff};

TEST(TailJumpTarget, DecodesTheRealForwarder) {
  EXPECT_EQ(TailJumpTarget(kRegMrForwarder, 0x17a00), 0x7320U);
}

TEST(TailJumpTarget, Endbr64AndShortJumps) {
  const std::vector<uint8_t> code = {0xf3, 0x0f, 0x1e, 0xfa, 0x89, 0xf8, 0xeb, 0xf0};
  EXPECT_EQ(TailJumpTarget(code, 0x1000), 0x1000U + 8 - 16);
}

TEST(TailJumpTarget, AnythingButMovesAndOneJumpIsNotAForwarder) {
  // mov (%rdi),%rax reads memory: a compat wrapper such as ibv_dereg_mr@IBVERBS_1.0.
  EXPECT_FALSE(TailJumpTarget(std::vector<uint8_t>{0x48, 0x8b, 0x07, 0xe9, 0, 0, 0, 0}, 0));
  // call rel32: the function does work after the call returns.
  EXPECT_FALSE(TailJumpTarget(std::vector<uint8_t>{0xe8, 0, 0, 0, 0, 0xc3}, 0));
  // push %rbp: a real function body.
  EXPECT_FALSE(TailJumpTarget(std::vector<uint8_t>{0x55, 0x48, 0x89, 0xe5}, 0));
  // Truncated jmp and empty code.
  EXPECT_FALSE(TailJumpTarget(std::vector<uint8_t>{0x89, 0xf8, 0xe9, 0x01}, 0));
  EXPECT_FALSE(TailJumpTarget({}, 0));
  // Only register moves, never a jump.
  EXPECT_FALSE(TailJumpTarget(std::vector<uint8_t>(64, 0x89), 0));
}

TEST(PltGotSlot, ClassicAndIbtStubs) {
  // libibverbs 44's ibv_reg_mr_iova2@plt at 0x7320: jmp *0x1885a(%rip) -> slot 0x1fb80.
  const std::vector<uint8_t> classic = {0xff, 0x25, 0x5a, 0x88, 0x01, 0x00, 0x68, 0x2f};
  EXPECT_EQ(PltGotSlot(classic, 0x7320), 0x1fb80U);
  // .plt.sec: endbr64; bnd jmp *0x100(%rip).
  const std::vector<uint8_t> ibt = {0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x00, 0x01, 0, 0};
  EXPECT_EQ(PltGotSlot(ibt, 0x2000), 0x2000U + 11 + 0x100);
  EXPECT_FALSE(PltGotSlot(std::vector<uint8_t>{0xff, 0x15, 0, 0, 0, 0}, 0)) << "call, not jmp";
  EXPECT_FALSE(PltGotSlot(std::vector<uint8_t>{0xff, 0x25, 0}, 0)) << "truncated";
}

}  // namespace
}  // namespace rdmascope::sys
