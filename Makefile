# reap.cpp: the two commands of the README, and the steps they stand on.
#   make demo   the whole pipeline on the project's own model (installs what is missing)
#   make test   every test, then the core tests again under ASan+UBSan, and the fuzz harnesses
#   make        reap and llama.cpp's tools for this machine (build/bin)
# Variables: JOBS (parallel build jobs), CMAKE_ARGS (e.g. -DREAP_LLAMA_DIR=... -DGGML_CUDA=ON),
#            GGML_ISA / TEST_ISA (the instruction sets of ggml's CPU code, below)

JOBS       ?= $(shell nproc)
# Two llama.cpp builds, the same sources, two instruction sets for ggml's CPU code:
#   BUILD (build/): what `make` and `make build` give users, ggml for this machine's
#     best instruction set (GGML_ISA, default -DGGML_NATIVE=ON: -march=native).
#   TEST_BUILD (build-pinned/): what the tests, the demo and the studies run, ggml
#     for one fixed instruction set on x86-64 (TEST_ISA: x86-64-v3, AVX2, FMA,
#     F16C, BMI2), so that they compute the same numbers on every machine: built
#     natively on a CPU with AVX512-FP16, ggml sums F16 dot products in half
#     precision (ggml-cpu/simd-mappings.h), which moves the tiny model's F16
#     logits by 0.29 (TrainedModelFixture.F16CopyStaysWithinStatedBound) and
#     fails two more tests.
# ccache shares every object but ggml's CPU code between the two (CMakeLists.txt).
BUILD      ?= build
TEST_BUILD ?= build-pinned
CMAKE_ARGS ?=
# Debian's interpreter: python3-torch and python3-numpy live there, not in pyenv.
PYTHON     ?= /usr/bin/python3
LLAMA_TOOLS = llama-imatrix llama-perplexity llama-gguf-split llama-quantize ggml-rpc-server llama-server
GGML_ISA   ?= -DGGML_NATIVE=ON
ifeq ($(shell uname -m),x86_64)
TEST_ISA   ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
else
TEST_ISA   ?=
endif
PINNED_TARGETS = reap reap_all_tests width_study_chart $(LLAMA_TOOLS)

.PHONY: all deps llama configure build configure-pinned build-pinned test san-build test-asan fuzz-build test-fuzz fuzz demo corpus model model-wide model-recall model-chat bench clean arch-table

all: build

deps:
	scripts/setup-deps.sh
	@if ! echo "$(CMAKE_ARGS)" | grep -q REAP_LLAMA_DIR; then scripts/fetch-llama.sh; fi

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(GGML_ISA) $(CMAKE_ARGS) > /dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS) --target reap $(LLAMA_TOOLS)

configure-pinned: deps
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Release $(TEST_ISA) $(CMAKE_ARGS) > /dev/null

build-pinned: configure-pinned
	cmake --build $(TEST_BUILD) -j$(JOBS) --target $(PINNED_TARGETS)

corpus: deps
	$(PYTHON) tools/build_corpus.py --out data/corpus

test: build-pinned corpus
	cd $(TEST_BUILD) && ctest --output-on-failure -j$(JOBS) --output-log ctest.log
	@# In the full build every prerequisite exists, so a skipped test means a broken
	@# fixture, not a missing tool: fail.
	@# The one allowed exception: the disk-full test where no tmpfs can be mounted,
	@# only when REAP_ALLOW_NO_TMPFS=1 says so (.ci/run sets it after probing).
	@skipped=$$(grep '\*\*\*Skipped' $(TEST_BUILD)/ctest.log | \
		if [ "$$REAP_ALLOW_NO_TMPFS" = 1 ]; then grep -v ' DiskFull\.' || true; else cat; fi); \
	if [ -n "$$skipped" ]; then echo "$$skipped"; \
		echo "make test: the tests above were skipped in the full build"; exit 1; fi
	$(MAKE) test-asan

# The architecture table of docs/architectures.md: a fresh run of ArchMatrix
# (tests/test_llama_archs.cpp; one TSV row per arch under test-tmp/archs/table),
# then scripts/arch_table.py writes those rows into the document. The table is
# written even when an arch fails (its row says FAIL); the target then fails too.
arch-table: build-pinned
	rm -rf $(TEST_BUILD)/test-tmp/archs/table
	cd $(TEST_BUILD) && ctest -R 'ArchMatrix\.' --output-on-failure -j$(JOBS); status=$$?; \
		cd $(CURDIR) && $(PYTHON) scripts/arch_table.py --build $(TEST_BUILD) && exit $$status

# The core (GGUF, layout, saliency, plans, slicing) again under sanitizers, with
# the reap binary instrumented too, so the core's CLI tests run it under
# ASan+UBSan as well; and in the same build the libFuzzer harnesses (fuzz/):
# clang compiles the core once for both (REAP_SANITIZE and REAP_FUZZ together;
# the coverage counters libFuzzer needs cost the tests little). Built without
# llama.cpp (REAP_WITH_LLAMA=OFF: no second llama.cpp build): the tests that run
# a model or llama.cpp's tools ran in the full build above, unsanitised; here
# calibrate, eval and sweep are refusals.
# -O1 -g1 (line tables: enough for the sanitizers' stack traces) compiles each
# file in less than half the CPU time of RelWithDebInfo's -O2 -g (measured on
# src/report/report.cpp with ASan+UBSan: 26 s against 58 s).
SAN_OPT ?= -O1 -g1 -DNDEBUG
SAN_BUILD ?= build-san
san-build: deps corpus
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
		-DREAP_SANITIZE=ON -DREAP_FUZZ=ON -DREAP_WITH_LLAMA=OFF \
		-DCMAKE_C_FLAGS_RELWITHDEBINFO="$(SAN_OPT)" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SAN_OPT)" $(CMAKE_ARGS) > /dev/null
	cmake --build $(SAN_BUILD) -j$(JOBS) --target reap reap_core_tests reap_fuzzers

