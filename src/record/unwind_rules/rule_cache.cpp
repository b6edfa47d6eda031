#include "record/unwind_rules/rule_cache.h"

#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "module/elf_file.h"

namespace memtrack {

namespace {

constexpr char kMagic[8] = {'M', 'T', 'R', 'U', 'L', 'E', 'S', '1'};
constexpr size_t kMaxId = 64;

struct EntryHeader {
  char magic[8];
  uint32_t build_id_size;
  uint32_t self_id_size;
  uint8_t build_id[kMaxId];
  uint8_t self_id[kMaxId];
  uint64_t file_size;
  uint64_t cfi_hash;
  uint64_t count;
  uint64_t payload_hash;  // of the offsets, then the rules
};
static_assert(sizeof(EntryHeader) == 176);

// FNV-1a steps over 8-byte words (the bytes left over one at a time): a
// check against damage and stale entries, not a cryptographic one; the
// directory's ownership keeps others out.
struct Hash {
  uint64_t value = 0xcbf29ce484222325ull;
  void add(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (; size >= 8; p += 8, size -= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      value = (value ^ word) * 0x100000001b3ull;
    }
    for (; size > 0; ++p, --size) value = (value ^ *p) * 0x100000001b3ull;
  }
  void add_u64(uint64_t v) { add(&v, sizeof(v)); }
};

std::string entry_name(const std::vector<uint8_t>& build_id) {
  static const char digits[] = "0123456789abcdef";
  std::string name;
  for (uint8_t b : build_id) {
    name += digits[b >> 4];
    name += digits[b & 15];
  }
  return name + ".rules";
}

// Ours and writable by nobody else.
bool owned_privately(const struct stat& st) { return st.st_uid == geteuid() && (st.st_mode & 022) == 0; }

bool read_exactly(int fd, void* out, size_t size, off_t offset) {
  auto* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = pread(fd, p, size, offset);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    p += n, size -= static_cast<size_t>(n), offset += n;
  }
  return true;
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    p += n, size -= static_cast<size_t>(n);
  }
  return true;
}

bool valid_rule(const mt_unwind_rule& r) {
  constexpr unsigned kFlags = MT_RULE_RBP_SAVED | MT_RULE_OUTERMOST | MT_RULE_UNSUPPORTED | MT_RULE_SIGNAL_FRAME;
  return (r.cfa_reg == MT_CFA_RSP || r.cfa_reg == MT_CFA_RBP) && (r.flags & ~kFlags) == 0 && r.reserved == 0;
}

}  // namespace

std::string RuleCache::default_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/memtrack/unwind-rules";
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') return std::string(home) + "/.cache/memtrack/unwind-rules";
  return "";
}

std::unique_ptr<RuleCache> RuleCache::open(const std::string& dir, std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::unique_ptr<RuleCache> {
    if (why) *why = dir + ": " + reason;
    return nullptr;
  };
  if (dir.empty() || dir[0] != '/') return refuse("not an absolute path");
  // Missing directories are made private; existing ones are the user's own
  // choice, except the cache directory itself, checked below.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return refuse(std::strerror(errno));
    if (slash == std::string::npos) break;
  }
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return refuse(std::strerror(errno));  // ELOOP: a symbolic link
  struct stat st;
  if (fstat(fd, &st) != 0 || !owned_privately(st)) {
    close(fd);
    return refuse("not a directory of this user that only this user can write");
  }
  std::vector<uint8_t> self_id;
  try {
    self_id = ElfFile("/proc/self/exe").build_id();
  } catch (const std::exception&) {
  }
  if (self_id.empty() || self_id.size() > kMaxId) {
    close(fd);
    return refuse("memtrack's executable has no build id");
  }
  return std::unique_ptr<RuleCache>(new RuleCache(fd, std::move(self_id)));
}

RuleCache::~RuleCache() { close(dir_fd_); }

