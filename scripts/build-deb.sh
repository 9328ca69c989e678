#!/bin/bash
# Build the Debian package: vsnap_<version>_amd64.deb (with its .buildinfo and
# .changes) in the checkout's parent directory, as dpkg-buildpackage does.
# Installs the build dependencies (debian/control) first when some are missing.
#
#   sudo ./scripts/build-deb.sh
#   then: sudo apt-get install ../vsnap_<version>_amd64.deb
#
# The build runs in obj-x86_64-linux-gnu/ and debian/vsnap/ inside the
# checkout (build/ is not touched); `debian/rules clean` removes them.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  apt-get -o DPkg::Lock::Timeout=300 "$@"
}
dpkg-query -W -f='${Status}' dpkg-dev 2>/dev/null | grep -q "install ok installed" ||
  apt_install install -y -qq --no-install-recommends dpkg-dev >/dev/null
if ! dpkg-checkbuilddeps 2>/dev/null; then
  echo "build-deb: installing the build dependencies"
  apt_install build-dep -y -qq --no-install-recommends ./ >/dev/null
fi

version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -q DEB_HOST_ARCH)
meson_version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)
if [ "$version" != "$meson_version" ]; then
  echo "build-deb: debian/changelog says $version, meson.build $meson_version" >&2
  exit 1
fi

dpkg-buildpackage -us -uc -b -Jauto
deb=$(cd .. && pwd)/vsnap_${version}_${arch}.deb
[ -f "$deb" ] || { echo "build-deb: $deb was not built" >&2; exit 1; }
echo "build-deb: $deb"
