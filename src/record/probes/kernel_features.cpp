#include "record/probes/kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string_view>

namespace memtrack {

namespace {

// Helpers every program set needs, none of which has a replacement, each
// with the version that brought it (for kprobe-type programs, uprobes'
// type; the tracing programs' helpers came earlier).
struct RequiredHelper {
  bpf_func_id id;
  const char* name;
  const char* since;
};
constexpr RequiredHelper kRequiredHelpers[] = {
    {BPF_FUNC_ringbuf_reserve, "bpf_ringbuf_reserve", "5.8"},
    {BPF_FUNC_get_attach_cookie, "bpf_get_attach_cookie", "5.15"},
    {BPF_FUNC_loop, "bpf_loop", "5.17"},
    {BPF_FUNC_find_vma, "bpf_find_vma", "5.17"},
    {BPF_FUNC_ringbuf_reserve_dynptr, "bpf_ringbuf_reserve_dynptr", "5.19"},
    {BPF_FUNC_map_lookup_percpu_elem, "bpf_map_lookup_percpu_elem", "5.19"},
};

struct BtfDeleter {
  void operator()(struct ::btf* b) const { btf__free(b); }
};

// Whether enum `enum_name` of the kernel's BTF has the value `value_name`:
// the kernel's own UAPI enum lists exactly the attach types it accepts.
bool enum_has_value(const btf* kernel, const char* enum_name, std::string_view value_name) {
  int id = btf__find_by_name_kind(kernel, enum_name, BTF_KIND_ENUM);
  if (id < 0) return false;
  const btf_type* type = btf__type_by_id(kernel, id);
  const struct btf_enum* values = btf_enum(type);
  for (int i = 0; i < btf_vlen(type); ++i)
    if (const char* name = btf__name_by_offset(kernel, values[i].name_off); name && value_name == name) return true;
  return false;
}

// The parameters of tracepoint `name` as a BTF-enabled program sees them
// (the typedef btf_trace_NAME: a pointer to a prototype whose first
// parameter is the tracepoint's private data), or -1 when there is none.
int tracepoint_arguments(const btf* kernel, const std::string& name) {
  int id = btf__find_by_name_kind(kernel, ("btf_trace_" + name).c_str(), BTF_KIND_TYPEDEF);
  if (id < 0) return -1;
  const btf_type* type = btf__type_by_id(kernel, id);
  while (type && (btf_is_typedef(type) || btf_is_ptr(type))) type = btf__type_by_id(kernel, type->type);
  if (!type || !btf_is_func_proto(type)) return -1;
  return btf_vlen(type) - 1;
}

// The raw BTF's layout (include/uapi/linux/btf.h): a header, then types of
// 12 bytes each followed by a part of a size known from their kind, then the
// strings.
struct RawBtfHeader {
  uint16_t magic;
  uint8_t version, flags;
  uint32_t hdr_len, type_off, type_len, str_off, str_len;
};
constexpr uint16_t kBtfMagic = 0xeB9F;

// The bytes that follow a type of `kind` with `vlen` members, or -1 for a
// kind this scanner does not know.
long trailing_bytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case BTF_KIND_INT: case BTF_KIND_VAR: case BTF_KIND_DECL_TAG: return 4;
    case BTF_KIND_ARRAY: return 12;
    case BTF_KIND_STRUCT: case BTF_KIND_UNION: case BTF_KIND_DATASEC: case BTF_KIND_ENUM64: return 12L * vlen;
    case BTF_KIND_ENUM: case BTF_KIND_FUNC_PROTO: return 8L * vlen;
    case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE: case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT: case BTF_KIND_TYPE_TAG: return 0;
    default: return -1;
  }
}

// The whole of `path` (mapped where the kernel allows it, Linux >= 6.16;
// else read).
class WholeFile {
 public:
  explicit WholeFile(const char* path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      size_ = static_cast<size_t>(st.st_size);
      void* map = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (map != MAP_FAILED) {
        mapped_ = static_cast<const uint8_t*>(map);
      } else {
        read_.resize(size_);
        size_t done = 0;
        for (ssize_t n; done < size_ && (n = read(fd, read_.data() + done, size_ - done)) != 0;) {
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) break;
          done += static_cast<size_t>(n);
        }
        if (done != size_) size_ = 0;
      }
    }
    close(fd);
  }
  ~WholeFile() {
    if (mapped_) munmap(const_cast<uint8_t*>(mapped_), size_);
  }
  WholeFile(const WholeFile&) = delete;
  WholeFile& operator=(const WholeFile&) = delete;
  const uint8_t* data() const { return mapped_ ? mapped_ : read_.data(); }
  size_t size() const { return size_; }

 private:
  const uint8_t* mapped_ = nullptr;
  std::vector<uint8_t> read_;
  size_t size_ = 0;
};

