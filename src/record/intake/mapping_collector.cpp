#include "record/intake/mapping_collector.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "record/process/proc_fs.h"

namespace memtrack {

namespace {

// Data pages of all rings together: 4 MiB of locked memory at 4 KiB pages.
// Each ring gets 64 pages up to 16 CPUs, fewer beyond, never under 8. 64
// pages (256 KiB) held 1816 MMAP2 records of a 50-byte path (measured):
// far more than a program maps in the 10 ms between two drains.
constexpr size_t kRingBudgetPages = 1024;
constexpr size_t kMaxRingPages = 64;
constexpr size_t kMinRingPages = 8;

size_t ring_data_pages(size_t cpus) {
  return std::bit_floor(std::clamp(kRingBudgetPages / cpus, kMinRingPages, kMaxRingPages));
}

// Every record ends with the sample_id the attributes ask for (TID | TIME).
struct SampleId {
  uint32_t pid, tid;
  uint64_t time;
};
constexpr size_t kSampleIdBytes = sizeof(SampleId);

// PERF_RECORD_MMAP2 up to its file name.
struct Mmap2Fixed {
  perf_event_header header;
  uint32_t pid, tid;
  uint64_t addr, len, pgoff;
  // maj (u32), min (u32), ino (u64), ino_generation (u64); or, when the
  // header has PERF_RECORD_MISC_MMAP_BUILD_ID, the build id's size (u8),
  // 3 reserved bytes and the build id (up to 20 bytes).
  uint8_t file_identity[24];
  uint32_t prot, flags;
};
static_assert(sizeof(Mmap2Fixed) == 72);
constexpr size_t kBuildIdOffset = 4;
constexpr size_t kMaxBuildIdBytes = sizeof(Mmap2Fixed::file_identity) - kBuildIdOffset;

struct CommFixed {
  perf_event_header header;
  uint32_t pid, tid;
};

// What read() returns with read_format PERF_FORMAT_LOST.
struct ReadValues {
  uint64_t value;  // the dummy event counts nothing
  uint64_t lost;   // records the ring had no room for
};

template <typename T>
T load(const uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

// The NUL-terminated string in [begin, end), or nullopt without a NUL.
std::optional<std::string_view> bounded_c_string(const uint8_t* begin, const uint8_t* end) {
  const void* nul = std::memchr(begin, 0, static_cast<size_t>(end - begin));
  if (!nul) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(begin),
                          static_cast<const uint8_t*>(nul) - begin);
}

// What is kept: code mapped from a file. The kernel names anonymous
// mappings "//anon" and special ones "[vdso]", "[heap]"...; it reports only
// executable mappings when mmap_data is off, checked anyway so that a
// Mapping record always describes code.
bool is_file_code(uint32_t prot, std::string_view path) {
  return (prot & PROT_EXEC) && path.starts_with('/') && !path.starts_with("//");
}

perf_event_attr mapping_event_attr() {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;  // counts nothing: only side-band records
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.sample_id_all = 1;  // so MMAP2, COMM and LOST records carry pid, tid and time
  attr.disabled = 1;       // enabled once every CPU's event exists
  // Losses of inherited events are charged to this (parent) event too.
  // PERF_RECORD_LOST would report them only once a later record fits, so
  // losses at the end of a run would go unreported.
  attr.read_format = PERF_FORMAT_LOST;
  attr.inherit = 1;        // every thread and child created from now on
  attr.mmap = 1;
  attr.mmap2 = 1;
  attr.build_id = 1;  // the file's content identity rather than dev/ino, when readable
  // COMM records, for the exec marker: begin_new_exec() sends one flagged
  // PERF_RECORD_MISC_COMM_EXEC once the old address space is gone and
  // before the new image is mapped.
  attr.comm = 1;
  attr.comm_exec = 1;
  // User-side records need no kernel profiling permission (paranoid 2).
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.use_clockid = 1;  // the clock of bpf_ktime_get_ns and of the artifact
  attr.clockid = CLOCK_MONOTONIC;
  return attr;
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::system_error(errno, std::generic_category(), std::string("cannot read ") + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

PerfRecord decode_perf_record(std::span<const uint8_t> bytes) {
  PerfRecord decoded;
  const uint8_t* record = bytes.data();
  const size_t size = bytes.size();
  const auto header = load<perf_event_header>(record);
  // The sample_id ends every record; use once `size` is known to hold it.
  auto sample_id = [&] { return record + size - kSampleIdBytes; };
  switch (header.type) {
    case PERF_RECORD_MMAP2: {
      decoded.kind = PerfRecord::Kind::Malformed;
      if (size < sizeof(Mmap2Fixed) + kSampleIdBytes) return decoded;
      const auto fixed = load<Mmap2Fixed>(record);
      std::optional<std::string_view> path = bounded_c_string(record + sizeof(Mmap2Fixed), sample_id());
      const bool has_build_id = header.misc & PERF_RECORD_MISC_MMAP_BUILD_ID;
      const uint8_t build_id_size = fixed.file_identity[0];
      if (!path || (has_build_id && build_id_size > kMaxBuildIdBytes)) return decoded;
      decoded.kind = PerfRecord::Kind::Other;
      if (!is_file_code(fixed.prot, *path)) return decoded;
      decoded.kind = PerfRecord::Kind::Mapping;
      decoded.timestamp = load<SampleId>(sample_id()).time;
      decoded.pid = static_cast<int32_t>(fixed.pid);
      decoded.event.type = EventType::Mapping;
      decoded.event.pid = decoded.pid;
      decoded.event.tid = static_cast<int32_t>(fixed.tid);
      decoded.event.timestamp = decoded.timestamp;
      decoded.event.addr = fixed.addr;
      decoded.mapping = std::make_shared<MappingInfo>();
      MappingInfo& mapping = *decoded.mapping;
      mapping.len = fixed.len;
      mapping.file_offset = fixed.pgoff;
      if (has_build_id) {
        const uint8_t* id = fixed.file_identity + kBuildIdOffset;
        mapping.build_id.assign(id, id + build_id_size);
      } else {
        const auto major = load<uint32_t>(fixed.file_identity);
        const auto minor = load<uint32_t>(fixed.file_identity + 4);
        mapping.dev = (uint64_t{major} << 20) | minor;
        mapping.ino = load<uint64_t>(fixed.file_identity + 8);
      }
      mapping.prot = fixed.prot;
      mapping.path = *path;
      return decoded;
    }
    case PERF_RECORD_COMM:
      if (size < sizeof(CommFixed) + kSampleIdBytes) {
        decoded.kind = PerfRecord::Kind::Malformed;
      } else if (header.misc & PERF_RECORD_MISC_COMM_EXEC) {  // not a rename
        decoded.kind = PerfRecord::Kind::Exec;
        decoded.timestamp = load<SampleId>(sample_id()).time;
        decoded.pid = static_cast<int32_t>(load<CommFixed>(record).pid);
      }
      return decoded;
    default:
      // PERF_RECORD_LOST: read() counts the same losses. FORK and EXIT: the
      // kernel sends them to every mmap event; the recorder has them from BPF.
      return decoded;
  }
}

std::vector<int> parse_cpu_list(std::string_view list) {
  while (!list.empty() && std::isspace(static_cast<unsigned char>(list.back()))) list.remove_suffix(1);
  auto malformed = [&] { return std::invalid_argument("malformed CPU list \"" + std::string(list) + "\""); };
  auto number = [&](std::string_view digits) {
    int value = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value < 0)
      throw malformed();
    return value;
  };
  std::vector<int> cpus;
  for (size_t pos = 0;;) {
    size_t comma = list.find(',', pos);
    std::string_view item = list.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
    size_t dash = item.find('-');
    int first = number(item.substr(0, dash));
    int last = dash == std::string_view::npos ? first : number(item.substr(dash + 1));
    if (last < first) throw malformed();
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    if (comma == std::string_view::npos) return cpus;
    pos = comma + 1;
  }
}

// One CPU's perf event and its mmapped ring: a metadata page, then the
// data pages the kernel writes records into.
class MappingCollector::Ring {
 public:
  Ring(int fd, size_t data_pages) : fd_(fd) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (1 + data_pages) * page;
    // Writable, so the kernel honours data_tail and never overwrites
    // unread records (it counts them as lost instead).
    void* base = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      int error = errno;
      close(fd_);
      throw std::system_error(error, std::generic_category(), "mmap of the perf ring");
    }
    meta_ = static_cast<perf_event_mmap_page*>(base);
    data_ = static_cast<const uint8_t*>(base) + meta_->data_offset;
    size_ = meta_->data_size;
  }
  ~Ring() {
    munmap(meta_, map_bytes_);
    close(fd_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  int fd() const { return fd_; }
  perf_event_mmap_page* meta() const { return meta_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  int fd_;
  size_t map_bytes_ = 0;
  perf_event_mmap_page* meta_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

MappingCollector::MappingCollector() = default;

MappingCollector::MappingCollector(pid_t root) {
  try {
    std::vector<int> cpus = parse_cpu_list(read_text("/sys/devices/system/cpu/online"));
    size_t data_pages = ring_data_pages(cpus.size());
    perf_event_attr attr = mapping_event_attr();
    for (int cpu : cpus) {
      // With inherit, an event on every CPU (cpu = -1) cannot be mmapped:
      // one event per CPU.
      int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, root, cpu, -1, PERF_FLAG_FD_CLOEXEC));
      if (fd < 0)
        throw std::system_error(errno, std::generic_category(), "perf_event_open on CPU " + std::to_string(cpu));
      rings_.push_back(std::make_unique<Ring>(fd, data_pages));
      wrapped_record_.resize(std::max<size_t>(wrapped_record_.size(), rings_.back()->size()));
    }
    for (const auto& ring : rings_) {
      if (ioctl(ring->fd(), PERF_EVENT_IOC_ENABLE, 0) != 0)
        throw std::system_error(errno, std::generic_category(), "enabling the perf event");
    }
  } catch (const std::exception& e) {
    rings_.clear();
    wrapped_record_ = {};
    fallback_reason_ = e.what();
  }
}

MappingCollector::~MappingCollector() = default;

std::string_view MappingCollector::feature() const {
  return source() == Source::Perf ? "mappings-perf" : "mappings-procfs";
}

std::vector<Event> MappingCollector::drain(uint64_t watermark_ns) {
  for (const auto& ring : rings_) read_ring(*ring);
  if (pending_.empty()) return {};
  auto by_time = [](const PerfRecord& a, const PerfRecord& b) { return a.timestamp < b.timestamp; };
  std::stable_sort(pending_.begin(), pending_.end(), by_time);
  auto cut = std::upper_bound(pending_.begin(), pending_.end(), watermark_ns,
                              [](uint64_t w, const PerfRecord& p) { return w < p.timestamp; });
  std::vector<Event> events;
  for (auto it = pending_.begin(); it != cut; ++it) {
    if (it->kind == PerfRecord::Kind::Exec) {
      exec_in_progress_.insert(it->pid);
      continue;
    }
    it->mapping->new_image = exec_in_progress_.erase(it->event.pid) > 0;
    it->event.mapping = std::move(it->mapping);
    events.push_back(std::move(it->event));
  }
  pending_.erase(pending_.begin(), cut);
  records_ += events.size();
  return events;
}

void MappingCollector::read_ring(Ring& ring) {
  perf_event_mmap_page* meta = ring.meta();
  // Acquire: the records up to data_head are visible once head is.
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;  // only this thread writes it
  const uint64_t size = ring.size();  // a power of two
  if (head - tail > size) {
    // Cannot happen while the ring is writable (the kernel stops at
    // data_tail); a corrupt header page: skip what it claims.
    ++dropped_;
    tail = head;
  }
  while (tail != head) {
    const uint64_t offset = tail & (size - 1);
    // Records are 8-byte aligned and sized, so a header never wraps.
    const auto header = load<perf_event_header>(ring.data() + offset);
    if (header.size < sizeof(header) || header.size % 8 != 0 || header.size > head - tail) {
      ++dropped_;  // nothing after it can be trusted either
      tail = head;
      break;
    }
    const uint8_t* record = ring.data() + offset;
    if (offset + header.size > size) {
      const size_t first_part = size - offset;
      std::memcpy(wrapped_record_.data(), record, first_part);
      std::memcpy(wrapped_record_.data() + first_part, ring.data(), header.size - first_part);
      record = wrapped_record_.data();
    }
    PerfRecord decoded = decode_perf_record({record, header.size});
    if (decoded.kind == PerfRecord::Kind::Malformed) ++dropped_;
    if (decoded.kind == PerfRecord::Kind::Mapping || decoded.kind == PerfRecord::Kind::Exec)
      pending_.push_back(std::move(decoded));
    tail += header.size;
  }
  // Release: our reads of the records happen before the kernel may reuse them.
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

std::vector<Event> MappingCollector::snapshot_mappings(pid_t pid, uint64_t timestamp) {
  std::vector<Event> events;
  for (const MapEntry& entry : read_maps(pid)) {
    // /proc names special mappings "[vdso]"...; anonymous ones have no path.
    if (!entry.executable() || !entry.path.starts_with('/')) continue;
    auto mapping = std::make_shared<MappingInfo>();
    mapping->len = entry.end - entry.start;
    mapping->file_offset = entry.offset;
    mapping->dev = entry.kernel_dev();
    mapping->ino = entry.ino;
    mapping->prot = PROT_EXEC;
    mapping->path = entry.path;
    Event event;
    event.type = EventType::Mapping;
    event.pid = event.tid = pid;
    event.timestamp = timestamp;
    event.addr = entry.start;
    event.mapping = std::move(mapping);
    events.push_back(std::move(event));
  }
  records_ += events.size();
  return events;
}

std::map<std::string, uint64_t> MappingCollector::counters() const {
  uint64_t lost = 0;
  for (const auto& ring : rings_) {
    ReadValues values;
    if (read(ring->fd(), &values, sizeof values) != sizeof values)
      throw std::system_error(errno, std::generic_category(), "reading the perf event's loss count");
    lost += values.lost;
  }
  return {
      {"mapping_records", records_.load()},
      {"mapping_records_lost", lost},
      {"mapping_records_dropped", dropped_.load()},
  };
}

}  // namespace memtrack
