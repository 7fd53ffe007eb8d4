// Recognises x86-64 functions that only forward their arguments to another function.
//
// libibverbs' ibv_reg_mr@@IBVERBS_1.1 and ibv_reg_mr_iova are three instructions: shuffle
// argument registers, then `jmp ibv_reg_mr_iova2@plt`. A uprobe on such a forwarder costs a
// trap (and a uretprobe a second one) for a call the inner probe sees anyway, so the MR probe
// skips forwarders whose target it also probes. The decoder accepts only what a forwarder is
// made of (endbr64, register-to-register moves, one jmp): anything else is "not a forwarder",
// and the function is probed as before. Wrong answers can only add probes, never remove one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace rdmascope::sys {

// The address a forwarder jumps to, if `code` (the function's bytes, loaded at `address`) is
// register moves followed by an unconditional jmp.
std::optional<uint64_t> TailJumpTarget(std::span<const uint8_t> code, uint64_t address);

// The GOT slot a PLT stub jumps through (`jmp *slot(%rip)`, with or without the endbr64 and
// bnd prefixes of .plt.sec), for a stub loaded at `address`.
std::optional<uint64_t> PltGotSlot(std::span<const uint8_t> stub, uint64_t address);

}  // namespace rdmascope::sys
