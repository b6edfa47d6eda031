// Probe placement on hand-assembled byte sequences.
#include "record/probes/probe_placement.h"

#include <gtest/gtest.h>

#include <vector>

namespace memtrack {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Instructions used below (AT&T syntax in the names).
const Bytes kPushRbx = {0x53};
const Bytes kPushR12 = {0x41, 0x54};
const Bytes kPopRbx = {0x5b};
const Bytes kRet = {0xc3};
const Bytes kTestRdiRdi = {0x48, 0x85, 0xff};
const Bytes kJeShort = {0x74, 0x01};  // over the next one-byte instruction
const Bytes kJeNear = {0x0f, 0x84, 0x01, 0x00, 0x00, 0x00};
const Bytes kJmpShort = {0xeb, 0x01};
const Bytes kEndbr64 = {0xf3, 0x0f, 0x1e, 0xfa};
const Bytes kMovRaxRdi = {0x48, 0x89, 0xc7};  // mov %rax,%rdi: writes an argument
const Bytes kMovRdiRbx = {0x48, 0x89, 0xfb};  // mov %rdi,%rbx
const Bytes kMovRaxRax = {0x48, 0x89, 0xc0};
const Bytes kSubRsp8 = {0x48, 0x83, 0xec, 0x08};
const Bytes kCmpbRip = {0x80, 0x3d, 0x10, 0x20, 0x30, 0x00, 0x00};  // cmpb $0,x(%rip)
const Bytes kStoreRedZone = {0x48, 0x89, 0x44, 0x24, 0xf8};       // mov %rax,-8(%rsp)
const Bytes kEnter = {0xc8, 0x00, 0x00, 0x00};
const Bytes kLeaRsi = {0x48, 0x8d, 0x77, 0xf0};  // lea -0x10(%rdi),%rsi
const Bytes kMulRdx = {0x48, 0xf7, 0xe2};
const Bytes kStackGuard = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};  // %fs:0x28
const Bytes kRepStos = {0xf3, 0x48, 0xab};
const Bytes kMovabsRax = {0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8};  // 10 bytes
const Bytes kMovEaxImm = {0xb8, 1, 2, 3, 4};                    // 5 bytes
const Bytes kNop5 = {0x0f, 0x1f, 0x44, 0x00, 0x00};
const Bytes kNoplNonCanonical = {0x0f, 0x1f, 0x04, 0x00};  // nopl (%rax,%rax,1)

ProbePlacement place(const Bytes& code, FunctionExtent extent = FunctionExtent::whole) {
  InstructionDecoder decoder;
  return choose_probe_offset(decoder, code, extent);
}

TEST(ProbePlacement, PushAtEntryStaysAtEntry) {
  ProbePlacement p = place(cat({kPushRbx, kPopRbx, kRet}));
  EXPECT_EQ(p.offset, 0u);
  EXPECT_EQ(p.reason, "entry: push (emulated)");
  EXPECT_EQ(place(cat({kPushR12, kRet})).offset, 0u);
}

TEST(ProbePlacement, TestThenJccMovesToTheJcc) {
  ProbePlacement p = place(cat({kTestRdiRdi, kJeShort, kRet, kRet}));
  EXPECT_EQ(p.offset, 3u);
  EXPECT_EQ(p.reason, "+3: jcc after test (emulated)");
  EXPECT_EQ(place(cat({kTestRdiRdi, kJeNear, kRet, kRet})).offset, 3u);
}

TEST(ProbePlacement, TestThenJmpMovesToTheJmp) {
  ProbePlacement p = place(cat({kTestRdiRdi, kJmpShort, kRet, kRet}));
  EXPECT_EQ(p.offset, 3u);
  EXPECT_EQ(p.reason, "+3: jmp after test (emulated)");
}

TEST(ProbePlacement, Endbr64ThenPushMovesPastEndbr64) {
  ProbePlacement p = place(cat({kEndbr64, kPushRbx, kPopRbx, kRet}));
  EXPECT_EQ(p.offset, 4u);
  EXPECT_EQ(p.reason, "+4: push after endbr64 (emulated)");
}

TEST(ProbePlacement, WalksOverSeveralTransparentInstructions) {
  // glibc memalign: cmpb $0,__malloc_initialized(%rip); je ...
  EXPECT_EQ(place(cat({kCmpbRip, kJeShort, kRet, kRet})).offset, 7u);
  // A copy of an argument into a scratch register does not change it.
  ProbePlacement p = place(cat({kEndbr64, kMovRdiRbx, kStackGuard, kPushRbx, kPopRbx, kRet}));
  EXPECT_EQ(p.offset, 16u);
  EXPECT_EQ(p.reason, "+16: push after endbr64, mov, mov (emulated)");
}

