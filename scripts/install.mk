# SPDX-License-Identifier: GPL-2.0-only
# install.mk - latch's version, `make install` / `make uninstall`, the man
# pages and the bash completion (docs/install.md says what goes where, and why).
#
#   make install [PREFIX=/usr/local] [DESTDIR=]     latch, latchd and latch-cni in $(PREFIX)/sbin
#        (latch-cni linked from $(CNIBINDIR)),
#        the image recipes and guest programs in $(PREFIX)/lib/latch, the
#        systemd units, /etc/latch/latch.conf (never overwritten), man pages,
#        the bash completion, and a manifest of what it wrote
#   make uninstall [PREFIX=...] [DESTDIR=]          `latch boot uninstall` (what boot install
#        wrote), then what the manifest lists; latch.conf only when it is still as installed
#        (dpkg's conffile rule)
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
$(BUILD)/obj/cli/latch.o: $(BUILD)/cli/version.h
# latchd's copy, in its own module's place (scripts/arrows.sh) under build/obj/ (build/latchd is
# the binary); copied only when the version changed
$(BUILD)/obj/latchd/version.h: $(BUILD)/cli/version.h
	$(Q)mkdir -p $(@D) && cp $< $@
$(BUILD)/obj/latchd/main.o: $(BUILD)/obj/latchd/version.h

FORCE:
.PHONY: FORCE

# ---- where things go -----------------------------------------------------------
PREFIX ?= /usr/local
DESTDIR ?=
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
# latch reads /etc/latch whatever the prefix (LATCH_ROOT moves it), as a package's conffiles live in /etc
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
MANDIR ?= $(PREFIX)/share/man
# where container runtimes look for CNI plugins: latch-cni is linked there from SBINDIR
CNIBINDIR ?= /opt/cni/bin
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
# what install wrote, for uninstall: one path a line, and the conf's sha256 when install created it
MANIFEST := $(LIBDIR)/latch/install.manifest

