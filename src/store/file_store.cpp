// FileStore: a store in one file, shared by processes through the file system.
//
// The file is an append-only log: an 8-byte header, then records
//   type u8 | key_len u32 | value_len u32 | key | value | fnv1a32 u32
// (little-endian; the checksum covers the record before it). A key's value is
// its last SET record, unless a DELETE record follows it.
//
// Every operation opens the file, takes an open-file-description lock (shared
// to read, exclusive to append), replays the records it has not seen yet into
// its cache, works, and closes the file, which drops the lock. Opening per
// operation is what makes other hosts' appends visible on NFS (close-to-open
// consistency). OFD locks, unlike classic fcntl locks, also exclude two
// FileStores of one process from each other and are not dropped when another
// descriptor of the file closes. Locks are taken with F_OFD_SETLK and a short
// back-off rather than F_OFD_SETLKW so that a wait is bounded by its deadline.
//
// Users are counted under the internal key "" (user keys are never empty): the
// constructor adds 1, the destructor subtracts 1, and the one that reaches 0
// removes the file, as torch's FileStore does.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "src/common/errors.hpp"
#include "src/common/fd.hpp"
#include "src/common/log.hpp"
#include "src/common/time.hpp"
#include "src/store/store_wire.hpp"

namespace braid::store {

namespace {

constexpr char kFileMagic[8] = {'B', 'R', 'A', 'I', 'D', 'F', 'S', '1'};
constexpr std::size_t kRecordOverhead = 1 + 4 + 4 + 4;
const std::string kRefCountKey;  // "": never a user key
enum class Record : std::uint8_t { Set = 1, Delete = 2 };

std::uint32_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

// An open, locked store file; closing it releases the lock.
struct LockedFile {
  Fd fd;
  std::uint64_t size = 0;
};

// Sleeps with doubling back-off, never past the deadline; false once it has passed.
class Backoff {
 public:
  Backoff(std::chrono::microseconds first, std::chrono::microseconds cap) : next_(first), cap_(cap) {}
  bool sleep(Deadline deadline) {
    auto left = deadline.at - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(next_, left));
    next_ = std::min(next_ * 2, cap_);
    return true;
  }

 private:
  std::chrono::microseconds next_, cap_;
};

}  // namespace

struct FileStore::Impl {
  std::string path;
  std::mutex mu;  // one operation of this object at a time (the cache)
  std::unordered_map<std::string, Bytes> cache;
  std::uint64_t pos = 0;  // bytes of the log already replayed into `cache`
  dev_t dev = 0;
  ino_t ino = 0;

  LockedFile open_locked(bool exclusive, Deadline deadline, Millis timeout);
  void replay(int fd, std::uint64_t end);
  [[noreturn]] void corrupt(std::uint64_t at, const std::string& why) const;
  void append(LockedFile& f, Record type, const std::string& key, const Bytes& value);
  std::int64_t add(const std::string& key, std::int64_t delta, Millis timeout);
  const Bytes* find(const std::string& key) const {
    auto it = cache.find(key);
    return it == cache.end() ? nullptr : &it->second;
  }
  bool has_all(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return cache.count(k) != 0; });
  }
};

LockedFile FileStore::Impl::open_locked(bool exclusive, Deadline deadline, Millis timeout) {
  Backoff backoff(std::chrono::microseconds(20), std::chrono::milliseconds(2));
  for (;;) {
    // 0600: the store holds the job's addresses and id; only its user reads it.
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (!fd.valid()) fail(ErrorCode::Store, "cannot open file store '{}': {}", path, errno_text());
    struct flock lk {};
    lk.l_type = exclusive ? F_WRLCK : F_RDLCK;
    lk.l_whence = SEEK_SET;  // start 0, len 0: the whole file
    while (fcntl(fd.get(), F_OFD_SETLK, &lk) != 0) {
      if (errno != EAGAIN && errno != EACCES && errno != EINTR)
        fail(ErrorCode::Store, "cannot lock file store '{}': {}", path, errno_text());
      if (!backoff.sleep(deadline))
        fail(ErrorCode::Timeout, "timed out after {} ms waiting for the lock of file store '{}'",
             timeout.count(), path);
    }
    // The last user may have removed the file while we waited for its lock:
    // then open the path again rather than work in a file nobody else sees.
    struct stat st_fd {}, st_path {};
    if (fstat(fd.get(), &st_fd) != 0)
      fail(ErrorCode::Store, "cannot stat file store '{}': {}", path, errno_text());
    if (::stat(path.c_str(), &st_path) != 0 || st_path.st_ino != st_fd.st_ino ||
        st_path.st_dev != st_fd.st_dev)
      continue;
    const auto size = static_cast<std::uint64_t>(st_fd.st_size);
    if (st_fd.st_dev != dev || st_fd.st_ino != ino || size < pos) {
      cache.clear();  // a different file than the one cached
      pos = 0;
      dev = st_fd.st_dev;
      ino = st_fd.st_ino;
    }
    replay(fd.get(), size);
    return {std::move(fd), size};
  }
}

