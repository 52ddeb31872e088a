# SPDX-License-Identifier: GPL-2.0-only
# Unit tests: the pure parts of the loader (parsing, rule bookkeeping), the
# audit log, and broker profiles and names, under Criterion.  No root and no
# kernel.
#   make unit        build and run them; Criterion prints the Synthesis line

UNIT_SRCS := $(wildcard tests/test_*.c)

$(BUILD)/tests/unit: $(UNIT_SRCS) $(wildcard loader/*.h audit/*.h broker/*.h) bpf/latch_abi.h $(BUILD)/liblatch.a | $(BUILD)/tests
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(UNIT_SRCS) $(BUILD)/liblatch.a $(LDLIBS) -lcriterion

# Criterion always ends with "[====] Synthesis: Tested: N | Passing: N |
# Failing: N | Crashing: N" and exits non-zero on any failure.  Its verbosity
# counts down: --verbose=0 lists every test, UNIT_FLAGS= shows failures only.
UNIT_FLAGS ?= --verbose=0

unit: $(BUILD)/tests/unit
	$(Q)$(BUILD)/tests/unit $(UNIT_FLAGS)

.PHONY: unit
