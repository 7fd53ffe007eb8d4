#include "doctor/history.h"

#include <algorithm>
#include <string>

#include "core/log.h"

namespace rdmascope::doctor {

History::History(size_t max_kept, double interval_seconds, size_t max_series,
                 double lookback_seconds)
    : max_kept_(max_kept),
      interval_seconds_(interval_seconds),
      max_series_(max_series),
      lookback_seconds_(lookback_seconds),
      counter_spacing_seconds_(std::max(interval_seconds, lookback_seconds / kCounterSlots)) {}

bool History::Fits(const Snapshot& copy, std::string_view what) const {
  if (copy.SeriesCount() <= max_series_) return true;
  // A bound on memory whatever the host runs: keep nothing rather than a partial picture
  // that would read as processes or ports vanishing.
  log::Warn("doctor history: too many " + std::string(what) + " series, this snapshot is not kept",
            {{"series", std::to_string(copy.SeriesCount())}, {"max", std::to_string(max_series_)}});
  return false;
}

bool History::Offer(const Snapshot& snapshot) {
  const double now = snapshot.seconds();
  std::lock_guard lock(mutex_);
  if (!started_) {
    started_ = true;
    started_seconds_ = now;
  }
  // Counters older than the lookback are never judged against again: dropping them is what
  // lets an old error burst stop firing.
  while (!counters_.empty() && now - counters_.front()->seconds() > lookback_seconds_) {
    counters_.pop_front();
  }
  if (counters_.empty() || now - counters_.back()->seconds() >= counter_spacing_seconds_) {
    auto counters = std::make_shared<const Snapshot>(WindowSeriesOf(snapshot));
    if (Fits(*counters, "counter")) counters_.push_back(std::move(counters));
  }
  if (!kept_.empty() && now - kept_.back()->seconds() < interval_seconds_) return false;
  auto trend = std::make_shared<const Snapshot>(snapshot.Only(kTrendSeries));
  if (!Fits(*trend, "trend")) return false;
  kept_.push_back(std::move(trend));
  while (kept_.size() > max_kept_) kept_.pop_front();
  return true;
}

std::shared_ptr<const HistoryView> History::View() const {
  auto view = std::make_shared<HistoryView>();
  std::lock_guard lock(mutex_);
  view->started_seconds = started_seconds_;
  view->lookback_seconds = lookback_seconds_;
  view->counters.assign(counters_.begin(), counters_.end());
  view->kept.assign(kept_.begin(), kept_.end());
  return view;
}

size_t History::kept() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace rdmascope::doctor
