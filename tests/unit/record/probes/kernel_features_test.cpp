// The mechanism chosen for each concern from the kernel's features
// (record/probes/kernel_features.h), and the features read off the running kernel.
#include "record/probes/kernel_features.h"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <linux/btf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>
#include <string>

namespace memtrack {
namespace {

KernelFeatures linux_6_18() {
  KernelFeatures k;
  k.release = "6.18.0";
  k.btf = true;
  k.uprobe_sessions = true;
  k.uprobe_multi = true;
  k.send_signal_task = true;
  k.rss_stat = KernelFeatures::RssStat::PerCpuCounters;
  return k;
}

KernelFeatures linux_6_12() {
  KernelFeatures k = linux_6_18();
  k.release = "6.12.118";
  k.uprobe_sessions = false;
  k.send_signal_task = false;
  return k;
}

KernelFeatures linux_6_1() {
  KernelFeatures k = linux_6_12();
  k.release = "6.1.0";
  k.uprobe_multi = false;
  k.rss_stat = KernelFeatures::RssStat::CountArgument;
  return k;
}

TEST(KernelFeatures, NewestKernelUsesTheBestMechanismsWithoutFallbacks) {
  Mechanisms m = choose_mechanisms(linux_6_18(), {});
  EXPECT_EQ(m.uprobes, UprobeMechanism::Session);
  EXPECT_EQ(m.child_stop, ChildStop::BpfSignal);
  EXPECT_FALSE(m.ptrace_hold);
  EXPECT_EQ(m.rss, RssMechanism::Tracepoint);
  EXPECT_TRUE(m.fallbacks.empty());
}

TEST(KernelFeatures, Debian12KernelsGetOlderUprobesAndChildrenThatStopThemselves) {
  EXPECT_EQ(choose_mechanisms(linux_6_12(), {}).uprobes, UprobeMechanism::Multi);
  EXPECT_NE(choose_mechanisms(linux_6_12(), {}).fallbacks[0].find("uprobe_multi links"), std::string::npos);
  EXPECT_EQ(choose_mechanisms(linux_6_1(), {}).uprobes, UprobeMechanism::Classic);
  EXPECT_NE(choose_mechanisms(linux_6_1(), {}).fallbacks[0].find("no uprobe_multi links before 6.6"), std::string::npos);
  for (const KernelFeatures& k : {linux_6_12(), linux_6_1()}) {
    Mechanisms m = choose_mechanisms(k, {});
    EXPECT_FALSE(m.ptrace_hold) << k.release << ": the signal hold stays the default";
    EXPECT_EQ(m.child_stop, ChildStop::ChildSelfStop) << k.release;
    ASSERT_EQ(m.fallbacks.size(), 2u) << k.release;
    EXPECT_NE(m.fallbacks[1].find("stops itself at its first return from fork"), std::string::npos);
  }
  EXPECT_EQ(choose_mechanisms(linux_6_12(), {}).rss, RssMechanism::Tracepoint);
  EXPECT_EQ(choose_mechanisms(linux_6_1(), {}).rss, RssMechanism::TracepointCountArgument);
}

TEST(KernelFeatures, OptionsStayChoicesWhereTheyWork) {
  MechanismRequest request;
  request.classic_uprobes = true;
  request.ptrace_hold = true;
  request.rss_sampling = true;
  Mechanisms m = choose_mechanisms(linux_6_18(), request);
  EXPECT_EQ(m.uprobes, UprobeMechanism::Classic);
  EXPECT_TRUE(m.ptrace_hold);
  EXPECT_EQ(m.rss, RssMechanism::Statm);
  EXPECT_TRUE(m.fallbacks.empty()) << "chosen by the user, not forced by the kernel";
  request = {};
  request.memory_records = false;
  EXPECT_EQ(choose_mechanisms(linux_6_1(), request).rss, RssMechanism::Off);
}

TEST(KernelFeatures, HoldsAndPidAttachWithoutTheKfunc) {
  MechanismRequest pid_attach;
  pid_attach.can_ptrace = false;  // --pid
  Mechanisms m = choose_mechanisms(linux_6_12(), pid_attach);
  EXPECT_EQ(m.child_stop, ChildStop::ChildSelfStop);
  // --hold ptrace holds children itself; with --pid it cannot, and the
  // child stops itself instead.
  MechanismRequest ptrace;
  ptrace.ptrace_hold = true;
  m = choose_mechanisms(linux_6_1(), ptrace);
  EXPECT_TRUE(m.ptrace_hold);
  EXPECT_EQ(m.child_stop, ChildStop::PtraceHold);
  EXPECT_EQ(m.child_stop_without_hold, ChildStop::ChildSelfStop);
  MechanismRequest pid_ptrace = pid_attach;
  pid_ptrace.ptrace_hold = true;
  EXPECT_EQ(choose_mechanisms(linux_6_12(), pid_ptrace).child_stop, ChildStop::ChildSelfStop);
  EXPECT_EQ(choose_mechanisms(linux_6_18(), pid_ptrace).child_stop, ChildStop::BpfSignal);
  MechanismRequest global;
  global.global_probes = true;
  EXPECT_EQ(choose_mechanisms(linux_6_1(), global).child_stop, ChildStop::GlobalProbes);
}

TEST(KernelFeatures, WithoutTheTracepointRssIsSampled) {
  KernelFeatures k = linux_6_18();
  k.rss_stat = KernelFeatures::RssStat::Absent;
  Mechanisms m = choose_mechanisms(k, {});
  EXPECT_EQ(m.rss, RssMechanism::Statm);
  ASSERT_EQ(m.fallbacks.size(), 1u);
  EXPECT_NE(m.fallbacks[0].find("statm"), std::string::npos);
}

TEST(KernelFeatures, MissingRequirementsNameTheFeatureAndTheKernel) {
  KernelFeatures k = linux_6_18();
  EXPECT_EQ(k.missing_requirement(), "");
  k.release = "5.15.0-91-generic";
  k.missing_helper = "bpf_ringbuf_reserve_dynptr (Linux 5.19)";
  std::string why = k.missing_requirement();
  EXPECT_NE(why.find("Linux 5.15.0-91-generic lacks the BPF helper bpf_ringbuf_reserve_dynptr (Linux 5.19)"),
            std::string::npos)
      << why;
  k.btf = false;
  EXPECT_NE(k.missing_requirement().find("CONFIG_DEBUG_INFO_BTF"), std::string::npos);
}

// The running kernel, read for real: what it offers must agree with its
// release (every supported kernel's features came in a known version).
TEST(KernelFeatures, TheRunningKernelIsReadConsistentlyWithItsRelease) {
  KernelFeatures k = KernelFeatures::probe();
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(k.release, u.release);
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(u.release, "%d.%d", &major, &minor), 2);
  int version = major * 100 + minor;
  if (!k.btf) GTEST_SKIP() << "this kernel has no /sys/kernel/btf/vmlinux: nothing to read";
  EXPECT_EQ(k.uprobe_sessions, version >= 613);
  EXPECT_EQ(k.uprobe_multi, version >= 606);
  EXPECT_EQ(k.send_signal_task, version >= 613);
  EXPECT_EQ(k.rss_stat, version >= 602 ? KernelFeatures::RssStat::PerCpuCounters
                                       : KernelFeatures::RssStat::CountArgument);
  if (version >= 601) EXPECT_EQ(k.missing_requirement(), "");
}

// The features' scan of the kernel's BTF finds what libbpf's parse finds,
// on the running kernel (the kernel matrix runs the scan on 6.1 and 6.12).
TEST(KernelBtf, ScanFindsWhatLibbpfsParseFinds) {
  std::optional<BtfFeatures> parsed = parse_kernel_btf();
  if (!parsed) GTEST_SKIP() << "*** SKIPPED: no kernel BTF here ***";
  std::optional<BtfFeatures> scanned = scan_kernel_btf();
  ASSERT_TRUE(scanned);
  EXPECT_EQ(scanned->uprobe_sessions, parsed->uprobe_sessions);
  EXPECT_EQ(scanned->uprobe_multi, parsed->uprobe_multi);
  EXPECT_EQ(scanned->send_signal_task, parsed->send_signal_task);
  EXPECT_EQ(scanned->rss_stat_arguments, parsed->rss_stat_arguments);
  EXPECT_GE(scanned->rss_stat_arguments, 2) << "rss_stat has its mm and member at least";
}

// A file the scanner does not know is left to libbpf: not BTF, cut short,
// or with a type of a kind newer than the scanner.
TEST(KernelBtf, ScanRefusesWhatItDoesNotKnow) {
  char dir[] = "/tmp/memtrack-btf-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/btf";
  auto write = [&](const std::vector<uint8_t>& bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  // Header (24 bytes), one type of 12 bytes, strings "\0x\0".
  auto btf_with_kind = [](uint32_t kind) {
    std::vector<uint8_t> b(24 + 12 + 3, 0);
    uint16_t magic = 0xeB9F;
    std::memcpy(&b[0], &magic, 2);
    b[2] = 1;
    uint32_t header[5] = {24, 0, 12, 12, 3};  // hdr_len, type_off, type_len, str_off, str_len
    std::memcpy(&b[4], header, sizeof(header));
    uint32_t type[3] = {1, kind << 24, 0};
    std::memcpy(&b[24], type, sizeof(type));
    b[24 + 12 + 1] = 'x';
    return b;
  };
  write(btf_with_kind(BTF_KIND_TYPEDEF));
  EXPECT_TRUE(scan_kernel_btf(path.c_str())) << "a well-formed file";
  write(btf_with_kind(30));
  EXPECT_FALSE(scan_kernel_btf(path.c_str())) << "a kind newer than the scanner";
  std::vector<uint8_t> cut = btf_with_kind(BTF_KIND_TYPEDEF);
  cut.resize(30);
  write(cut);
  EXPECT_FALSE(scan_kernel_btf(path.c_str())) << "cut short";
  write({'n', 'o', 't', ' ', 'B', 'T', 'F'});
  EXPECT_FALSE(scan_kernel_btf(path.c_str())) << "not BTF";
  std::remove(path.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace memtrack
