#include "record/probes/kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>
#include <unistd.h>

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
  std::unique_ptr<struct ::btf, BtfDeleter> kernel(btf__load_vmlinux_btf());
  if (!kernel) {
    f.btf = false;
    return f;
  }
  f.uprobe_sessions = enum_has_value(kernel.get(), "bpf_attach_type", "BPF_TRACE_UPROBE_SESSION");
  f.uprobe_multi = enum_has_value(kernel.get(), "bpf_attach_type", "BPF_TRACE_UPROBE_MULTI");
  f.send_signal_task = btf__find_by_name_kind(kernel.get(), "bpf_send_signal_task", BTF_KIND_FUNC) >= 0;
  switch (tracepoint_arguments(kernel.get(), "rss_stat")) {
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
