// Scheduler: continuous batching gives every request the canvas it gets alone, cancellation
// releases cache pins, the queue is bounded, bad requests fail alone. No wall-time assertions:
// waits are bounded only so a bug fails the test instead of hanging it.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "engine/threads.h"
#include "test_util.h"

namespace bicache::engine {
namespace {

using bicache::testing::DataPath;
using namespace std::chrono_literals;

// Collects one outcome per submission.
struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  ErrorKind kind = ErrorKind::kInternal;
  RequestResult result;
  int steps_seen = 0;

  RequestCallbacks Callbacks() {
    RequestCallbacks cb;
    cb.on_done = [this](const RequestResult& r) { Set(true, ErrorKind::kInternal, &r); };
    cb.on_error = [this](const Error& e) { Set(false, e.kind(), nullptr); };
    return cb;
  }
  void Set(bool success, ErrorKind k, const RequestResult* r) {
    std::lock_guard<std::mutex> l(m);
    ASSERT_FALSE(done) << "two outcomes for one request";
    done = true;
    ok = success;
    kind = k;
    if (r) result = *r;
    cv.notify_all();
  }
  bool Wait() {
    std::unique_lock<std::mutex> l(m);
    return cv.wait_for(l, 120s, [&] { return done; });
  }
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { lm_ = LoadedModel::Load(DataPath("golden/llada-tiny.gguf")); }

  RequestOptions Options(int i) {
    static const char* kModes[] = {"fixed:1", "none", "dual", "llm"};
    Prompt p = lm_->ChatPrompt(
        {{"system", "Shared document number " + std::to_string(i % 3) + " that many read."},
         {"user", "question " + std::to_string(i) + std::string(i % 5, '?')}});
    RequestOptions o;
    o.prompt = p.tokens;
    o.prefix_len = p.prefix_len;
    o.sampler.gen_length = 8;
    o.sampler.steps = 8;
    o.sampler.block_length = i % 2 ? 4 : 8;
    o.sampler.temperature = 0.8f;
    o.sampler.seed = 100 + i;
    o.sampler.stop_ids = lm_->stop_ids();
    o.cache = ParseCacheMode(kModes[i % 4]);
    return o;
  }

  std::unique_ptr<LoadedModel> lm_;
};

TEST_F(SchedulerTest, BatchedWithAQuarterCancelledMidwayTheRestMatchAlone) {
  constexpr int kN = 12;
  std::vector<std::vector<int32_t>> alone;
  {
    Engine solo(lm_->model(), {});
    for (int i = 0; i < kN; ++i) alone.push_back(solo.Run(Options(i)).canvas);
  }
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 5, .max_queue = kN, .token_budget = 0});
  // A cancel target cancels itself from its first on_step; it waits (bounded) for its handle to be
  // published so the cancellation point is deterministic.
  struct Slot {
    std::mutex m;
    std::condition_variable cv;
    std::shared_ptr<Scheduler::Handle> h;
  };
  std::vector<Slot> slots(kN);
  std::vector<Outcome> out(kN);
  for (int i = 0; i < kN; ++i) {
    RequestCallbacks cb = out[i].Callbacks();
    if (i % 4 == 1) {
      cb.on_step = [&, i](const StepEvent&) {
        std::unique_lock<std::mutex> l(slots[i].m);
        slots[i].cv.wait_for(l, 60s, [&] { return slots[i].h != nullptr; });
        if (slots[i].h) slots[i].h->Cancel();
      };
    }
    auto h = sched.Submit(Options(i), std::move(cb));
    std::lock_guard<std::mutex> l(slots[i].m);
    slots[i].h = h;
    slots[i].cv.notify_all();
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(out[i].Wait()) << i;
    if (i % 4 == 1) {
      EXPECT_FALSE(out[i].ok) << i;
      EXPECT_EQ(out[i].kind, ErrorKind::kCancelled) << i;
    } else {
      ASSERT_TRUE(out[i].ok) << i;
      EXPECT_EQ(out[i].result.canvas, alone[i]) << "request " << i;
    }
  }
  sched.Stop();
  SchedulerStats s = sched.stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.finished, kN - kN / 4u);
  EXPECT_EQ(s.cancelled, kN / 4u);
  EXPECT_GT(s.iterations, 0u);
  EXPECT_EQ(engine.cache_stats().total.bytes_pinned, 0u);
  EXPECT_GT(engine.cache_stats().total.entries, 0u);
}

