#include "doctor/history.h"

#include <string>

#include "core/log.h"

namespace rdmascope::doctor {

History::History(size_t max_kept, double interval_seconds, size_t max_series)
    : max_kept_(max_kept), interval_seconds_(interval_seconds), max_series_(max_series) {}

bool History::Offer(const Snapshot& snapshot) {
  auto trend = std::make_shared<Snapshot>(snapshot.Only(kTrendSeries));
  std::lock_guard lock(mutex_);
  if (!first_) first_ = std::make_shared<const Snapshot>(snapshot);
  if (!kept_.empty() && snapshot.seconds() - kept_.back()->seconds() < interval_seconds_) {
    return false;
  }
  if (trend->SeriesCount() > max_series_) {
    // A bound on memory whatever the host runs: keep nothing rather than a partial picture
    // that would read as processes vanishing.
    log::Warn(
        "doctor history: too many trend series, this snapshot is not kept",
        {{"series", std::to_string(trend->SeriesCount())}, {"max", std::to_string(max_series_)}});
    return false;
  }
  kept_.push_back(std::move(trend));
  while (kept_.size() > max_kept_) kept_.pop_front();
  return true;
}

std::shared_ptr<const HistoryView> History::View() const {
  auto view = std::make_shared<HistoryView>();
  std::lock_guard lock(mutex_);
  view->first = first_;
  view->kept.assign(kept_.begin(), kept_.end());
  return view;
}

size_t History::kept() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

}  // namespace rdmascope::doctor
