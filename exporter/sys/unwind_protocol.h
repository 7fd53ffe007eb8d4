// The messages between the exporter and its sandboxed unwinder worker (sys/unwind_client.h,
// sys/unwind_worker.h), on a SOCK_SEQPACKET socketpair: one message per datagram, at most one
// file descriptor with it (SCM_RIGHTS). The parent asks (unwind, symbolize, retain, stats); while
// it works the worker asks back what only the parent may read (a process's start time, maps,
// files: sys/process_access.h) and the parent answers, until the worker's result comes.
//
// Both ends are the same binary, so the encoding is plain: little-endian integers, strings and
// byte strings prefixed by their u32 length. Every read is bounds-checked all the same: the
// parent treats the worker's bytes as hostile (it parsed a tenant's files), and a malformed
// message is the worker's death, not the parent's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/image_key.h"
#include "sys/untrusted_files.h"

namespace rdmascope::sys::unwind_protocol {

enum class Type : uint32_t {
  // parent -> worker
  // An image is its tgid, exec generation and start_ns (sys/image_key.h); "start ticks" is
  // the parent's reading of its process's start time now (0: gone).
  kUnwind = 1,     // image, start ticks, 17 registers, max_frames, budget_ns, stack bytes
  kSymbolize = 2,  // image, start ticks, first, inline_frames, budget_ns, addresses
  kRetain = 3,     // images
  kAccessReply = 4,
  // worker -> parent
  kReady = 16,  // the sandbox's layers, as text: what was set up, what was refused and why
  kAccess = 17,
  kUnwound = 18,  // pcs, method, truncated, stop_reason, outcome
  kSymbols = 19,  // frames, missing
  kRetained = 20,
  // The capability broker's messages (sys/capability_broker.h), in the same encoding.
  kBrokerRequest = 32,  // op, then its arguments
  kBrokerReply = 33,    // errno (0: done), error text, the answer; a descriptor for opens
};

// What the worker asks its parent (ProcessAccess's calls).
enum class AccessOp : uint32_t {
  kStartTicks = 1,    // pid -> u64 (0: gone)
  kStillRunning = 2,  // pid, start ticks -> u8
  kMaps = 3,          // image -> errno, and the text in a memfd (a process may have 100k lines)
  // pid, start, end, offset, device, inode, path -> error, or "" then u8 only-root-can-write
  // (the parent's fstat: the worker's user namespace hides owners) with the fd.
  kOpenMapping = 4,
  // 5 was kOpenInRoot (pid, path): a path of the worker's choosing, each debug-file candidate
  // a round trip. The worker now names the module and the parent computes the candidates.
  // pid, mapped path, build id, debuglink name ("": none), first candidate -> error ("": an fd
  // comes with it), the index of the candidate opened (sys/debug_files.h), and when an fd
  // comes, u8 only-root-can-write as kOpenMapping's.
  kOpenDebugFile = 6,
};

// The largest message either way: a stack copy (16 KiB at most) and its registers, or 127
// frames with their names. Names are cut at kMaxName.
inline constexpr size_t kMaxMessage = 256 * 1024;
inline constexpr size_t kMaxName = 4096;
inline constexpr size_t kMaxItems = 4096;      // addresses or frames in one message
inline constexpr size_t kMaxRetained = 16000;  // images in one kRetain (16 bytes each)
inline constexpr size_t kMaxBuildId = 64;      // bytes (sys/untrusted_files.h BuildIdDebugPath)
inline constexpr size_t kMaxDebuglink = 255;   // a file name (IsPlainDebuglinkName)

class Writer {
 public:
  explicit Writer(Type type) { U32(static_cast<uint32_t>(type)); }
  Writer& U8(uint8_t value);
  Writer& U32(uint32_t value);
  Writer& U64(uint64_t value);
  Writer& Bytes(std::span<const uint8_t> bytes);
  Writer& String(std::string_view text);
  Writer& Image(const ImageKey& image);  // tgid, exec_id, start_ns
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads a message; once a read fails (past the end, a length above its bound) every later one
// fails too, and ok() is false.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint8_t U8();
  uint32_t U32();
  uint64_t U64();
  std::span<const uint8_t> Bytes(size_t max_size);
  std::string String(size_t max_size = kMaxName);
  ImageKey Image();
  // All of it read, nothing left over.
  bool ok() const { return ok_; }
  bool done() const { return ok_ && at_ == bytes_.size(); }
  size_t remaining() const { return ok_ ? bytes_.size() - at_ : 0; }

 private:
  bool Take(size_t size);
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
  bool ok_ = true;
};

struct Message {
  Type type{};
  std::vector<uint8_t> body;  // after the type
  UniqueFd fd;                // the descriptor sent with it, if any
};

// Sends a message and, when `fd` >= 0, a duplicate of that descriptor with it. False when the
// peer is gone (EPIPE: MSG_NOSIGNAL, no SIGPIPE) or the message is too large.
bool Send(int socket, const Writer& message, int fd = -1);
// The next message; an error when the peer closed, the message was truncated (larger than
// kMaxMessage), carried more than one descriptor, or is shorter than its type. Blocks.
std::expected<Message, std::string> Receive(int socket);

// The maps text in a sealed memfd, and back (bounded by `max_bytes`).
std::expected<UniqueFd, std::string> TextToMemfd(std::string_view text);
std::expected<std::string, std::string> TextFromFd(int fd, size_t max_bytes);

}  // namespace rdmascope::sys::unwind_protocol
