// Continuous batching: one worker thread owns the Engine and, every iteration, admits waiting
// requests, runs one Engine::StepBatch over every active request (each at its own step, depth and
// cache mode) and retires the finished ones.
//
// Why one worker: a forward already uses every core (OpenMP inside the matmuls), so two forwards
// at once would only fight over them; batching ragged requests into one forward is what raises
// throughput. The engine guarantees a request's output does not depend on its batch mates.
//
// Callbacks run on the worker thread, between forwards: they must be quick (copy what they need
// and hand it to another thread). The one exception: a request cancelled while it waits in the
// queue gets its on_error on the thread that called Handle::Cancel(), inside that call, so the
// caller must not hold a lock its callbacks take. Exactly one of on_done / on_error is called per
// submission (on_error with ErrorKind::kCancelled when cancelled, or when Stop() gives up on it).
//
// Bounded: at most max_queue requests wait; Submit beyond that throws Error(kResource) (the
// server's 429 + Retry-After). Admission keeps the running requests at <= max_running and the sum
// of their token counts (prompt + canvas, the forward's rows) <= token_budget, except that one
// request is always admitted when nothing runs, so a large request cannot starve.
//
// Prefix builds: an admitted request whose prefix is not cached waits (counted as running) while
// the worker builds the prefix a few layers per iteration (prefix_chunk), between the batch's
// steps; requests that need the same prefix wait on one build, builds at the same layer run in
// one batched forward, and a build nobody waits for any more (all its requests cancelled) stops.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "util/error.h"

namespace bicache::engine {

struct SchedulerOptions {
  int max_running = 8;   // requests in one batch
  int max_queue = 64;    // requests waiting for admission
  int token_budget = 0;  // sum of running n_tokens; 0 = unlimited
  // Prefix builds run in chunks between the batch's steps, so requests already decoding never
  // wait for a whole prefix forward: each iteration runs this many token-layers of build (at least
  // one layer); 0 = as many as the running requests' tokens x layers (about one step's worth, so
  // a decoding request's step interval at most about doubles), everything when nothing decodes.
  int64_t prefix_chunk = 0;
  int threads = 0;  // OpenMP threads of the worker's forwards; 0 = the process default
};

struct RequestCallbacks {
  std::function<void(const StepEvent&)> on_step;      // after each of its steps (optional)
  std::function<void(const RequestResult&)> on_done;  // finished normally
  std::function<void(const Error&)> on_error;         // bad request, failure or cancellation
};

struct SchedulerStats {
  int running = 0;
  int waiting = 0;
  uint64_t submitted = 0;
  uint64_t finished = 0;       // on_done called
  uint64_t cancelled = 0;      // cancelled by the client or by Stop()
  uint64_t failed = 0;         // Start or a step threw
  uint64_t rejected = 0;       // Submit threw (queue full or stopping)
  uint64_t iterations = 0;     // StepBatch calls
  uint64_t prefix_chunks = 0;  // prefix-build forwards (chunks of layers, between steps)
  // Prefix reuse in tokens (vLLM counts tokens too): prompt tokens of finished requests, and the
  // part of them served from a cache hit.
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  std::vector<uint64_t> depth_counts;  // [n_layer + 1] finished requests by reuse depth
  EngineCacheStats cache;
};

class Scheduler {
 public:
  // A submitted request. Cancel() and EndEarly() may be called from any thread (on_step included),
  // any number of times, also after it finished (then they do nothing).
  class Handle {
   public:
    // The client is gone: the request ends with on_error(kCancelled), counted as cancelled. A
    // queued request is taken out of the queue at once, in this call (a batch step can take
    // seconds; the queue must not wait for it); a running one is retired after its current step.
    void Cancel();
    bool cancelled() const { return cancelled_.load(); }
    // The client has the answer it wants (a stop string matched in the committed text): a running
    // request is retired after its current step and ends with on_done, counted as finished, its
    // result holding the committed part so far (RequestResult::finish_reason "" when the canvas
    // was not done). A request still queued is not affected.
    void EndEarly() { end_early_.store(true); }
    bool end_early() const { return end_early_.load(); }
    uint64_t id() const { return id_; }

   private:
    friend class Scheduler;
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> end_early_{false};
    uint64_t id_ = 0;
    // The scheduler while the request is queued or running; cleared (under owner_mutex_) before
    // its outcome is delivered, so a Cancel() holding owner_mutex_ never reaches a finished job or
    // a destroyed scheduler. Lock order: owner_mutex_, then the scheduler's mutex_.
    std::mutex owner_mutex_;
    Scheduler* owner_ = nullptr;
  };

  Scheduler(Engine& engine, SchedulerOptions options);
  ~Scheduler();  // Stop(0): cancels whatever is left
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Enqueues a request. Throws Error(kResource) when the queue is full, Error(kCancelled) when
  // the scheduler is stopping.
  std::shared_ptr<Handle> Submit(RequestOptions options, RequestCallbacks callbacks);

  // Graceful stop: no new submissions; in-flight and queued requests may finish for up to `grace`,
  // then whatever is left is cancelled. Joins the worker. Idempotent.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Job {
    std::shared_ptr<Handle> handle;
    RequestOptions options;
    RequestCallbacks callbacks;
    std::unique_ptr<Request> request;  // set once started (admitted and its prefix built)
    int n_tokens = 0;                  // prompt + canvas, for the token budget
    // Admitted, waiting for its prefix: the start's first half and the build it waits on (one
    // build per prefix, shared by every job that needs it).
    std::optional<Engine::StartPlan> plan;
    std::shared_ptr<PrefixBuild> build;
  };

  // Handle::Cancel's half: removes the handle's job from the queue (counted as cancelled), if it
  // is still there.
  std::optional<Job> TakeQueued(const Handle& handle);
  void WorkerLoop();
  // Moves cancelled jobs out of the queue and the running set (under the lock).
  void CollectCancelledLocked(std::vector<Job>* out);
  // Moves the running job at `it` to `out` with the running counts (under the lock); returns the
  // iterator after it.
  std::vector<Job>::iterator RetireLocked(std::vector<Job>::iterator it, std::vector<Job>* out);
  // Engine::PlanStart for admissible queued jobs (errors -> on_error); a job whose prefix must be
  // built joins that prefix's build, the others start at once.
  void Admit();
  // One chunk of the prefix builds (builds at the same layer run in one forward); jobs whose
  // build finished start. Chunk size: SchedulerOptions::prefix_chunk.
  void AdvanceBuilds();
  void Step();  // one StepBatch, on_step calls, retirement
  void Finish(Job& job, const Error* error, bool cancelled);

  Engine& engine_;
  const SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> queue_;     // guarded by mutex_
  std::vector<Job> running_;  // worker thread only (size mirrored in running_count_); jobs
                              // waiting for a prefix build included
  std::vector<std::shared_ptr<PrefixBuild>> builds_;  // worker only: unfinished prefix builds
  int running_count_ = 0;                             // guarded by mutex_
  int running_tokens_ = 0;                            // worker only
  bool stopping_ = false;                             // guarded by mutex_: no new submissions
  bool cancel_all_ = false;                           // guarded by mutex_: Stop's grace ran out
  uint64_t next_id_ = 1;
  SchedulerStats counters_;  // guarded by mutex_ (running/waiting/cache filled on read)
  std::thread worker_;
};

}  // namespace bicache::engine
