# SPDX-License-Identifier: GPL-2.0-only
# install.mk - latch's version, `make install` / `make uninstall`, the man
# pages and the bash completion (docs/install.md says what goes where, and why).
#
#   make install [PREFIX=/usr/local] [DESTDIR=]     latch and latchd in $(PREFIX)/sbin,
#        the image recipes and guest programs in $(PREFIX)/lib/latch, the
#        systemd units, /etc/latch/latch.conf (never overwritten), man pages,
#        the bash completion, and a manifest of what it wrote
#   make uninstall [PREFIX=...] [DESTDIR=]          removes what the manifest lists;
#        latch.conf only when it is still as installed (dpkg's conffile rule)
#   make man                                        the man pages into build/man
#   make dist                                       a tarball with a VERSION file

# ---- the version: a tarball's VERSION file, else git describe -----------------
# v1.2.3 tags become 1.2.3, 1.2.3+4.gHASH past a tag; without a tag 0.0.0+gHASH.
LATCH_VERSION := $(shell if [ -f VERSION ]; then cat VERSION; \
	elif d=$$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then \
		echo "$$d" | sed -E 's/^v//; s/-([0-9]+)-g/+\1.g/; s/-dirty$$/.dirty/'; \
	elif h=$$(git rev-parse --short HEAD 2>/dev/null); then \
		echo "0.0.0+g$$h$$(git diff --quiet HEAD 2>/dev/null || echo .dirty)"; \
	else echo 0.0.0+unknown; fi)

# Rewritten only when the version changed, so an unchanged tree rebuilds nothing.
$(BUILD)/cli/version.h: FORCE
	$(Q)mkdir -p $(@D)
	$(Q)printf '#define LATCH_VERSION "%s"\n' '$(LATCH_VERSION)' > $@.tmp
	$(Q)cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(BUILD)/cli/latch.o: $(BUILD)/cli/version.h

FORCE:
.PHONY: FORCE
