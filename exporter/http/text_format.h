// The Prometheus text exposition format (0.0.4) written straight into one std::string: the
// bytes prometheus::TextSerializer (prometheus-cpp 1.0) writes, without its ostream inserts.
// Doubles as `out << value` at precision 16 in the classic locale ("%.16g": 0.1, 1e-300,
// 9007199254740992, -0), NaN as "Nan", infinities as "+Inf"/"-Inf"; label values escape
// \ " and newline. One difference, on purpose: HELP text escapes \ and newline as the format
// requires, where TextSerializer writes them raw (and so breaks the exposition).
#pragma once

#include <prometheus/metric_family.h>

#include <cstddef>
#include <string>
#include <vector>

namespace rdmascope {

// Appends the exposition of `families`, in order, to `out`.
void AppendTextFormat(std::string& out, const std::vector<prometheus::MetricFamily>& families);

// The exposition of `families`; `reserve` bytes reserved first (the last scrape's size).
std::string WriteTextFormat(const std::vector<prometheus::MetricFamily>& families,
                            size_t reserve = 0);

}  // namespace rdmascope
