#include "engine/scheduler.h"

#include <algorithm>
#include <limits>

#include "engine/threads.h"

namespace bicache::engine {
namespace {

// Runs a user callback; a throwing callback must not take the worker (and every other request)
// down with it.
template <typename F, typename... Args>
void Call(const F& f, Args&&... args) {
  if (!f) return;
  try {
    f(std::forward<Args>(args)...);
  } catch (...) {
  }
}

// What a failure is reported as: our own Error as it is, anything else as an internal error.
Error AsError(const std::exception& e) {
  const auto* err = dynamic_cast<const Error*>(&e);
  return err ? *err : Error(ErrorKind::kInternal, e.what());
}

}  // namespace

void Scheduler::Handle::Cancel() {
  cancelled_.store(true);
  std::optional<Job> job;
  {
    std::lock_guard<std::mutex> lock(owner_mutex_);
    if (owner_) job = owner_->TakeQueued(*this);
    if (job) owner_ = nullptr;
  }
  // Outside the lock, as every outcome: the callback may take the caller's own locks.
  if (job) Call(job->callbacks.on_error, Error(ErrorKind::kCancelled, "the request was cancelled"));
}

std::optional<Scheduler::Job> Scheduler::TakeQueued(const Handle& handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->handle.get() != &handle) continue;
    std::optional<Job> job(std::move(*it));
    queue_.erase(it);
    ++counters_.cancelled;
    return job;
  }
  return std::nullopt;
}

Scheduler::Scheduler(Engine& engine, SchedulerOptions options)
    : engine_(engine), options_(options) {
  if (options_.max_running < 1)
    throw Error(ErrorKind::kInvalidArgument, "max_running must be >= 1");
  if (options_.max_queue < 0) throw Error(ErrorKind::kInvalidArgument, "max_queue must be >= 0");
  if (options_.token_budget < 0)
    throw Error(ErrorKind::kInvalidArgument, "token_budget must be >= 0");
  counters_.depth_counts.assign(engine_.model().config().n_layer + 1, 0);
  worker_ = std::thread([this] { WorkerLoop(); });
}

Scheduler::~Scheduler() {
  Stop();
}

std::shared_ptr<Scheduler::Handle> Scheduler::Submit(RequestOptions options,
                                                     RequestCallbacks callbacks) {
  Job job;
  job.n_tokens = static_cast<int>(options.prompt.size()) + std::max(0, options.sampler.gen_length);
  job.options = std::move(options);
  job.callbacks = std::move(callbacks);
  job.handle = std::make_shared<Handle>();
  job.handle->owner_ = this;  // not shared yet: no lock needed (a refused job's handle is dropped)
  std::shared_ptr<Handle> handle = job.handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      ++counters_.rejected;
      throw Error(ErrorKind::kCancelled, "the server is shutting down");
    }
    if (static_cast<int>(queue_.size()) >= options_.max_queue) {
      ++counters_.rejected;
      throw Error(ErrorKind::kResource, "too many requests: the queue is full (" +
                                            std::to_string(queue_.size()) + " waiting)");
    }
    job.handle->id_ = next_id_++;
    ++counters_.submitted;
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return handle;
}

void Scheduler::Stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // Polling costs at most 10 ms of shutdown latency and needs no second condition variable.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() && running_count_ == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_all_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = counters_;
    s.running = running_count_;
    s.waiting = static_cast<int>(queue_.size());
  }
  s.cache = engine_.cache_stats();
  return s;
}

void Scheduler::WorkerLoop() {
  UseThreads(options_.threads);  // OpenMP's team size is per thread: set it on the worker itself
  for (;;) {
    std::vector<Job> dead;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return !queue_.empty() || !running_.empty() || stopping_; });
      CollectCancelledLocked(&dead);
      if (stopping_ && queue_.empty() && running_.empty() && dead.empty()) break;
    }
    for (Job& j : dead) Finish(j, nullptr, /*cancelled=*/true);
    Admit();
    AdvanceBuilds();
    if (!running_.empty()) Step();
  }
}

void Scheduler::CollectCancelledLocked(std::vector<Job>* out) {
  auto gone = [&](const Job& j) { return cancel_all_ || j.handle->cancelled(); };
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (gone(*it)) {
      out->push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = running_.begin(); it != running_.end();)
    it = gone(*it) ? RetireLocked(it, out) : it + 1;
}

std::vector<Scheduler::Job>::iterator Scheduler::RetireLocked(std::vector<Job>::iterator it,
                                                              std::vector<Job>* out) {
  running_tokens_ -= it->n_tokens;
  --running_count_;
  out->push_back(std::move(*it));
  return running_.erase(it);
}

void Scheduler::Admit() {
  for (;;) {
    Job job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty() || cancel_all_) return;
      if (static_cast<int>(running_.size()) >= options_.max_running) return;
      if (options_.token_budget > 0 && !running_.empty() &&
          running_tokens_ + queue_.front().n_tokens > options_.token_budget) {
        return;  // FIFO: a large request at the head waits rather than being overtaken forever
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_count_;  // counted as running while Start builds its prefix
    }
    try {
      Engine::StartPlan plan = engine_.PlanStart(job.options);
      if (plan.build.empty()) {
        job.request = engine_.FinishStart(std::move(plan), nullptr);
      } else {
        for (const auto& b : builds_) {
          if (b->layers() == plan.held && b->tokens() == plan.build) job.build = b;
        }
        if (!job.build) {
          job.build = std::make_shared<PrefixBuild>(engine_.model(), plan.build, plan.held);
          builds_.push_back(job.build);
        }
        job.plan = std::move(plan);
      }
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --running_count_;
      }
      const Error error = AsError(e);
      Finish(job, &error, false);
      continue;
    }
    running_tokens_ += job.n_tokens;
    std::lock_guard<std::mutex> lock(mutex_);
    running_.push_back(std::move(job));
  }
}

