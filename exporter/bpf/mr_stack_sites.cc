#include "bpf/mr_stack_sites.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/log.h"
#include "core/sysfs.h"
#include "mr.h"

namespace rdmascope {
namespace {

std::optional<uint64_t> Hex(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

uint64_t BytesOf(const MrUnwoundSite& site) {
  return site.pcs.size() * sizeof(uint64_t) + site.stop_reason.size() + sizeof(site);
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> ExecutableRanges(std::string_view maps,
                                                            size_t max_ranges) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  while (!maps.empty()) {
    const size_t newline = maps.find('\n');
    const std::string_view line = maps.substr(0, newline);
    maps = newline == std::string_view::npos ? std::string_view{} : maps.substr(newline + 1);
    // "start-end perms offset dev inode path"
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash == std::string_view::npos || space == std::string_view::npos || dash > space ||
        line.size() < space + 5) {
      continue;
    }
    if (line[space + 3] != 'x') continue;  // "r-xp": the third permission
    const auto start = Hex(line.substr(0, dash));
    const auto end = Hex(line.substr(dash + 1, space - dash - 1));
    if (!start || !end || *end <= *start) continue;
    ranges.emplace_back(*start, *end);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  // Too many (a program with hundreds of libraries): join the closest neighbours. The gaps
  // joined hold the libraries' data: pointers into it then count as code in the site hash,
  // which can only split sites (they are the same for one call path), never merge two.
  while (max_ranges > 0 && merged.size() > max_ranges) {
    size_t closest = 0;
    for (size_t i = 1; i + 1 < merged.size(); ++i) {
      if (merged[i + 1].first - merged[i].second <
          merged[closest + 1].first - merged[closest].second) {
        closest = i;
      }
    }
    merged[closest].second = merged[closest + 1].second;
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(closest) + 1);
  }
  return merged;
}

MrStackSites::MrStackSites(MrStackSitesOptions options, std::filesystem::path procfs,
                           int code_ranges_fd, int sites_seen_fd)
    : options_(options),
      procfs_(std::move(procfs)),
      code_ranges_fd_(code_ranges_fd),
      sites_seen_fd_(sites_seen_fd),
      unwinder_(std::make_unique<sys::DwarfUnwinder>(procfs_)) {}

MrStackSites::~MrStackSites() = default;

void MrStackSites::Add(const void* data, size_t size) {
  constexpr size_t kHeader = offsetof(mr_stack_sample, data);
  if (size < kHeader) return;
  mr_stack_sample header;
  std::memcpy(&header, data, kHeader);
  const size_t stack_bytes = std::min<size_t>({header.size, size - kHeader, MR_STACK_COPY_MAX});
  std::lock_guard lock(mutex_);
  if (stats_.pending_bytes + stats_.unwound_bytes + stack_bytes > options_.max_bytes) {
    ++stats_.dropped_memory;
    return;
  }
  Pending pending{.image = {header.tgid, header.exec_id, header.proc_start_ns},
                  .site = header.site,
                  .regs = {},
                  .stack = {}};
  std::copy(std::begin(header.regs), std::end(header.regs), pending.regs.begin());
  const auto* bytes = static_cast<const uint8_t*>(data) + kHeader;
  pending.stack.assign(bytes, bytes + stack_bytes);
  stats_.pending_bytes += stack_bytes;
  // An image's first sample: its code ranges go to the probes now rather than after the
  // unwind (0.3 ms cold), since until then each of its registrations is a sample of its own.
  InstallRanges(pending.image, false);
  pending_.push_back(std::move(pending));
}

void MrStackSites::InstallRanges(const Image& image, bool refresh) {
  auto& [generation, ranges] = ranges_[image];
  if (!ranges.empty() && !refresh) return;
  // Reading /proc/PID/maps under mutex_: one file per image, at its first sample and when
  // a library was loaded since; kept short.
  const auto maps = sysfs::ReadFile(procfs_ / std::to_string(std::get<0>(image)) / "maps", 8 << 20);
  if (!maps) return;
  auto fresh = ExecutableRanges(*maps, MR_CODE_RANGES);
  if (fresh.empty() || fresh == ranges) return;
  ranges = std::move(fresh);
  ++generation;
  if (code_ranges_fd_ < 0) return;
  mr_code_ranges value{};
  value.count = static_cast<uint32_t>(ranges.size());
  value.generation = generation;
  for (size_t i = 0; i < ranges.size(); ++i) {
    value.start[i] = ranges[i].first;
    value.end[i] = ranges[i].second;
  }
  const mr_proc_key key{
      .tgid = std::get<0>(image), .exec_id = std::get<1>(image), .start_ns = std::get<2>(image)};
  if (bpf_map_update_elem(code_ranges_fd_, &key, &value, BPF_ANY) != 0) {
    log::Debug("mr stacks: cannot write code ranges", {{"err", std::strerror(errno)}});
  }
}

void MrStackSites::Process(Wait wait) {
  // One caller unwinds at a time (the poller, or a request); the lock on the figures is
  // held only between stacks, so a scrape reading them never waits for an unwind.
  std::unique_lock worker(process_mutex_, std::defer_lock);
  if (wait == Wait::kYes) {
    worker.lock();
  } else if (!worker.try_lock()) {
    return;  // another caller is at it
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options_.unwind_budget;
  while (std::chrono::steady_clock::now() < deadline) {
    Pending sample;
    std::vector<std::pair<uint64_t, uint64_t>> known;
    {
      std::lock_guard lock(mutex_);
      if (pending_.empty()) break;
      sample = std::move(pending_.front());
      pending_.pop_front();
      stats_.pending_bytes -= sample.stack.size();
      known = ranges_[sample.image].second;
    }
    const uint32_t pid = std::get<0>(sample.image);
    const sys::CapturedStack captured{.pid = pid, .regs = sample.regs, .stack = sample.stack};
    sys::UnwoundStack unwound = unwinder_->Unwind(captured, options_.limits);
    // Code outside the ranges the probes hash with (or none yet: the image's first sample,
    // or a library loaded since): (re)write them, so that its sites are told apart and sent
    // once from now on.
    const bool outside = known.empty() || std::ranges::any_of(unwound.pcs, [&](uint64_t pc) {
                           return !std::ranges::any_of(known, [&](const auto& range) {
                             return pc >= range.first && pc < range.second;
                           });
                         });
    std::lock_guard lock(mutex_);
    if (unwound.stop_reason == "time budget" && sample.tries < options_.retries) {
      ++sample.tries;
      stats_.pending_bytes += sample.stack.size();
      pending_.push_back(std::move(sample));
      continue;
    }
    ++stats_.unwound;
    if (unwound.stop_reason == "process gone") {
      ++stats_.dropped_gone;
      continue;
    }
    if (outside) InstallRanges(sample.image, true);
    MrUnwoundSite site{.pcs = std::move(unwound.pcs),
                       .method = unwound.method,
                       .truncated = unwound.truncated,
                       .stop_reason = std::move(unwound.stop_reason)};
    auto [it, inserted] = sites_.try_emplace({sample.image, sample.site}, std::move(site));
    if (inserted) {
      stats_.unwound_bytes += BytesOf(it->second);
      candidates_.erase(it->first);
    }
  }
  std::lock_guard lock(mutex_);
  stats_.unwind_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

std::optional<MrUnwoundSite> MrStackSites::Find(const Image& image, uint64_t site) const {
  std::lock_guard lock(mutex_);
  const auto it = sites_.find({image, site});
  if (it == sites_.end()) return std::nullopt;
  return it->second;
}

void MrStackSites::Forget(const SiteKey& key) {
  const auto it = sites_.find(key);
  if (it == sites_.end()) return;
  stats_.unwound_bytes -= BytesOf(it->second);
  sites_.erase(it);
  if (sites_seen_fd_ < 0 || (key.second & MR_SITE_UNIQUE)) return;
  // The probes must send this site again if it registers again.
  const mr_site_key seen{.tgid = std::get<0>(key.first),
                         .exec_id = std::get<1>(key.first),
                         .start_ns = std::get<2>(key.first),
                         .site = key.second};
  bpf_map_delete_elem(sites_seen_fd_, &seen);
}

void MrStackSites::Collect(const std::set<SiteKey>& referenced) {
  std::lock_guard lock(mutex_);
  std::set<SiteKey> unreferenced;
  std::vector<SiteKey> doomed;
  for (const auto& [key, site] : sites_) {
    if (referenced.contains(key)) continue;
    if (candidates_.contains(key)) {
      doomed.push_back(key);
    } else {
      unreferenced.insert(key);
    }
  }
  for (const SiteKey& key : doomed) Forget(key);
  candidates_ = std::move(unreferenced);
}

void MrStackSites::DropImages(const std::vector<Image>& images) {
  std::lock_guard lock(mutex_);
  const struct Retain {
    MrStackSites& sites;
    ~Retain() { sites.RetainLiveSessions(); }
  } retain{*this};
  for (const Image& image : images) {
    std::vector<SiteKey> doomed;
    for (auto it = sites_.lower_bound({image, 0}); it != sites_.end() && it->first.first == image;
         ++it) {
      doomed.push_back(it->first);
    }
    for (const SiteKey& key : doomed) {
      Forget(key);
      candidates_.erase(key);
    }
    std::erase_if(pending_, [&](const Pending& sample) {
      if (sample.image != image) return false;
      stats_.pending_bytes -= sample.stack.size();
      return true;
    });
    if (ranges_.erase(image) > 0 && code_ranges_fd_ >= 0) {
      const mr_proc_key key{.tgid = std::get<0>(image),
                            .exec_id = std::get<1>(image),
                            .start_ns = std::get<2>(image)};
      bpf_map_delete_elem(code_ranges_fd_, &key);
    }
  }
}

void MrStackSites::RetainLiveSessions() {
  // The unwinder's per-process sessions (ELF files, CFI) of processes that ended go with them.
  std::vector<uint32_t> live;
  for (const auto& [image, ranges] : ranges_) live.push_back(std::get<0>(image));
  for (const Pending& sample : pending_) live.push_back(std::get<0>(sample.image));
  unwinder_->Retain(live);
}

MrStackSitesStats MrStackSites::stats() const {
  std::lock_guard lock(mutex_);
  MrStackSitesStats out = stats_;
  out.sites = sites_.size();
  return out;
}

}  // namespace rdmascope
