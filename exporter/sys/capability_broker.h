// The capability broker (issue 37, item 3): the only process of `serve` that holds
// CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH. CAP_SYS_PTRACE passes every PTRACE_MODE check,
// PTRACE_ATTACH included, so a process holding it can write any process's memory: the process
// that parses HTTP requests, stats files and tenants' ELF files must not have it. `serve`
// spawns the broker before it drops its own capabilities; the broker keeps those two (of what
// `serve` was started with) and nothing else, and answers sys/privileged_procfs.h's fixed set
// of questions about other users' processes. Opens are answered with a descriptor (the kernel
// checks permission at open; reading needs none), listings with their text.
//
// The broker confines itself before it reads a request:
//   uid          root's broker becomes nobody (65534), keeping the two capabilities: no file
//                of root's is its own to write (an exporter that is not root keeps its uid)
//   capabilities permitted = effective = the two; inheritable, ambient emptied; the bounding
//                set reduced to them (with CAP_SETPCAP, i.e. as root)
//   no_new_privs no execve gives anything back
//   dumpable     no core dump, no ptrace of it by the user it runs as
//   rlimits      no new process, no file written, no core, few descriptors
//   seccomp      an allow-list: reads, listings, opens for reading only, the protocol. Any
//                other call fails with EPERM (not a kill: a broker cannot be restarted once
//                `serve` has dropped the capabilities it would need, so a call a newer libc
//                makes must fail one request, not blind the exporter); ptrace(2),
//                process_vm_writev(2), kill(2) and every open for writing are refused.
// Requests are bounded (pids, paths, counts) and checked; a malformed one gets an error. The
// broker ends when `serve` does (its socket closes; PR_SET_PDEATHSIG as a backstop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/capabilities.h"
#include "sys/privileged_procfs.h"
#include "sys/unwind_protocol.h"

namespace rdmascope::sys {

// What the broker can be asked (the request's first word).
enum class BrokerOp : uint32_t {
  kMaps = 1,           // pid -> a descriptor of PID/maps
  kOpenMapping = 2,    // pid, start, end, offset, device, inode, path -> a descriptor
  kOpenInRoot = 3,     // pid, path -> a descriptor
  kNamespaces = 4,     // kind, pids -> link texts
  kUverbsHolders = 5,  // -> (pid, uverbsN) pairs
};

// The two capabilities the broker may hold; any other is refused.
caps::CapabilitySet BrokerCapabilities();

struct CapabilityBrokerStats {
  bool up = false;
  std::map<std::string, uint64_t> requests;  // by op name, answered or not
  uint64_t failed = 0;                       // requests the broker did not answer
};

class CapabilityBroker final : public PrivilegedProcfs {
 public:
  // Spawns `program __capability-broker PARENT_PID CAPS` and waits (up to `timeout`) for it to
  // say what it holds. `keep` must be a subset of BrokerCapabilities().
  static std::expected<std::shared_ptr<CapabilityBroker>, std::string> Start(
      const std::string& program, const caps::CapabilitySet& keep,
      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~CapabilityBroker() override;
  CapabilityBroker(const CapabilityBroker&) = delete;
  CapabilityBroker& operator=(const CapabilityBroker&) = delete;

  std::expected<std::string, int> Maps(uint32_t pid, size_t max_bytes) override;
  std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                     const MappedFile& mapping) override;
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t pid, std::string_view path) override;
  std::vector<std::optional<std::string>> Namespaces(NamespaceKind kind,
                                                     std::span<const uint32_t> pids) override;
  std::expected<UverbsHolderMap, std::string> UverbsHolders() override;
  // Another process answers, with capabilities this one dropped.
  bool InThisProcess() const override { return false; }

  pid_t pid() const { return pid_; }
  // The broker's own account of its confinement: "layer=1" / "layer=0 (why)" lines, and
  // "held=cap_a,cap_b".
  const std::string& layers() const { return layers_; }
  // The same, parsed: layer -> entered; and the capabilities it holds ("cap_dac_read_search,...").
  const std::map<std::string, bool>& confinement() const { return confinement_; }
  const std::string& held() const { return held_; }
  CapabilityBrokerStats stats() const;

 private:
  CapabilityBroker(pid_t pid, int socket, std::string layers, std::chrono::milliseconds timeout);
  struct Reply;
  // One request and its reply, under mutex_; a broker that does not answer within timeout_,
  // or answers with something else, is killed and stays gone.
  std::expected<Reply, std::string> Ask(BrokerOp op, const unwind_protocol::Writer& request);
  static std::expected<OpenedFile, std::string> Opened(Reply reply);
  void StopLocked(const std::string& why);

  mutable std::mutex mutex_;
  pid_t pid_ = -1;
  int socket_ = -1;
  std::string layers_;
  std::map<std::string, bool> confinement_;
  std::string held_;
  const std::chrono::milliseconds timeout_;
  CapabilityBrokerStats stats_;
};

// `rdmascope __capability-broker PARENT_PID CAPS`: the socket is descriptor 3. Confines itself,
// says so, then answers until the socket closes.
int CapabilityBrokerMain(int argc, char** argv);

}  // namespace rdmascope::sys
