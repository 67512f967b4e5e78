#!/usr/bin/env bash
# Pack this host's OpenSSH (sshd, ssh, ssh-keygen) with every shared library it loads, glibc's own
# loader included, into a directory that runs on a Linux host with no OpenSSH and nothing to install
# from (the lent GPU machine: its image has no sshd and no ssh client, and no package index):
#
#   tests/ssh_bundle.sh [DIR]          # default .sshbundle (git-ignored); carry it with the work tree
#   KERNELLSP_TEST_SSH_BUNDLE=$PWD/.sshbundle python -m pytest -m gpu tests/run/test_runner_ssh_gpu.py
#
# Why the loader: Debian 12's OpenSSH needs glibc 2.36, which an older host lacks; running each
# binary through the bundled ld-linux with --library-path makes the host's libc irrelevant.
# Why libnss_wrapper: sshd run as root needs its privilege-separation user `sshd`; a host without
# one gets it from a copy of /etc/passwd through nss_wrapper (tests/helpers/sshd.py), so /etc stays as it is.
#
# Layout: DIR/libexec/{sshd,ssh,ssh-keygen} (the binaries), DIR/lib/ (their libraries, the loader,
# libnss_wrapper.so), DIR/bin/{sshd,ssh,ssh-keygen} (shell wrappers that run them through the loader;
# bin/sshd takes a preload library from KERNELLSP_SSHD_PRELOAD).
# Needs here: openssh-server, openssh-client (apt-get install -y openssh-server) and apt-get download
# access for libnss-wrapper (Debian's package index).
set -euo pipefail
out=${1:-.sshbundle}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/libexec"
out=$(cd "$out" && pwd)
bins=(/usr/sbin/sshd "$(command -v ssh)" "$(command -v ssh-keygen)")
for b in "${bins[@]}"; do
  cp -L "$b" "$out/libexec/"
  # ldd lines: "libx.so.1 => /path (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)".
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | while read -r lib; do
    cp -Ln "$lib" "$out/lib/" 2>/dev/null || true
  done
done
loader=$(basename "$(ldd /usr/sbin/sshd | awk '$1 ~ /^\/.*ld-linux/ {print $1}' | head -1)")
[ -f "$out/lib/$loader" ] || { echo "no loader found for sshd" >&2; exit 1; }
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download -q libnss-wrapper >/dev/null && dpkg-deb -x libnss-wrapper_*.deb x)
cp -L "$(find "$tmp/x" -name 'libnss_wrapper.so*' -type f | head -1)" "$out/lib/libnss_wrapper.so"
rm -rf "$tmp"
for name in ssh ssh-keygen; do
  cat > "$out/bin/$name" <<EOF
#!/bin/sh
d=\$(dirname "\$0")/..
exec "\$d/lib/$loader" --library-path "\$d/lib" "\$d/libexec/$name" "\$@"
EOF
done
cat > "$out/bin/sshd" <<EOF
#!/bin/sh
d=\$(dirname "\$0")/..
if [ -n "\${KERNELLSP_SSHD_PRELOAD:-}" ]; then
  exec "\$d/lib/$loader" --library-path "\$d/lib" --preload "\$KERNELLSP_SSHD_PRELOAD" "\$d/libexec/sshd" "\$@"
fi
exec "\$d/lib/$loader" --library-path "\$d/lib" "\$d/libexec/sshd" "\$@"
EOF
chmod +x "$out/bin/"*
echo "$out: $(du -sh "$out" | cut -f1), $(ls "$out/lib" | wc -l) libraries"
"$out/bin/ssh" -V
