// The persistent cache of files' prepared unwind rules (record/unwind_rules/rule_cache.h):
// what it gives back is what was stored, and only when nothing about the
// entry, its directory or what it was derived from is off.
#include "record/unwind_rules/rule_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"

namespace memtrack {
namespace {

namespace fs = std::filesystem;

PreparedRules some_rules() {
  PreparedRules r;
  for (uint64_t i = 1; i <= 1000; ++i) {
    r.offsets.push_back(i * 16);
    mt_unwind_rule rule{};
    rule.cfa_reg = i % 2 ? MT_CFA_RSP : MT_CFA_RBP;
    rule.flags = i % 3 ? MT_RULE_RBP_SAVED : 0;
    rule.cfa_offset = static_cast<int32_t>(8 * (i % 7 + 1));
    rule.rbp_offset = -16;
    r.rules.push_back(rule);
  }
  return r;
}

bool same(const PreparedRules& a, const PreparedRules& b) {
  return a.offsets == b.offsets && a.rules.size() == b.rules.size() &&
         std::memcmp(a.rules.data(), b.rules.data(), a.rules.size() * sizeof(mt_unwind_rule)) == 0;
}

class RuleCaching : public ::testing::Test {
 protected:
  void SetUp() override {
    auto found = RuleCache::source_of("/proc/self/exe");
    ASSERT_TRUE(found) << "the test executable has no build id";
    source_ = *found;
    cache_ = RuleCache::open(dir(), &why_);
    ASSERT_TRUE(cache_) << why_;
  }
  std::string dir() const { return tmp_.file("a/b/unwind-rules"); }
  std::string entry() const {
    for (const auto& e : fs::directory_iterator(dir()))
      if (e.path().extension() == ".rules") return e.path();
    return "";
  }
  void flip_byte(const std::string& path, long from_end) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-from_end, std::ios::end);
    char c = static_cast<char>(f.get() ^ 1);
    f.seekp(-from_end, std::ios::end);
    f.put(c);
  }

  testing::TempDir tmp_;
  RuleSource source_;
  std::unique_ptr<RuleCache> cache_;
  std::string why_;
};

TEST_F(RuleCaching, GivesBackWhatWasStoredForTheSameFile) {
  EXPECT_FALSE(cache_->load(source_, 1 << 20));  // nothing yet: a miss, not a rejection
  EXPECT_EQ(cache_->rejected(), 0u);
  cache_->store(source_, some_rules());
  EXPECT_EQ(cache_->stored(), 1u);
  auto loaded = cache_->load(source_, 1 << 20);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(same(*loaded, some_rules()));
  // Private: the directory 0700, the entry 0600, no temporary file left.
  struct stat st;
  ASSERT_EQ(stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(entry().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir()), fs::directory_iterator()), 1);
  // Another recording's cache object reads it too.
  EXPECT_TRUE(RuleCache::open(dir())->load(source_, 1 << 20));
}

TEST_F(RuleCaching, AnEntryOfAnotherBuildOrContentIsNotUsed) {
  cache_->store(source_, some_rules());
  RuleSource other = source_;
  other.file_size += 1;
  EXPECT_FALSE(cache_->load(other, 1 << 20));
  other = source_;
  other.cfi_hash ^= 1;
  EXPECT_FALSE(cache_->load(other, 1 << 20));
  EXPECT_FALSE(cache_->load(source_, 999));  // more rules than the caller takes
  // Different files have different sources.
  auto libc = RuleCache::source_of("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(libc);
  EXPECT_NE(libc->build_id, source_.build_id);
  EXPECT_NE(libc->cfi_hash, source_.cfi_hash);
}

TEST_F(RuleCaching, ADamagedEntryIsRejected) {
  cache_->store(source_, some_rules());
  flip_byte(entry(), 1);  // a rule's byte
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  EXPECT_EQ(cache_->rejected(), 1u);
  cache_->store(source_, some_rules());
  fs::resize_file(entry(), fs::file_size(entry()) - 12);  // truncated
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  EXPECT_EQ(cache_->rejected(), 2u);
  // Rules that are no rule, consistently hashed: still rejected.
  PreparedRules bad = some_rules();
  bad.rules[5].cfa_reg = 7;
  cache_->store(source_, bad);
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  bad = some_rules();
  std::swap(bad.offsets[3], bad.offsets[4]);  // not ascending
  cache_->store(source_, bad);
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  EXPECT_EQ(cache_->rejected(), 4u);
  cache_->store(source_, some_rules());
  EXPECT_TRUE(cache_->load(source_, 1 << 20));
}

TEST_F(RuleCaching, SymbolicLinksAreNeitherReadNorWrittenThrough) {
  cache_->store(source_, some_rules());
  const std::string name = entry(), elsewhere = tmp_.file("elsewhere.rules");
  fs::rename(name, elsewhere);
  fs::create_symlink(elsewhere, name);
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  EXPECT_EQ(cache_->rejected(), 1u);
  const auto before = fs::file_size(elsewhere);
  PreparedRules fewer = some_rules();
  fewer.offsets.resize(10);
  fewer.rules.resize(10);
  cache_->store(source_, fewer);  // replaces the link itself
  EXPECT_FALSE(fs::is_symlink(name));
  EXPECT_EQ(fs::file_size(elsewhere), before);
  auto loaded = cache_->load(source_, 1 << 20);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(same(*loaded, fewer));
  // The cache directory itself a link: refused.
  const std::string link = tmp_.file("link");
  fs::create_symlink(dir(), link);
  EXPECT_FALSE(RuleCache::open(link, &why_));  // O_NOFOLLOW | O_DIRECTORY: ENOTDIR
}

TEST_F(RuleCaching, ADirectoryOrEntryOthersCanWriteIsNotUsed) {
  cache_->store(source_, some_rules());
  ASSERT_EQ(chmod(entry().c_str(), 0620), 0);
  EXPECT_FALSE(cache_->load(source_, 1 << 20));
  ASSERT_EQ(chmod(entry().c_str(), 0600), 0);
  EXPECT_TRUE(cache_->load(source_, 1 << 20));
  if (geteuid() == 0) {  // an entry of another user
    ASSERT_EQ(chown(entry().c_str(), 65534, 65534), 0);
    EXPECT_FALSE(cache_->load(source_, 1 << 20));
  }
  ASSERT_EQ(chmod(dir().c_str(), 0777), 0);
  EXPECT_FALSE(RuleCache::open(dir(), &why_));
  EXPECT_NE(why_.find("only this user can write"), std::string::npos) << why_;
  EXPECT_FALSE(RuleCache::open("relative/dir", &why_));
}

}  // namespace
}  // namespace memtrack
