# nmt — every target CI runs is here. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
NMT := $(BIN)/nmt
# Where no GPU is present the CPU build of torch is pinned, so pip does not pull the
# multi-GB CUDA build. Set TORCH_INDEX to a CPU wheel index if your pip does not find one.
TORCH_CPU ?= torch==2.13.0
TORCH_INDEX ?=
# A local copy of the corpus (file or directory) beside the checkout is used when present.
export NMT_DATA_MIRROR ?= $(wildcard $(CURDIR)/../shared/data)
# The textbook's recipe script, which `make bench` compares training speed with (skipped without).
BASELINE ?= $(wildcard $(CURDIR)/../shared/baselines/d2l_recipe.py)
CONFIG ?= configs/demo.toml
RUN ?=

.DEFAULT_GOAL := help
.PHONY: help install data train translate bleu quality test test-isa test-all test-argos lint bench \
	bench-peers bench-peers-quality bench-startup bench-bt bench-adapt bench-data bench-spans demo clean gpu-bundle gpu-check

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

install: $(VENV)/.installed ## create .venv and install nmt with its dev tools (idempotent)

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
	  $(BIN)/python -m pip install --quiet "torch>=2.10"; \
	else \
	  $(BIN)/python -m pip install --quiet "$(TORCH_CPU)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	fi
	$(BIN)/python -m pip install --quiet -e ".[dev,ctranslate2]"
	touch $@

data: install ## download, verify and prepare the corpus for CONFIG
	$(NMT) data download
	$(NMT) data prepare --config $(CONFIG)
	$(NMT) data stats --config $(CONFIG)

train: install ## train CONFIG (default configs/demo.toml) into runs/
	$(NMT) train --config $(CONFIG)

translate: install ## translate a sentence with the latest run (RUN=runs/NAME to pick one)
	$(NMT) translate $(if $(RUN),--run $(RUN)) "I'm home." "He's calm." "Go." "I lost."

bleu: install ## BLEU and chrF of the latest run (RUN=runs/NAME) on its test split
	$(NMT) bleu $(if $(RUN),--run $(RUN))

# The figures of docs/BENCHMARKS.md's quality table: greedy and beam, with and without the
# weights' moving average, and with the sources typed the textbook's way.
quality: install ## BLEU/chrF of RUN (default runs/demo): greedy, beam 5, --no-ema, --textbook-input
	$(NMT) bleu --run $(or $(RUN),runs/demo) --beam 1
	$(NMT) bleu --run $(or $(RUN),runs/demo) --beam 5
	$(NMT) bleu --run $(or $(RUN),runs/demo) --no-ema
	$(NMT) bleu --run $(or $(RUN),runs/demo) --textbook-input

test: install ## the fast test suite (what CI runs)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow"

# The tests that compare two computations of one model (nmt and CTranslate2, cached and uncached,
# batched and alone, the golden file) again with the CPU's vector unit narrowed, as on machines
# without AVX-512 and without any: a comparison that holds only by luck on this CPU fails here.
ISA_TESTS := tests/test_export.py tests/test_decode.py tests/test_translate.py tests/test_models_golden.py
ISA_AVX2 := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2
ISA_NONE := ATEN_CPU_CAPABILITY=default CT2_FORCE_CPU_ISA=GENERIC

test-isa: install ## the engine-equality and golden tests as AVX2-only and plain CPUs compute (CI)
	$(ISA_AVX2) OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow" $(ISA_TESTS)
	$(ISA_NONE) OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m "not slow" $(ISA_TESTS)

test-all: install ## every test, slow ones included (reads the whole corpus)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q

test-argos: install ## real Argos Translate and LibreTranslate install and serve an export (venvs in build/)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -m slow tests/test_export.py

lint: install ## ruff and mypy
	$(BIN)/ruff check nmt tests cli.py bench
	$(BIN)/mypy

# Decoding is measured on the demo model when `make demo` has trained one, else on a random one;
# the demo model is also exported to CTranslate2 (fp32, int8) and timed against nmt's decoding.
bench: install ## CPU benchmarks (<= 10 minutes); writes bench/out/ and prints tables
	$(BIN)/python -m bench --out bench/out $(if $(BASELINE),--baseline $(BASELINE)) \
		$(if $(wildcard $(NMT_DATA_MIRROR)),--corpus $(NMT_DATA_MIRROR)) \
		$(if $(wildcard runs/demo/checkpoints/best.pt),--decode-run runs/demo)

# nmt data prepare on generated corpora of 1, 5 and 10 million pairs (bench/data_scale.py):
# pairs a second, peak memory (main process, and with its workers), cache size; AGAINST=DIR
# also runs another checkout on each size. Needs about 8 GB of disk at 10 million pairs.
DATA_SIZES ?= 1000000,5000000,10000000
bench-data: install ## preparation at 1, 5 and 10 million pairs (~50 min); bench/out/data_scale.md
	$(BIN)/python -m bench.data_scale --sizes $(DATA_SIZES) $(if $(AGAINST),--against $(AGAINST)) \
		$(if $(wildcard $(NMT_DATA_MIRROR)/fra-eng.zip),--corpus $(NMT_DATA_MIRROR)/fra-eng.zip)

