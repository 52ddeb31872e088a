#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# notify-desktop.sh - an example notify_command for latch (docs/grants.md):
# a desktop notification for each grant a sandbox asks for.
#
#   install -o root -g root -m 0755 docs/notify-desktop.sh /usr/local/lib/latch/notify-desktop.sh
#   echo 'notify_command = /usr/local/lib/latch/notify-desktop.sh' >> /etc/latch/latch.conf
#   systemctl reload latchd
#
# latchd runs it as root, with the ask as one JSON document on stdin, a bare
# environment (PATH and LANG only), no arguments, a time limit
# (notify_timeout), and its output thrown away: nothing it prints can decide
# anything.  Decisions are `latch approve ID` and `latch deny ID` on the host.
#
# It shows the document's "message", which names the sandbox, each host and
# port, the duration, and the sandbox's reason labelled as its own words.
# The notification daemon reads markup in the body, and the reason is the
# sandbox's text, so <, > and & are escaped before it is shown.
#
# Needs: jq, notify-send (libnotify-bin), setpriv (util-linux).  Set
# DESKTOP_USER to the user whose session should show it.
set -eu
DESKTOP_USER=${DESKTOP_USER:-$(getent passwd 1000 | cut -d: -f1)}

uid=$(id -u "$DESKTOP_USER")
gid=$(id -g "$DESKTOP_USER")
msg=$(head -c 65536 | jq -r '.message // "latch: a sandbox asks for a grant (no message)"')
body=$(printf '%s' "$msg" | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g')

exec setpriv --reuid="$uid" --regid="$gid" --init-groups \
	env DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" \
	notify-send --urgency=critical --app-name=latch --expire-time=0 "latch: a sandbox asks" "$body"