void Scheduler::AdvanceBuilds() {
  // A build whose every request was cancelled is dropped (running_ no longer holds its jobs).
  std::erase_if(builds_, [](const std::shared_ptr<PrefixBuild>& b) { return b.use_count() == 1; });
  if (builds_.empty()) return;
  const int L = engine_.model().config().n_layer;
  int64_t budget = options_.prefix_chunk;
  if (budget == 0) {
    for (const Job& j : running_)
      if (j.request) budget += static_cast<int64_t>(j.request->n_tokens()) * L;
    if (budget == 0) budget = std::numeric_limits<int64_t>::max();  // nobody decodes: all at once
  }
  // The builds at the first one's layer, in one forward.
  std::vector<PrefixBuild*> group;
  int64_t tokens = 0;
  for (const auto& b : builds_) {
    if (b->next_layer() != builds_.front()->next_layer()) continue;
    group.push_back(b.get());
    tokens += static_cast<int64_t>(b->tokens().size());
  }
  const int layers =
      static_cast<int>(std::clamp<int64_t>(budget / std::max<int64_t>(tokens, 1), 1, L));
  std::optional<Error> error;
  try {
    PrefixBuild::AdvanceTogether(group, layers, nullptr);
    std::lock_guard<std::mutex> lock(mutex_);
    ++counters_.prefix_chunks;
  } catch (const std::exception& e) {
    error = AsError(e);
  }
  // Start the jobs whose build is done (or fail those of a failed build).
  std::vector<std::shared_ptr<PrefixKvPayload>> payloads(group.size());
  for (auto it = running_.begin(); it != running_.end();) {
    Job& j = *it;
    const auto g = std::find(group.begin(), group.end(), j.build.get());
    if (j.request || g == group.end() || !(error || (*g)->done())) {
      ++it;
      continue;
    }
    std::shared_ptr<PrefixKvPayload>& payload = payloads[g - group.begin()];
    try {
      if (error) throw *error;
      j.plan->shared_build = payload != nullptr;  // not the first waiter: it is cached by now
      if (!payload) payload = (*g)->Take();
      j.request = engine_.FinishStart(std::move(*j.plan), payload);
      j.plan.reset();
      j.build.reset();
      ++it;
    } catch (const std::exception& e) {
      std::vector<Job> failed;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        it = RetireLocked(it, &failed);
      }
      const Error why = AsError(e);
      Finish(failed.front(), &why, false);
    }
  }
  std::erase_if(builds_, [&](const std::shared_ptr<PrefixBuild>& b) {
    return error ? std::find(group.begin(), group.end(), b.get()) != group.end() : b->done();
  });
}

void Scheduler::Step() {
  // Retire what is already done (a request can finish at Start) so StepBatch only sees live ones.
  auto retire_done = [&] {
    std::vector<Job> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = running_.begin(); it != running_.end();) {
        const bool over = it->request && (it->request->done() || it->handle->end_early());
        it = over ? RetireLocked(it, &done) : it + 1;
      }
    }
    for (Job& j : done) Finish(j, nullptr, false);
  };
  retire_done();
  std::vector<Request*> batch;  // the started jobs (the others wait for their prefix build)
  for (Job& j : running_)
    if (j.request) batch.push_back(j.request.get());
  if (batch.empty()) return;
  try {
    engine_.StepBatch(batch);
  } catch (const std::exception& e) {
    // A failed forward leaves every request of the batch half-stepped: fail them all, keep serving.
    const Error err = AsError(e);
    std::vector<Job> failed;  // the started ones: those waiting for a prefix build go on
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = running_.begin(); it != running_.end();)
        it = it->request ? RetireLocked(it, &failed) : it + 1;
    }
    for (Job& j : failed) Finish(j, &err, false);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counters_.iterations;
  }
  for (Job& j : running_)
    if (j.request) Call(j.callbacks.on_step, j.request->LastStep());
  retire_done();
}

void Scheduler::Finish(Job& job, const Error* error, bool cancelled) {
  {
    // From here a Cancel() cannot reach this job (it is in neither the queue nor running_).
    std::lock_guard<std::mutex> lock(job.handle->owner_mutex_);
    job.handle->owner_ = nullptr;
  }
  job.build.reset();  // a build nobody waits for any more is dropped (AdvanceBuilds)
  job.plan.reset();
  RequestResult result;
  const bool ok = !error && !cancelled;
  if (ok) result = job.request->result();
  job.request.reset();  // releases the cache pin before anyone is told
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled) {
      ++counters_.cancelled;
    } else if (error) {
      ++counters_.failed;
    } else {
      ++counters_.finished;
      counters_.prefix_query_tokens += job.options.prompt.size();
      if (result.prefix_hit) counters_.prefix_hit_tokens += result.prefix_used;
      const size_t d =
          std::min<size_t>(std::max(result.depth, 0), counters_.depth_counts.size() - 1);
      ++counters_.depth_counts[d];
    }
  }
  if (cancelled) {
    Call(job.callbacks.on_error, Error(ErrorKind::kCancelled, "the request was cancelled"));
  } else if (error) {
    Call(job.callbacks.on_error, *error);
  } else {
    Call(job.callbacks.on_done, result);
  }
}

}  // namespace bicache::engine
