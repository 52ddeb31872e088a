# SPDX-License-Identifier: GPL-2.0-only
# Unit tests: the pure parts of the loader (parsing, rule bookkeeping), the
# base layer, the audit log, profiles and names, the broker's head reading, and the spend caps (budget/,
# with their fixtures in tests/fixtures/budget/), under Criterion.  No root and
# no kernel.
#   make unit        build and run them; Criterion prints the Synthesis line

UNIT_SRCS := $(wildcard tests/test_*.c)

UNIT_USES := budget vm profile kit audit config loader common
# the broker's pure head reading and checks, out of latchd's archive (which would bring libevent and the rest)
UNIT_BROKER_OBJS := $(call objs_of,broker/http/head.c broker/http/check.c)

UNIT_OBJS := $(call objs_of,$(UNIT_SRCS))
ALL_OBJS += $(UNIT_OBJS)

$(BUILD)/tests/unit: $(UNIT_OBJS) $(UNIT_BROKER_OBJS) $(call archives_of,$(call closure,$(UNIT_USES)))
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(UNIT_OBJS) $(UNIT_BROKER_OBJS) $(call link_with,$(UNIT_USES)) -lhttp_parser \
		-lcrypto -lcriterion

# Criterion always ends with "[====] Synthesis: Tested: N | Passing: N |
# Failing: N | Crashing: N" and exits non-zero on any failure.  Its verbosity
# counts down: --verbose=0 lists every test, UNIT_FLAGS= shows failures only.
UNIT_FLAGS ?= --verbose=0

unit: $(BUILD)/tests/unit
	$(Q)$(BUILD)/tests/unit $(UNIT_FLAGS)

.PHONY: unit
