# Thin wrapper over CMake: the README's two commands.
#   make run   -- install deps, build, run the main job on the embedded model
#   make test  -- install deps, build, run every test
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: deps build run test hardening clean model

deps:
	bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	bash scripts/main_job.sh $(BUILD)/bicache

# Test processes run side by side (-j), so each gets one OpenMP thread unless told otherwise:
# several processes each spinning on every core would oversubscribe the machine.
# Then the hardening stages (docs/hardening.md): the whole suite again under ASan+UBSan, the
# concurrency tests under TSan, and each libFuzzer target for FUZZ_SECONDS (default 20 here).
# HARDENING_SKIP=1 make test runs the ordinary suite only (quick local runs).
# First of all, every C++ file must be as .clang-format writes it (scripts/check_format.sh) and
# no function may run over 150 lines (scripts/check_function_size.py).
test: build
	bash scripts/check_format.sh
	/usr/bin/python3 scripts/check_function_size.py
	cd $(BUILD) && OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} ctest --output-on-failure -j $(JOBS)
	JOBS=$(JOBS) FUZZ_SECONDS=$${FUZZ_SECONDS:-20} bash scripts/hardening.sh asan tsan fuzz

# Every hardening stage: ASan+UBSan, TSan, fuzzing (FUZZ_SECONDS default 60).
hardening: deps
	JOBS=$(JOBS) bash scripts/hardening.sh asan tsan fuzz

model: deps
	bash tools/train/make_model.sh

clean:
	rm -rf $(BUILD)
