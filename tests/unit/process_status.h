// How the unit tests look at the exporter's helper processes (the unwinder worker, the
// capability broker): a field of /proc/PID/status, a thread that cannot kill them as serve's
// threads cannot, and the clean-up of fakes left behind.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

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

// Runs `body` on a thread without CAP_KILL in its effective set (capabilities are per thread),
// as serve's threads run once it has dropped its capabilities; how long it took.
inline std::chrono::steady_clock::duration WithoutCapKill(const std::function<void()>& body) {
  std::chrono::steady_clock::duration took{};
  std::thread([&] {
    cap_t caps = cap_get_proc();
    const cap_value_t kill_cap = CAP_KILL;
    cap_set_flag(caps, CAP_EFFECTIVE, 1, &kill_cap, CAP_CLEAR);
    ASSERT_EQ(cap_set_proc(caps), 0);
    cap_free(caps);
    const auto start = std::chrono::steady_clock::now();
    body();
    took = std::chrono::steady_clock::now() - start;
  }).join();
  return took;
}

// SIGKILL to every process whose command line (NUL-separated) starts with `prefix`.
inline void KillByCommandLine(std::string_view prefix) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string text((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    if (text.starts_with(prefix)) kill(std::stoi(entry.path().filename().string()), SIGKILL);
  }
}

}  // namespace rdmascope
