# SPDX-License-Identifier: GPL-2.0-only
# latch: build everything into build/.  `make V=1` shows the full commands.
#   make            BPF objects, skeletons, latch
#   make deps       install the Debian packages latch needs (safe to re-run)
#   make check      unit tests (tests/) and root selftests (selftests/)
#   make bench      benchmarks, printed as one table
#   make demo       the README's main job: latch up on the default guest image
#   make demo-netns the same boundary on a network namespace (no VM)
.DELETE_ON_ERROR:
.SUFFIXES:

BUILD ?= build
CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

PKGS := libbpf libnl-route-3.0 libnl-3.0 jansson libvirt libnftables libarchive sqlite3 libcrypto ldns libevent
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wshadow -Wmissing-prototypes -Wno-unused-parameter \
	  -D_GNU_SOURCE -I$(BUILD) -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libvirt: headers only; vm/libvirt.c loads libvirt.so.0 with dlopen when a
# command first needs libvirtd (linked in, it costs every command ~25 ms)
LDLIBS += $(shell pkg-config --libs $(filter-out libvirt,$(PKGS)) 2>/dev/null) -lelf -lz -lcap -ldl
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(BUILD) -Ibpf

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

# vm/agent.c is the guest side (static, below); agent_selftest.c is a test driver
LIB_SRCS := $(wildcard loader/*.c) $(filter-out vm/agent.c vm/agent_selftest.c vm/guest_rawsend.c,$(wildcard vm/*.c)) $(wildcard audit/*.c) \
	    $(filter-out broker/latchd.c,$(wildcard broker/*.c))
LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRCS))

all: $(BUILD)/latch $(BUILD)/latchd $(BPF_OBJS) $(BUILD)/vm/latch-agent $(BUILD)/vm/latch-rawsend

$(BUILD) $(BUILD)/loader $(BUILD)/audit $(BUILD)/broker $(BUILD)/cli $(BUILD)/tests $(BUILD)/selftests $(BUILD)/bench:
	$(Q)mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/vmlinux.h | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o
	$(Q)rm -f $@.tmp.o

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*) > $@

$(BUILD)/loader/%.o: loader/%.c $(wildcard loader/*.h) bpf/latch_abi.h $(SKELS) | $(BUILD)/loader
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/audit/%.o: audit/%.c audit/audit.h | $(BUILD)/audit
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The built-in profiles are compiled in from broker/profiles/*.txt.
PROFILE_FILES := $(sort $(wildcard broker/profiles/*.txt))
$(BUILD)/broker/profiles_builtin.h: $(PROFILE_FILES) broker/embed_profiles.sh | $(BUILD)/broker
	$(call msg,GEN,$@)
	$(Q)sh broker/embed_profiles.sh $(PROFILE_FILES) > $@

$(BUILD)/broker/%.o: broker/%.c $(wildcard broker/*.h loader/*.h vm/*.h audit/*.h) bpf/latch_abi.h $(SKELS) \
		     $(BUILD)/broker/profiles_builtin.h | $(BUILD)/broker
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/cli/%.o: cli/%.c $(wildcard cli/*.h loader/*.h vm/*.h audit/*.h broker/*.h) bpf/latch_abi.h $(SKELS) | $(BUILD)/cli
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/vm:
	$(Q)mkdir -p $@

$(BUILD)/vm/%.o: vm/%.c $(wildcard vm/*.h loader/*.h) bpf/latch_abi.h $(SKELS) | $(BUILD)/vm
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/liblatch.a: $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ # ar never drops a member: a stale object (a main()) would linger
	$(Q)$(AR) rcs $@ $^

$(BUILD)/latch: $(CLI_OBJS) $(BUILD)/liblatch.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/latchd: $(BUILD)/broker/latchd.o $(BUILD)/liblatch.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The default guest image, its agent and latch-rawsend (the attack selftest's
# raw frame sender); `selftests/run.sh` runs `make image` before the guest tests.
# The agent is static and built without the pkg-config flags of the host side.
IMAGE_DIR ?= /var/lib/latch/images/default
AGENT_CFLAGS := -std=gnu11 -Os -static -Wall -Wextra -Wshadow -Wmissing-prototypes -D_GNU_SOURCE -I.

$(BUILD)/vm/latch-agent: vm/agent.c vm/agent_proto.h | $(BUILD)/vm
	$(call msg,CC-STATIC,$@)
	$(Q)$(CC) $(AGENT_CFLAGS) -o $@ $<
	$(Q)strip $@

# The guest attack selftest's raw frame sender, also static, also in the image.
$(BUILD)/vm/latch-rawsend: vm/guest_rawsend.c | $(BUILD)/vm
	$(call msg,CC-STATIC,$@)
	$(Q)$(CC) $(AGENT_CFLAGS) -o $@ $<
	$(Q)strip $@

$(BUILD)/vm/agent_selftest: $(BUILD)/vm/agent_selftest.o $(BUILD)/vm/agent_client.o
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^

image: $(BUILD)/vm/latch-agent $(BUILD)/vm/latch-rawsend
	vm/image.sh $(IMAGE_DIR) $(BUILD)/vm/latch-agent

vm-proof: image $(BUILD)/vm/agent_selftest
	vm/agent_proof.sh $(IMAGE_DIR) $(BUILD)/vm/agent_selftest

# The debian image (debootstrap, minutes) and a boot of it under latch; never in `check`.
vm-debian-proof: all
	vm/debian_proof.sh

include tests/tests.mk
include selftests/selftests.mk
include bench/bench.mk

deps:
	@bash .ci/deps.sh

# Unit tests first (no root), then the root selftests; each prints its summary.
check: all
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory selftest

selftest: all $(SELFTEST_BINS)
	$(Q)bash selftests/run.sh

demo: all
	@bash selftests/demo_vm.sh

demo-netns: all
	@bash selftests/demo.sh

clean:
	rm -rf $(BUILD)

.PHONY: all deps check unit selftest bench demo demo-netns clean image vm-proof vm-debian-proof
