#include "cli/capture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cli/client_access_flags.h"
#include "collectors/build.h"
#include "collectors/capture_config.h"
#include "collectors/registry.h"
#include "core/capture.h"
#include "core/capture_index.h"
#include "core/capture_tree.h"
#include "core/collector_runner.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/redact.h"
#include "core/sysfs.h"
#include "core/terminal_text.h"
#include "core/version.h"
#include "doctor/checks.h"
#include "doctor/local_snapshot.h"
#include "doctor/replay_report.h"
#include "doctor/report.h"
#include "http/text_format.h"

namespace rdmascope {
namespace {

std::filesystem::path DefaultOutput(const redact::Redactor* redactor) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name = redactor != nullptr ? redactor->Name("host", host) : std::string(host);
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", &tm);
  return "rdmascope-capture-" + name + "-" + stamp;
}

// --output X.tar.gz (or .tgz): the capture is written as a directory first, into a private
// directory beside X, then archived into that directory and renamed onto X whole. The writer
// keeps its guarantees (each sample committed whole, nothing written through a link), a
// crash leaves no half archive under X's name, and the rename stays on one filesystem.
class ArchiveOutput {
 public:
  static bool Named(const std::filesystem::path& output) {
    const std::string name = output.filename().string();
    return name.ends_with(".tar.gz") || name.ends_with(".tgz");
  }
  ArchiveOutput(const std::filesystem::path& archive, bool force) : archive_(archive) {
    struct stat st {};
    if (::lstat(archive.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        throw std::runtime_error(archive.string() + " is a symbolic link: give another --output");
      }
      if (!S_ISREG(st.st_mode)) throw std::runtime_error(archive.string() + " is not a file");
      if (!force) {
        throw std::runtime_error(archive.string() +
                                 " exists: choose another --output, or --force to replace it");
      }
    }
    const std::filesystem::path parent =
        archive.parent_path().empty() ? std::filesystem::path(".") : archive.parent_path();
    std::string temp = (parent / ("." + archive.filename().string() + ".XXXXXX")).string();
    if (::mkdtemp(temp.data()) == nullptr) {  // 0700
      throw std::runtime_error("cannot create a directory beside " + archive.string() + ": " +
                               std::strerror(errno));
    }
    temp_ = temp;
  }
  ~ArchiveOutput() {
    std::error_code ignored;
    std::filesystem::remove_all(temp_, ignored);  // never follows a link
  }
  ArchiveOutput(const ArchiveOutput&) = delete;
  ArchiveOutput& operator=(const ArchiveOutput&) = delete;

  std::filesystem::path directory() const { return temp_ / "capture"; }
  void Archive() const {
    std::string top = archive_.filename().string();
    top.resize(top.size() - (top.ends_with(".tgz") ? 4 : 7));
    if (top.empty() || top == "." || top == "..") top = "capture";
    const std::filesystem::path built = temp_ / "capture.tar.gz";
    if (auto written = capture::WriteArchive(directory(), built, top); !written) {
      throw std::runtime_error(written.error());
    }
    if (::rename(built.c_str(), archive_.c_str()) != 0) {
      throw std::runtime_error("cannot write " + archive_.string() + ": " + std::strerror(errno));
    }
  }

 private:
  std::filesystem::path archive_;
  std::filesystem::path temp_;
};

// Lives for the rest of the process: the boundary points at it.
std::unique_ptr<capture::Session>& InstalledSession() {
  static std::unique_ptr<capture::Session> session;
  return session;
}

}  // namespace