void FileStore::Impl::corrupt(std::uint64_t at, const std::string& why) const {
  fail(ErrorCode::Store,
       "file store '{}' is corrupt at byte {}: {}; expected a file written by Braid's FileStore "
       "(remove it to start afresh)",
       path, at, why);
}

// Applies the records in [pos, end) to the cache. Appends are whole records
// made under the exclusive lock, so anything partial means a crashed writer
// or a foreign file.
void FileStore::Impl::replay(int fd, std::uint64_t end) {
  if (end == pos) return;
  Bytes buf(end - pos);
  std::size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(pos + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorCode::Store, "cannot read file store '{}': {}", path, errno_text());
    if (n == 0) corrupt(pos + got, "the file shrank while locked");
    got += static_cast<std::size_t>(n);
  }
  std::size_t off = 0;
  if (pos == 0) {
    if (buf.size() < sizeof kFileMagic || std::memcmp(buf.data(), kFileMagic, sizeof kFileMagic))
      corrupt(0, "bad file header");
    off = sizeof kFileMagic;
  }
  while (off < buf.size()) {
    const std::uint64_t at = pos + off;
    const std::size_t left = buf.size() - off;
    const std::uint8_t* p = buf.data() + off;
    if (left < kRecordOverhead) corrupt(at, "truncated record");
    const auto type = static_cast<Record>(p[0]);
    const std::size_t klen = wire::get_le(p + 1, 4), vlen = wire::get_le(p + 5, 4);
    if ((type != Record::Set && type != Record::Delete) || klen > kMaxKeyLen ||
        vlen > kMaxValueLen || (type == Record::Delete && vlen != 0))
      corrupt(at, "bad record header");
    const std::size_t len = kRecordOverhead + klen + vlen;
    if (left < len) corrupt(at, "truncated record");
    if (wire::get_le(p + len - 4, 4) != fnv1a(p, len - 4)) corrupt(at, "bad record checksum");
    std::string key(reinterpret_cast<const char*>(p + 9), klen);
    if (type == Record::Set)
      cache[std::move(key)] = Bytes(p + 9 + klen, p + 9 + klen + vlen);
    else
      cache.erase(key);
    off += len;
  }
  pos = end;
}

