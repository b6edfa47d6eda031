// When the kernel gets a file's prepared unwind rules. They go once, when
// both have happened, in either order: the rules are prepared (on the
// learner's thread, tens of ms for a large file) and the kernel needs them
// (at once without the fast path; on the fast path, when its walk first
// misses in the file). A walk can miss in a file while it is still being
// prepared: that request must not count as the handoff.
#pragma once

namespace memtrack {

class PreparedRulesHandoff {
 public:
  // Each returns whether the rules go to the kernel now.
  bool kernel_needs() {
    needed_ = true;
    return take();
  }
  bool prepared() {
    prepared_ = true;
    return take();
  }
  bool kernel_has() const { return given_; }

 private:
  bool take() {
    if (!needed_ || !prepared_ || given_) return false;
    given_ = true;
    return true;
  }
  bool needed_ = false, prepared_ = false, given_ = false;
};

}  // namespace memtrack
