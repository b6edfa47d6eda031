#include "record/intake/event_pipeline.h"

#include <exception>
#include <optional>
#include <utility>

namespace memtrack {

EventPipeline::EventPipeline(ArtifactWriter& writer, Observer observe)
    : writer_(writer), observe_(std::move(observe)), thread_([this] { run(); }) {}

std::vector<Event> EventPipeline::spare_batch() {
  std::lock_guard lock(mutex_);
  if (spare_batches_.empty()) return {};
  std::vector<Event> batch = std::move(spare_batches_.back());
  spare_batches_.pop_back();
  return batch;
}

void EventPipeline::push(std::vector<Event>&& batch) {
  size_t events = batch.size(), bytes = memory_of(batch);
  if (batches_.push(std::move(batch), bytes)) {
    ++batches_pushed_;
    return;
  }
  std::lock_guard lock(mutex_);  // after close(): counted, never silently lost
  dropped_ += events;
}

size_t EventPipeline::interposer_room(std::chrono::milliseconds wait) {
  size_t queued = batches_.wait_until_at_most(kInterposerQueuedBytes / 2, wait);
  return queued < kInterposerQueuedBytes ? (kInterposerQueuedBytes - queued) / sizeof(Event) : 0;
}

void EventPipeline::sync() {
  const uint64_t pushed = batches_pushed_.load();
  std::unique_lock lock(mutex_);
  batch_taken_.wait(lock, [&] { return batches_taken_ >= pushed || finished_; });
}

void EventPipeline::close() {
  batches_.close();
  if (thread_.joinable()) thread_.join();
}

std::string EventPipeline::error() const {
  {
    std::lock_guard lock(mutex_);
    if (!error_.empty()) return error_;
  }
  return writer_.error();
}

uint64_t EventPipeline::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

size_t EventPipeline::memory_of(const std::vector<Event>& batch) {
  size_t bytes = batch.capacity() * sizeof(Event);
  for (const Event& e : batch) {
    if (e.stack)
      bytes += sizeof(StackDefinition) + e.stack->bytes.size() +
               sizeof(uint64_t) * (e.stack->chain.size() + e.stack->regs.size() + e.stack->fp_chain.size());
    if (e.mapping) bytes += sizeof(MappingInfo) + e.mapping->path.size() + e.mapping->build_id.size();
    if (e.image) bytes += sizeof(ProcessImage) + e.image->path.size() + e.image->comm.size();
  }
  return bytes;
}

void EventPipeline::run() {
  while (std::optional<std::vector<Event>> batch = batches_.pop()) {
    if (observe_) observe_(*batch);
    if (!error().empty()) {
      std::lock_guard lock(mutex_);
      dropped_ += batch->size();
      ++batches_taken_;
      batch_taken_.notify_all();
      continue;
    }
    try {
      writer_.append(*batch);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      error_ = e.what();  // the writer counts what it held
    }
    batch->clear();
    std::lock_guard lock(mutex_);
    if (spare_batches_.size() < kSpareBatches) spare_batches_.push_back(std::move(*batch));
    ++batches_taken_;
    batch_taken_.notify_all();
  }
  std::lock_guard lock(mutex_);
  finished_ = true;
  batch_taken_.notify_all();
}

}  // namespace memtrack
