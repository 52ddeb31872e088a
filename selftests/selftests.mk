# SPDX-License-Identifier: GPL-2.0-only
# Root selftests: BPF programs exercised in the kernel.
#   make selftest-prog   the tc programs over a table of crafted packets

SELFTEST_BINS += $(BUILD)/selftests/prog_table

$(BUILD)/selftests/prog_table: selftests/prog_table.c $(BUILD)/latch_tc.skel.h | $(BUILD)/selftests pkgs-ok
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,loader)

selftest-prog: $(BUILD)/selftests/prog_table
	$(Q)$(BUILD)/selftests/prog_table

.PHONY: selftest-prog

# The loader's policy maps, judged by the pinned program (selftests/policy_api.c).
SELFTEST_BINS += $(BUILD)/selftests/policy_api

$(BUILD)/selftests/policy_api: selftests/policy_api.c $(call archives_of,$(call closure,loader)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,loader)

# The filtering DNS resolver in an event loop, for live_resolver.sh (selftests/resolver_drv.c).
SELFTEST_BINS += $(BUILD)/selftests/resolver_drv

# loader: its port parser, for the driver's options
$(BUILD)/selftests/resolver_drv: selftests/resolver_drv.c $(call archives_of,$(call closure,resolver loader)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,resolver loader)

# The audit module's anchors against a journald of live_audit.sh's own (selftests/audit_drv.c).
SELFTEST_BINS += $(BUILD)/selftests/audit_drv

$(BUILD)/selftests/audit_drv: selftests/audit_drv.c $(call archives_of,$(call closure,audit)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,audit)

# What root can do to a device's TCX chain and XDP hook, for live_tamper.sh (selftests/tcx_tool.c).
SELFTEST_BINS += $(BUILD)/selftests/tcx_tool

$(BUILD)/selftests/tcx_tool: selftests/tcx_tool.c $(call archives_of,$(call closure,loader)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,loader)

# The guest agent run on this host behind a raw pty, for live_agent.sh (selftests/agent_selftest.c --local).
SELFTEST_BINS += $(BUILD)/selftests/agent_selftest $(BUILD)/vm/latch-agent
