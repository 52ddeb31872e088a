# SPDX-License-Identifier: GPL-2.0-only
# Root selftests: BPF programs exercised in the kernel.
#   make selftest-prog   the tc programs over a table of crafted packets

SELFTEST_BINS += $(BUILD)/selftests/prog_table

$(BUILD)/selftests/prog_table: selftests/prog_table.c bpf/latch_abi.h $(BUILD)/latch_tc.skel.h $(BUILD)/liblatch.a \
		| $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

selftest-prog: $(BUILD)/selftests/prog_table
	$(Q)$(BUILD)/selftests/prog_table

.PHONY: selftest-prog

# The loader's policy maps, judged by the pinned program (selftests/policy_api.c).
SELFTEST_BINS += $(BUILD)/selftests/policy_api

$(BUILD)/selftests/policy_api: selftests/policy_api.c $(wildcard loader/*.h) bpf/latch_abi.h $(BUILD)/liblatch.a | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

# The filtering DNS resolver in an event loop, for live_resolver.sh (selftests/resolver_drv.c).
SELFTEST_BINS += $(BUILD)/selftests/resolver_drv

$(BUILD)/selftests/resolver_drv: selftests/resolver_drv.c broker/resolver.h $(wildcard loader/*.h) $(BUILD)/liblatch.a | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)

# What root can do to a device's TCX chain and XDP hook, for live_tamper.sh (selftests/tcx_tool.c).
SELFTEST_BINS += $(BUILD)/selftests/tcx_tool

$(BUILD)/selftests/tcx_tool: selftests/tcx_tool.c loader/tc.h loader/tcx_uapi.h $(BUILD)/liblatch.a | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblatch.a $(LDLIBS)
