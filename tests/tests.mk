# SPDX-License-Identifier: GPL-2.0-only
# Unit tests: the pure parts of the loader (parsing, rule bookkeeping), the
# base layer, the audit log, profiles and names, the broker's head reading, and the spend caps (budget/,
# with their fixtures in tests/fixtures/budget/), under Criterion.  No root and
# no kernel.
#   make unit        build and run them; Criterion prints the Synthesis line

UNIT_SRCS := $(wildcard tests/test_*.c)

# broker: its pure head reading and checks (the linker takes only those objects from its archive)
# resolver: its wire parsing (tests/test_resolver_wire.c); latchd: its grant logic (tests/test_latchd_grant.c)
# cni: latch-cni's config, pod file and prevResult (tests/test_cni.c)
UNIT_USES := cni latchd sandbox budget vm profile kit audit config loader broker ctl resolver common

UNIT_OBJS := $(call objs_of,$(UNIT_SRCS))
ALL_OBJS += $(UNIT_OBJS)

$(BUILD)/tests/unit: $(UNIT_OBJS) $(call archives_of,$(call closure,$(UNIT_USES))) | $(BUILD)/tests
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(UNIT_OBJS) $(call link_with,$(UNIT_USES)) -lcrypto -lcriterion

# Criterion always ends with "[====] Synthesis: Tested: N | Passing: N |
# Failing: N | Crashing: N" and exits non-zero on any failure.  Its verbosity
# counts down: --verbose=0 lists every test, UNIT_FLAGS= shows failures only.
UNIT_FLAGS ?= --verbose=0

unit: $(BUILD)/tests/unit
	$(Q)$(BUILD)/tests/unit $(UNIT_FLAGS)

.PHONY: unit

# libFuzzer over the meter's JSON and SSE scanners under each format's usage
# reader (budget/scan.c, budget/usage.c): any bytes cut anywhere read the
# same, and a known usage embedded in a real-shaped response is found exactly.
#   make fuzz-scan        FUZZ_SECS (120) seconds over tests/fuzz/corpus_scan
#   make fuzz-scan-short  the same for 20 s (part of `make check`)
FUZZ_SCAN_SRCS := tests/fuzz/fuzz_scan.c budget/scan.c budget/usage.c

$(BUILD)/tests/fuzz_scan: $(FUZZ_SCAN_SRCS) budget/internal.h budget/budget.h | $(BUILD)/tests pkgs-ok
	$(call msg,CLANG,$@)
	$(Q)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 \
		-D_GNU_SOURCE -I. -I$(BUILD) -o $@ $(FUZZ_SCAN_SRCS) -ljansson -lz

fuzz-scan: $(BUILD)/tests/fuzz_scan
	$(Q)mkdir -p $(BUILD)/fuzz-corpus-scan
	$(Q)$(BUILD)/tests/fuzz_scan -max_total_time=$(FUZZ_SECS) -max_len=8192 -print_final_stats=1 \
		$(BUILD)/fuzz-corpus-scan tests/fuzz/corpus_scan

fuzz-scan-short:
	$(Q)$(MAKE) --no-print-directory fuzz-scan FUZZ_SECS=20

.PHONY: fuzz-scan fuzz-scan-short
check: fuzz-scan-short

# libFuzzer over the resolver's reading of a guest's query (resolver/wire.c):
# the fast path against ldns, the name the policy judges, the reply built.
#   make fuzz-resolver        FUZZ_SECS (120) seconds over tests/fuzz/corpus_resolver
#   make fuzz-resolver-short  the same for 20 s (part of `make check`)
FUZZ_RESOLVER_SRCS := tests/fuzz/fuzz_resolver.c resolver/wire.c

$(BUILD)/tests/fuzz_resolver: $(FUZZ_RESOLVER_SRCS) resolver/dns.h resolver/resolver.h | $(BUILD)/tests pkgs-ok
	$(call msg,CLANG,$@)
	$(Q)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 \
		-D_GNU_SOURCE -I. -I$(BUILD) -o $@ $(FUZZ_RESOLVER_SRCS) -lldns

