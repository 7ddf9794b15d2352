# rocemu: `make` builds the libraries and programs, `make check` runs every test in a plain
# and in a sanitizer (ASan + UBSan) build, `make fuzz` runs the libFuzzer harnesses.
# Dependencies point one way: tools -> emu -> memreg, wire -> icrc.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
PKG     ?= pkg-config

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wpointer-arith -Wformat=2
ALL_CFLAGS  := -std=gnu11 $(OPT) -g $(WARN) -MMD -MP -D_GNU_SOURCE -I. $(SAN) $(CFLAGS)
ALL_LDFLAGS := $(SAN) $(LDFLAGS)

ISAL_LIBS  := $(shell $(PKG) --libs libisal 2>/dev/null || echo -lisal)
PCAP_LIBS  := $(shell $(PKG) --libs libpcap 2>/dev/null || echo -lpcap)
CHECK_LIBS := $(shell $(PKG) --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

module_objs = $(patsubst %.c,$(BUILD)/%.o,$(wildcard $(1)/*.c))

LIB_ICRC   := $(BUILD)/libicrc.a
LIB_WIRE   := $(BUILD)/libwire.a
LIB_MEMREG := $(BUILD)/libmemreg.a
LIB_ROCEMU := $(BUILD)/librocemu.a
EV_LIBS    := -lev

TOOLS_COMMON := $(patsubst %.c,$(BUILD)/%.o,tools/decode.c tools/ctl_client.c)
PROGRAMS     := $(BUILD)/rocemuctl $(BUILD)/rocemud $(BUILD)/rdma-write
TESTS        := $(BUILD)/test/icrc_test $(BUILD)/test/wire_test $(BUILD)/test/memreg_test \
                $(BUILD)/test/decode_test $(BUILD)/test/lib_test
TEST_COMMON  := $(BUILD)/test/testutil.o $(BUILD)/test/frames.o
# Programs the integration tests (test/*.test.sh) drive against running daemons.
TEST_PROGRAMS := $(patsubst test/%.c,$(BUILD)/%,$(wildcard test/*_e2e.c))

.PHONY: all check test-run asan fuzz fuzz-build demo clean
all: $(LIB_ICRC) $(LIB_WIRE) $(LIB_MEMREG) $(LIB_ROCEMU) $(PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIB_ICRC): $(call module_objs,icrc)
$(LIB_WIRE): $(call module_objs,wire)
$(LIB_MEMREG): $(call module_objs,memreg)
$(LIB_ROCEMU): $(call module_objs,emu/lib)
$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/rocemuctl: $(BUILD)/tools/rocemuctl.o $(TOOLS_COMMON) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PCAP_LIBS) $(ISAL_LIBS)

# The daemon: emu/daemon composes memreg and wire.
$(BUILD)/rocemud: $(call module_objs,emu/daemon) $(LIB_MEMREG) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(EV_LIBS) $(PCAP_LIBS) $(ISAL_LIBS)

$(BUILD)/rdma-write: $(BUILD)/tools/rdma-write.o $(LIB_ROCEMU)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(BUILD)/test/icrc_test: $(BUILD)/test/icrc_test.o $(TEST_COMMON) $(LIB_WIRE) $(LIB_ICRC)
$(BUILD)/test/wire_test: $(BUILD)/test/wire_test.o $(TEST_COMMON) $(LIB_WIRE) $(LIB_ICRC)
$(BUILD)/test/memreg_test: $(BUILD)/test/memreg_test.o $(TEST_COMMON) $(LIB_MEMREG)
$(BUILD)/test/lib_test: $(BUILD)/test/lib_test.o $(TEST_COMMON) $(LIB_ROCEMU)
$(BUILD)/test/decode_test: $(BUILD)/test/decode_test.o $(TEST_COMMON) $(TOOLS_COMMON) \
                           $(LIB_WIRE) $(LIB_ICRC)
$(TESTS):
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) -lz

# The sanitizer build lives in its own tree so both can exist side by side.
ASAN_VARS := BUILD=build/asan OPT=-O1 \
             SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all'

$(BUILD)/%_e2e: $(BUILD)/test/%_e2e.o $(LIB_ROCEMU)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

test-run: all $(TESTS) $(TEST_PROGRAMS)
	scripts/run-tests.sh $(BUILD)

check:
	scripts/run-tests.sh --summary-of "$(MAKE) test-run" "$(MAKE) $(ASAN_VARS) test-run"

asan:
	$(MAKE) $(ASAN_VARS) all $(TESTS) $(TEST_PROGRAMS)

# libFuzzer: FUZZ_SECONDS per harness (default 60); the corpus lives in test/fuzz/corpus/.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_HARNESSES := $(patsubst test/fuzz/%.c,build/fuzz/%,$(wildcard test/fuzz/*_fuzz.c))
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all

fuzz-build: $(FUZZ_HARNESSES) $(BUILD)/make_seeds
$(BUILD)/make_seeds: $(BUILD)/test/fuzz/make_seeds.o $(BUILD)/test/frames.o $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ISAL_LIBS) -lz
build/fuzz/%: test/fuzz/%.c $(wildcard icrc/*.c wire/*.c memreg/*.c) $(wildcard */*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(ISAL_LIBS)

fuzz: fuzz-build
	ROCEMU_SEED_TOOL=$(BUILD)/make_seeds scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

demo:
	scripts/demo.sh

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
