# SPDX-License-Identifier: GPL-2.0-only
# latch: build everything into build/.  `make V=1` shows the full commands.
#   make            BPF objects, skeletons, latch, latchd, the guest agent
#   make deps       install the Debian packages latch needs (safe to re-run)
#   make check      unit tests (tests/) and root selftests (selftests/)
#   make bench      benchmarks, printed as one table
#   make demo       the README's main job: latch up on the default guest image
#   make demo-netns the same boundary on a network namespace (no VM)
#
# The tree is a set of modules (docs/ARCHITECTURE.md).  Each is one archive,
# and the arrows below say which modules each may use: `make` refuses an
# include across a missing arrow (the arrows check), a call across one (the
# symbols check, on the archives), an arrow nothing uses, and a map that
# disagrees with them (docs/ARCHITECTURE.md, README.md).
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

# ---- modules and their arrows ------------------------------------------------
# USES_m: the modules m may include and call (besides itself and bpf/'s ABI
# header).  `latchd` is the daemon (latchd/main.c is its binary's main);
# `cli` is the latch command.  docs/ARCHITECTURE.md's graph is `make arrows`
# (build/map.ok checks it).
MODULES := common loader audit config profile kit vm room ctl resolver broker budget latchd sandbox cni
USES_common :=
USES_loader := common
USES_audit := common
USES_config := common
USES_profile := loader common
USES_kit := profile common
USES_vm := config loader common
USES_room := config loader common
USES_ctl := common
USES_resolver := common
USES_broker := common
USES_budget := config common
USES_latchd := ctl resolver broker budget profile kit audit config loader common
USES_sandbox := vm ctl kit profile config loader common
USES_cli := sandbox vm room ctl budget profile kit audit config loader common
# cni: latch-cni, the chained CNI plugin (cni/main.c is its binary's main)
USES_cni := sandbox ctl kit profile audit loader common