TEST(ProbePlacement, WriteToAnArgumentRegisterKeepsTheEntry) {
  ProbePlacement p = place(cat({kMovRaxRdi, kPushRbx, kPopRbx, kRet}));
  EXPECT_EQ(p.offset, 0u);
  EXPECT_EQ(p.reason, "entry: single-stepped (mov)");
  EXPECT_EQ(place(cat({kLeaRsi, kPushRbx, kPopRbx, kRet})).offset, 0u);
  // glibc reallocarray: mov %rsi,%rax; mul %rdx (writes %rdx:%rax).
  EXPECT_EQ(place(cat({{0x48, 0x89, 0xf0}, kMulRdx, kJeShort, kRet, kRet})).offset, 0u);
}

TEST(ProbePlacement, OnlyTheArgumentsTheProbeReadsAreProtected) {
  // tcmalloc's malloc: mov x(%rip),%rax; mov %rdi,%r8; test %rax,%rax; jne.
  Bytes tc_malloc = cat({{0x48, 0x8b, 0x05, 0x10, 0x20, 0x30, 0x00}, {0x49, 0x89, 0xf8},
                         {0x48, 0x85, 0xc0}, kJeShort, kRet, kRet});
  InstructionDecoder decoder;
  ProbePlacement size_only = choose_probe_offset(decoder, tc_malloc, FunctionExtent::whole, 0x01);
  EXPECT_EQ(size_only.offset, 13u);
  EXPECT_EQ(size_only.reason, "+13: jcc after mov, mov, test (emulated)");
  // %r8 is argument 4: a probe reading it must stay at the entry.
  EXPECT_EQ(choose_probe_offset(decoder, tc_malloc, FunctionExtent::whole, 0x11).offset, 0u);
  EXPECT_EQ(place(tc_malloc).offset, 0u);
  // %rsp and %rbp are protected whatever the mask.
  EXPECT_EQ(choose_probe_offset(decoder, cat({kSubRsp8, kPushRbx, kRet}), FunctionExtent::whole, 0)
                .offset,
            0u);
  EXPECT_EQ(choose_probe_offset(decoder, cat({{0x48, 0x89, 0xe5}, kPushRbx, kRet}),  // mov %rsp,%rbp
                                FunctionExtent::whole, 0)
                .offset,
            0u);
}

TEST(ProbePlacement, StackPointerAndMemoryWritesAreNotTransparent) {
  EXPECT_EQ(place(cat({kSubRsp8, kPushRbx, kRet})).offset, 0u);
  EXPECT_EQ(place(cat({kStoreRedZone, kPushRbx, kRet})).offset, 0u);
  // Capstone 4 reports no register writes for enter: the allow-list catches it.
  EXPECT_EQ(place(cat({kEnter, kPushRbx, kRet})).offset, 0u);
  EXPECT_EQ(place(cat({kRepStos, kPushRbx, kRet})).offset, 0u);
}

TEST(ProbePlacement, GivesUpAfterFourInstructions) {
  Bytes four = cat({kMovRaxRax, kMovRaxRax, kMovRaxRax, kMovRaxRax});
  EXPECT_EQ(place(cat({four, kPushRbx, kRet})).offset, 12u);
  EXPECT_EQ(place(cat({four, kMovRaxRax, kPushRbx, kRet})).offset, 0u);
}

TEST(ProbePlacement, GivesUpPast32Bytes) {
  Bytes thirty = cat({kMovabsRax, kMovabsRax, kMovabsRax});
  EXPECT_EQ(place(cat({thirty, kPushRbx, kRet})).offset, 30u);
  EXPECT_EQ(place(cat({thirty, kMovEaxImm, kPushRbx, kRet})).offset, 0u);
}

TEST(ProbePlacement, BranchBackIntoTheSkippedRangeKeepsTheEntry) {
  // 0: test; 3: je 7; 5: jmp 3; 7: ret. The jmp would fire a probe at +3 twice.
  Bytes back_to_3 = cat({kTestRdiRdi, {0x74, 0x02}, {0xeb, 0xfc}, kRet});
  ProbePlacement p = place(back_to_3);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_EQ(p.reason, "entry: single-stepped (test; +3 is a branch target)");
  // A branch to the entry itself fires an entry probe again too: no obstacle.
  Bytes back_to_0 = cat({kTestRdiRdi, {0x74, 0x02}, {0xeb, 0xf9}, kRet});
  EXPECT_EQ(place(back_to_0).offset, 3u);
}

