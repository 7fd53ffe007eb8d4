// Benchmark helper (issue #17): the prometheus-cpp floor. Serves, through prometheus-cpp-pull's
// Exposer (civetweb, gzip when asked), one gauge per series of a Prometheus text exposition
// file, with the file's metric names, labels and values: the same series count and label shape
// as the exporter's output it was captured from. exposer_* series in the file are skipped: the
// Exposer exports its own. Runs until SIGTERM or SIGINT.
//
// Usage: serve_floor EXPOSITION_FILE LISTEN_ADDRESS (e.g. 127.0.0.1:19632)
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace {

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// One sample line: name{a="x",b="y"} value [timestamp]. Returns nothing for a line it cannot
// read (the caller counts those).
std::optional<Series> ParseLine(std::string_view line) {
  Series s;
  std::size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') {
    ++i;
  }
  s.name = std::string(line.substr(0, i));
  if (s.name.empty()) {
    return std::nullopt;
  }
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const std::size_t eq = line.find('=', i);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
        return std::nullopt;
      }
      std::string key(line.substr(i, eq - i));
      std::string value;
      std::size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size()) {
          ++j;
          value.push_back(line[j] == 'n' ? '\n' : line[j]);
        } else {
          value.push_back(line[j]);
        }
      }
      if (j >= line.size()) {
        return std::nullopt;
      }
      s.labels.emplace(std::move(key), std::move(value));
      i = j + 1;
      if (i < line.size() && line[i] == ',') {
        ++i;
      }
    }
    if (i >= line.size()) {
      return std::nullopt;
    }
    ++i;  // '}'
  }
  const std::string rest(line.substr(i));
  char* end = nullptr;
  s.value = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str()) {
    return std::nullopt;
  }
  return s;
}

int Serve(const char* file, const char* address) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "serve_floor: cannot read %s\n", file);
    return 1;
  }
  auto registry = std::make_shared<prometheus::Registry>();
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> families;
  std::size_t series = 0;
  std::size_t unreadable = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#' || line.rfind("exposer_", 0) == 0) {
      continue;
    }
    const auto parsed = ParseLine(line);
    if (!parsed) {
      ++unreadable;
      continue;
    }
    auto [it, added] = families.try_emplace(parsed->name, nullptr);
    if (added) {
      it->second = &prometheus::BuildGauge().Name(parsed->name).Help("floor").Register(*registry);
    }
    it->second->Add(parsed->labels).Set(parsed->value);
    ++series;
  }
  if (series == 0) {
    std::fprintf(stderr, "serve_floor: no series in %s (%zu unreadable lines)\n", file, unreadable);
    return 1;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before the Exposer starts its threads
  prometheus::Exposer exposer(address);
  exposer.RegisterCollectable(registry);
  std::fprintf(stderr, "serve_floor: %zu series in %zu families on %s (%zu unreadable lines)\n",
               series, families.size(), address, unreadable);
  int received = 0;
  sigwait(&signals, &received);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s EXPOSITION_FILE LISTEN_ADDRESS\n", argv[0]);
    return 2;
  }
  try {
    return Serve(argv[1], argv[2]);
  } catch (const std::exception& e) {  // a bad metric name, or the address in use
    std::fprintf(stderr, "serve_floor: %s\n", e.what());
    return 1;
  }
}
