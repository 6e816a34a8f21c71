# npubench: a thin wrapper over CMake with the reference flow's targets.
# MODEL=instruct|base|gemma3|PATH  PROMPT="..."  N_TOKENS=N  DTYPE=bf16|f32|q4_1|native  THREADS=N
BUILD    ?= build
MODEL    ?= instruct
DTYPE    ?= bf16
THREADS  ?= 0
NB        = $(BUILD)/npubench
DEPLOY    = --model $(MODEL) --dtype $(DTYPE) --threads $(THREADS)
# The prompt reaches npubench as text only: $(value) stops make from expanding it (a
# PROMPT of '$(shell ...)' would run), and the recipe reads it from the environment, so
# the shell never parses it either.
NB_PROMPT   := $(value PROMPT)
unexport PROMPT
export NB_PROMPT
PROMPT_ARG   = $(if $(NB_PROMPT),--prompt "$$NB_PROMPT",)
NTOKENS_ARG  = $(if $(N_TOKENS),--n-tokens $(N_TOKENS),)

.PHONY: all setup build run verify verify-full diagnosis profile test test-sanitize test-faults fuzz coverage mutate hf-reference bench clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j$$(nproc)

run: build
	$(NB) run $(DEPLOY) $(PROMPT_ARG) $(NTOKENS_ARG)

verify: build
	$(NB) verify $(DEPLOY) $(NTOKENS_ARG)

verify-full: build
	$(NB) verify-full $(DEPLOY) $(NTOKENS_ARG)

diagnosis: build
	$(NB) diagnosis $(DEPLOY) $(PROMPT_ARG)

profile: build
	$(NB) profile $(DEPLOY) $(PROMPT_ARG) $(if $(N_TOKENS),--n-tokens $(N_TOKENS),--n-tokens 20)

# The whole suite: warnings as errors, then the unit and corrupt-input tests
# again under AddressSanitizer + UndefinedBehaviorSanitizer.
test: build
	cd $(BUILD) && ctest --output-on-failure
	@$(MAKE) --no-print-directory test-sanitize

# -O1: the sanitizers keep their checks, and the engine-driven tests run several times faster
# than at -O0 (the suite's time under ASan is mostly model forward passes).
test-sanitize:
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" \
	  -DNB_WERROR=ON -DNB_SANITIZE=ON >/dev/null
	@cmake --build $(BUILD)-asan -j$$(nproc)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -LE e2e

# The service fault scenarios at full size: 8 clients x 2,000 jobs counted exactly once (the
# default suite runs 8 x 125); the other faults run in `make test` already.
test-faults: build
	cd $(BUILD) && NB_FAULTS_FULL=1 ctest --output-on-failure -R test_service_api

# Coverage-guided fuzzing (clang, installed if missing): every tests/fuzz harness for
# FUZZ_SECONDS (default 30) seconds; FUZZ_ONLY=fuzz_gguf runs one.
fuzz:
	@scripts/fuzz.sh

# Line and branch coverage of the non-e2e suite, per directory (gcovr; build-cov/).
coverage: setup
	scripts/coverage.sh

# Mutation testing: tests/mutations.txt applied one by one, the kill rate (build-mutate/).
mutate: setup
	tests/mutate.sh

# Regenerates the committed HF bf16 traces (needs torch: scripts/setup_hf.sh).
hf-reference: setup
	scripts/hf_reference.sh

# Every benchmark once at a short size, then each one's ratio lines (bench/run_all.sh);
# THREADS, MODEL and OUT as that script reads them.
bench: build
	bench/run_all.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz build-cov build-mutate reports