void AddCaptureFlags(CLI::App& app, CaptureOptions& options) {
  app.add_option("--output", options.output,
                 "Directory to write the capture into: absent or empty (default "
                 "./rdmascope-capture-HOST-YYYYmmddTHHMMSS); a name ending .tar.gz or .tgz "
                 "writes the same as a gzip'd tar (0600)")
      ->group("Capture");
  app.add_flag("--force", options.force,
               "Replace the capture in a non-empty --output (its samples/ and index.json only), or "
               "an --output .tar.gz")
      ->group("Capture");
  app.add_option("--samples", options.samples,
                 "Samples to take, one pass of every enabled collector each (2 give rates)")
      ->check(CLI::Range(1, 9999))
      ->default_str("2")
      ->group("Capture");
  app.add_option_function<std::string>(
         "--interval",
         [&options](const std::string& text) {
           options.interval = std::chrono::nanoseconds(*ParseDurationNs(text));
         },
         "Time between the samples")
      ->check([](const std::string& text) {
        return ParseDurationNs(text) ? std::string() : "not a duration like 10s or 1m: " + text;
      })
      ->default_str("10s")
      ->group("Capture");
  app.add_flag("--redact", options.redact,
               "Replace host names, GUIDs, MAC and IP addresses, GIDs and container/pod ids with "
               "keyed hashes of the same shape (docs/capture.md \"Redaction\")")
      ->group("Capture");
  app.add_option("--redact.key-file", options.redact_key_file,
                 "The key of --redact (16 bytes or more, e.g. head -c 32 /dev/urandom): the same "
                 "key hashes a value alike in every capture of a fleet; without it each capture "
                 "draws its own")
      ->group("Capture");
  AddCaptureExporterFlags(app, options.exporter);
}

void FinishCaptureOptions(const CaptureOptions& options) {
  CheckClientAccess("--exporter", options.exporter.access);
}

namespace {

// The redactor of --redact, or null.
std::shared_ptr<const redact::Redactor> MakeRedactor(const CaptureOptions& options) {
  if (!options.redact) {
    if (!options.redact_key_file.empty()) {
      throw std::runtime_error("--redact.key-file needs --redact");
    }
    return nullptr;
  }
  if (options.redact_key_file.empty()) {
    auto random = redact::Redactor::WithRandomKey();
    if (!random) throw std::runtime_error("--redact: " + random.error());
    log::Warn("--redact without --redact.key-file: this capture's hashes match no other's",
              {{"why", "each capture draws its own key"}});
    return std::make_shared<const redact::Redactor>(std::move(*random));
  }
  // A key is a few bytes: anything larger is not one (and a FIFO is refused).
  const auto key = sysfs::ReadOwnFile(options.redact_key_file, 4096);
  if (!key) {
    throw std::runtime_error("--redact.key-file " + options.redact_key_file.string() + ": " +
                             std::strerror(key.error()));
  }
  auto keyed = redact::Redactor::WithKey(*key);
  if (!keyed) throw std::runtime_error("--redact.key-file: " + keyed.error());
  return std::make_shared<const redact::Redactor>(std::move(*keyed));
}

// doctor's report over the capture's samples as they were taken (docs/capture.md
// "doctor.json"): the checks with their default thresholds, the window between the first and
// the last sample, the history checks skipped as on a replay.
std::string LiveDoctorReport(doctor::Snapshot& now, const doctor::Snapshot* first,
                             const std::vector<std::string>& times) {
  now.set_no_history_reason(doctor::kNoHistoryInCapture);
  std::vector<doctor::Finding> findings = doctor::RunChecks(now, first, doctor::DoctorOptions{});
  doctor::SortFindings(findings);
  doctor::ReportContext context{
      .host = doctor::HostName(),
      .generated = times.back(),
      .window_seconds = first != nullptr ? now.seconds() - first->seconds() : 0,
      .window_kind = first != nullptr ? doctor::kWindowLive : doctor::kWindowNone};
  return doctor::RenderJson(findings, context);
}

}  // namespace