fuzz-resolver: $(BUILD)/tests/fuzz_resolver
	$(Q)mkdir -p $(BUILD)/fuzz-corpus-resolver
	$(Q)$(BUILD)/tests/fuzz_resolver -max_total_time=$(FUZZ_SECS) -max_len=4096 -print_final_stats=1 \
		$(BUILD)/fuzz-corpus-resolver tests/fuzz/corpus_resolver

fuzz-resolver-short:
	$(Q)$(MAKE) --no-print-directory fuzz-resolver FUZZ_SECS=20

.PHONY: fuzz-resolver fuzz-resolver-short
check: fuzz-resolver-short

# libFuzzer over the ClientHello reader of the tc program (bpf/latch_tls.h,
# compiled for user space): bytes past the ones given never change a verdict,
# a prefix reads MORE or what the whole reads.
#   make fuzz-tls        FUZZ_SECS (120) seconds over tests/fuzz/corpus_tls
#   make fuzz-tls-short  the same for 20 s (part of `make check`)
$(BUILD)/tests/fuzz_tls: tests/fuzz/fuzz_tls.c bpf/latch_tls.h | $(BUILD)/tests
	$(call msg,CLANG,$@)
	$(Q)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 \
		-D_GNU_SOURCE -I. -o $@ tests/fuzz/fuzz_tls.c

fuzz-tls: $(BUILD)/tests/fuzz_tls
	$(Q)mkdir -p $(BUILD)/fuzz-corpus-tls
	$(Q)$(BUILD)/tests/fuzz_tls -max_total_time=$(FUZZ_SECS) -max_len=2100 -print_final_stats=1 \
		$(BUILD)/fuzz-corpus-tls tests/fuzz/corpus_tls

fuzz-tls-short:
	$(Q)$(MAKE) --no-print-directory fuzz-tls FUZZ_SECS=20

.PHONY: fuzz-tls fuzz-tls-short
check: fuzz-tls-short

# Sizes and exports (issue 35): no product file over 800 lines and no
# function over 100 unless it says why (scripts/sizes.sh); each module's
# archive exports only names with its prefixes (scripts/exports.sh).  latchd
# is out of exports: only its own binary and tests link it.
# The node agent's Kubernetes manifests, for structure (no cluster runs here: docs/kubernetes.md),
# and the check refusing a copy that breaks each of its rules.
k8s-check:
	$(Q)python3 deploy/kubernetes/check.py deploy/kubernetes/latch-node.yaml docs/kubernetes.md
	$(Q)bash deploy/kubernetes/check_test.sh
check: k8s-check
.PHONY: k8s-check

SIZES_SRCS = $(foreach m,$(MODULES) cli,$(SRCS_$(m))) $(LATCHD_MAIN) $(CNI_MAIN) $(wildcard vm/guest/*.c)
EXPORTS_common := latch_
EXPORTS_config := latch_
EXPORTS_kit := latch_ kit_
EXPORTS_room := latch_ room_
EXPORTS_profile := latch_ profile_
EXPORTS_vm := latch_ vm_
EXPORTS_audit := latch_ audit_
EXPORTS_broker := latch_ hb_
EXPORTS_resolver := latch_ resolver_ dns_
EXPORTS_sandbox := latch_
EXPORTS_latchd := latch_ latchd_
EXPORTS_ctl := latch_ latchd_
EXPORTS_loader := latch_ loader_
EXPORTS_budget := latch_ budget_
EXPORTS_cni := latch_
EXPORTS_MODULES := common config kit room profile vm audit broker resolver budget sandbox ctl loader latchd cni

sizes:
	$(Q)bash scripts/sizes.sh $(SIZES_SRCS)

exports: $(foreach m,$(EXPORTS_MODULES),$(BUILD)/lib$(m).a)
	$(Q)rc=0; $(foreach m,$(EXPORTS_MODULES),bash scripts/exports.sh $(BUILD)/lib$(m).a $(EXPORTS_$(m)) || rc=1;) exit $$rc

check: sizes exports

.PHONY: sizes exports