# Seconds from launching `nmt` to its exit (--help, one sentence through CTranslate2 and PyTorch),
# median of 5 fresh processes each (bench/startup.py); RUN: a trained Transformer run.
bench-startup: install ## cold-start seconds of nmt --help and one-sentence translations; bench/out/startup.md
	$(BIN)/python -m bench.startup --run $(or $(RUN),runs/demo)

# OpenNMT-py 3.5.1 in its own environment (build/onmt-venv, made on first use) trains the demo's
# model on the demo's pieces beside nmt, one thread each, alternated (bench/peers.py).
PEERS_STEPS ?= 150
bench-peers: install ## nmt against OpenNMT-py, demo model, 1 thread each; bench/out/peers.md
	$(BIN)/python -m bench.peers --out bench/out --steps $(PEERS_STEPS) $(if $(PEERS_CPU),--cpu $(PEERS_CPU))

# The same two trainings to the same validation loss, 2 threads each, 1,200 steps (~17 min).
bench-peers-quality: install ## time to the same validation loss, nmt vs OpenNMT-py; bench/out/peers-quality.md
	$(BIN)/python -m bench.peers --quality --out bench/out --steps 1200 --eval-every 100

# Back-translation's gain on the shipped corpus: fr->en on half of it back-translates the French
# of the other half; en->fr with and without those pairs, the same steps (bench/backtranslation.py).
BT_STEPS ?= 600
bench-bt: install ## what back-translation gains (3 demo trainings, ~25 min); bench/out/backtranslation/
	$(BIN)/python -m bench.backtranslation --steps $(BT_STEPS) \
		$(if $(wildcard $(NMT_DATA_MIRROR)/fra-eng.zip),--corpus $(NMT_DATA_MIRROR)/fra-eng.zip)

# Adapting the benchmark's en->fr model to questions of the corpus' other half, with and without
# a share of its own data (bench/adaptation.py); after bench-bt, whose runs it continues.
bench-adapt: install ## what nmt train --from gains and forgets (after bench-bt); its work folder
	$(BIN)/python -m bench.adaptation $(if $(wildcard $(NMT_DATA_MIRROR)/fra-eng.zip),--corpus $(NMT_DATA_MIRROR)/fra-eng.zip)

# Protected spans through every engine (bench/software_strings.py): a corpus of software strings
# from this machine's gettext catalogues (/usr/share/locale/LANG), the demo trained on it mixed
# with the prose corpus, both test sets scored through nmt, CTranslate2 and the Argos package
# (build/argos-venv, which test-argos makes; skipped with a note without it).
SPANS_DIR ?= bench/out/software-strings
SPANS_LANG ?= fr
bench-spans: install ## software strings' spans through nmt, CTranslate2, Argos; SPANS_DIR/results.md
	$(BIN)/python -m bench.software_strings corpus --out $(SPANS_DIR) --target $(SPANS_LANG)
	$(BIN)/python -m bench.software_strings measure --work $(SPANS_DIR) $(if $(SPANS_STEPS),--steps $(SPANS_STEPS))

demo: install ## download, train the small CPU demo model (about 10 min, 15 at most), translate and score it
	$(NMT) data download
	$(NMT) train --config configs/demo.toml --run-name demo --overwrite
	$(NMT) translate --run runs/demo "I'm home." "He's calm." "Go." "I lost." "i'm home ."
	$(NMT) bleu --run runs/demo

# The GPU check (docs/BENCHMARKS.md). gpu-bundle, where a package registry is reachable: the
# wheels of every dependency but torch for the GPU machine's CPython 3.12, and the corpus
# (GPU_PRESENT=FILE, that machine's `pip list --format=freeze`, leaves out what it has; the
# software strings of SPANS_DIR go along where it holds a corpus).
# gpu-check, on the GPU machine: installs the bundle offline, then runs STEP (tests, speed,
# transformer, gru, decode; default all, in that order; spans only by name) within
# GPU_SECONDS (default 480: one lease's command), writing GPU_OUT/STEP.json and STEP.md.
# Without a CUDA device each step says it is skipped.
GPU_BUNDLE ?= build/gpu-bundle
GPU_PYTHON ?= python3
GPU_OUT ?= bench/out/gpu
STEP ?= all
GPU_SECONDS ?= 480

gpu-bundle: ## download what the GPU check needs besides torch into build/gpu-bundle/
	$(PYTHON) -m bench.gpu bundle --dest $(GPU_BUNDLE) $(if $(GPU_PRESENT),--present $(GPU_PRESENT)) \
		$(if $(wildcard $(NMT_DATA_MIRROR)),--corpus $(NMT_DATA_MIRROR)) \
		$(if $(wildcard $(SPANS_DIR)/corpus.json),--spans $(SPANS_DIR))

gpu-check: ## on a CUDA machine: STEP=tests|speed|transformer|gru|decode|spans (default all); bench/out/gpu/
	if [ -f $(GPU_BUNDLE)/requirements.txt ]; then \
	  $(GPU_PYTHON) -m pip install --quiet --no-index --find-links $(GPU_BUNDLE)/wheels \
	    -r $(GPU_BUNDLE)/requirements.txt; \
	fi
	PYTHONPATH=$(CURDIR) $(GPU_PYTHON) -m bench.gpu check --step $(STEP) --out $(GPU_OUT) \
		--seconds $(GPU_SECONDS) --bundle $(GPU_BUNDLE) $(if $(REQUIRE_GPU),--require-gpu)

clean: ## remove caches (keeps data/ and runs/)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info