std::optional<RuleSource> RuleCache::source_of(const std::string& path) {
  try {
    ElfFile file(path);
    RuleSource source;
    source.build_id = file.build_id();
    if (source.build_id.empty() || source.build_id.size() > kMaxId) return std::nullopt;
    source.file_size = file.file_size();
    struct stat st;
    if (fstat(file.fd(), &st) != 0) return std::nullopt;
    source.dev = st.st_dev;
    source.ino = st.st_ino;
    Hash hash;
    std::vector<uint8_t> bytes;
    for (const char* name : {".eh_frame", ".eh_frame_hdr", ".debug_frame"}) {
      GElf_Shdr header;
      hash.add(name, std::strlen(name) + 1);
      if (!file.section(name, &header)) continue;
      file.read_bytes(header.sh_offset, header.sh_size, bytes);
      hash.add_u64(header.sh_addr);
      hash.add_u64(bytes.size());
      hash.add(bytes.data(), bytes.size());
    }
    size_t count = 0;
    if (elf_getphdrnum(file.elf(), &count) != 0) return std::nullopt;
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr p;
      if (!gelf_getphdr(file.elf(), static_cast<int>(i), &p)) return std::nullopt;
      if (p.p_type != PT_LOAD || !(p.p_flags & PF_X)) continue;
      hash.add_u64(p.p_offset);
      hash.add_u64(p.p_filesz);
      hash.add_u64(p.p_vaddr);
    }
    source.cfi_hash = hash.value;
    return source;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<PreparedRules> RuleCache::load(const RuleSource& source, uint64_t max_rules) {
  int fd = openat(dir_fd_, entry_name(source.build_id).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) ++rejected_;  // ELOOP: a symbolic link
    return std::nullopt;
  }
  auto reject = [&]() -> std::optional<PreparedRules> {
    close(fd);
    ++rejected_;
    return std::nullopt;
  };
  struct stat st;
  EntryHeader h;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !owned_privately(st) ||
      static_cast<uint64_t>(st.st_size) < sizeof(h) || !read_exactly(fd, &h, sizeof(h), 0))
    return reject();
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.build_id_size != source.build_id.size() ||
      std::memcmp(h.build_id, source.build_id.data(), source.build_id.size()) != 0 ||
      h.self_id_size != self_id_.size() || std::memcmp(h.self_id, self_id_.data(), self_id_.size()) != 0 ||
      h.file_size != source.file_size || h.cfi_hash != source.cfi_hash || h.count > max_rules ||
      static_cast<uint64_t>(st.st_size) != sizeof(h) + h.count * (sizeof(uint64_t) + sizeof(mt_unwind_rule)))
    return reject();
  PreparedRules out;
  out.offsets.resize(h.count);
  out.rules.resize(h.count);
  const size_t offsets_bytes = h.count * sizeof(uint64_t), rules_bytes = h.count * sizeof(mt_unwind_rule);
  if (!read_exactly(fd, out.offsets.data(), offsets_bytes, sizeof(h)) ||
      !read_exactly(fd, out.rules.data(), rules_bytes, static_cast<off_t>(sizeof(h) + offsets_bytes)))
    return reject();
  Hash hash;
  hash.add(out.offsets.data(), offsets_bytes);
  hash.add(out.rules.data(), rules_bytes);
  if (hash.value != h.payload_hash) return reject();
  for (size_t i = 0; i < h.count; ++i) {
    if (out.offsets[i] == 0 || out.offsets[i] > source.file_size || (i > 0 && out.offsets[i] <= out.offsets[i - 1]) ||
        !valid_rule(out.rules[i]))
      return reject();
  }
  close(fd);
  return out;
}

void RuleCache::store(const RuleSource& source, const PreparedRules& rules) {
  if (rules.offsets.size() != rules.rules.size()) return;
  EntryHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.build_id_size = static_cast<uint32_t>(source.build_id.size());
  std::memcpy(h.build_id, source.build_id.data(), source.build_id.size());
  h.self_id_size = static_cast<uint32_t>(self_id_.size());
  std::memcpy(h.self_id, self_id_.data(), self_id_.size());
  h.file_size = source.file_size;
  h.cfi_hash = source.cfi_hash;
  h.count = rules.offsets.size();
  const size_t offsets_bytes = h.count * sizeof(uint64_t), rules_bytes = h.count * sizeof(mt_unwind_rule);
  Hash hash;
  hash.add(rules.offsets.data(), offsets_bytes);
  hash.add(rules.rules.data(), rules_bytes);
  h.payload_hash = hash.value;

  // A new file of our own, renamed over the entry: readers see the old entry
  // or the whole new one, and a symbolic link at the name is replaced.
  const std::string name = entry_name(source.build_id);
  const std::string temporary = "." + name + "." + std::to_string(getpid()) + ".tmp";
  unlinkat(dir_fd_, temporary.c_str(), 0);  // left by a killed recorder of the same pid
  int fd = openat(dir_fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool written = write_all(fd, &h, sizeof(h)) && write_all(fd, rules.offsets.data(), offsets_bytes) &&
                 write_all(fd, rules.rules.data(), rules_bytes);
  written = close(fd) == 0 && written;
  if (!written || renameat(dir_fd_, temporary.c_str(), dir_fd_, name.c_str()) != 0) {
    unlinkat(dir_fd_, temporary.c_str(), 0);
    return;
  }
  ++stored_;
}

}  // namespace memtrack
