// Umbrella header for the denoising samplers: configuration (sampler_config.h) and the
// per-request canvas state machine (denoiser.h).
#pragma once

#include "diffusion/denoiser.h"
#include "diffusion/sampler_config.h"
