#include "core/gzip.h"

#include <zlib.h>

#include <limits>

namespace rdmascope {
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