// Holds the scheduler's worker inside a request's on_step (as a long batch step would) until
// Release(), so a test can act on the queue meanwhile.
class WorkerGate {
 public:
  RequestCallbacks Hold(RequestCallbacks cb) {
    cb.on_step = [this](const StepEvent&) {
      std::unique_lock<std::mutex> l(m_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait_for(l, 60s, [&] { return released_; });
    };
    return cb;
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> l(m_);
    return cv_.wait_for(l, 60s, [&] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> l(m_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool entered_ = false, released_ = false;
};

// A request whose prefix is not cached: while the worker builds it, a layer per iteration
// (prefix_chunk 1), the request already decoding steps between the chunks instead of waiting for
// the whole build; the chunked build's entry gives the request the canvas it gets alone.
class PrefixBuildTest : public SchedulerTest {
 protected:
  RequestOptions WithPrefix(int i) {
    RequestOptions o = Options(i);
    o.cache = ParseCacheMode("llm");
    o.sampler.temperature = 0;
    return o;
  }
  RequestOptions Decoding() {
    RequestOptions o = Options(1);
    o.cache = ParseCacheMode("none");
    o.sampler.gen_length = o.sampler.steps = o.sampler.block_length = 32;
    return o;
  }
};

TEST_F(PrefixBuildTest, RunningRequestsStepBetweenTheChunksOfABuild) {
  const int L = lm_->model().config().n_layer;
  ASSERT_GE(L, 2);
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 4, .max_queue = 4, .prefix_chunk = 1});
  WorkerGate gate;
  Outcome a, b;
  std::atomic<int> a_steps{0}, a_steps_before_b{-1};
  RequestCallbacks acb = gate.Hold(a.Callbacks());
  auto hold = acb.on_step;
  acb.on_step = [&](const StepEvent& e) {
    if (a_steps.fetch_add(1) == 0) hold(e);  // the first step waits until B is queued
  };
  sched.Submit(Decoding(), std::move(acb));
  ASSERT_TRUE(gate.WaitEntered());
  RequestCallbacks bcb = b.Callbacks();
  bcb.on_step = [&](const StepEvent&) {
    int expected = -1;
    a_steps_before_b.compare_exchange_strong(expected, a_steps.load());
  };
  sched.Submit(WithPrefix(2), std::move(bcb));
  gate.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  ASSERT_TRUE(a.ok && b.ok);
  // B's build ran one layer per iteration; A stepped in each of them, before B's first step.
  EXPECT_EQ(sched.stats().prefix_chunks, static_cast<uint64_t>(L));
  EXPECT_GE(a_steps_before_b.load(), 1 + L);
  EXPECT_EQ(engine.cache_stats().prefix_builds, 1u);
  Engine alone(lm_->model(), {});
  EXPECT_EQ(b.result.canvas, alone.Run(WithPrefix(2)).canvas);
  EXPECT_EQ(b.result.depth, L);
  EXPECT_EQ(b.result.prefix_used, WithPrefix(2).prefix_len);
}

// Two requests admitted together on one uncached prefix wait on one build.
TEST_F(PrefixBuildTest, TwoRequestsOnOneNewPrefixBuildItOnce) {
  const int L = lm_->model().config().n_layer;
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 4, .max_queue = 4, .prefix_chunk = 1});
  WorkerGate gate;
  Outcome a, b, c;
  sched.Submit(Decoding(), gate.Hold(a.Callbacks()));
  ASSERT_TRUE(gate.WaitEntered());
  RequestOptions ob = WithPrefix(2), oc = WithPrefix(5);  // documents 2 and 5 % 3 == 2
  ASSERT_EQ(ob.prefix_len, oc.prefix_len);
  ASSERT_NE(ob.prompt, oc.prompt);
  sched.Submit(ob, b.Callbacks());
  sched.Submit(oc, c.Callbacks());
  gate.Release();
  for (Outcome* o : {&a, &b, &c}) {
    ASSERT_TRUE(o->Wait());
    EXPECT_TRUE(o->ok);
  }
  EXPECT_EQ(engine.cache_stats().prefix_builds, 1u);
  EXPECT_EQ(sched.stats().prefix_chunks, static_cast<uint64_t>(L));
  Engine alone(lm_->model(), {});
  EXPECT_EQ(b.result.canvas, alone.Run(ob).canvas);
  EXPECT_EQ(c.result.canvas, alone.Run(oc).canvas);
}

