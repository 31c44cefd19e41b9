#!/bin/sh
# meson install script: put the example configuration into SYSCONFDIR/steer only where there
# is none yet, so that installing an upgrade never overwrites the operator's steer.yaml or
# zones. The pristine copies stay in DATADIR/steer for reference.
#
#   install-config.sh SYSCONFDIR_STEER DATADIR_STEER      (absolute paths, before DESTDIR)
set -eu

conf_dir=${DESTDIR:-}$1
ref_dir=${DESTDIR:-}$2

install_if_missing() {
	if [ -e "$conf_dir/$1" ]; then
		echo "Keeping $conf_dir/$1 (the example is $ref_dir/$1)"
	else
		install -D -m "$2" "$ref_dir/$1" "$conf_dir/$1"
		echo "Installing $conf_dir/$1"
	fi
}

install_if_missing steer.yaml 0644
install_if_missing zones/example.test.zone 0644
