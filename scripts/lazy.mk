# SPDX-License-Identifier: GPL-2.0-only
# The `latch` binary's heavy libraries, loaded when first called instead of
# at exec (scripts/lazy_stubs.sh says how and why).  `latch run`, which
# needs none of them, starts ~3 ms of CPU sooner; a command that does need
# one loads it on its first call.  Included by the top Makefile; only the
# latch binary is linked this way (latchd, tests and benchmarks link as
# usual).  x86-64 only: elsewhere LATCH_LAZY_PKGS is empty and latch links
# every library the usual way.
#
#   LATCH_LAZY_PKGS   pkg-config packages loaded lazily
#   LATCH_LAZY_LIBS   their -l names (what lazy_stubs.sh stubs)

ifeq ($(ARCH),x86)
LATCH_LAZY_PKGS := libarchive libnftables sqlite3 libcrypto libcyaml yaml-0.1 libcurl
LATCH_LAZY_LIBS := archive nftables sqlite3 crypto cyaml yaml curl
LATCH_LAZY_OBJS := $(BUILD)/lazy/stubs.o $(BUILD)/lazy/resolve.o
endif

LATCH_OBJS := $(call objs_of,$(SRCS_cli))
LATCH_ARCHIVES := $(call archives_of,$(call closure,cli))
# every package of the cli's closure but the lazy ones
LATCH_EAGER_PKGS := $(filter-out $(LATCH_LAZY_PKGS),$(sort $(foreach m,$(call closure,cli),$(PKGS_$(m)))))
LATCH_LINK := $(LATCH_OBJS) $(LATCH_ARCHIVES) $(LATCH_LAZY_OBJS) \
	      $(shell pkg-config --libs $(LATCH_EAGER_PKGS) 2>/dev/null) $(call extra_libs,$(call closure,cli))

$(BUILD)/lazy/stubs.c: scripts/lazy_stubs.sh scripts/lazy.mk $(LATCH_OBJS) $(LATCH_ARCHIVES)
	$(Q)mkdir -p $(@D)
	$(call msg,GEN,$@)
	$(Q)CC=$(CC) bash scripts/lazy_stubs.sh $@ "$(LATCH_LAZY_LIBS)" $(LATCH_OBJS) $(LATCH_ARCHIVES)

$(BUILD)/lazy/stubs.o: $(BUILD)/lazy/stubs.c scripts/lazy_resolve.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/lazy/resolve.o: scripts/lazy_resolve.c scripts/lazy_resolve.h
	$(Q)mkdir -p $(@D)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# A lazy library among latch's NEEDED entries would be loaded at exec after all: the build stops.
define latch_lazy_check
	$(Q)! readelf -d $(1) | grep -E 'NEEDED.*\[lib($(subst $(eval) ,|,$(strip $(LATCH_LAZY_LIBS))))[.-]' \
		|| { echo "make: $(1) still needs a lazy library at exec (scripts/lazy.mk)" >&2; rm -f $(1); exit 1; }
endef
