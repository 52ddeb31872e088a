# SPDX-License-Identifier: GPL-2.0-only
# Benchmarks: `make bench` builds the helpers below and runs bench/run.sh,
# which prints one table (latch beside no filter and nftables, with targets);
# bench/latchd.sh adds the rows that go through latchd (resolver beside
# dnsmasq, a 65,536-entry profile switch beside nftables).
#   make bench                  3 reps of everything (about 6-8 minutes, root)
#   BENCH_REPS=5 make bench     more reps; see bench/run.sh for other knobs

BENCH_BINS := $(BUILD)/bench/inject $(BUILD)/bench/testrun $(BUILD)/bench/ctl $(BUILD)/bench/profswitch $(BUILD)/selftests/tcx_tool \
	      $(BUILD)/bench/match

$(BUILD)/bench/bench_progs.bpf.o: bench/bench_progs.bpf.c $(BUILD)/vmlinux.h | $(BUILD)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bench/bench_progs.skel.h: $(BUILD)/bench/bench_progs.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name bench_progs > $@

$(BUILD)/bench/inject: bench/inject.c $(BUILD)/bench/bench_progs.skel.h | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/bench -o $@ $< $(LDLIBS)

$(BUILD)/bench/testrun: bench/testrun.c bpf/latch_abi.h $(BUILD)/latch_tc.skel.h $(BUILD)/bench/bench_progs.skel.h \
		$(BUILD)/liblatch.a | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/bench -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/bench/ctl: bench/ctl.c $(wildcard loader/*.h) $(BUILD)/liblatch.a | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/bench/profswitch: bench/profswitch.c $(wildcard loader/*.h broker/*.h) $(BUILD)/liblatch.a | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

$(BUILD)/bench/match: bench/match.c $(wildcard broker/*.h) $(BUILD)/liblatch.a | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

bench: $(BUILD)/latch $(BUILD)/latchd $(BENCH_BINS)
	$(Q)BUILD=$(BUILD) bash bench/run.sh
