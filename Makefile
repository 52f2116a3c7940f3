# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-$(shell cat pyproject.toml client/pyproject.toml | cksum | cut -d' ' -f1)
export HF_HUB_OFFLINE = 1
export TOKENIZERS_PARALLELISM = false

.PHONY: install run test lint proto docs docs-config docs-serve bench-latency bench-hop bench-rebalance bench-recall bench-graph bench-migration bench-load \
	bench-peers bench-after-writes bench-http-isolation bench-observe \
	dev-secrets fuzz \
	eval-locomo eval-locomo-policy train-ranker clean

# A line per step, and quiet commands: pip with --quiet says nothing for minutes otherwise.
$(PY):
	@echo "→ creating the virtual environment in $(VENV)"
	@$(PYTHON) -m venv $(VENV)

# torch first, and exactly 2.13.0: a CPU build of it is on these machines, while letting
# sentence-transformers pick a torch pulls gigabytes of CUDA packages.
$(STAMP): pyproject.toml client/pyproject.toml | $(PY)
	@echo "→ installing packages into $(VENV) (a few minutes the first time)"
	@echo "  → pip"
	@$(PY) -m pip install --quiet --upgrade pip
	@echo "  → torch 2.13.0"
	@$(PY) -m pip install --quiet torch==2.13.0
	@echo "  → the client and the server from this checkout, with their dependencies"
	@$(PY) -m pip install --quiet -e './client[agents]' -e '.[server,dev,privacy]'
	@rm -f $(VENV)/.installed-* && touch $@
	@echo "→ packages installed"

install: $(STAMP)

# The server's own log lines follow: the model, the encoder file, and where it serves.
run: install
	@echo "→ starting the server"
	@CELESTIAL_HTTP_ADDRESS=$${CELESTIAL_HTTP_ADDRESS-localhost:8080} $(VENV)/bin/celestial serve

# The 25 slowest tests follow the summary: where the suite's time goes, run by run.
test: install
	$(PY) -m pytest -q -rs --durations=25

lint: install
	$(VENV)/bin/ruff check proto server client tests benchmarks
	$(VENV)/bin/mypy server client

proto: install
	$(PY) proto/generate.py

# The configuration reference, docs/configuration.md, from the settings object (config.py).
docs-config: install
	$(PY) -m celestial_memory.ops.config_reference

# The documentation site (mkdocs.yml, docs/) into site/; the suite builds it too, with --strict.
docs: install
	$(VENV)/bin/mkdocs build --strict

docs-serve: install
	$(VENV)/bin/mkdocs serve

# RANKERS=learned,weights: the two orders of a recall side by side on one encoder, interleaved.
bench-latency: install
	$(PY) benchmarks/grpc_latency.py $(if $(RANKERS),--encoders onnx --rankers $(RANKERS))

# The turn policy's cost: Observe against Store on the same turns, by decision, 10,000 memories.
bench-observe: install
	$(PY) benchmarks/observe_latency.py

bench-rebalance: install
	$(PY) benchmarks/rebalance.py

# A vector recall and a health Check from another process beside a bare grpc.aio server's.
bench-hop: install
	$(PY) benchmarks/recall_hop.py

bench-recall: install
	$(PY) benchmarks/recall_latency.py

# Relations at scale: expansion's cost to a recall, Related walks, bytes per edge.
bench-graph: install
	$(PY) benchmarks/graph_latency.py

bench-migration: install
	$(PY) benchmarks/migration.py

# An admin API key, a self-signed certificate (.secrets/) and a Qdrant API key (.env) for
# docker compose, readable by their owner only; not in git.
dev-secrets: install
	CELESTIAL=$(VENV)/bin/celestial deploy/dev-secrets.sh .

# A longer fuzz run of every method (the suite runs 25 examples per method).
FUZZ_EXAMPLES ?= 300
fuzz: install
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -s tests/integration/test_fuzz.py

bench-load: install
	$(PY) benchmarks/load.py

# A keyed gRPC and a keyed HTTP caller while an attacker works the HTTP port (costly bodies,
# unread Exports, slow bodies): each phase's p50/p99 against idle.
bench-http-isolation: install
	$(PY) benchmarks/http_isolation.py

# Recall in the minute after a 2,000-memory StoreBatch against the same once the server is idle.
bench-after-writes: install
	$(PY) benchmarks/after_writes.py

# This service beside Chroma, LangChain + Qdrant and mem0, with the raw floors (its own
# environment, benchmarks/peers/.venv, made on first use; not part of `make test`).
bench-peers: install
	benchmarks/peers/run.sh

# LoCoMo recall quality: a throwaway server with the admin clock, then `celestial eval locomo`,
# then which order ranked the recalls (the server's start-up line; benchmarks/ranker_note.py).
LOCOMO ?= ../shared/data/locomo-dev
EVAL_ADDRESS ?= localhost:50061
eval-locomo: install
	rm -rf .eval-data
	CELESTIAL_ADMIN_CLOCK=true CELESTIAL_DATA_DIR=.eval-data CELESTIAL_ADDRESS=$(EVAL_ADDRESS) \
		$(VENV)/bin/celestial serve > .eval-server.log 2>&1 & pid=$$!; \
	until $(PY) -m celestial_memory.ops.healthcheck $(EVAL_ADDRESS) >/dev/null 2>&1; do \
		kill -0 $$pid || exit 1; sleep 1; done; \
	$(VENV)/bin/celestial --target $(EVAL_ADDRESS) eval locomo $(LOCOMO) --k 5 10 $(EVAL_ARGS); rc=$$?; \
	$(PY) benchmarks/ranker_note.py $(LOCOMO) .eval-server.log; \
	kill $$pid; wait $$pid; rm -rf .eval-data; exit $$rc

# The turn policy on LoCoMo: every turn through Observe, beside storing every turn (skip rate,
# evidence kept, recall of both, RETRIEVE on the questions).
eval-locomo-policy:
	$(MAKE) eval-locomo EVAL_ARGS=--policy

# The learned ranker (server/celestial_memory/ranking/model/) from the LoCoMo dev split: the
# leave-one-conversation-out figures first, then the model and its card.
# RANKER_OUT=folder: the model and its card there (for CELESTIAL_RANKER_MODEL) instead.
train-ranker: install
	$(PY) benchmarks/train_ranker.py $(LOCOMO) $(if $(RANKER_OUT),--out $(RANKER_OUT))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
