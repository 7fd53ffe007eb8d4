#include "profile/profile_data.h"

#include <algorithm>
#include <cmath>

namespace rdmascope::profile {

// The bucket that holds the ceil(q * n)-th smallest value (n counted from the buckets, which
// are what the estimate is made from), reported as that bucket's upper bound 2^b: a figure the
// data guarantees is not exceeded, rather than an interpolation it cannot support.
std::optional<double> Log2Histogram::Quantile(double q) const {
  if (!(q >= 0.0 && q <= 1.0)) return std::nullopt;  // also rejects NaN
  uint64_t total = 0;
  for (uint64_t bucket : buckets) total += bucket;
  if (total == 0) return std::nullopt;
  const double wanted = std::ceil(q * static_cast<double>(total));
  const uint64_t rank = wanted < 1.0 ? 1 : static_cast<uint64_t>(wanted);
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    seen += buckets[b];
    if (seen >= rank) return std::ldexp(1.0, static_cast<int>(b));
  }
  return std::nullopt;  // unreachable: rank <= total
}

std::optional<double> Log2Histogram::Interpolated(double q) const {
  if (!(q >= 0.0 && q <= 1.0)) return std::nullopt;  // also rejects NaN
  uint64_t total = 0;
  for (uint64_t bucket : buckets) total += bucket;
  if (total == 0) return std::nullopt;
  const double rank = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b] == 0) continue;
    if (static_cast<double>(seen + buckets[b]) >= rank) {
      const double upper = std::ldexp(1.0, static_cast<int>(b));
      const double lower = b == 0 ? 0.0 : upper / 2;
      const double within = (rank - static_cast<double>(seen)) / static_cast<double>(buckets[b]);
      return lower + (upper - lower) * std::max(0.0, within);
    }
    seen += buckets[b];
  }
  return std::nullopt;  // unreachable: rank <= total
}

}  // namespace rdmascope::profile
