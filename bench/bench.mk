# SPDX-License-Identifier: GPL-2.0-only
# Benchmarks: `make bench` builds the helpers below and runs bench/run.sh,
# which prints one table (latch beside no filter and nftables, with targets);
# bench/latchd.sh adds the rows that go through latchd (resolver beside
# dnsmasq, a 65,536-entry profile switch beside nftables).
#   make bench                  3 reps of everything (about 6-8 minutes, root)
#   BENCH_REPS=5 make bench     more reps; see bench/run.sh for other knobs
#   make bench-agent            latch agent run on a real guest (bench/agent.sh; root, libvirt)
#   make bench-budget           the spend meter alone (bench/budget.c; BENCH_BUDGET_ARGS="N N_FULL REPS
#                               [FOLD_EVERY [CONFIGS [SHAPES]]]", e.g. "20000 10 3 512 scan,journal small")

BENCH_BINS := $(BUILD)/bench/inject $(BUILD)/bench/testrun $(BUILD)/bench/ctl $(BUILD)/bench/profswitch $(BUILD)/selftests/tcx_tool \
	      $(BUILD)/bench/match $(BUILD)/bench/dnsload

$(BUILD)/bench/bench_progs.bpf.o: bench/bench_progs.bpf.c $(BUILD)/vmlinux.h | $(BUILD)/bench pkgs-ok
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/bench/bench_progs.skel.h: $(BUILD)/bench/bench_progs.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name bench_progs > $@

$(BUILD)/bench/inject: bench/inject.c $(BUILD)/bench/bench_progs.skel.h | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -I$(BUILD)/bench -o $@ $< $(call link_with,loader)

$(BUILD)/bench/testrun: bench/testrun.c bpf/latch_abi.h $(BUILD)/latch_tc.skel.h $(BUILD)/bench/bench_progs.skel.h \
		$(call archives_of,$(call closure,loader)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -I$(BUILD)/bench -o $@ $< $(call link_with,loader)

$(BUILD)/bench/ctl: bench/ctl.c $(call archives_of,$(call closure,loader)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,loader)

$(BUILD)/bench/profswitch: bench/profswitch.c $(call archives_of,$(call closure,profile)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,profile)

$(BUILD)/bench/match: bench/match.c $(call archives_of,$(call closure,profile)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,profile)

# the saturating DNS client of bench/latchd.sh (ldns makes its queries)
$(BUILD)/bench/dnsload: bench/dnsload.c | $(BUILD)/bench pkgs-ok
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(shell pkg-config --libs ldns)

# budget/'s share of a request, beside a memcpy and a bare sqlite ledger (bench/budget.c); no root needed
$(BUILD)/bench/budget: bench/budget.c $(call archives_of,$(call closure,budget)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,budget)

bench-budget: $(BUILD)/bench/budget
	$(Q)$(BUILD)/bench/budget $(BENCH_BUDGET_ARGS) 2>/dev/null

bench: $(BUILD)/latch $(BUILD)/latchd $(BENCH_BINS) $(BUILD)/bench/budget
	$(Q)BUILD=$(BUILD) bash bench/run.sh
	$(Q)$(BUILD)/bench/budget $(BENCH_BUDGET_ARGS) 2>/dev/null

.PHONY: bench-budget

# `latch agent run` on a real guest (bench/agent.sh): dry-run, time to ready, setup, first output
bench-agent: $(BUILD)/latch $(BUILD)/latchd
	$(Q)BUILD=$(BUILD) bash bench/agent.sh

bench: bench-agent

.PHONY: bench-agent
