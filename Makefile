# Thin wrapper over Meson/Ninja and the scripts in scripts/ and qa/. The real build is
# meson.build; everything here can also be run by hand (see README.md).
#
#   make run     install build/run dependencies if missing, build, run steerd on 127.0.0.1:5353
#                (status page and /metrics on http://127.0.0.1:8053/)
#   make test    install test dependencies if missing, build, run the whole suite
#   make fuzz    build the libFuzzer targets (clang, ASan+UBSan) and run each for FUZZ_SECONDS
#                (default 60); FUZZ_TARGETS="conf zone_load" runs only those (scripts/fuzz.sh)
#   make bench   side-by-side benchmark against gdnsd, Knot and NSD (bench/run.py)
#   make install meson install: binaries, man pages, systemd unit, /usr/local/etc/steer/steer.yaml
#   make clean   remove the build directories

BUILD      ?= build
ASAN_BUILD ?= build-asan
PYTHON     ?= /usr/bin/python3
PORT       ?= 5353
HTTP_PORT  ?= 8053
ZONE       ?= examples/zones/example.test.zone

STEERD   = $(BUILD)/src/daemon/steerd
STEERCTL = $(BUILD)/tools/steerctl

.PHONY: all run test fuzz bench build asan deps-run deps-test format format-fix install clean help

all: build

help:
	@sed -n 's/^#   //p' Makefile

deps-run:
	@scripts/setup-deps.sh run

deps-test:
	@scripts/setup-deps.sh test

build: deps-run
	@scripts/build.sh $(BUILD)

asan: deps-test
	@scripts/build.sh $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false

run: build
	@echo
	@echo "steerd is starting on 127.0.0.1:$(PORT), serving $(ZONE). Try:"
	@echo "    kdig @127.0.0.1 -p $(PORT) www.example.test"
	@echo "    kdig @127.0.0.1 -p $(PORT) +tcp example.test MX"
	@echo "    $(STEERCTL) status"
	@echo "    curl -s http://127.0.0.1:$(HTTP_PORT)/metrics | grep steer_queries_total"
	@echo "The status page is at http://127.0.0.1:$(HTTP_PORT)/ ."
	@echo "Stop it with Ctrl-C."
	@echo
	exec $(STEERD) --listen 127.0.0.1:$(PORT) --zone example.test=$(ZONE) \
		--http 127.0.0.1:$(HTTP_PORT)

test: deps-test
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) PYTHON=$(PYTHON) scripts/test-all.sh

# Not part of `make test` (which replays the corpus): findings land in tests/fuzz/corpus/.
fuzz: deps-test
	@scripts/fuzz.sh $(FUZZ_TARGETS)

# BENCH_ARGS passes options to bench/run.py, e.g. make bench BENCH_ARGS="--rounds 1 --no-memory".
bench: deps-test build
	$(PYTHON) bench/run.py --steerd $(STEERD) --loadgen $(BUILD)/bench/loadgen \
		--echo $(BUILD)/bench/echo $(BENCH_ARGS)

# The prefix is Meson's (default /usr/local): meson configure $(BUILD) -Dprefix=/usr to change it.
install: build
	meson install -C $(BUILD)

format:
	@qa/format-check.sh

format-fix:
	@qa/format-check.sh --fix

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
