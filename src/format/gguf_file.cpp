// GgufFile: opening (read-only mmap) or copying an image, then handing it to the parser.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace bicache::format {
namespace {

[[noreturn]] void FailIo(const std::string& path, const std::string& what, int err) {
  throw Error(ErrorKind::kIo, "cannot " + what + " '" + path + "': " + std::strerror(err));
}

// Closes a file descriptor on every exit path.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

GgufFile::Impl::~Impl() {
  if (mapping != nullptr) ::munmap(mapping, mapping_size);
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::Open(const std::string& path, OpenOptions options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) FailIo(path, "open", errno);
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) FailIo(path, "stat", errno);
  if (S_ISDIR(st.st_mode)) FailIo(path, "read", EISDIR);
  if (!S_ISREG(st.st_mode)) {
    throw Error(ErrorKind::kIo, "cannot read '" + path + "': not a regular file");
  }
  if (st.st_size == 0) throw Error(ErrorKind::kIo, "cannot read '" + path + "': file is empty");

  auto impl = std::make_unique<Impl>();
  impl->size = static_cast<uint64_t>(st.st_size);
  const uint8_t* bytes = nullptr;
  if (options.mmap) {
    // MAP_PRIVATE + PROT_READ: weights are paged in on demand and shared with the page cache.
    void* p = ::mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) FailIo(path, "memory-map", errno);
    impl->mapping = p;
    impl->mapping_size = impl->size;
    bytes = static_cast<const uint8_t*>(p);
  } else {
    // Read once: later changes to the file cannot reach this process.
    impl->copy.resize(impl->size);
    uint64_t got = 0;
    while (got < impl->size) {
      const ssize_t n =
          ::read(fd, impl->copy.data() + got, std::min<uint64_t>(impl->size - got, 1u << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) FailIo(path, "read", errno);
      if (n == 0) {
        throw Error(ErrorKind::kIo, "cannot read '" + path + "': it shrank to " +
                                        std::to_string(got) + " bytes while being read (expected " +
                                        std::to_string(impl->size) + ")");
      }
      got += static_cast<uint64_t>(n);
    }
    bytes = impl->copy.data();
  }
  if (options.mlock && ::mlock(bytes, impl->size) != 0) {
    const int err = errno;
    throw Error(
        ErrorKind::kIo,
        "cannot lock '" + path + "' (" + std::to_string(impl->size / (1024 * 1024)) +
            " MiB) in memory: " + std::strerror(err) +
            (err == ENOMEM || err == EPERM
                 ? " (the locked-memory limit is too low: raise 'ulimit -l' or drop --mlock)"
                 : ""));
  }
  try {
    impl->parsed = detail::ParseGguf(bytes, impl->size);
  } catch (const Error& e) {
    // Same kind, prefixed with the path so a front end can print it as one line.
    throw Error(e.kind(), path + ": " + e.what());
  }
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::FromBytes(std::span<const uint8_t> bytes) {
  auto impl = std::make_unique<Impl>();
  impl->copy.assign(bytes.begin(), bytes.end());
  impl->size = impl->copy.size();
  impl->parsed = detail::ParseGguf(impl->copy.data(), impl->size);
  return GgufFile(std::move(impl));
}

uint32_t GgufFile::version() const {
  return impl_->parsed.version;
}
uint64_t GgufFile::alignment() const {
  return impl_->parsed.alignment;
}
uint64_t GgufFile::file_size() const {
  return impl_->size;
}

const std::map<std::string, Value>& GgufFile::metadata() const {
  return impl_->parsed.metadata;
}

const Value* GgufFile::Find(std::string_view key) const {
  const auto& md = impl_->parsed.metadata;
  auto it = md.find(std::string(key));
  return it == md.end() ? nullptr : &it->second;
}

const std::vector<TensorInfo>& GgufFile::tensors() const {
  return impl_->parsed.tensors;
}

// Linear scan: models have a few hundred tensors and are looked up once each at load.
const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const TensorInfo& t : impl_->parsed.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace bicache::format
