#include "sys/local_exporter.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace rdmascope {
namespace {

// Local addresses of /proc/net/tcp{,6} (hex, in the kernel's byte order for each 32-bit word)
// a connection to 127.0.0.1 lands on: 127.0.0.1 itself, the IPv4 wildcard, the IPv6 wildcard
// (dual-stack) and ::ffff:127.0.0.1.
bool ReachedFromLoopback(const std::string& address) {
  static const std::set<std::string> kAddresses = {"0100007F", "00000000",
                                                   "00000000000000000000000000000000",
                                                   "0000000000000000FFFF00000100007F"};
  return kAddresses.contains(address);
}

constexpr const char* kListenState = "0A";  // TCP_LISTEN in include/net/tcp_states.h

// Inodes of the sockets listening on `port` reachable from 127.0.0.1, per
// Documentation/networking/proc_net_tcp.rst: "sl local_address rem_address st ... inode".
std::set<std::string> ListeningInodes(const std::string& procfs, int port) {
  std::set<std::string> inodes;
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04X", static_cast<unsigned>(port));
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(procfs + table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
            timeout >> inode)) {
        continue;
      }
      const size_t colon = local.find(':');
      if (colon == std::string::npos || state != kListenState) continue;
      if (local.substr(colon + 1) == port_hex && ReachedFromLoopback(local.substr(0, colon))) {
        inodes.insert(inode);
      }
    }
  }
  return inodes;
}

// The first field of /proc/PID/status's `Uid:` line and the others: real, effective, saved,
// filesystem. All must be 0.
bool RunsAsRoot(const std::string& proc_dir) {
  std::ifstream in(proc_dir + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("Uid:")) continue;
    std::istringstream fields(line.substr(4));
    std::string uid;
    int seen = 0;
    while (fields >> uid) {
      if (uid != "0") return false;
      ++seen;
    }
    return seen == 4;
  }
  return false;
}

std::string ReadLink(const std::string& path) {
  char target[4096];
  const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

bool IsPid(const char* name) {
  for (const char* c = name; *c != '\0'; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(*c))) return false;
  }
  return *name != '\0';
}

}  // namespace

std::expected<void, std::string> VerifyLocalExporter(int port, const std::string& procfs) {
  const std::set<std::string> inodes = ListeningInodes(procfs, port);
  if (inodes.empty()) return std::unexpected("nothing listens on port " + std::to_string(port));
  std::set<std::string> held;  // inodes whose holder was checked
  DIR* proc = opendir(procfs.c_str());
  if (proc == nullptr) return std::unexpected("cannot read " + procfs);
  std::string refusal;
  while (const dirent* entry = readdir(proc)) {
    if (!IsPid(entry->d_name)) continue;
    const std::string dir = procfs + "/" + entry->d_name;
    DIR* fds = opendir((dir + "/fd").c_str());
    if (fds == nullptr) continue;  // gone, or another user's without the privilege to look
    bool holds = false;
    while (const dirent* fd = readdir(fds)) {
      const std::string target = ReadLink(dir + "/fd/" + fd->d_name);
      // "socket:[INODE]" (fs/proc/fd.c through the socket's d_dname).
      if (target.starts_with("socket:[") && target.ends_with("]") &&
          inodes.contains(target.substr(8, target.size() - 9))) {
        holds = true;
        held.insert(target.substr(8, target.size() - 9));
      }
    }
    closedir(fds);
    if (!holds) continue;
    std::string exe = ReadLink(dir + "/exe");
    if (exe.ends_with(" (deleted)")) exe.resize(exe.size() - 10);  // upgraded in place
    const std::string name = exe.substr(exe.rfind('/') + 1);
    if (!RunsAsRoot(dir)) {
      refusal = "pid " + std::string(entry->d_name) + " (" + exe + ") holding it is not root";
    } else if (name != "rdmascope") {
      refusal = "pid " + std::string(entry->d_name) + " holding it runs " +
                (exe.empty() ? std::string("an unknown program") : exe) + ", not rdmascope";
    }
    if (!refusal.empty()) break;
  }
  closedir(proc);
  if (!refusal.empty()) return std::unexpected(refusal);
  if (held != inodes) {
    return std::unexpected("cannot tell which process listens on port " + std::to_string(port) +
                           " (doctor needs root to look into other processes' descriptors)");
  }
  return {};
}

}  // namespace rdmascope