SRCS_common := $(wildcard common/*.c)
SRCS_loader := $(wildcard loader/*.c)
SRCS_audit := $(wildcard audit/*.c)
SRCS_config := $(wildcard config/*.c)
SRCS_profile := $(wildcard profile/*.c)
SRCS_kit := $(wildcard kit/*.c)
SRCS_vm := $(wildcard vm/*.c)
SRCS_room := $(wildcard room/*.c)
SRCS_ctl := $(wildcard ctl/*.c)
SRCS_resolver := $(wildcard resolver/*.c)
SRCS_broker := $(wildcard broker/*.c)
SRCS_budget := $(wildcard budget/*.c)
LATCHD_MAIN := latchd/main.c
SRCS_latchd := $(filter-out $(LATCHD_MAIN),$(wildcard latchd/*.c))
SRCS_sandbox := $(wildcard sandbox/*.c)
SRCS_cli := $(wildcard cli/*.c)
CNI_MAIN := cni/main.c
SRCS_cni := $(filter-out $(CNI_MAIN),$(wildcard cni/*.c))

# The Debian packages each module builds against (pkg-config names).
PKGS_loader := libbpf libelf zlib libnl-3.0 libnl-route-3.0
PKGS_audit := sqlite3 libcrypto jansson libsystemd
# kit/: libcyaml for the schema, libyaml (which it is built on) for env and the unknown-field warning
PKGS_kit := libcyaml yaml-0.1 libcrypto libcurl libarchive jansson
PKGS_vm := libnl-3.0 libnl-route-3.0 libnftables libarchive jansson libseccomp libcap
PKGS_room := libseccomp libcap jansson
PKGS_ctl := jansson
PKGS_resolver := ldns libevent libnl-3.0 libnl-route-3.0
# Debian's http-parser ships no pkg-config file (EXTRA_LIBS_broker)
PKGS_broker := libevent libevent_openssl openssl jansson
PKGS_budget := sqlite3 jansson zlib libxxhash
# libsystemd: sd_notify (READY, WATCHDOG, STOPPING) for latchd.service's Type=notify; libcurl: notify_url
PKGS_latchd := ldns libevent libevent_openssl openssl jansson libnl-3.0 libnl-route-3.0 libsystemd libcurl
PKGS_sandbox := jansson
PKGS_cli := jansson libcap
# libcrypto: the sandbox name's SHA-256 of the container id
PKGS_cni := jansson libnl-3.0 libnl-route-3.0 libcrypto
# libvirt: headers only; vm/libvirt.c loads libvirt.so.0 with dlopen when a
# command first needs libvirtd (linked in, it costs every command ~25 ms)
PKGS_HEADERS_ONLY := libvirt
ALL_PKGS := $(sort $(foreach m,$(MODULES) cli,$(PKGS_$(m))) $(PKGS_HEADERS_ONLY))

# pkg-config is asked once; a package it can't find stops every build step
# (pkgs-ok) with its name, instead of failing later on a missing header.
ifeq ($(filter-out deps clean,$(or $(MAKECMDGOALS),all)),)
PKGS_MISSING :=
else
PKGS_MISSING := $(foreach p,$(ALL_PKGS),$(if $(shell pkg-config --exists $(p) && echo y),,$(p)))
PKG_CFLAGS := $(shell pkg-config --cflags $(filter-out $(PKGS_MISSING),$(ALL_PKGS)) 2>/dev/null)
endif
# the link libraries of a list of modules, each package once
pkg_libs = $(shell pkg-config --libs $(sort $(foreach m,$(1),$(PKGS_$(m)))) 2>/dev/null)
# the modules in $(1) and everything they use, all the way down
closure = $(sort $(1) $(if $(strip $(1)),$(call closure,$(foreach m,$(1),$(USES_$(m))))))
EXTRA_LIBS_loader := -lelf -lz
EXTRA_LIBS_vm := -ldl
# budget/checkpoint.c's thread (in libc since glibc 2.34; named for older ones)
EXTRA_LIBS_budget := -lpthread
EXTRA_LIBS_cli := -lcap
EXTRA_LIBS_broker := -lhttp_parser
extra_libs = $(sort $(foreach m,$(1),$(EXTRA_LIBS_$(m))))
# archives in link order: users before what they use
LINK_ORDER := cni sandbox vm room latchd resolver broker ctl kit profile budget audit config loader common
archives_of = $(foreach m,$(LINK_ORDER),$(if $(filter $(m),$(1)),$(BUILD)/lib$(m).a))
# $(call link_with,MODULES): the archives and libraries a binary using MODULES needs
link_with = $(call archives_of,$(call closure,$(1))) $(call pkg_libs,$(call closure,$(1))) \
	    $(call extra_libs,$(call closure,$(1)))

CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wshadow -Wmissing-prototypes -Wno-unused-parameter \
	  -Werror=implicit-function-declaration -D_GNU_SOURCE -MMD -MP -I$(BUILD) -I$(BUILD)/obj -I. $(PKG_CFLAGS)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(BUILD) -Ibpf

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
# every object waits for the skeletons: make must not delete one as an
# intermediate file, or the next make rebuilds the whole tree
.SECONDARY: $(SKELS)

# objects under build/obj/: build/latchd is the daemon's binary, so its module's objects can't sit in build/latchd/
objs_of = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
ALL_OBJS := $(foreach m,$(MODULES) cli,$(call objs_of,$(SRCS_$(m)))) $(call objs_of,$(LATCHD_MAIN) $(CNI_MAIN))

all: $(BUILD)/latch $(BUILD)/latchd $(BUILD)/latch-cni $(BUILD)/map.ok $(BPF_OBJS) $(BUILD)/vm/latch-agent $(BUILD)/vm/latch-rawsend $(BUILD)/vm/latch-ask

# The module graph, one line a module (docs/ARCHITECTURE.md quotes it).
arrows_print = $(foreach m,cli $(MODULES),printf '%-8s -> %s\n' $(m) "$(or $(strip $(USES_$(m))),nothing)";)
arrows:
	@$(arrows_print)

# The map against the territory: docs/ARCHITECTURE.md's graph is `make
# arrows`, its table and README's have a row for each module, and each used
# module's public header says what it owns (scripts/map.sh).
$(BUILD)/map.ok: Makefile scripts/map.sh docs/ARCHITECTURE.md README.md $(wildcard */*.h) | $(BUILD)
	$(call msg,MAP,docs/ARCHITECTURE.md README.md)
	$(Q){ $(arrows_print) } | bash scripts/map.sh docs/ARCHITECTURE.md README.md
	$(Q)touch $@