TEST(ProbePlacement, UnknownFunctionEndKeepsTheEntry) {
  ProbePlacement p = place(cat({kEndbr64, kPushRbx, kRet}), FunctionExtent::unknown_end);
  EXPECT_EQ(p.offset, 0u);
  EXPECT_EQ(p.reason, "entry: single-stepped (endbr64; function size unknown)");
  EXPECT_EQ(place(cat({kPushRbx, kRet}), FunctionExtent::unknown_end).offset, 0u);
}

TEST(ProbePlacement, NopsFollowTheKernelsCanonicalTable) {
  EXPECT_EQ(place(cat({kNop5, kRet})).reason, "entry: nop5 (emulated)");
  // Not in x86_nops: single-stepped, but transparent.
  ProbePlacement p = place(cat({kNoplNonCanonical, kPushRbx, kRet}));
  EXPECT_EQ(p.offset, 4u);
  EXPECT_EQ(p.reason, "+4: push after nop (emulated)");
}

TEST(ProbePlacement, UndecodableEntry) {
  EXPECT_EQ(place({0x06}).reason, "entry: undecodable");  // invalid in 64-bit mode
  EXPECT_EQ(place({}).reason, "entry: undecodable");
  EXPECT_EQ(place({}).offset, 0u);
}

TEST(InstructionDecoder, EmulatedKinds) {
  InstructionDecoder d;
  auto kind = [&d](const Bytes& b) { return std::string(d.decode(b, 0).value().emulated); };
  EXPECT_EQ(kind({0x55}), "push");
  EXPECT_EQ(kind({0x41, 0x57}), "push");
  EXPECT_EQ(kind({0x48, 0x53}), "");  // REX.W push: single-stepped (measured)
  EXPECT_EQ(kind({0x74, 0x00}), "jcc");
  EXPECT_EQ(kind({0x0f, 0x85, 0, 0, 0, 0}), "jcc");
  EXPECT_EQ(kind({0x66, 0x74, 0x00}), "");  // 0x66 prefix: refused
  EXPECT_EQ(kind({0x3e, 0x74, 0x00}), "");  // ds prefix: refused
  EXPECT_EQ(kind({0xeb, 0x00}), "jmp");
  EXPECT_EQ(kind({0xe9, 0, 0, 0, 0}), "jmp");
  EXPECT_EQ(kind({0xe8, 0, 0, 0, 0}), "call");
  EXPECT_EQ(kind({0xff, 0xe0}), "");  // jmp *%rax
  EXPECT_EQ(kind({0xc3}), "");
  EXPECT_EQ(kind(kTestRdiRdi), "");
  EXPECT_EQ(kind(kEndbr64), "");
  const std::vector<Bytes> canonical = {
      {0x90}, {0x66, 0x90}, {0x0f, 0x1f, 0x00}, {0x0f, 0x1f, 0x40, 0x00},
      {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}, {0x0f, 0x1f, 0x80, 0, 0, 0, 0},
      {0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0}};
  for (const Bytes& nop : canonical) EXPECT_EQ(kind(nop), "nop") << nop.size();
  EXPECT_EQ(kind(kNop5), "nop5");
  EXPECT_EQ(kind({0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}), "");  // nopw, 9 bytes
  EXPECT_EQ(kind({0x41, 0x90}), "");  // xchg %eax,%r8d, not a NOP
}

TEST(InstructionDecoder, TransparencyAndBranchTargets) {
  InstructionDecoder d;
  auto transparent = [&d](const Bytes& b) { return d.decode(b, 0).value().transparent; };
  EXPECT_TRUE(transparent(kTestRdiRdi));
  EXPECT_TRUE(transparent(kEndbr64));
  EXPECT_TRUE(transparent(kCmpbRip));
  EXPECT_TRUE(transparent(kStackGuard));
  EXPECT_TRUE(transparent(kMovRdiRbx));
  EXPECT_FALSE(transparent(kMovRaxRdi));
  EXPECT_FALSE(transparent(kSubRsp8));
  EXPECT_FALSE(transparent(kPushRbx));
  EXPECT_FALSE(transparent(kJeShort));
  EXPECT_FALSE(transparent({0x0f, 0x05}));  // syscall
  EXPECT_FALSE(transparent({0x0f, 0xa2}));  // cpuid writes %ecx, %edx

  Bytes code = cat({kTestRdiRdi, {0x74, 0x02}, {0xe8, 0xf8, 0xff, 0xff, 0xff}});
  EXPECT_EQ(d.decode(code, 3).value().branch_target, 7);
  EXPECT_EQ(d.decode(code, 5).value().branch_target, 2);  // 10 - 8
  EXPECT_FALSE(d.decode(code, 0).value().branch_target.has_value());
  EXPECT_FALSE(d.decode(code, code.size()).has_value());
}

}  // namespace
}  // namespace memtrack
