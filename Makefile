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

comma := ,
module_objs = $(patsubst %.c,$(BUILD)/%.o,$(wildcard $(1)/*.c))

LIB_ICRC   := $(BUILD)/libicrc.a
LIB_WIRE   := $(BUILD)/libwire.a
LIB_MEMREG := $(BUILD)/libmemreg.a
LIB_ROCEMU := $(BUILD)/librocemu.a
# The daemon's lower layers as libraries, for the unit tests that drive them without root.
LIB_PORT      := $(BUILD)/libport.a
LIB_TRANSPORT := $(BUILD)/libtransport.a
LIB_CM        := $(BUILD)/libcm.a
EV_LIBS    := -lev

TOOLS_COMMON := $(patsubst %.c,$(BUILD)/%.o,tools/decode.c tools/ctl_client.c)
PROGRAMS     := $(BUILD)/rocemuctl $(BUILD)/rocemud $(BUILD)/rdma-write
TESTS        := $(BUILD)/test/icrc_test $(BUILD)/test/wire_test $(BUILD)/test/memreg_test \
                $(BUILD)/test/decode_test $(BUILD)/test/lib_test $(BUILD)/test/dcqcn_test \
                $(BUILD)/test/cm_mad_test
# Unit tests that need neither root nor the network, seconds in all: `make unit`.
UNIT_TESTS   := $(TESTS) $(BUILD)/test/transport_test $(BUILD)/test/cm_test \
                $(BUILD)/test/txmsg_test
TEST_COMMON  := $(BUILD)/test/testutil.o $(BUILD)/test/frames.o
# Programs the integration tests (test/*.test.sh) drive against running daemons.
TEST_PROGRAMS := $(patsubst test/%.c,$(BUILD)/%,$(wildcard test/*_e2e.c))
# Their objects come only from the pattern rule below, which would make them intermediate
# files that make deletes after each build (and so recompiles and relinks each time).
TEST_PROGRAM_OBJS := $(patsubst test/%.c,$(BUILD)/test/%.o,$(wildcard test/*_e2e.c)) \
                     $(BUILD)/test/e2e.o
.SECONDARY: $(TEST_PROGRAM_OBJS)

.PHONY: all check build-tests test-run asan fuzz fuzz-build demo clean unit
all: $(LIB_ICRC) $(LIB_WIRE) $(LIB_MEMREG) $(LIB_ROCEMU) $(PROGRAMS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(LIB_ICRC): $(call module_objs,icrc)
$(LIB_WIRE): $(call module_objs,wire)
$(LIB_MEMREG): $(call module_objs,memreg)
$(LIB_ROCEMU): $(call module_objs,emu/lib)
$(LIB_PORT): $(call module_objs,emu/daemon/port)
$(LIB_TRANSPORT): $(call module_objs,emu/daemon/transport)
$(LIB_CM): $(call module_objs,emu/daemon/cm)
$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/rocemuctl: $(BUILD)/tools/rocemuctl.o $(TOOLS_COMMON) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PCAP_LIBS) $(ISAL_LIBS)

# The daemon: emu/daemon composes memreg and wire, in layers (port, transport, control).
DAEMON_DIRS := emu/daemon emu/daemon/port emu/daemon/transport emu/daemon/cm emu/daemon/control
$(BUILD)/rocemud: $(foreach d,$(DAEMON_DIRS),$(call module_objs,$(d))) $(LIB_MEMREG) $(LIB_WIRE) \
                  $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(EV_LIBS) $(PCAP_LIBS) $(ISAL_LIBS)

$(BUILD)/rdma-write: $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/rdma-write/*.c)) $(LIB_ROCEMU)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

# The verbs layer (emu/verbs): librocemu-verbs.so, which rocemu-run preloads into unmodified
# libibverbs programs. Its symbols carry libibverbs' version nodes; the private one is
# read from the installed libibverbs.so.1 (rdma-core 44: IBVERBS_PRIVATE_34).
IBVERBS_SO      := $(firstword $(wildcard /usr/lib/*/libibverbs.so.1 /usr/lib/libibverbs.so.1))
IBVERBS_PRIVATE := $(or $(shell objdump -T $(IBVERBS_SO) 2>/dev/null | \
                     awk '$$NF == "ibv_query_gid_type" { print $$(NF-1); exit }'),IBVERBS_PRIVATE_34)