# ---- man pages and the completion ------------------------------------------------
MAN_SRCS := $(wildcard docs/man/*.md)
MAN_PAGES := $(patsubst docs/man/%.md,$(BUILD)/man/%,$(MAN_SRCS))

$(BUILD)/man/%: docs/man/%.md scripts/man.sh $(wildcard docs/*.md) | $(BUILD)
	$(Q)mkdir -p $(@D)
	$(call msg,MAN,$@)
	$(Q)command -v go-md2man >/dev/null || { echo "make: go-md2man renders the man pages: apt-get install go-md2man (make deps)" >&2; exit 1; }
	$(Q)sh scripts/man.sh '$(LATCH_VERSION)' $< | go-md2man > $@

$(BUILD)/latch.bash-completion: $(BUILD)/latch
	$(call msg,GEN,$@)
	$(Q)$(BUILD)/latch completion bash > $@

man: $(MAN_PAGES)

# ---- install / uninstall -----------------------------------------------------------
# inst MODE SRC DEST: install one file and note DEST (without DESTDIR) in the manifest
inst = install -D -m $(1) $(2) $(DESTDIR)$(3) && echo '$(3)' >> $(DESTDIR)$(MANIFEST).new

install: all man $(BUILD)/latch.bash-completion
	$(Q)test -n "$(PREFIX)" || { echo "make install: PREFIX is empty" >&2; exit 1; }
	$(Q)mkdir -p $(DESTDIR)$(LIBDIR)/latch && : > $(DESTDIR)$(MANIFEST).new
	$(Q)$(call inst,0755,$(BUILD)/latch,$(SBINDIR)/latch)
	$(Q)$(call inst,0755,$(BUILD)/latchd,$(SBINDIR)/latchd)
	$(Q)$(call inst,0755,$(BUILD)/latch-cni,$(SBINDIR)/latch-cni)
	$(Q)mkdir -p $(DESTDIR)$(CNIBINDIR) && ln -sfn $(SBINDIR)/latch-cni $(DESTDIR)$(CNIBINDIR)/latch-cni && \
		echo '$(CNIBINDIR)/latch-cni' >> $(DESTDIR)$(MANIFEST).new
	$(Q)$(foreach f,image.sh image_debian.sh,$(call inst,0755,vm/images/$(f),$(LIBDIR)/latch/$(f)) &&) true
	$(Q)$(call inst,0644,vm/images/lib.sh,$(LIBDIR)/latch/lib.sh)
	$(Q)$(foreach f,latch-agent latch-rawsend latch-ask,$(call inst,0755,$(BUILD)/vm/$(f),$(LIBDIR)/latch/$(f)) &&) true
	$(Q)$(foreach u,latch-boot latchd,sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@ENV@||' vm/units/$(u).service.in \
		> $(BUILD)/$(u).service && $(call inst,0644,$(BUILD)/$(u).service,$(UNITDIR)/$(u).service) &&) true
	$(Q)$(call inst,0644,vm/units/tmpfiles.conf,$(TMPFILESDIR)/latch.conf)
	$(Q)$(foreach p,$(MAN_PAGES),gzip -9n < $(p) > $(p).gz && \
		$(call inst,0644,$(p).gz,$(MANDIR)/man$(subst .,,$(suffix $(p)))/$(notdir $(p)).gz) &&) true
	$(Q)$(call inst,0644,$(BUILD)/latch.bash-completion,$(COMPLETIONDIR)/latch)
	@# the conffile: written when absent, never over an existing one (dpkg's rule)
	$(Q)if [ -e $(DESTDIR)$(SYSCONFDIR)/latch/latch.conf ]; then \
		echo "install: kept $(DESTDIR)$(SYSCONFDIR)/latch/latch.conf as it is (the shipped one is config/latch.conf)"; \
		grep -s '^conf ' $(DESTDIR)$(MANIFEST) >> $(DESTDIR)$(MANIFEST).new || true; \
	else install -D -m 0644 config/latch.conf $(DESTDIR)$(SYSCONFDIR)/latch/latch.conf && \
		echo "conf $(SYSCONFDIR)/latch/latch.conf $$(sha256sum < config/latch.conf | cut -d' ' -f1)" \
			>> $(DESTDIR)$(MANIFEST).new; fi
	$(Q)mv $(DESTDIR)$(MANIFEST).new $(DESTDIR)$(MANIFEST)
	@echo "installed latch $(LATCH_VERSION) under $(DESTDIR)$(PREFIX) (manifest $(DESTDIR)$(MANIFEST));"
	@echo "  then, as root: latch boot install && systemctl daemon-reload && systemctl start latch-boot latchd"

# Exactly what the manifest lists.  latch.conf goes only when install created
# it and it is unchanged; an edited one stays, and uninstall says so.
uninstall:
	$(Q)test -f $(DESTDIR)$(MANIFEST) || { echo "make uninstall: no $(DESTDIR)$(MANIFEST): nothing installed under this PREFIX/DESTDIR" >&2; exit 1; }
	@# what `latch boot install` wrote (the units' links, units of its own, the hook), while the installed
	@# latch is there to remove it; under DESTDIR, LATCH_ROOT (else DESTDIR) is the root it wrote into.
	@# boot install needs root, so without root there is nothing of it to remove.
	$(Q)if [ -x $(DESTDIR)$(SBINDIR)/latch ] && [ "$$(id -u)" = 0 ]; then \
		LATCH_ROOT=$${LATCH_ROOT:-$(DESTDIR)} $(DESTDIR)$(SBINDIR)/latch boot uninstall || exit 1; fi
	$(Q)while read -r a b c; do \
		if [ "$$a" = conf ]; then \
			if [ "$$(sha256sum < $(DESTDIR)$$b 2>/dev/null | cut -d' ' -f1)" = "$$c" ]; then rm -f $(DESTDIR)$$b; \
			elif [ -e $(DESTDIR)$$b ]; then echo "uninstall: kept $(DESTDIR)$$b: it was edited"; fi; \
			rmdir $$(dirname $(DESTDIR)$$b) 2>/dev/null || true; \
		else rm -f $(DESTDIR)$$a; fi; \
	done < $(DESTDIR)$(MANIFEST)
	$(Q)rm -f $(DESTDIR)$(MANIFEST) && rmdir $(DESTDIR)$(LIBDIR)/latch 2>/dev/null || true
	@echo "uninstalled latch from $(DESTDIR)$(PREFIX)"

# A tarball that knows its version without git.
dist:
	$(Q)mkdir -p $(BUILD)
	$(Q)git archive --prefix=latch-$(LATCH_VERSION)/ -o $(BUILD)/latch-$(LATCH_VERSION).tar HEAD
	$(Q)echo '$(LATCH_VERSION)' > $(BUILD)/VERSION && tar -rf $(BUILD)/latch-$(LATCH_VERSION).tar \
		--transform 's|^$(BUILD)/|latch-$(LATCH_VERSION)/|' $(BUILD)/VERSION && gzip -f $(BUILD)/latch-$(LATCH_VERSION).tar
	@echo "$(BUILD)/latch-$(LATCH_VERSION).tar.gz"

.PHONY: install uninstall man dist