void pretend_features(KernelFeatures& f, std::string_view list) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item == "-uprobe-sessions")
      f.uprobe_sessions = false;
    else if (item == "-uprobe-multi")
      f.uprobe_multi = false;
    else if (item == "-send-signal-task")
      f.send_signal_task = false;
    else if (item == "rss-stat=absent")
      f.rss_stat = KernelFeatures::RssStat::Absent;
    else if (item == "rss-stat=count")
      f.rss_stat = KernelFeatures::RssStat::CountArgument;
    else if (item == "rss-stat=percpu")
      f.rss_stat = KernelFeatures::RssStat::PerCpuCounters;
    else if (!item.empty())
      throw std::invalid_argument("MEMTRACK_KERNEL_FEATURES: unknown item \"" + std::string(item) + "\"");
  }
}

}  // namespace

std::optional<BtfFeatures> scan_kernel_btf(const char* path) {
  WholeFile file(path);
  const uint8_t* data = file.data();
  const size_t size = file.size();
  RawBtfHeader h;
  if (size < sizeof(h)) return std::nullopt;
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != kBtfMagic || h.version != 1 || h.hdr_len < sizeof(h) || h.hdr_len > size ||
      uint64_t(h.hdr_len) + h.type_off + h.type_len > size || uint64_t(h.hdr_len) + h.str_off + h.str_len > size)
    return std::nullopt;
  const uint8_t* types = data + h.hdr_len + h.type_off;
  const char* strings = reinterpret_cast<const char*>(data + h.hdr_len + h.str_off);
  auto name_is = [&](uint32_t offset, std::string_view name) {
    return offset < h.str_len && h.str_len - offset > name.size() &&
           std::memcmp(strings + offset, name.data(), name.size()) == 0 && strings[offset + name.size()] == '\0';
  };
  struct Raw {
    uint32_t name_off, info, type;
  };
  auto kind_of = [](const Raw& t) { return (t.info >> 24) & 0x1f; };
  auto vlen_of = [](const Raw& t) { return t.info & 0xffff; };
  // Where each type starts (type ids from 1), to follow the typedef.
  std::vector<uint32_t> at{0};
  BtfFeatures found;
  uint32_t rss_typedef = 0;
  for (uint64_t offset = 0; offset < h.type_len;) {
    if (h.type_len - offset < sizeof(Raw)) return std::nullopt;
    Raw t;
    std::memcpy(&t, types + offset, sizeof(t));
    long more = trailing_bytes(kind_of(t), vlen_of(t));
    if (more < 0 || h.type_len - offset - sizeof(Raw) < uint64_t(more)) return std::nullopt;
    at.push_back(static_cast<uint32_t>(offset));
    if (kind_of(t) == BTF_KIND_ENUM && name_is(t.name_off, "bpf_attach_type")) {
      for (uint32_t i = 0; i < vlen_of(t); ++i) {
        uint32_t value_name;
        std::memcpy(&value_name, types + offset + sizeof(Raw) + 8 * i, sizeof(value_name));
        if (name_is(value_name, "BPF_TRACE_UPROBE_SESSION")) found.uprobe_sessions = true;
        if (name_is(value_name, "BPF_TRACE_UPROBE_MULTI")) found.uprobe_multi = true;
      }
    } else if (kind_of(t) == BTF_KIND_FUNC && name_is(t.name_off, "bpf_send_signal_task")) {
      found.send_signal_task = true;
    } else if (kind_of(t) == BTF_KIND_TYPEDEF && name_is(t.name_off, "btf_trace_rss_stat")) {
      rss_typedef = static_cast<uint32_t>(at.size() - 1);
    }
    offset += sizeof(Raw) + uint64_t(more);
  }
  // As tracepoint_arguments: through typedefs and pointers to the prototype.
  for (uint32_t id = rss_typedef, hops = 0; id != 0 && id < at.size() && hops < 8; ++hops) {
    Raw t;
    std::memcpy(&t, types + at[id], sizeof(t));
    if (kind_of(t) == BTF_KIND_FUNC_PROTO) {
      found.rss_stat_arguments = static_cast<int>(vlen_of(t)) - 1;
      break;
    }
    if (kind_of(t) != BTF_KIND_TYPEDEF && kind_of(t) != BTF_KIND_PTR) break;
    id = t.type;
  }
  return found;
}