// A request cancelled while its prefix is being built stops the build: nothing is cached.
TEST_F(PrefixBuildTest, ACancelledRequestStopsItsBuild) {
  const int L = lm_->model().config().n_layer;
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 4, .max_queue = 4, .prefix_chunk = 1});
  WorkerGate gate;
  Outcome a, b;
  std::shared_ptr<Scheduler::Handle> hb;
  std::atomic<int> a_steps{0};
  RequestCallbacks acb = gate.Hold(a.Callbacks());
  auto hold = acb.on_step;
  acb.on_step = [&](const StepEvent& e) {
    const int k = a_steps.fetch_add(1);
    if (k == 0) hold(e);       // B is queued meanwhile
    if (k == 1) hb->Cancel();  // B was admitted and its first chunk ran in this iteration
  };
  sched.Submit(Decoding(), std::move(acb));
  ASSERT_TRUE(gate.WaitEntered());
  hb = sched.Submit(WithPrefix(2), b.Callbacks());
  gate.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(b.kind, ErrorKind::kCancelled);
  EXPECT_EQ(engine.cache_stats().prefix_builds, 0u);
  EXPECT_EQ(engine.cache_stats().total.entries, 0u);
  EXPECT_LT(sched.stats().prefix_chunks, static_cast<uint64_t>(L));
}

TEST_F(SchedulerTest, FullQueueRejectsWithResourceErrorAndRecovers) {
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 1, .max_queue = 2, .token_budget = 0});
  // The first request holds the worker inside its on_step until released, so the queue fills.
  WorkerGate gate;
  Outcome first, b, c;
  sched.Submit(Options(0), gate.Hold(first.Callbacks()));
  ASSERT_TRUE(gate.WaitEntered());
  sched.Submit(Options(1), b.Callbacks());
  sched.Submit(Options(2), c.Callbacks());
  EXPECT_EQ(sched.stats().waiting, 2);
  try {
    Outcome d;
    sched.Submit(Options(3), d.Callbacks());
    ADD_FAILURE() << "queue full must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
  }
  gate.Release();
  for (Outcome* o : {&first, &b, &c}) {
    ASSERT_TRUE(o->Wait());
    EXPECT_TRUE(o->ok);
  }
  EXPECT_EQ(sched.stats().rejected, 1u);
}

