# SPDX-License-Identifier: GPL-2.0-only
# Rooms: `latch run` (room/), the cgroup programs' loader (loader/cgroup.c)
# and their tests and benchmark.  Included by the top Makefile.
#   make selftest-room     the room selftests (root): bash selftests/run.sh live_room ...
#   make bench-room        latch run beside bubblewrap and fork/exec, and a hook's cost per connect()

# room/ itself is a module of the top Makefile (MODULES, USES_room, PKGS_room).

# The pinned room programs live in a directory named after a hash of their
# object, so that a new build never runs on an older build's pins.
$(BUILD)/latch_cg_id.h: $(BUILD)/latch_cg.bpf.o
	$(call msg,GEN,$@)
	$(Q)printf '#define LATCH_CG_BUILD_ID "%s"\n' "$$(sha256sum $< | cut -c1-16)" > $@

$(BUILD)/obj/loader/cgroup.o: $(BUILD)/latch_cg_id.h

# latch_rules.h is shared by both BPF objects
$(BPF_OBJS): bpf/latch_rules.h

# The room programs on a live cgroup (selftests/room_cg.c).
SELFTEST_BINS += $(BUILD)/selftests/room_cg

$(BUILD)/selftests/room_cg: selftests/room_cg.c $(call archives_of,$(call closure,loader)) | $(BUILD)/selftests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< $(call link_with,loader)

# The room benchmark (bench/room.sh); `make bench` runs it first.
ROOM_BENCH_BINS := $(BUILD)/bench/room_stamp $(BUILD)/bench/room_start $(BUILD)/bench/room_lean $(BUILD)/bench/room_hook

$(BUILD)/bench/room_stamp: bench/room_stamp.c | $(BUILD)/bench
	$(call msg,CC-STATIC,$@)
	$(Q)$(CC) -O2 -static -Wall -Wextra -o $@ $<

$(BUILD)/bench/room_start: bench/room_start.c | $(BUILD)/bench pkgs-ok
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $<

# only what room/ and loader/ need: the point of this binary
$(BUILD)/bench/room_lean $(BUILD)/bench/room_hook: $(BUILD)/bench/%: bench/%.c $(call archives_of,$(call closure,room)) | $(BUILD)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -o $@ $< -Wl,--as-needed $(call link_with,room)

bench-room: $(BUILD)/latch $(ROOM_BENCH_BINS)
	$(Q)BUILD=$(BUILD) bash bench/room.sh

bench: bench-room

.PHONY: bench-room
