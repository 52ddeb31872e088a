# SPDX-License-Identifier: GPL-2.0-only
# broker: the credential broker's HTTP engine (broker/broker.h),
# its selftest driver, its fuzz target and its benchmark.
#   make fuzz        the libFuzzer target over head parsing and the route checks (FUZZ_SECS, default 120)
#   make fuzz-short  the same for 20 s (part of `make check`)
#   make bench-broker  the broker beside direct HTTPS and nginx (also part of `make bench`)

# The engine is the broker module (the Makefile's SRCS_broker, PKGS_broker),
# hosted by latchd; here are only its test, fuzz and bench programs.

# The engine in an event loop over real sockets, for selftests/live_broker.sh.
SELFTEST_BINS += $(BUILD)/selftests/broker_drv

$(BUILD)/selftests/broker_drv: selftests/broker_drv.c $(call archives_of,$(call closure,broker budget)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,broker budget)

# libFuzzer: clang, -fsanitize=fuzzer,address, over the pure checks (no sockets).
FUZZ_SRCS := tests/fuzz/fuzz_broker.c broker/head.c broker/check.c common/names.c common/addr.c common/errors.c
FUZZ_SECS ?= 120

$(BUILD)/tests/fuzz_broker: $(FUZZ_SRCS) $(wildcard broker/*.h) | $(BUILD)/tests pkgs-ok
	$(call msg,CLANG,$@)
	$(Q)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=gnu11 \
		-D_GNU_SOURCE -I. -I$(BUILD) -o $@ $(FUZZ_SRCS) -lhttp_parser -lcrypto

fuzz: $(BUILD)/tests/fuzz_broker
	$(Q)mkdir -p $(BUILD)/fuzz-corpus
	$(Q)$(BUILD)/tests/fuzz_broker -max_total_time=$(FUZZ_SECS) -max_len=4096 -print_final_stats=1 \
		$(BUILD)/fuzz-corpus tests/fuzz/corpus

fuzz-short:
	$(Q)$(MAKE) --no-print-directory fuzz FUZZ_SECS=20

bench-broker: $(BUILD)/selftests/broker_drv $(BUILD)/latch $(BUILD)/latchd
	$(Q)BUILD=$(BUILD) bash bench/broker.sh

bench: bench-broker

.PHONY: fuzz fuzz-short bench-broker
check: fuzz-short
