#include "sys/unwind_protocol.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rdmascope::sys::unwind_protocol {

Writer& Writer::U8(uint8_t value) {
  bytes_.push_back(value);
  return *this;
}

Writer& Writer::U32(uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  return *this;
}

Writer& Writer::U64(uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  return *this;
}

Writer& Writer::Bytes(std::span<const uint8_t> bytes) {
  U32(static_cast<uint32_t>(bytes.size()));
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

Writer& Writer::String(std::string_view text) {
  if (text.size() > kMaxName) text = text.substr(0, kMaxName);
  return Bytes({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

Writer& Writer::Image(const ImageKey& image) {
  return U32(image.tgid).U32(image.exec_id).U64(image.start_ns);
}

bool Reader::Take(size_t size) {
  if (!ok_ || bytes_.size() - at_ < size) {
    ok_ = false;
    return false;
  }
  return true;
}

uint8_t Reader::U8() {
  if (!Take(1)) return 0;
  return bytes_[at_++];
}

uint32_t Reader::U32() {
  if (!Take(4)) return 0;
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(bytes_[at_++]) << (8 * i);
  return value;
}

uint64_t Reader::U64() {
  if (!Take(8)) return 0;
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(bytes_[at_++]) << (8 * i);
  return value;
}

std::span<const uint8_t> Reader::Bytes(size_t max_size) {
  const uint32_t size = U32();
  if (size > max_size) ok_ = false;
  if (!Take(size)) return {};
  const std::span<const uint8_t> out = bytes_.subspan(at_, size);
  at_ += size;
  return out;
}

std::string Reader::String(size_t max_size) {
  const std::span<const uint8_t> bytes = Bytes(max_size);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

ImageKey Reader::Image() {
  // Three statements: the order of reads is the wire's.
  ImageKey image;
  image.tgid = U32();
  image.exec_id = U32();
  image.start_ns = U64();
  return image;
}

bool Send(int socket, const Writer& message, int fd) {
  const std::vector<uint8_t>& bytes = message.bytes();
  if (bytes.size() > kMaxMessage) return false;
  iovec io{.iov_base = const_cast<uint8_t*>(bytes.data()), .iov_len = bytes.size()};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(bytes.size());
}

std::expected<Message, std::string> Receive(int socket) {
  // One byte more than the largest message: a longer one is then seen as truncated.
  std::vector<uint8_t> buffer(kMaxMessage + 1);
  iovec io{.iov_base = buffer.data(), .iov_len = buffer.size()};
  msghdr header{};
  header.msg_iov = &io;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  ssize_t received;
  do {
    received = recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  // Every descriptor received is owned first, so that none leaks whatever is wrong below.
  std::vector<UniqueFd> fds;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&header); cmsg != nullptr; cmsg = CMSG_NXTHDR(&header, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
      fds.emplace_back(fd);
    }
  }
  if (received < 0) return std::unexpected(std::string("recvmsg: ") + std::strerror(errno));
  if (received == 0) return std::unexpected("the peer closed the socket");
  if ((header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
      static_cast<size_t>(received) > kMaxMessage) {
    return std::unexpected("a message larger than the protocol allows");
  }
  if (fds.size() > 1) return std::unexpected("a message with more than one descriptor");
  if (received < 4) return std::unexpected("a message shorter than its type");
  Message message;
  Reader reader({buffer.data(), 4});
  message.type = static_cast<Type>(reader.U32());
  message.body.assign(buffer.begin() + 4, buffer.begin() + received);
  if (!fds.empty()) message.fd = std::move(fds[0]);
  return message;
}

std::expected<UniqueFd, std::string> TextToMemfd(std::string_view text) {
  UniqueFd fd(memfd_create("rdmascope-maps", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return std::unexpected(std::string("memfd_create: ") + std::strerror(errno));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd.get(), text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::unexpected(std::string("memfd write: ") + std::strerror(errno));
    written += static_cast<size_t>(n);
  }
  // The worker reads what was written, nothing the writer could change afterwards.
  fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  return fd;
}

std::expected<std::string, std::string> TextFromFd(int fd, size_t max_bytes) {
  struct stat status {};
  if (fstat(fd, &status) != 0)
    return std::unexpected(std::string("fstat: ") + std::strerror(errno));
  if (!S_ISREG(status.st_mode) || status.st_size < 0 ||
      static_cast<uint64_t>(status.st_size) > max_bytes) {
    return std::unexpected("not a regular file within the size bound");
  }
  std::string text(static_cast<size_t>(status.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = pread(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::unexpected(std::string("pread: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return text;
}

}  // namespace rdmascope::sys::unwind_protocol