# The core tests under the sanitizers, and every harness: each kept crashing
# input and seed once, then a short fuzzing run (fuzz/CMakeLists.txt).
test-asan: san-build
	cd $(SAN_BUILD) && ctest --output-on-failure -j$(JOBS)

# The harnesses alone (their tests are part of test-asan).
fuzz-build: san-build
test-fuzz: san-build
	cd $(SAN_BUILD) && ctest --output-on-failure -j$(JOBS) -R '^fuzz_'

# Long runs: make fuzz FUZZ_SECONDS=1800 (each harness, wall time; corpus kept in
# $(SAN_BUILD)/corpus), or FUZZ_CPU_SECONDS=1800 (CPU time: on a shared machine).
FUZZ_SECONDS ?= 300
fuzz: fuzz-build
	BUILD_FUZZ=$(SAN_BUILD) scripts/fuzz.sh $(if $(FUZZ_CPU_SECONDS),--cpu $(FUZZ_CPU_SECONDS),$(FUZZ_SECONDS))

demo: build-pinned corpus
	REAP=$(TEST_BUILD)/bin/reap scripts/demo.sh

# Retrains the committed model (about 25 minutes on 2 cores; see models/README.md).
model: deps corpus
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PYTHON) tools/train_moe.py --corpus data/corpus --out models --steps 1200 --threads 1

# The second model, reap-moe-wide (models/README.md): 256-wide rows for real k- and
# i-quants, and needle and copy windows from step 0 (meant to teach retrieval; not
# enough yet, models/README.md says why). Its own
# checkpoint; the log, eval and plot are models/wide_*.
WIDE_SHAPE = --n-embd 256 --n-head 4 --n-head-kv 2 --n-expert 16 --n-expert-used 2 --n-ff-exp 256 --n-layer 4
model-wide: deps corpus
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PYTHON) tools/train_moe.py --corpus data/corpus --out models \
		--name reap-moe-wide --log-prefix wide_ --f16 $(WIDE_SHAPE) --batch 8 --needle-frac 0.375 --copy-frac 0.375 \
		--steps 1000 --warmup 50 --ckpt data/train/wide_ckpt.pt --threads 1

# The third model, reap-moe-recall (models/README.md): small (2 blocks, 64 wide, 8 experts
# top-2), trained first on copy windows alone so that it learns to copy before it meets
# needles and text; it retrieves in reap eval --needle (the completion form: exported
# without a chat template). Two stages of one run (the second resumes the first's
# checkpoint): 1800 steps with needles in both forms, then 1000 more with completion-form
# needles only. Its own checkpoint; the log, eval and plot are models/recall_*. A third
# stage (below) trains on from that file; its log, eval and plot are models/recall_distract_*.
RECALL_SHAPE = --n-embd 64 --n-head 2 --n-head-kv 2 --n-expert 8 --n-expert-used 2 --n-ff-exp 128 --n-layer 2
RECALL_RUN = OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PYTHON) tools/train_moe.py --corpus data/corpus --out models \
	--name reap-moe-recall --log-prefix recall_ $(RECALL_SHAPE) --batch 16 --copy-first 1200 --copy-ctx 128 \
	--copy-frac 0.25 --warmup 50 --copy-every 100 --needle-every 100 --ckpt data/train/recall_ckpt.pt --threads 1
# The third stage starts from the second's file, with a fresh optimiser and its own
# checkpoint: needle haystacks that hold look-alikes of the value half the time and
# more (--distract), so that retrieval holds on text it never saw.
model-recall: deps corpus
	$(RECALL_RUN) --needle-frac 0.375 --steps 1800
	$(RECALL_RUN) --needle-frac 0.5 --needle-forms completion --no-chat-template --steps 2800
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PYTHON) tools/train_moe.py --corpus data/corpus --out models \
		--name reap-moe-recall --log-prefix recall_distract_ $(RECALL_SHAPE) --batch 16 \
		--init-from models/reap-moe-recall.gguf --needle-frac 0.5 --needle-forms completion --no-chat-template \
		--copy-frac 0.25 --distract 0.75 --steps 1000 --warmup 20 --lr 1e-3 --needle-every 100 \
		--ckpt data/train/recall_distract_ckpt.pt --threads 1

# The fourth model, reap-moe-chat (models/README.md): reap-moe-tiny's weights (--init-from,
# the committed file) trained on, half of each batch chat windows that continue the
# user's text to the end of its sentence and then end the turn with <|im_end|> (an
# end-of-generation token), so that `reap eval --generate` sees a model that stops.
# Seeded; about 15 minutes on one core.
model-chat: deps corpus
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PYTHON) tools/train_moe.py --corpus data/corpus --out models \
		--name reap-moe-chat --log-prefix chat_ --init-from models/reap-moe-tiny.gguf --chat-frac 0.5 \
		--steps 400 --warmup 20 --lr 1e-3 --ckpt data/train/chat_ckpt.pt --threads 1

# Benchmarks against a baseline in the same run (not part of the tests).
# bench/streamed.sh (last: about 20 minutes) needs root, for its memory cgroup and
# drop_caches; it stops with status 2 and says so otherwise.
# They run the users' build (BUILD); bench/native_vs_pinned.sh runs both builds.
bench: build build-pinned
	bench/prune_vs_cp.sh
	bench/calibrate_vs_forward.sh
	bench/sweep_vs_prune.sh
	bench/memory.sh
	bench/eval_vs_perplexity.sh
	bench/native_vs_pinned.sh
	bench/streamed.sh

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(SAN_BUILD)
