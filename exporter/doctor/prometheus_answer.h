// Prometheus' query API answers (/api/v1/query, /api/v1/query_range) read as a stream of series
// (nlohmann's SAX parser), never as a document: at 1,000 hosts one evaluation time is some
// 57 MiB of JSON, and building and walking its DOM cost doctor more than every check together
// (docs/benchmarks.md, "doctor --prometheus on a 1,000-host fleet").
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::doctor {

// What a query answered: `vector` (an instant query) or `matrix` (a range query).
enum class ResultType { kVector, kMatrix };

struct AnswerSeries {
  std::string name;                               // __name__, "" for an expression's result
  std::string instance;                           // "" when the series has none
  std::map<std::string, std::string> labels;      // the others
  std::vector<std::pair<double, double>> points;  // (seconds, value): one for a vector
};

// Calls `each` for every series of the answer, in the answer's order, as it is read. Points
// whose value is not a number in Prometheus' writing ("1", "NaN", "+Inf"...) are left out, and
// so is a series left with none. The error says what the answer is: Prometheus' own error
// (errorType: error), another result type than `expected`, not the API's JSON. A caller must
// discard what `each` was given before an error (the error may come after). The answer's
// `warnings` (a partial answer: Thanos, Mimir, Prometheus' own) go to `warnings` when given, at
// most 8 of at most 512 bytes each.
std::expected<void, std::string> ReadQueryAnswer(std::string_view body, ResultType expected,
                                                 const std::function<void(AnswerSeries&&)>& each,
                                                 std::vector<std::string>* warnings = nullptr);

}  // namespace rdmascope::doctor
