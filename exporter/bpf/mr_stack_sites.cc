#include "bpf/mr_stack_sites.h"

#include <bpf/bpf.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "bpf/mr_image_key.h"
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
  uint64_t bytes = site.pcs.size() * sizeof(uint64_t) + site.stop_reason.size() + sizeof(site) +
                   site.symbols.missing.size();
  for (const sys::Frame& frame : site.symbols.frames) {
    bytes += sizeof frame + frame.function.size() + frame.module.size();
  }
  return bytes;
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
  // Joining a gap leaves the others as they are, so the smallest gaps (the lower address
  // first among equal ones) are joined in one pass: a sort, not a scan per join.
  if (max_ranges == 0 || merged.size() <= max_ranges) return merged;
  std::vector<size_t> gaps(merged.size() - 1);  // gap i: between ranges i and i + 1
  for (size_t i = 0; i < gaps.size(); ++i) gaps[i] = i;
  const auto width = [&](size_t i) { return merged[i + 1].first - merged[i].second; };
  const size_t joins = merged.size() - max_ranges;
  std::nth_element(
      gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(joins - 1), gaps.end(),
      [&](size_t a, size_t b) { return width(a) != width(b) ? width(a) < width(b) : a < b; });
  std::vector<bool> joined(gaps.size(), false);
  for (size_t i = 0; i < joins; ++i) joined[gaps[i]] = true;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.reserve(max_ranges);
  for (size_t i = 0; i < merged.size(); ++i) {
    if (i > 0 && joined[i - 1]) {
      out.back().second = merged[i].second;
    } else {
      out.push_back(merged[i]);
    }
  }
  return out;
}

StackBytes::StackBytes(const uint8_t* bytes, size_t size) {
  if (size == 0) return;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (size + page - 1) / page * page;
  void* address = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) return;  // an empty copy: the stack unwinds to its first frame
  // Out of core dumps (mm/madvise.c: VM_DONTDUMP); PR_SET_DUMPABLE 0 in serve prevents them
  // anyway, this holds for a dump made by other means (gcore of a dumpable test build).
  madvise(address, mapped, MADV_DONTDUMP);
  data_ = static_cast<uint8_t*>(address);
  size_ = size;
  mapped_ = mapped;
  std::memcpy(data_, bytes, size);
}

StackBytes::~StackBytes() { Free(); }