pkgs-ok:
	@if [ -n "$(strip $(PKGS_MISSING))" ]; then \
		echo "make: pkg-config can't find $(strip $(PKGS_MISSING)); run \`make deps\` (bash .ci/deps.sh) first" >&2; \
		exit 1; fi

# The arrows check: every #include of a module's sources, in either bracket
# style, names its own directory, the ABI header, or the public header
# (DIR/DIR.h) of a module its arrows allow; libbpf and the skeletons stay
# inside loader/; an #include of a macro is refused (scripts/arrows.sh).
MODULE_FILES := $(sort $(shell find $(MODULES) cli -name '*.[ch]' 2>/dev/null))
module_files = $(filter $(1)/%,$(MODULE_FILES))
$(BUILD)/arrows.ok: Makefile scripts/arrows.sh $(MODULE_FILES) | $(BUILD)
	$(call msg,ARROWS,modules)
	$(Q){ $(foreach m,$(MODULES) cli,printf '%s|%s|%s\n' $(m) "$(strip $(USES_$(m)))" "$(call module_files,$(m))";) } \
		| BUILD=$(BUILD) bash scripts/arrows.sh
	$(Q)touch $@

# sandbox/ prints nothing (sandbox/sandbox.h): the command shows what it
# returns and says.  An object of it that names stdout or stderr, or calls
# printf, puts or perror, stops the build before its archive is made.
SANDBOX_PRINTS := stdout stderr printf vprintf puts putchar perror __printf_chk __vprintf_chk
$(BUILD)/sandbox.quiet.ok: $(call objs_of,$(SRCS_sandbox))
	$(call msg,QUIET,sandbox)
	$(Q)bad=$$(nm -u $^ | awk '{print $$NF}' | grep -xE '$(subst $(eval) ,|,$(SANDBOX_PRINTS))' | sort -u | tr '\n' ' '); \
	if [ -n "$$bad" ]; then echo "make: sandbox/ prints nothing, yet its objects use: $$bad(return the line, or say it through struct latch_sandbox_say)" >&2; exit 1; fi
	$(Q)touch $@
$(BUILD)/libsandbox.a: | $(BUILD)/sandbox.quiet.ok

$(BUILD) $(BUILD)/tests $(BUILD)/selftests $(BUILD)/bench:
	$(Q)mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/vmlinux.h | $(BUILD) pkgs-ok
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -MF $(BUILD)/$*.bpf.d -c $< -o $@.tmp.o
	$(Q)$(BPFTOOL) gen object $@ $@.tmp.o
	$(Q)rm -f $@.tmp.o

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*) > $@

