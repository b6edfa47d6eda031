// What the running kernel offers memtrack's BPF programs, read once at start
// from its BTF (/sys/kernel/btf/vmlinux) and by loading probe programs, and
// the mechanism chosen for each concern from it.
//
// Contract:
//  - Probing never loads memtrack's own programs and never fails (but on a
//    malformed MEMTRACK_KERNEL_FEATURES): a feature that cannot be confirmed
//    is absent.
//  - `missing_requirement()` names the first feature no mechanism can replace
//    (BTF, a BPF helper), with the Linux version that brought it; empty when
//    memtrack can record on this kernel.
//  - `choose_mechanisms()` picks, per concern, the best mechanism the kernel
//    and the options allow; `fallbacks` says, for each concern not served by
//    the best one, what is used instead and why (shown by record, info and
//    report).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace memtrack {

struct KernelFeatures {
  std::string release;            // uname -r
  bool btf = false;               // /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)
  std::string missing_helper;     // a required BPF helper this kernel lacks, with its version
  bool uprobe_sessions = false;   // BPF_TRACE_UPROBE_SESSION links (Linux 6.13)
  bool uprobe_multi = false;      // BPF_TRACE_UPROBE_MULTI links (Linux 6.6)
  bool send_signal_task = false;  // the bpf_send_signal_task kfunc (Linux 6.13)
  // The rss_stat tracepoint, and how it gives the counter's value.
  enum class RssStat {
    Absent,
    CountArgument,    // (mm, member, count), atomic counters: Linux < 6.2
    PerCpuCounters,   // (mm, member), percpu_counter rss_stat[]: Linux >= 6.2
  } rss_stat = RssStat::Absent;

  // The running kernel's features. MEMTRACK_KERNEL_FEATURES, a comma list
  // of "-uprobe-sessions", "-uprobe-multi", "-send-signal-task" and
  // "rss-stat=absent|count|percpu", takes features away or changes their layout, so the tests run
  // every fallback on the newest kernel too (tests/integration).
  static KernelFeatures probe();
  // Why memtrack cannot record here at all, or "".
  std::string missing_requirement() const;
};

// What the features need from the kernel's BTF (/sys/kernel/btf/vmlinux).
struct BtfFeatures {
  bool uprobe_sessions = false;
  bool uprobe_multi = false;
  bool send_signal_task = false;
  int rss_stat_arguments = -1;  // the rss_stat tracepoint's, -1: none
  bool operator==(const BtfFeatures&) const = default;
};
// Found by scanning the raw BTF for those names, in place (mapped where the
// kernel allows it): libbpf's parse reads the 5.5 MB file 4 KiB at a time,
// copies it and checks every type (~5-10 ms of a start), and the load parses
// it again. nullopt for a file the scanner does not know (a kind newer than
// it); KernelFeatures::probe then asks parse_kernel_btf, libbpf's parse.
std::optional<BtfFeatures> scan_kernel_btf(const char* path = "/sys/kernel/btf/vmlinux");
std::optional<BtfFeatures> parse_kernel_btf();

// How the allocator probes are attached: one uprobe session link per file
// and process (entry and return in one program), else uprobe_multi links
// (entries and returns apart), else one perf uprobe per function and direction.
enum class UprobeMechanism { Session, Multi, Classic };
// How a tracked process's new child is kept from running before its probes
// exist: the kernel stops it (bpf_send_signal_task), it stops itself at its
// first return from fork (before 6.13), the ptrace hold holds it, or every
// process has the probes already.
enum class ChildStop { BpfSignal, ChildSelfStop, PtraceHold, GlobalProbes };
// Where RSS over time comes from.
enum class RssMechanism { Off, Tracepoint, TracepointCountArgument, Statm };

struct MechanismRequest {
  bool classic_uprobes = false;  // --classic-uprobes
  bool global_probes = false;    // --global-probes
  bool ptrace_hold = false;      // --hold ptrace
  bool can_ptrace = true;        // memtrack starts the command (not --pid)
  bool memory_records = true;
  bool rss_sampling = false;     // --rss-sampling
};

struct Mechanisms {
  UprobeMechanism uprobes = UprobeMechanism::Session;
  bool ptrace_hold = false;
  ChildStop child_stop = ChildStop::BpfSignal;
  // What stops a new child where the ptrace hold cannot (it was refused).
  ChildStop child_stop_without_hold = ChildStop::BpfSignal;
  RssMechanism rss = RssMechanism::Tracepoint;
  // "concern: what is used (why)", for each concern not served by its best
  // mechanism because of the kernel.
  std::vector<std::string> fallbacks;
};

Mechanisms choose_mechanisms(const KernelFeatures& kernel, const MechanismRequest& request);

}  // namespace memtrack