StackBytes::StackBytes(StackBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

StackBytes& StackBytes::operator=(StackBytes&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void StackBytes::Free() {
  if (data_ == nullptr) return;
  explicit_bzero(data_, size_);  // not elided as a dead store before munmap
  munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

MrStackSites::MrStackSites(MrStackSitesOptions options, std::filesystem::path procfs,
                           int code_ranges_fd, int sites_seen_fd)
    : options_(options),
      procfs_(std::move(procfs)),
      code_ranges_fd_(code_ranges_fd),
      sites_seen_fd_(sites_seen_fd),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!options_.privileged) options_.privileged = std::make_shared<sys::DirectProcfs>(procfs_);
  if (options_.sandboxed_worker && procfs_ == "/proc") {
    auto worker = std::make_unique<sys::UnwindClient>(
        std::make_shared<sys::LocalProcessAccess>(procfs_, options_.privileged,
                                                  options_.image_current),
        options_.worker);
    worker_ = worker.get();
    unwinder_ = std::move(worker);
    worker_->Start();  // now: its sandbox is known (and logged) before the first stack
  } else {
    unwinder_ = std::make_unique<sys::DwarfUnwinder>(
        std::make_shared<sys::LocalProcessAccess>(procfs_, options_.privileged,
                                                  options_.image_current),
        nullptr);
  }
}

MrStackSites::~MrStackSites() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void MrStackSites::Add(const void* data, size_t size) {
  constexpr size_t kHeader = offsetof(mr_stack_sample, data);
  if (size < kHeader) return;
  mr_stack_sample header;
  std::memcpy(&header, data, kHeader);
  const size_t stack_bytes = std::min<size_t>({header.size, size - kHeader, MR_STACK_COPY_MAX});
  {
    std::lock_guard lock(mutex_);
    if (stats_.pending_bytes + stats_.unwound_bytes + stack_bytes > options_.max_bytes) {
      ++stats_.dropped_memory;
      return;
    }
  }
  Pending pending{.image = ImageKeyOf(header),
                  .site = header.site,
                  .regs = {},
                  .stack = StackBytes(static_cast<const uint8_t*>(data) + kHeader, stack_bytes)};
  std::copy(std::begin(header.regs), std::end(header.regs), pending.regs.begin());
  explicit_bzero(&header, sizeof header);  // its registers are the process's too
  std::lock_guard lock(mutex_);
  stats_.pending_bytes += pending.stack.size();
  pending_.push_back(std::move(pending));
}

// Called without mutex_: /proc/PID/maps is read and merged (a process with 100,000 mappings
// takes milliseconds) while a scrape's stats() or a request's Find() go on; only the result
// is compared and written under the lock.
void MrStackSites::InstallRanges(const sys::ImageKey& image, bool refresh) {
  {
    std::lock_guard lock(mutex_);
    const auto it = ranges_.find(image);
    if (it != ranges_.end() && !it->second.second.empty() && !refresh) return;
  }
  const auto maps = options_.privileged->Maps(image.tgid, 8 << 20);
  // The maps of whatever runs under the pid now: the image's only if it still runs (checked
  // after the read, as sys/process_access.cc does).
  if (!maps || (options_.image_current && !options_.image_current(image))) return;
  auto fresh = ExecutableRanges(*maps, MR_CODE_RANGES);
  std::lock_guard lock(mutex_);
  auto& [generation, ranges] = ranges_[image];
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
  const mr_proc_key key = ProcKeyOf(image);
  if (bpf_map_update_elem(code_ranges_fd_, &key, &value, BPF_ANY) != 0) {
    log::Debug("mr stacks: cannot write code ranges", {{"err", std::strerror(errno)}});
  }
}

MrSymbols MrStackSites::SymbolizeFrames(const sys::ImageKey& image,
                                        const std::vector<uint64_t>& pcs, sys::FirstAddress first,
                                        std::chrono::steady_clock::time_point deadline) {
  MrSymbols symbols;
  const sys::SymbolizeOptions options{.first = first, .inline_frames = true, .deadline = deadline};
  symbols.frames = unwinder_->Symbolize(image, pcs, options, &symbols.missing);
  return symbols;
}

void MrStackSites::Process() {
  // One caller at a time (the stack thread; tests call it directly). The lock on the figures
  // is held only between stacks, so a scrape reading them never waits for an unwind.
  std::lock_guard worker(process_mutex_);
  if (wake_fd_ >= 0) {
    uint64_t wakes = 0;
    [[maybe_unused]] const ssize_t drained = read(wake_fd_, &wakes, sizeof wakes);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options_.unwind_budget;
  // The frame-pointer stacks a request waits for first: a few lookups, while samples may be
  // many.
  ProcessSymbolRequests(deadline);
  while (std::chrono::steady_clock::now() < deadline) {
    Pending sample;
    bool ranges_known = false;
    {
      std::lock_guard lock(mutex_);
      if (pending_.empty()) break;
      sample = std::move(pending_.front());
      pending_.pop_front();
      stats_.pending_bytes -= sample.stack.size();
      // A site already unwound (its samples sent before the image's code ranges reached the
      // probes share its key): the same stack, not unwound and symbolized again.
      if (sites_.contains({sample.image, sample.site})) {
        ++stats_.unwound;
        continue;
      }
      ++in_flight_;
      const auto it = ranges_.find(sample.image);
      ranges_known = it != ranges_.end() && !it->second.second.empty();
    }
    // An image's first sample: its code ranges go to the probes before the unwind (0.3 ms
    // cold), since until then each of its registrations is a sample of its own.
    if (!ranges_known) InstallRanges(sample.image, false);
    std::vector<std::pair<uint64_t, uint64_t>> known;
    {
      std::lock_guard lock(mutex_);
      known = ranges_[sample.image].second;
    }
    const sys::CapturedStack captured{
        .image = sample.image, .regs = sample.regs, .stack = sample.stack.span()};
    sys::UnwoundStack unwound = unwinder_->Unwind(captured, options_.limits);
    const bool gone = unwound.outcome == sys::UnwindOutcome::kImageGone;
    if (unwound.outcome == sys::UnwindOutcome::kTimeBudget && sample.tries < options_.retries) {
      ++sample.tries;
      std::lock_guard lock(mutex_);
      --in_flight_;
      stats_.pending_bytes += sample.stack.size();
      pending_.push_back(std::move(sample));
      continue;
    }
    explicit_bzero(sample.regs.data(), sizeof sample.regs);
    sample.stack = StackBytes();  // zeroed and unmapped now, not at the end of the round
    // Code outside the ranges the probes hash with (a library loaded since): rewrite them, so
    // that its sites are told apart and sent once from now on.
    const bool outside = std::ranges::any_of(unwound.pcs, [&](uint64_t pc) {
      return !std::ranges::any_of(
          known, [&](const auto& range) { return pc >= range.first && pc < range.second; });
    });
    if (!gone && outside) InstallRanges(sample.image, true);
    MrSymbols symbols;
    if (!gone) {
      symbols = SymbolizeFrames(sample.image, unwound.pcs, sys::FirstAddress::kInstructionPointer,
                                std::chrono::steady_clock::now() + options_.symbolize_budget);
    }
    std::lock_guard lock(mutex_);
    --in_flight_;
    ++stats_.unwound;
    if (gone) {
      ++stats_.dropped_gone;
      continue;
    }
    MrUnwoundSite site{.pcs = std::move(unwound.pcs),
                       .method = unwound.method,
                       .truncated = unwound.truncated,
                       .stop_reason = std::move(unwound.stop_reason),
                       .symbols = std::move(symbols)};
    auto [it, inserted] = sites_.try_emplace({sample.image, sample.site}, std::move(site));
    if (inserted) {
      stats_.unwound_bytes += BytesOf(it->second);
      candidates_.erase(it->first);
    }
  }
  ProcessSymbolRequests(deadline);
  std::lock_guard lock(mutex_);
  stats_.unwind_ns += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  if (Idle()) processed_.notify_all();
}

void MrStackSites::ProcessSymbolRequests(std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    SymbolRequest request;
    {
      std::lock_guard lock(mutex_);
      if (symbol_requests_.empty()) return;
      request = std::move(symbol_requests_.front());
      symbol_requests_.pop_front();
      if (frame_pointer_symbols_.contains({request.image, request.stack_id})) continue;
      ++in_flight_;
    }
    // The probes' frame-pointer walk (bpf_get_stack): each address a return address.
    MrSymbols symbols =
        SymbolizeFrames(request.image, request.addresses, sys::FirstAddress::kReturnAddress,
                        std::chrono::steady_clock::now() + options_.symbolize_budget);
    std::lock_guard lock(mutex_);
    --in_flight_;
    if (!ranges_.contains(request.image)) continue;  // the image ended meanwhile
    if (frame_pointer_symbols_.size() >= kMaxFramePointerSymbols) {
      frame_pointer_symbols_.erase(frame_pointer_symbols_.begin());
    }
    frame_pointer_symbols_[{request.image, request.stack_id}] = std::move(symbols);
  }
}

bool MrStackSites::HasWork() const {
  std::lock_guard lock(mutex_);
  return !pending_.empty() || !symbol_requests_.empty();
}

bool MrStackSites::WaitProcessed(std::chrono::steady_clock::time_point deadline) {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof one);
  }
  std::unique_lock lock(mutex_);
  return processed_.wait_until(lock, deadline, [&] { return Idle(); });
}

