#include "http/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace rdmascope {
namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "q=0", "q=0.0", "q=0.000" refuse the coding (RFC 9110 12.4.2); any other weight accepts it.
bool RefusedByWeight(std::string_view parameters) {
  while (!parameters.empty()) {
    const auto semicolon = parameters.find(';');
    const std::string_view parameter = Trim(parameters.substr(0, semicolon));
    if (parameter.size() >= 2 && (parameter[0] == 'q' || parameter[0] == 'Q') &&
        parameter[1] == '=') {
      const std::string_view weight = parameter.substr(2);
      return !weight.empty() && weight.find_first_not_of("0.") == std::string_view::npos;
    }
    if (semicolon == std::string_view::npos) break;
    parameters.remove_prefix(semicolon + 1);
  }
  return false;
}

}  // namespace

bool AcceptsGzip(std::string_view accept_encoding) {
  while (!accept_encoding.empty()) {
    const auto comma = accept_encoding.find(',');
    const std::string_view item = accept_encoding.substr(0, comma);
    const auto semicolon = item.find(';');
    const std::string_view coding = Trim(item.substr(0, semicolon));
    if ((EqualsIgnoreCase(coding, "gzip") || coding == "*") &&
        !(semicolon != std::string_view::npos && RefusedByWeight(item.substr(semicolon + 1)))) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    accept_encoding.remove_prefix(comma + 1);
  }
  return false;
}

namespace {

// One deflate state per thread, reset per call: deflateInit2 allocates and initialises ~270 KB
// (window, hash chains, pending buffer), which cost as much as the compression of a scrape.
class Deflater {
 public:
  ~Deflater() { Close(); }

  z_stream* Ready(int level) {
    if (open_ && level_ == level && deflateReset(&stream_) == Z_OK) return &stream_;
    Close();
    stream_ = z_stream{};
    // 16 + MAX_WBITS: a gzip header and trailer instead of zlib's; prometheus-cpp's settings.
    if (deflateInit2(&stream_, level, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
      return nullptr;
    }
    open_ = true;
    level_ = level;
    return &stream_;
  }

 private:
  void Close() {
    if (open_) deflateEnd(&stream_);
    open_ = false;
  }

  z_stream stream_{};
  bool open_ = false;
  int level_ = 0;
};

}  // namespace

std::optional<std::string> GzipCompress(std::string_view input, int level) {
  // avail_in and avail_out are 32 bits; a body of 2 GB is not a scrape anyway.
  if (input.size() > std::numeric_limits<uInt>::max() / 2) return std::nullopt;
  thread_local Deflater deflater;
  z_stream* stream = deflater.Ready(level);
  if (stream == nullptr) return std::nullopt;
  // deflateBound is an upper bound for the whole stream: one deflate call finishes it.
  std::string output;
  output.resize_and_overwrite(
      deflateBound(stream, static_cast<uLong>(input.size())), [&](char* data, size_t size) {
        stream->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
        stream->avail_in = static_cast<uInt>(input.size());
        stream->next_out = reinterpret_cast<Bytef*>(data);
        stream->avail_out = static_cast<uInt>(size);
        const int result = deflate(stream, Z_FINISH);
        return result == Z_STREAM_END ? static_cast<size_t>(stream->total_out) : size_t{0};
      });
  if (output.empty()) return std::nullopt;  // a gzip stream is never empty (header: 10 B)
  return output;
}

}  // namespace rdmascope