// A client that leaves while its request waits: the request is taken out of the queue at once,
// inside Cancel(), though the worker is busy (held here inside the running request's on_step, as
// a long batch step would hold it); it never starts and is counted as cancelled, while the running
// one and the other queued one go on.
TEST_F(SchedulerTest, CancelWhileQueuedDropsTheRequestUnstarted) {
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 1, .max_queue = 4, .token_budget = 0});
  WorkerGate gate;
  Outcome first, gone, kept;
  std::atomic<int> gone_steps{0};
  sched.Submit(Options(0), gate.Hold(first.Callbacks()));
  ASSERT_TRUE(gate.WaitEntered());
  RequestCallbacks gcb = gone.Callbacks();
  gcb.on_step = [&](const StepEvent&) { ++gone_steps; };
  auto h = sched.Submit(Options(1), std::move(gcb));
  sched.Submit(Options(2), kept.Callbacks());
  EXPECT_EQ(sched.stats().waiting, 2);
  h->Cancel();
  {
    std::lock_guard<std::mutex> l(gone.m);
    EXPECT_TRUE(gone.done);  // delivered inside Cancel(), with the worker still held
  }
  EXPECT_EQ(sched.stats().waiting, 1);
  EXPECT_EQ(sched.stats().cancelled, 1u);
  gate.Release();
  ASSERT_TRUE(gone.Wait());
  EXPECT_FALSE(gone.ok);
  EXPECT_EQ(gone.kind, ErrorKind::kCancelled);
  EXPECT_EQ(gone_steps.load(), 0);
  ASSERT_TRUE(first.Wait());
  ASSERT_TRUE(kept.Wait());
  EXPECT_TRUE(first.ok);
  EXPECT_TRUE(kept.ok);
  sched.Stop();
  const SchedulerStats s = sched.stats();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.finished, 2u);
  EXPECT_EQ(s.waiting, 0);
  h->Cancel();  // after the end: nothing happens
  EXPECT_EQ(sched.stats().cancelled, 1u);
}

// EndEarly (a stop string matched in the committed text): the request is retired after the step
// that asked, as finished, with the committed part so far; its cache pin is released.
TEST_F(SchedulerTest, EndEarlyRetiresAsFinishedWithTheCommittedPart) {
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 2, .max_queue = 4, .token_budget = 0});
  RequestOptions o = Options(2);
  o.sampler.gen_length = 32;
  o.sampler.steps = 32;
  o.sampler.block_length = 32;
  o.sampler.temperature = 0;
  o.sampler.stop_ids.clear();  // so the canvas cannot end at a stop token before step 2
  struct Slot {
    std::mutex m;
    std::condition_variable cv;
    std::shared_ptr<Scheduler::Handle> h;
  } slot;
  Outcome out;
  std::atomic<int> steps{0};
  std::vector<int32_t> final_part;
  RequestCallbacks cb = out.Callbacks();
  cb.on_step = [&](const StepEvent& e) {
    if (++steps != 2) return;
    final_part.assign(e.canvas.begin(), e.canvas.begin() + e.final_length);
    std::unique_lock<std::mutex> l(slot.m);
    slot.cv.wait_for(l, 60s, [&] { return slot.h != nullptr; });
    if (slot.h) slot.h->EndEarly();
  };
  auto h = sched.Submit(o, std::move(cb));
  {
    std::lock_guard<std::mutex> l(slot.m);
    slot.h = h;
    slot.cv.notify_all();
  }
  ASSERT_TRUE(out.Wait());
  ASSERT_TRUE(out.ok);
  EXPECT_EQ(steps.load(), 2);  // no step after the one that asked
  EXPECT_EQ(out.result.steps, 2);
  EXPECT_EQ(out.result.finish_reason, "");  // 2 of 32 steps: the canvas was not done
  EXPECT_EQ(out.result.answer, final_part);
  sched.Stop();
  EXPECT_EQ(sched.stats().finished, 1u);
  EXPECT_EQ(sched.stats().cancelled, 0u);
  EXPECT_EQ(engine.cache_stats().total.bytes_pinned, 0u);
}