std::optional<MrSymbols> MrStackSites::FramePointerSymbols(const sys::ImageKey& image,
                                                           int32_t stack_id,
                                                           const std::vector<uint64_t>& addresses) {
  std::lock_guard lock(mutex_);
  const auto it = frame_pointer_symbols_.find({image, stack_id});
  if (it != frame_pointer_symbols_.end()) return it->second;
  // An image the stack thread knows (its ranges) is one whose process it tracks: its stacks
  // may be symbolized, and are dropped with it (DropImages).
  ranges_.try_emplace(image);
  symbol_requests_.push_back({.image = image, .stack_id = stack_id, .addresses = addresses});
  return std::nullopt;
}

std::optional<MrUnwoundSite> MrStackSites::Find(const sys::ImageKey& image, uint64_t site) const {
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
  const mr_site_key seen = SiteKeyOf(key.first, key.second);
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

void MrStackSites::DropImages(const std::vector<sys::ImageKey>& images) {
  std::lock_guard lock(mutex_);
  const struct Retain {
    MrStackSites& sites;
    ~Retain() { sites.RetainLiveSessions(); }
  } retain{*this};
  for (const sys::ImageKey& image : images) {
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
    std::erase_if(symbol_requests_,
                  [&](const SymbolRequest& request) { return request.image == image; });
    std::erase_if(frame_pointer_symbols_,
                  [&](const auto& entry) { return entry.first.first == image; });
    if (ranges_.erase(image) > 0 && code_ranges_fd_ >= 0) {
      const mr_proc_key key = ProcKeyOf(image);
      bpf_map_delete_elem(code_ranges_fd_, &key);
    }
  }
}

void MrStackSites::RetainLiveSessions() {
  // The unwinder's per-image sessions (ELF files, CFI) of images that ended go with them.
  std::vector<sys::ImageKey> live;
  for (const auto& [image, ranges] : ranges_) live.push_back(image);
  for (const Pending& sample : pending_) live.push_back(sample.image);
  unwinder_->Retain(live);
  if (Idle()) processed_.notify_all();
}

MrStackSitesStats MrStackSites::stats() const {
  std::lock_guard lock(mutex_);
  MrStackSitesStats out = stats_;
  out.sites = sites_.size();
  if (worker_ != nullptr) {
    out.sandboxed = true;
    out.worker = worker_->stats();
  }
  return out;
}

}  // namespace rdmascope
