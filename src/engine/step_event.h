// What a step callback sees after one denoising step of one request (Engine::Run's callback and
// the scheduler's RequestCallbacks::on_step): a small view built by the driver, so streaming code
// (SSE deltas, `bicache generate`'s progress view) never reaches into the Request or its Denoiser.
//
// The spans point into the request and are valid only during the callback: copy what you keep.
#pragma once

#include <cstdint>
#include <span>

namespace bicache::engine {

struct CommittedToken {
  int position = 0;  // canvas position (0 = first generated token)
  int32_t token = 0;
};

struct StepEvent {
  int step = 0;  // denoising steps taken so far (1 after the first)
  // Tokens committed at this step, positions ascending (positions padded after a stop excluded).
  std::span<const CommittedToken> committed;
  std::span<const int32_t> canvas;  // [gen_length] the whole canvas, the mask id where masked
  // canvas[0, final_length) is answer text that never changes again (the leftmost committed run,
  // clipped at the stop token): what a stream may send.
  int final_length = 0;
};

}  // namespace bicache::engine