TEST_F(SchedulerTest, BadRequestFailsAloneAndTheWorkerKeepsServing) {
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {});
  RequestOptions bad = Options(0);
  bad.prompt.clear();  // Start throws kInvalidArgument
  RequestOptions oob = Options(1);
  oob.prompt[0] = 1 << 30;  // outside the vocabulary
  Outcome o1, o2, o3;
  sched.Submit(bad, o1.Callbacks());
  sched.Submit(oob, o2.Callbacks());
  sched.Submit(Options(2), o3.Callbacks());
  for (Outcome* o : {&o1, &o2, &o3}) ASSERT_TRUE(o->Wait());
  EXPECT_EQ(o1.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(o2.kind, ErrorKind::kInvalidArgument);
  EXPECT_TRUE(o3.ok);
  EXPECT_EQ(sched.stats().failed, 2u);
}

TEST_F(SchedulerTest, StopWithoutGraceCancelsAndReleasesEverything) {
  Engine engine(lm_->model(), {});
  std::vector<Outcome> out(6);
  {
    Scheduler sched(engine, {.max_running = 2, .max_queue = 8, .token_budget = 0});
    for (int i = 0; i < 6; ++i) sched.Submit(Options(i), out[i].Callbacks());
    sched.Stop();
    try {
      sched.Submit(Options(0), {});
      ADD_FAILURE() << "a stopped scheduler took a request";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCancelled);  // the server's 503, not a full queue's 429
    }
    SchedulerStats s = sched.stats();
    EXPECT_EQ(s.finished + s.cancelled, 6u);
  }
  for (Outcome& o : out) {
    ASSERT_TRUE(o.Wait());  // exactly one outcome each (Set asserts no second one)
    if (!o.ok) {
      EXPECT_EQ(o.kind, ErrorKind::kCancelled);
    }
  }
  EXPECT_EQ(engine.cache_stats().total.bytes_pinned, 0u);
}

TEST_F(SchedulerTest, TokenBudgetStillAdmitsAnOversizedRequestAlone) {
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 4, .max_queue = 4, .token_budget = 1});
  Outcome a, b;
  sched.Submit(Options(0), a.Callbacks());
  sched.Submit(Options(1), b.Callbacks());
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_TRUE(a.ok);
  EXPECT_TRUE(b.ok);
}

// `serve -t N` reaches the forwards: OpenMP's team size is a per-thread setting, so the worker
// applies SchedulerOptions::threads itself (before, the main thread's omp_set_num_threads never
// reached the worker and its forwards ran on every core).
TEST_F(SchedulerTest, ThreadsOptionIsAppliedOnTheWorkerThread) {
#ifdef BICACHE_TSAN_BUILD
  GTEST_SKIP()
      << "more than one OpenMP thread would start uninstrumented libgomp workers under TSan";
#endif
  const int want = omp_get_max_threads() == 2 ? 3 : 2;  // differs from the process default
  Engine engine(lm_->model(), {});
  Scheduler sched(engine, {.max_running = 2, .max_queue = 4, .token_budget = 0, .threads = want});
  Outcome out;
  std::atomic<int> seen{0};
  RequestCallbacks cb = out.Callbacks();
  cb.on_step = [&](const StepEvent&) { seen = omp_get_max_threads(); };  // runs on the worker
  sched.Submit(Options(1), std::move(cb));
  ASSERT_TRUE(out.Wait());
  EXPECT_TRUE(out.ok);
  EXPECT_EQ(seen.load(), want);
}

TEST(ForwardThreads, SmallModelsRunOnOneThreadUnlessAsked) {
  model::ModelConfig small, big;
  small.d_model = kSmallModelDim;
  big.d_model = 2 * kSmallModelDim;
  const char* env = std::getenv("OMP_NUM_THREADS");
  EXPECT_EQ(ForwardThreads(0, small), env ? 0 : 1);  // a user's OMP_NUM_THREADS wins over the rule
  EXPECT_EQ(ForwardThreads(0, big), 0);  // OpenMP's default (OMP_NUM_THREADS or every core)
  EXPECT_EQ(ForwardThreads(3, small), 3);
  EXPECT_EQ(ForwardThreads(5, big), 5);
}

}  // namespace
}  // namespace bicache::engine
