// A field of /proc/PID/status as the kernel prints it ("Seccomp:\t2" -> "2"): how the unit
// tests check the sandboxes of the exporter's helper processes.
#pragma once

#include <sys/types.h>

#include <fstream>
#include <string>

namespace rdmascope {

inline std::string StatusField(pid_t pid, const std::string& name) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with(name + ":")) {
      const size_t value = line.find_first_not_of(" \t", name.size() + 1);
      return value == std::string::npos ? "" : line.substr(value);
    }
  }
  return "";
}

}  // namespace rdmascope