int RunCapture(ServeConfig config, const CaptureOptions& options) {
  log::SetLevel(config.log_level);
  ConfigureForCapture(config);
  const auto redactor = MakeRedactor(options);
  const std::filesystem::path output =
      options.output.empty() ? DefaultOutput(redactor.get()) : options.output;
  std::optional<ArchiveOutput> archive;
  if (ArchiveOutput::Named(output)) archive.emplace(output, options.force);
  auto writer =
      capture::Writer::Create(archive ? archive->directory() : output, !archive && options.force);
  if (!writer) throw std::runtime_error(writer.error());
  (*writer)->SetRedactor(redactor, !options.redact_key_file.empty());
  InstalledSession() =
      capture::Session::Recording(capture::Layout(config.sysfs, config.procfs), writer->get());
  capture::Install(InstalledSession().get());

  // What the collectors read while they are built (device lists, PMUs) goes into sample 1,
  // which replay also answers them from.
  if (auto begun = (*writer)->BeginSample(1); !begun) throw std::runtime_error(begun.error());
  std::vector<std::string> replayed;
  std::vector<NamedCollector> collectors = BuildCollectors(config);
  for (const NamedCollector& entry : collectors) replayed.push_back(entry.name);
  const auto probe_errors = doctor::ProbeErrors(collectors);
  CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
  std::optional<doctor::Snapshot> first;
  for (int sample = 1; sample <= options.samples; ++sample) {
    if (sample > 1) {
      std::this_thread::sleep_for(options.interval);
      if (auto begun = (*writer)->BeginSample(sample); !begun) {
        throw std::runtime_error(begun.error());
      }
    }
    (*writer)->StampSample();  // the counters' time: rates divide by the samples' distance
    const auto families = runner.Collect();
    // What the collectors made of this sample live: the replay's n-th scrape gives the same
    // (docs/capture.md "Fidelity"), and a support engineer reads it first. Not under --redact:
    // it holds the identifiers as the host gave them.
    if (!redactor) {
      (*writer)->File("metrics.prom", WriteTextFormat(families));
      // And what doctor made of the samples so far, with the last one: `doctor --replay`
      // finds the same.
      // Only the first and the last sample are judged: the ones between are not made snapshots.
      if (sample == 1 || sample == options.samples) {
        const std::vector<std::string> times = (*writer)->sample_times();
        const auto offsets = capture::SecondsSinceFirst(times);
        doctor::Snapshot now =
            doctor::SnapshotOf(runner, families, probe_errors, offsets ? offsets->back() : 0);
        if (sample == options.samples) {
          (*writer)->File("doctor.json", LiveDoctorReport(now, first ? &*first : nullptr, times));
        } else {
          first = std::move(now);
        }
      }
    }
    RecordExporterAnswers(options.exporter, **writer, redactor.get());
    if (auto committed = (*writer)->CommitSample(); !committed) {
      throw std::runtime_error(committed.error());
    }
    log::Info("sample recorded",
              {{"sample", std::to_string(sample)}, {"of", std::to_string(options.samples)}});
  }
  if (auto index = (*writer)->WriteIndex(kVersion, replayed); !index) {
    throw std::runtime_error(index.error());
  }
  capture::Install(nullptr);
  if (archive) archive->Archive();

  std::printf("capture written to %s (%d sample%s)\n", EscapeControls(output.string()).c_str(),
              options.samples, options.samples == 1 ? "" : "s");
  for (const CollectorState& state : runner.States()) {
    // A detail names the host's devices and files: a terminal's controls in them are shown,
    // not acted on.
    std::printf("  %-10s %-8s %7zu series  %s\n", state.name.c_str(), HealthName(state.health),
                state.series, EscapeControls(state.detail).c_str());
  }
  const auto missed = (*writer)->missed();
  if (!missed.empty()) std::printf("not recorded (see index.json \"not_recorded\"):\n");
  for (const capture::NotRecorded& entry : missed) {
    std::printf("  %s: %s\n", EscapeControls(entry.source).c_str(),
                EscapeControls(entry.reason).c_str());
  }
  return 0;
}

void StartReplay(ServeConfig& config) {
  auto reader = capture::Reader::Open(config.replay);
  if (!reader) throw std::runtime_error("--replay: " + reader.error());
  log::Info("replaying a capture", {{"path", config.replay.string()},
                                    {"samples", std::to_string(reader->sample_count())}});
  const auto facts = capture::ReadIndexFacts(reader->index_text());
  ConfigureForReplay(config, facts ? facts->collectors : std::vector<std::string>{});
  InstalledSession() =
      capture::Session::Replaying(capture::Layout(config.sysfs, config.procfs), std::move(*reader));
  capture::Install(InstalledSession().get());
}

}  // namespace rdmascope