std::optional<BtfFeatures> parse_kernel_btf() {
  std::unique_ptr<struct ::btf, BtfDeleter> kernel(btf__load_vmlinux_btf());
  if (!kernel) return std::nullopt;
  BtfFeatures found;
  found.uprobe_sessions = enum_has_value(kernel.get(), "bpf_attach_type", "BPF_TRACE_UPROBE_SESSION");
  found.uprobe_multi = enum_has_value(kernel.get(), "bpf_attach_type", "BPF_TRACE_UPROBE_MULTI");
  found.send_signal_task = btf__find_by_name_kind(kernel.get(), "bpf_send_signal_task", BTF_KIND_FUNC) >= 0;
  found.rss_stat_arguments = tracepoint_arguments(kernel.get(), "rss_stat");
  return found;
}

KernelFeatures KernelFeatures::probe() {
  KernelFeatures f;
  if (utsname u; uname(&u) == 0) f.release = u.release;
  f.btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  for (const auto& helper : kRequiredHelpers) {
    // 1: supported; 0: not; < 0: could not tell (then loading will say).
    if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, helper.id, nullptr) == 0) {
      f.missing_helper = std::string(helper.name) + " (Linux " + helper.since + ")";
      break;
    }
  }
  if (!f.btf) return f;
  // Scanned for these few names; libbpf's parse (which the load repeats)
  // where the scanner does not know the file.
  std::optional<BtfFeatures> found = scan_kernel_btf();
  if (!found) found = parse_kernel_btf();
  if (!found) {
    f.btf = false;
    return f;
  }
  f.uprobe_sessions = found->uprobe_sessions;
  f.uprobe_multi = found->uprobe_multi;
  f.send_signal_task = found->send_signal_task;
  switch (found->rss_stat_arguments) {
    case 2: f.rss_stat = RssStat::PerCpuCounters; break;
    case 3: f.rss_stat = RssStat::CountArgument; break;
    default: f.rss_stat = RssStat::Absent; break;
  }
  if (const char* pretend = std::getenv("MEMTRACK_KERNEL_FEATURES")) pretend_features(f, pretend);
  return f;
}

std::string KernelFeatures::missing_requirement() const {
  std::string kernel = "Linux " + release;
  if (!btf)
    return kernel + " has no BTF type information (/sys/kernel/btf/vmlinux: a kernel built without "
                    "CONFIG_DEBUG_INFO_BTF); memtrack's BPF programs need it (Linux 6.1 or later, built with BTF)";
  if (!missing_helper.empty())
    return kernel + " lacks the BPF helper " + missing_helper + "; memtrack needs Linux 6.1 or later";
  return {};
}

Mechanisms choose_mechanisms(const KernelFeatures& kernel, const MechanismRequest& request) {
  Mechanisms m;
  if (request.classic_uprobes) {
    m.uprobes = UprobeMechanism::Classic;
  } else if (kernel.uprobe_sessions) {
    m.uprobes = UprobeMechanism::Session;
  } else if (kernel.uprobe_multi) {
    m.uprobes = UprobeMechanism::Multi;
    m.fallbacks.push_back("uprobes: uprobe_multi links, entries and returns apart (no uprobe sessions before Linux 6.13)");
  } else {
    m.uprobes = UprobeMechanism::Classic;
    m.fallbacks.push_back("uprobes: classic perf uprobes, one per function (no uprobe sessions before Linux 6.13, "
                          "no uprobe_multi links before 6.6)");
  }

  m.ptrace_hold = request.ptrace_hold;
  m.child_stop_without_hold = kernel.send_signal_task ? ChildStop::BpfSignal : ChildStop::ChildSelfStop;
  if (request.global_probes) {
    m.child_stop = ChildStop::GlobalProbes;
  } else if (m.ptrace_hold && request.can_ptrace) {
    m.child_stop = ChildStop::PtraceHold;
  } else if (kernel.send_signal_task) {
    m.child_stop = ChildStop::BpfSignal;
  } else {
    m.child_stop = ChildStop::ChildSelfStop;
    m.fallbacks.push_back("children: a new child stops itself at its first return from fork until its probes "
                          "exist (no bpf_send_signal_task before Linux 6.13 to stop it from its parent)");
  }

  if (!request.memory_records) {
    m.rss = RssMechanism::Off;
  } else if (request.rss_sampling) {
    m.rss = RssMechanism::Statm;
  } else if (kernel.rss_stat == KernelFeatures::RssStat::PerCpuCounters) {
    m.rss = RssMechanism::Tracepoint;
  } else if (kernel.rss_stat == KernelFeatures::RssStat::CountArgument) {
    m.rss = RssMechanism::TracepointCountArgument;
  } else {
    m.rss = RssMechanism::Statm;
    m.fallbacks.push_back("rss: /proc/PID/statm sampled every 10 ms (this kernel has no rss_stat tracepoint)");
  }
  return m;
}

}  // namespace memtrack