void FileStore::Impl::append(LockedFile& f, Record type, const std::string& key, const Bytes& value) {
  Bytes rec;
  if (f.size == 0) rec.insert(rec.end(), kFileMagic, kFileMagic + sizeof kFileMagic);
  const std::size_t start = rec.size();
  rec.push_back(static_cast<std::uint8_t>(type));
  wire::put_le(rec, key.size(), 4);
  wire::put_le(rec, value.size(), 4);
  rec.insert(rec.end(), key.begin(), key.end());
  rec.insert(rec.end(), value.begin(), value.end());
  wire::put_le(rec, fnv1a(rec.data() + start, rec.size() - start), 4);
  std::size_t done = 0;
  while (done < rec.size()) {
    ssize_t n = ::pwrite(f.fd.get(), rec.data() + done, rec.size() - done,
                         static_cast<off_t>(f.size + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      // Leave no partial record behind (it would read as corruption).
      [[maybe_unused]] int rc = ftruncate(f.fd.get(), static_cast<off_t>(f.size));
      fail(ErrorCode::Store, "cannot write file store '{}': {}", path, errno_text(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (type == Record::Set)
    cache[key] = value;
  else
    cache.erase(key);
  f.size += rec.size();
  pos = f.size;
}

std::int64_t FileStore::Impl::add(const std::string& key, std::int64_t delta, Millis timeout) {
  std::lock_guard lock(mu);
  LockedFile f = open_locked(true, Deadline::after(timeout), timeout);
  std::int64_t v = added_value(key, find(key), delta);
  append(f, Record::Set, key, decimal(v));
  return v;
}

FileStore::FileStore(const std::string& path, Millis timeout) : impl_(std::make_unique<Impl>()) {
  if (path.empty()) fail(ErrorCode::InvalidArgument, "file store path is empty: expected a file path");
  check_timeout(timeout);
  timeout_ = timeout;
  impl_->path = path;
  impl_->add(kRefCountKey, 1, timeout);
}

FileStore::~FileStore() {
  try {
    std::lock_guard lock(impl_->mu);
    LockedFile f = impl_->open_locked(true, Deadline::after(timeout_), timeout_);
    std::int64_t users = added_value(kRefCountKey, impl_->find(kRefCountKey), -1);
    if (users <= 0) {
      // Still under the lock: anyone waiting for it will see the path gone
      // and start a new file.
      ::unlink(impl_->path.c_str());
    } else {
      impl_->append(f, Record::Set, kRefCountKey, decimal(users));
    }
  } catch (const std::exception& e) {
    BRAID_WARN("closing file store '{}': {}", impl_->path, e.what());
  }
}

void FileStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(value);
  std::lock_guard lock(impl_->mu);
  LockedFile f = impl_->open_locked(true, Deadline::after(timeout_), timeout_);
  impl_->append(f, Record::Set, key, value);
}

Bytes FileStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  check_timeout(timeout);
  const Deadline deadline = Deadline::after(timeout);
  Backoff backoff(std::chrono::milliseconds(1), std::chrono::milliseconds(50));
  do {
    std::lock_guard lock(impl_->mu);
    impl_->open_locked(false, deadline, timeout);
    if (const Bytes* v = impl_->find(key)) return *v;
  } while (backoff.sleep(deadline));
  fail(ErrorCode::Timeout, "timed out after {} ms waiting for key '{}' in file store '{}'",
       timeout.count(), key, impl_->path);
}

std::optional<Bytes> FileStore::try_get(const std::string& key) {
  check_key(key);
  std::lock_guard lock(impl_->mu);
  impl_->open_locked(false, Deadline::after(timeout_), timeout_);
  if (const Bytes* v = impl_->find(key)) return *v;
  return std::nullopt;
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  check_key(key);
  return impl_->add(key, delta, timeout_);
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key(key);
  check_value(expected);
  check_value(desired);
  std::lock_guard lock(impl_->mu);
  LockedFile f = impl_->open_locked(true, Deadline::after(timeout_), timeout_);
  const Bytes* cur = impl_->find(key);
  // torch: a missing key matches an empty `expected`; a missing key with a
  // non-empty `expected` stores nothing and answers `expected`.
  if (!cur && !expected.empty()) return expected;
  if (!cur || *cur == expected) {
    impl_->append(f, Record::Set, key, desired);
    return desired;
  }
  return *cur;
}

bool FileStore::delete_key(const std::string& key) {
  check_key(key);
  std::lock_guard lock(impl_->mu);
  LockedFile f = impl_->open_locked(true, Deadline::after(timeout_), timeout_);
  if (!impl_->find(key)) return false;
  impl_->append(f, Record::Delete, key, {});
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  check_keys(keys);
  check_timeout(timeout);
  const Deadline deadline = Deadline::after(timeout);
  Backoff backoff(std::chrono::milliseconds(1), std::chrono::milliseconds(50));
  do {
    std::lock_guard lock(impl_->mu);
    impl_->open_locked(false, deadline, timeout);
    if (impl_->has_all(keys)) return;
  } while (backoff.sleep(deadline));
  fail(ErrorCode::Timeout, "timed out after {} ms waiting for {} in file store '{}'",
       timeout.count(), describe_keys(keys), impl_->path);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  check_keys(keys);
  std::lock_guard lock(impl_->mu);
  impl_->open_locked(false, Deadline::after(timeout_), timeout_);
  return impl_->has_all(keys);
}

std::int64_t FileStore::num_keys() {
  std::lock_guard lock(impl_->mu);
  impl_->open_locked(false, Deadline::after(timeout_), timeout_);
  return static_cast<std::int64_t>(impl_->cache.size() - impl_->cache.count(kRefCountKey));
}

}  // namespace braid::store
