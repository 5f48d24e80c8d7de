#!/usr/bin/env bash
# Build the Integration Hub image (`make image`). No container registry is used:
#   1. mmdebstrap makes the Debian 12 root filesystem from Debian's packages;
#   2. the hub is built as a wheel, and the context gathers it with the lock and the jars;
#   3. buildah builds image/Containerfile on that root filesystem (FROM scratch).
# Usage: image/build.sh IMAGE_NAME   (HUB_HOME, VENV and the build tools from the Makefile)
set -euo pipefail

name=${1:?usage: image/build.sh IMAGE_NAME}
repo=$(cd "$(dirname "$0")/.." && pwd)
hub_home=${HUB_HOME:-$repo/.hub}
venv=${VENV:-$repo/.venv}
work=$hub_home/image
context=$work/context
# vfs and chroot: the storage and the isolation that work without a container runtime's
# privileges (no overlay mounts, no namespaces).
buildah=(buildah --storage-driver vfs)
export BUILDAH_ISOLATION=chroot

# Debian 12 ("bookworm", with its security updates): Python 3.11 as the lock expects, the Java 17
# runtime Spark 4.0 and the JVM tools need, CA certificates for TLS to Kafka and S3, and tini.
# Documentation, manual pages and translations are left out; apt's lists are removed.
packages=python3,python3-venv,openjdk-17-jre-headless,ca-certificates,tini
rootfs=$work/rootfs-$(echo "$packages" | sha256sum | cut -c1-12).tar
mkdir -p "$work"
if [ ! -s "$rootfs" ]; then
  echo "==> Debian 12 root filesystem with $packages (mmdebstrap)"
  rm -f "$work"/rootfs-*.tar
  mmdebstrap --variant=apt --format=tar --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --essential-hook='mkdir -p "$1/usr/share/man/man1"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$rootfs.partial" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  mv "$rootfs.partial" "$rootfs"
fi

echo "==> The build context in $context"
rm -rf "$context" && mkdir -p "$context/wheels" "$context/jars"
ln "$rootfs" "$context/rootfs.tar"
"$venv/bin/uv" build --quiet --wheel --out-dir "$context/wheels" "$repo"
for jars in spark s3a metastore; do
  cp -al "$hub_home/jars/$jars" "$context/jars/$jars"
done

# What build.sh mounts for the one RUN step (never copied into the image): uv, its cache (the
# wheels `make setup` downloaded), the lock, the wheel, and the CA bundle the build machine
# trusts (a TLS-intercepting proxy's CA, where one is on the way to PyPI).
mkdir -p "$context/run"
cp "$venv/bin/uv" "$context/run/uv"
cp "$repo/requirements.lock" "$context/run/requirements.lock"
uv_cache=$("$venv/bin/uv" cache dir)
mkdir -p "$uv_cache"
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("integration-hub"))')

echo "==> buildah build -t $name"
"${buildah[@]}" build --isolation chroot --layers=false --file "$repo/image/Containerfile" --tag "$name" \
  --label org.opencontainers.image.title=integration-hub \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.revision="$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --volume "$context/run/uv:/run/build/uv:ro" \
  --volume "$context/run/requirements.lock:/run/build/requirements.lock:ro" \
  --volume "$context/wheels:/run/build/wheels:ro" \
  --volume "$uv_cache:/run/build/uv-cache" \
  --volume "/etc/ssl/certs/ca-certificates.crt:/run/build/ca.pem:ro" \
  "$context"
# A rebuilt image leaves the previous one untagged: remove it (the build removed its container).
"${buildah[@]}" rmi --prune >/dev/null || true
# pyspark comes as a source distribution, and uv keeps each build of it as a cache revision of
# half a gigabyte: drop the revisions nothing refers to any more, or every build adds one.
"$venv/bin/uv" cache prune --quiet
echo "==> $name: $("${buildah[@]}" images --format '{{.Size}}' "$name")"