# The built-in profiles are compiled in from profile/profiles/*.txt.
PROFILE_FILES := $(sort $(wildcard profile/profiles/*.txt))
$(BUILD)/profile/profiles_builtin.h: $(PROFILE_FILES) profile/embed_profiles.sh
	$(Q)mkdir -p $(@D)
	$(call msg,GEN,$@)
	$(Q)sh profile/embed_profiles.sh $(PROFILE_FILES) > $@

# The built-in kits are compiled in from kit/kits/*.yaml.
KIT_FILES := $(sort $(wildcard kit/kits/*.yaml))
$(BUILD)/kit/kits_builtin.h: $(KIT_FILES) kit/embed_kits.sh
	$(Q)mkdir -p $(@D)
	$(call msg,GEN,$@)
	$(Q)sh kit/embed_kits.sh $(KIT_FILES) > $@
$(BUILD)/obj/kit/load.o: $(BUILD)/kit/kits_builtin.h

# The systemd units, one template each (vm/units/*.in): `latch boot install`
# writes them from this header, `make install` from the files.
UNIT_FILES := $(sort $(wildcard vm/units/*.service.in))
$(BUILD)/vm/units.h: $(UNIT_FILES) vm/units/embed.sh
	$(Q)mkdir -p $(@D)
	$(call msg,GEN,$@)
	$(Q)sh vm/units/embed.sh $(UNIT_FILES) > $@
$(BUILD)/obj/vm/boot.o: $(BUILD)/vm/units.h

# Every object waits for the skeletons and generated headers (-MMD records
# what it really includes after the first build) and for the arrows check.
$(BUILD)/obj/%.o: %.c $(SKELS) $(BUILD)/profile/profiles_builtin.h | $(BUILD)/arrows.ok pkgs-ok
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(foreach m,$(MODULES),$(eval $(BUILD)/lib$(m).a: $(call objs_of,$(SRCS_$(m)))))

$(BUILD)/lib%.a:
	$(call msg,AR,$@)
	$(Q)rm -f $@ # ar never drops a member: a stale object would linger
	$(Q)$(AR) rcs $@ $^

# The arrows on the built code: every symbol a module calls is its own, a
# module's its arrows reach, or a system library's, and every arrow is used
# (scripts/symbols.sh).  The binaries wait for it, so a call across a missing
# arrow fails the build even where the link would succeed.
symbol_files = $(if $(filter cli,$(1)),$(call objs_of,$(SRCS_cli)),$(BUILD)/lib$(1).a) \
	       $(if $(filter latchd,$(1)),$(call objs_of,$(LATCHD_MAIN))) \
	       $(if $(filter cni,$(1)),$(call objs_of,$(CNI_MAIN)))
$(BUILD)/symbols.ok: Makefile scripts/symbols.sh $(foreach m,$(MODULES) cli,$(call symbol_files,$(m)))
	$(call msg,SYMBOLS,modules)
	$(Q){ $(foreach m,$(MODULES) cli,printf '%s|%s|%s|%s\n' $(m) "$(strip $(USES_$(m)))" \
		"$(call closure,$(USES_$(m)))" "$(strip $(call symbol_files,$(m)))";) } | bash scripts/symbols.sh
	$(Q)touch $@
$(BUILD)/latch $(BUILD)/latchd $(BUILD)/latch-cni: | $(BUILD)/symbols.ok

# Each check above refusing a copy of the tree with a forbidden include, call
# or map (scripts/arrows_test.sh); part of `make check`.
arrows-test: $(BUILD)/latch $(BUILD)/latchd $(BUILD)/map.ok
	$(Q)BUILD=$(BUILD) bash scripts/arrows_test.sh

# latch loads its heaviest libraries only when a command first calls them (scripts/lazy.mk)
include scripts/lazy.mk
$(BUILD)/latch: $(LATCH_OBJS) $(LATCH_ARCHIVES) $(LATCH_LAZY_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(LATCH_LINK)
	$(call latch_lazy_check,$@)

$(BUILD)/latchd: $(call objs_of,$(LATCHD_MAIN)) $(call archives_of,$(call closure,latchd))
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(call objs_of,$(LATCHD_MAIN)) $(call link_with,latchd)

# The chained CNI plugin (cni/cni.h); `make install` puts it beside latch and links it into /opt/cni/bin.
$(BUILD)/latch-cni: $(call objs_of,$(CNI_MAIN)) $(call archives_of,$(call closure,cni))
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $(call objs_of,$(CNI_MAIN)) $(call link_with,cni)

# The default guest image, its agent and latch-rawsend (the attack selftest's
# raw frame sender); `selftests/run.sh` runs `make image` before the guest tests.
# The agent is static and built without the pkg-config flags of the host side.
IMAGE_DIR ?= /var/lib/latch/images/default
AGENT_CFLAGS := -std=gnu11 -Os -static -Wall -Wextra -Wshadow -Wmissing-prototypes -D_GNU_SOURCE -MMD -MP -I.
# latch-ask (vm/guest/ask.c) asks for a grant from inside; jansson builds its JSON, statically linked.
GUEST_PROGS := $(BUILD)/vm/latch-agent $(BUILD)/vm/latch-rawsend $(BUILD)/vm/latch-ask

$(BUILD)/vm/latch-agent: vm/guest/agent.c vm/guest/agent_input.c common/clock.c
$(BUILD)/vm/latch-rawsend: vm/guest/rawsend.c
$(BUILD)/vm/latch-ask: vm/guest/ask.c common/units.c common/errors.c
$(BUILD)/vm/latch-ask: GUEST_LIBS := -ljansson
$(GUEST_PROGS):
	$(Q)mkdir -p $(@D)
	$(call msg,CC-STATIC,$@)
	$(Q)$(CC) $(AGENT_CFLAGS) -o $@ $^ $(GUEST_LIBS)
	$(Q)strip $@

image: $(GUEST_PROGS)
	vm/images/image.sh $(IMAGE_DIR) $(BUILD)/vm/latch-agent

# A proof of the image and the agent before libvirt is involved (vm-proof, never in `check`);
# with --local, the agent alone on this host (selftests/live_agent.sh).
$(BUILD)/selftests/agent_selftest: selftests/agent_selftest.c $(call archives_of,$(call closure,vm)) | $(BUILD)/selftests
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(call link_with,vm)

vm-proof: image $(BUILD)/selftests/agent_selftest
	selftests/agent_proof.sh $(IMAGE_DIR) $(BUILD)/selftests/agent_selftest

# The debian image (debootstrap, minutes) and a boot of it under latch; never in `check`.
vm-debian-proof: all
	selftests/debian_proof.sh

# Claude Code at the desk in a debian guest (selftests/vm_claude.sh: the image, ~196 MB of setup
# streamed into the guest, the agent's run); `check` runs it too, this target alone.
vm-claude: all
	bash selftests/run.sh vm_claude

include broker/broker.mk
include tests/tests.mk
include room/room.mk
include selftests/selftests.mk
include bench/bench.mk
include scripts/install.mk
-include $(ALL_OBJS:.o=.d) $(BUILD)/*.bpf.d $(BUILD)/*/*.d

deps:
	@bash .ci/deps.sh

# The C sources in the kernel's style (.clang-format); check fails on the first file that is not.
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -path ./$(BUILD) -prune -o -name '*.[ch]' -print)
CLANG_FORMAT ?= clang-format
format:
	$(Q)$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	$(Q)command -v $(CLANG_FORMAT) >/dev/null || { echo "make: no $(CLANG_FORMAT); run \`make deps\`" >&2; exit 1; }
	$(Q)out=$$($(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES) 2>&1 | head -n 20); \
	if [ -n "$$out" ]; then echo "$$out" >&2; \
		echo "make: these files are not in .clang-format's style; run \`make format\`" >&2; exit 1; fi

# Unit tests first (no root), then the root selftests; each prints its summary.
# Recursive, so that `make deps check` on a fresh machine reads the packages
# `deps` has just installed.
check:
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory format-check
	$(Q)$(MAKE) --no-print-directory arrows-test
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory selftest

selftest: all $(SELFTEST_BINS)
	$(Q)bash selftests/run.sh

# The selftests' own programs (prog_table, the drivers of live_broker, live_resolver...);
# selftests/run.sh builds them first, so that it runs them all when called alone.
selftest-bins: all $(SELFTEST_BINS)

demo:
	$(Q)$(MAKE) --no-print-directory all
	@bash selftests/demo_vm.sh

demo-netns:
	$(Q)$(MAKE) --no-print-directory all
	@bash selftests/demo.sh

clean:
	rm -rf $(BUILD)

.PHONY: arrows arrows-test all deps format format-check check unit selftest selftest-bins bench demo demo-netns clean image vm-proof vm-debian-proof vm-claude pkgs-ok
