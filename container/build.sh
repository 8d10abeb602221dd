#!/usr/bin/env bash
# Builds shape's container image from the source, with podman (or docker):
#
#   container/build.sh [TAG]        # default tag: shape-toxiproxy
#
# The release binary (allowed ports below 1024, with setcap from
# libcap2-bin) and what it links (libc, libm, libgcc_s, ld.so; glibc
# 2.36 resolves names itself, so nothing more), /etc/nsswitch.conf, and a
# passwd naming the unprivileged user, staged as a root for the
# Containerfile beside this script, which starts from scratch: no image
# from a registry is needed.
set -euo pipefail
# setcap lives in sbin, which a non-login shell may not search.
export PATH="$PATH:/usr/sbin:/sbin"
cd "$(dirname "$0")/.."
tag=${1:-shape-toxiproxy}
engine=$(command -v podman || command -v docker || { echo "neither podman nor docker is installed" >&2; exit 1; })
cargo build --release --quiet
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/rootfs
mkdir -p "$root/etc"
cp target/release/shape "$root/toxiproxy"
# Low ports for the unprivileged user, as toxiproxy's image (root) has
# them: permitted only, which shape makes effective itself
# (crates/net/src/low_ports.rs); marked effective, exec would fail outright
# under --cap-drop ALL.
setcap cap_net_bind_service=p "$root/toxiproxy"
# Every library the binary names, and the loader, at the paths it names.
for lib in $(ldd target/release/shape | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
printf 'root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/:/nonexistent\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
cp container/Containerfile "$stage/Containerfile"
"$engine" build --quiet -t "$tag" -f "$stage/Containerfile" "$stage"