VERBS_SO        := $(BUILD)/librocemu-verbs.so
VERBS_OBJS      := $(patsubst %.c,$(BUILD)/pic/%.o,$(wildcard emu/verbs/*.c emu/rdmacm/*.c emu/lib/*.c) \
                     wire/rtnl.c)
$(BUILD)/librocemu-verbs.map: scripts/librocemu-verbs.map.in
	@mkdir -p $(dir $@)
	sed 's/@PRIVATE@/$(IBVERBS_PRIVATE)/' $< >$@
$(VERBS_SO): $(VERBS_OBJS) $(BUILD)/librocemu-verbs.map
	$(CC) $(ALL_LDFLAGS) -shared -Wl,--no-undefined \
		-Wl,--version-script=$(BUILD)/librocemu-verbs.map -o $@ $(VERBS_OBJS) -lpthread
$(BUILD)/rocemu-run: tools/rocemu-run
	@mkdir -p $(dir $@)
	install -m 755 $< $@
all: $(VERBS_SO) $(BUILD)/rocemu-run

$(BUILD)/test/icrc_test: $(BUILD)/test/icrc_test.o $(TEST_COMMON) $(LIB_WIRE) $(LIB_ICRC)
$(BUILD)/test/wire_test: $(BUILD)/test/wire_test.o $(TEST_COMMON) $(LIB_WIRE) $(LIB_ICRC)
$(BUILD)/test/cm_mad_test: $(BUILD)/test/cm_mad_test.o $(TEST_COMMON) $(LIB_WIRE) $(LIB_ICRC)
$(BUILD)/test/memreg_test: $(BUILD)/test/memreg_test.o $(TEST_COMMON) $(LIB_MEMREG)
$(BUILD)/test/lib_test: $(BUILD)/test/lib_test.o $(TEST_COMMON) $(LIB_ROCEMU)
# DCQCN's arithmetic alone: the one daemon object with no loop and no sockets in it.
$(BUILD)/test/dcqcn_test: $(BUILD)/test/dcqcn_test.o $(BUILD)/emu/daemon/transport/dcqcn.o
# The transport whole, driven with frames, no root and no socket: the port below it is
# test/port_stub.c (frames sent are kept for the test to read), addresses are the port's own.
$(BUILD)/test/transport_test: $(BUILD)/test/transport_test.o $(BUILD)/test/port_stub.o \
                              $(TEST_COMMON) $(LIB_TRANSPORT) $(BUILD)/emu/daemon/port/addr.o \
                              $(BUILD)/emu/daemon/port/mcast.o $(LIB_MEMREG) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) $(EV_LIBS) -lz
# The send batch's layout alone (port/txmsg.c and port/udptx.c): no socket is opened.
$(BUILD)/test/txmsg_test: $(BUILD)/test/txmsg_test.o $(TEST_COMMON) \
                          $(BUILD)/emu/daemon/port/txmsg.o $(BUILD)/emu/daemon/port/udptx.o \
                          $(BUILD)/emu/daemon/port/addr.o $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) -lz
# The CM on the transport, driven with CM MADs the same way (test/port_stub.c below).
$(BUILD)/test/cm_test: $(BUILD)/test/cm_test.o $(BUILD)/test/port_stub.o $(TEST_COMMON) \
                       $(LIB_CM) $(LIB_TRANSPORT) $(BUILD)/emu/daemon/port/addr.o \
                       $(BUILD)/emu/daemon/port/mcast.o $(LIB_MEMREG) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) $(EV_LIBS) -lz
$(BUILD)/test/decode_test: $(BUILD)/test/decode_test.o $(TEST_COMMON) $(TOOLS_COMMON) \
                           $(LIB_WIRE) $(LIB_ICRC)
$(TESTS):
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(PCAP_LIBS) $(ISAL_LIBS) -lz

# The sanitizer build lives in its own tree so both can exist side by side.
ASAN_VARS := BUILD=build/asan OPT=-O1 \
             SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all'

$(BUILD)/%_e2e: $(BUILD)/test/%_e2e.o $(BUILD)/test/e2e.o $(LIB_ROCEMU) $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ISAL_LIBS)

# gso.test.sh preloads it into rocemud to play a kernel without UDP GSO on packet sockets.
# Built without the sanitizer: a preloaded library must not bring a second runtime.
$(BUILD)/test/gso_refuse.so: test/gso_refuse.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 $(WARN) -D_GNU_SOURCE -fPIC -shared -o $@ $< -ldl

# verbs-programs.test.sh runs it under rocemu-run: a user's verbs program, linked against
# libibverbs alone, so built plainly in both trees (rocemu-run brings the sanitizer along).
$(BUILD)/test/ibv_abuse: test/ibv_abuse.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -o $@ $< -libverbs -lpthread
# The verbs programs of the tests share test/peer_link.c (TCP between the ends, RC setup).
PEER_LINK := test/peer_link.c test/peer_link.h
# interop.sh runs it on rxe and, under rocemu-run, on rocemu: the same binary on both ends.
$(BUILD)/test/ibv_peer: test/ibv_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs
# congestion.test.sh and the benchmark: one process with many QPs, under rocemu-run.
$(BUILD)/test/many_qp: test/many_qp.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs
# The reference ICRC check of captured frames (ud.test.sh, interop.sh).
$(BUILD)/test/pcap_icrc: $(BUILD)/test/pcap_icrc.o $(BUILD)/test/frames.o $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PCAP_LIBS) $(ISAL_LIBS) -lz
# ud.test.sh and interop.sh: UD datagrams to 16 QPs, the same binary on rocemu and rxe.
$(BUILD)/test/ud_peer: test/ud_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs

# mcast.test.sh (and interop.sh): UD multicast, attach rules and datagrams to a group.
$(BUILD)/test/mcast_peer: test/mcast_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs

# uc.test.sh: UC messages checked one by one, lossless and lossy.
$(BUILD)/test/uc_peer: test/uc_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs

# mw.test.sh: memory windows between two hosts (and, one day, rxe).
$(BUILD)/test/mw_peer: test/mw_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs
# rereg.test.sh: ibv_rereg_mr while a peer writes into the MR.
$(BUILD)/test/rereg_peer: test/rereg_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs
# flush.test.sh: RDMA FLUSH posted as a program built with later rdma-core headers posts it.
$(BUILD)/test/flush_peer: test/flush_peer.c $(PEER_LINK)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -I. -o $@ $< test/peer_link.c -libverbs
# rdmacm.test.sh: refused connections and connect/disconnect cycles through rdma_cm, a plain
# librdmacm program (rocemu-run answers its librdmacm calls as it does libibverbs').
$(BUILD)/test/cm_peer: test/cm_peer.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -o $@ $< -lrdmacm -libverbs
# mpi.test.sh: an MPI program as a user writes one, run by Debian's Open MPI over UCX and
# over libfabric; built by Open MPI's own mpicc where there is one (the test skips without).
MPICC := $(shell command -v mpicc 2>/dev/null)
$(BUILD)/test/mpi_pingpong: test/mpi_pingpong.c
	@mkdir -p $(dir $@)
	$(MPICC) -std=gnu11 -O2 -g $(WARN) -o $@ $<

# Every binary of the tests, in this tree (the sanitizer make asks for it inside its own).
build-tests: all $(UNIT_TESTS) $(TEST_PROGRAMS) $(BUILD)/test/gso_refuse.so $(BUILD)/test/ibv_abuse \
             $(BUILD)/test/ud_peer $(BUILD)/test/pcap_icrc $(BUILD)/test/ibv_peer \
             $(BUILD)/test/many_qp $(BUILD)/test/uc_peer $(BUILD)/test/mw_peer $(BUILD)/test/cm_peer \
             $(BUILD)/test/mcast_peer \
             $(BUILD)/test/rereg_peer $(BUILD)/test/flush_peer $(BUILD)/bench/pump \
             $(if $(MPICC),$(BUILD)/test/mpi_pingpong)

test-run: build-tests
	scripts/run-tests.sh $(BUILD)

# The two passes run at once (run-tests.sh --side-by-side); the sanitizer's first keeps the
# machine's network, which its short interop needs to fetch the guest's kernel.
check:
	scripts/run-tests.sh --summary-of --side-by-side "$(MAKE) $(ASAN_VARS) test-run" "$(MAKE) test-run"

asan:
	$(MAKE) $(ASAN_VARS) build-tests

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do $$t || exit 1; done

# libFuzzer: FUZZ_SECONDS per harness (default 60); the corpus lives in test/fuzz/corpus/.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_HARNESSES := $(patsubst test/fuzz/%.c,build/fuzz/%,$(wildcard test/fuzz/*_fuzz.c))
# Warnings as the main build's; the harnesses' case tables leave trailing fields to zero.
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=all -Wall -Wextra -Werror -Wno-missing-field-initializers

# The harnesses link the layers they drive, built once more with the fuzzer's coverage
# instrumentation; each replaces what lies below the code under test with its own stubs.
FUZZ_OBJ_CFLAGS := $(subst -fsanitize=fuzzer$(comma),-fsanitize=fuzzer-no-link$(comma),$(FUZZ_CFLAGS))
fuzz_objs = $(patsubst %.c,build/fuzz/obj/%.o,$(1))
FUZZ_LIBS_COMMON := $(call fuzz_objs,$(wildcard wire/*.c icrc/*.c))
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -MMD -MP -c -o $@ $<
# rx_fuzz: the transport whole, memreg, and the port's address helpers.
build/fuzz/rx_fuzz: $(call fuzz_objs,$(wildcard emu/daemon/transport/*.c memreg/*.c) \
                    emu/daemon/port/addr.c emu/daemon/port/mcast.c)
# cm_fuzz: the CM with the transport's receive path in front of it.
build/fuzz/cm_fuzz: $(call fuzz_objs,$(wildcard emu/daemon/cm/*.c emu/daemon/transport/*.c \
                    memreg/*.c) emu/daemon/port/addr.c emu/daemon/port/mcast.c)
# txpath_fuzz: the port's transmit path and fault stages; its sendmmsg is the harness's.
build/fuzz/txpath_fuzz: $(call fuzz_objs,emu/daemon/port/netpath.c emu/daemon/port/fault.c \
                        emu/daemon/port/loopq.c emu/daemon/port/addr.c emu/daemon/port/txmsg.c \
                        emu/daemon/port/udptx.c emu/daemon/port/mcast.c)
build/fuzz/txpath_fuzz: FUZZ_LDFLAGS := -Wl,--wrap=sendmmsg
build/fuzz/%: test/fuzz/%.c $(FUZZ_LIBS_COMMON)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LDFLAGS) -o $@ $< $(filter %.o,$^) $(ISAL_LIBS) $(EV_LIBS)

fuzz-build: $(FUZZ_HARNESSES) $(BUILD)/make_seeds
$(BUILD)/make_seeds: $(BUILD)/test/fuzz/make_seeds.o $(BUILD)/test/frames.o $(LIB_WIRE) $(LIB_ICRC)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ISAL_LIBS) -lz

fuzz: fuzz-build
	ROCEMU_SEED_TOOL=$(BUILD)/make_seeds scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

demo:
	scripts/demo.sh

# rocemud against the kernel's rxe in a qemu guest, both ways (root; the
# first run downloads Debian's kernel package into build/interop).
.PHONY: interop
interop: all $(BUILD)/test/ibv_peer $(BUILD)/test/ud_peer $(BUILD)/test/mw_peer $(BUILD)/test/pcap_icrc \
	$(BUILD)/test/gso_refuse.so \
	$(BUILD)/test/cm_peer $(BUILD)/bench/pump
	test/interop.sh $(BUILD)

# Two guests on a bridge, rocemud on each one's virtio-net, beside iperf3 and rxe between
# the same two (docs/benchmarks.md).
.PHONY: two-vms
two-vms: all $(BUILD)/test/pcap_icrc $(BUILD)/test/cm_peer $(BUILD)/bench/pump
	test/two-vms.sh $(BUILD)

# perftest's bandwidth and latency inside one qemu guest, rocemu beside the kernel's rxe on the
# same vCPUs, the same perftest binaries on both (docs/benchmarks.md).
.PHONY: guest-bench
guest-bench: all $(BUILD)/test/cm_peer $(BUILD)/bench/pump
	test/guest-bench.sh $(BUILD)

# The fault soak: 20 seeds of docs/testing.md's fault spec, 64 MiB each, in both builds.
.PHONY: fault-soak
fault-soak: all
	$(MAKE) $(ASAN_VARS) build-tests
	ROCEMU_BUILD=$(CURDIR)/$(BUILD) test/fault-soak.sh 20
	ROCEMU_BUILD=$(CURDIR)/build/asan test/fault-soak.sh 20

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)

# The benchmark (root): baselines and rocemu on one veth; the report goes to
# stdout, $(BUILD)/bench/results.json and $(BUILD)/bench/goodput.png.
.PHONY: bench
$(BUILD)/bench/pump: test/bench/pump.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(ALL_LDFLAGS) -lpthread
$(BUILD)/bench/regcost: test/bench/regcost.c $(LIB_ROCEMU)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(ALL_LDFLAGS)
bench: all $(BUILD)/bench/pump $(BUILD)/bench/regcost $(BUILD)/test/many_qp
	scripts/bench.sh $(BUILD)

# Installation: make install / make uninstall, with PREFIX (default /usr/local) and
# DESTDIR. librocemu is also built as a shared library, with the soname librocemu.so.0 and
# only the rocemu_* symbols exported, from position-independent objects of its own tree.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
UNITDIR    ?= $(PREFIX)/lib/systemd/system
INSTALL    ?= install

ROCEMU_VERSION := 0.1
ROCEMU_SONAME  := librocemu.so.0
LIB_ROCEMU_SO  := $(BUILD)/librocemu.so.$(ROCEMU_VERSION)
MAN_PAGES      := tools/man/rdma-write.1 tools/man/rocemu-run.1 tools/man/rocemu.3 \
                  tools/man/rocemud.8 tools/man/rocemuctl.8
# What make install puts under $(DESTDIR); make uninstall removes exactly these.
INSTALLED := $(SBINDIR)/rocemud $(BINDIR)/rocemuctl $(BINDIR)/rdma-write $(BINDIR)/rocemu-run \
             $(LIBDIR)/rocemu/librocemu-verbs.so \
             $(LIBDIR)/librocemu.a $(LIBDIR)/librocemu.so.$(ROCEMU_VERSION) \
             $(LIBDIR)/$(ROCEMU_SONAME) $(LIBDIR)/librocemu.so \
             $(INCLUDEDIR)/rocemu/rocemu.h $(LIBDIR)/pkgconfig/rocemu.pc \
             $(UNITDIR)/rocemud@.service \
             $(foreach m,$(MAN_PAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m)))
# Runs ldconfig after a real install as root, so the loader finds the new librocemu.so.0.
LDCONFIG = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; \
           then ldconfig; fi

.PHONY: install uninstall
all: $(LIB_ROCEMU_SO)

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -c -o $@ $<

$(LIB_ROCEMU_SO): $(patsubst %.c,$(BUILD)/pic/%.o,$(wildcard emu/lib/*.c)) scripts/librocemu.map
	$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,$(ROCEMU_SONAME) -Wl,--no-undefined \
		-Wl,--version-script=scripts/librocemu.map -o $@ $(filter %.o,$^)

install: all
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(INCLUDEDIR)/rocemu $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 755 $(BUILD)/rocemud $(DESTDIR)$(SBINDIR)/rocemud
	$(INSTALL) -m 755 $(BUILD)/rocemuctl $(BUILD)/rdma-write $(BUILD)/rocemu-run \
		$(DESTDIR)$(BINDIR)/
	$(INSTALL) -d $(DESTDIR)$(LIBDIR)/rocemu
	$(INSTALL) -m 644 $(VERBS_SO) $(DESTDIR)$(LIBDIR)/rocemu/
	$(INSTALL) -m 644 $(LIB_ROCEMU) $(LIB_ROCEMU_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf librocemu.so.$(ROCEMU_VERSION) $(DESTDIR)$(LIBDIR)/$(ROCEMU_SONAME)
	ln -sf $(ROCEMU_SONAME) $(DESTDIR)$(LIBDIR)/librocemu.so
	$(INSTALL) -m 644 emu/rocemu.h $(DESTDIR)$(INCLUDEDIR)/rocemu/rocemu.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(ROCEMU_VERSION)|g' \
	    scripts/rocemu.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/rocemu.pc
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' scripts/rocemud@.service.in \
	    >$(DESTDIR)$(UNITDIR)/rocemud@.service
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/rocemu.pc $(DESTDIR)$(UNITDIR)/rocemud@.service
	for m in $(MAN_PAGES); do \
	    s=$${m##*.}; $(INSTALL) -m 644 $$m $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; done
	@$(LDCONFIG)

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	rmdir $(DESTDIR)$(INCLUDEDIR)/rocemu $(DESTDIR)$(LIBDIR)/rocemu 2>/dev/null || true
	@$(LDCONFIG)
