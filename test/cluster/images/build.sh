#!/usr/bin/env bash
# Builds the test cluster's container images without Docker, as OCI image archives that
# `ctr -n k8s.io images import` accepts (then run import.sh to load them into containerd).
#
#   build.sh [pause|sandbox|gateway|datascience|stdio-bridge|mcp-filesystem|all]...     (default: all)
#
#   pause    codemode.local/pause:v1    our static pause program (pause/pause.c), the pod sandbox image
#   sandbox  codemode.local/sandbox:v1  Debian bookworm minbase + python3, nodejs, bash, procps
#   gateway  codemode.local/gateway:v1  `npm run build` output + production node_modules + Node 22
#   datascience codemode.local/datascience:v1  sandbox + NumPy, pandas, SciPy, Matplotlib, ... (PyPI wheels)
#   stdio-bridge    codemode.local/stdio-bridge:v1    images/stdio-bridge, one static Go binary
#   mcp-filesystem  codemode.local/mcp-filesystem:v1  sandbox rootfs + Node 22 + the reference filesystem MCP server
#
# `all` is pause, sandbox, gateway and datascience; the stdio images are named explicitly (up.sh does).
# `all` builds every image even when one fails (the gateway fails while the project does not
# build yet) and exits 1 at the end if any failed; the images that did build are usable.
# Archives go to $CODEMODE_CACHE/images/<name>.oci.tar (default ~/.cache/codemode/images), each
# with a <name>.oci.tar.key holding the hash of its inputs: an unchanged image prints "cached".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../../.." && pwd)"
CACHE="${CODEMODE_CACHE:-$HOME/.cache/codemode}"
OUT="$CACHE/images"
WORK="$OUT/.work"
LOGS="$OUT/logs"
ROOTFS_CACHE="$OUT/rootfs"

SUITE=bookworm
MIRROR="${CODEMODE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Bump when clean_rootfs changes what a cached rootfs holds (it is part of the rootfs key).
ROOTFS_RECIPE=1
SANDBOX_PACKAGES=(bash coreutils libnss-extrausers nodejs procps python3)
# Node 22 from npm's `node` package is a glibc binary that needs libstdc++ (libgcc_s is in minbase).
GATEWAY_PACKAGES=(ca-certificates libstdc++6)

PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FIXED_MTIME=@0

say() { printf '[images] %s\n' "$*"; }

# fail SENTENCE: one clear sentence plus the log to read, then exit (the current target only).
fail() {
  printf '[images] FAILED: %s See %s\n' "$1" "$LOG" >&2
  exit 1
}

# sha of stdin, shortened for file names.
short_sha() { sha256sum | cut -c1-16; }

# safe_rmtree DIR: unmount anything left mounted below DIR (e.g. a debootstrap that died with
# /proc mounted in its chroot), then delete it without crossing file systems.
safe_rmtree() {
  local dir="$1" mp
  [[ -e "$dir" ]] || return 0
  dir="$(cd "$dir" && pwd -P)"
  while read -r mp; do
    umount -l "$mp" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($5 "/", d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  if awk -v d="$dir/" 'index($5 "/", d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    fail "Something is still mounted under $dir; unmount it and retry."
  fi
  rm -rf --one-file-system "$dir"
}

# clean_rootfs DIR: shrink a fresh debootstrap and drop host files it copied in.
clean_rootfs() {
  local r="$1"
  rm -rf "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/* "$r"/var/cache/debconf/*-old \
    "$r"/var/lib/dpkg/*-old "$r"/var/log/* "$r"/usr/share/doc/* "$r"/usr/share/man/* \
    "$r"/usr/share/info/* "$r"/usr/share/lintian "$r"/usr/share/linda "$r"/debootstrap \
    "$r"/tmp/* "$r"/var/tmp/* "$r"/root/.cache
  find "$r"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  mkdir -p "$r"/var/lib/apt/lists/partial "$r"/var/cache/apt/archives/partial
  # The kubelet/containerd provide these at run time; do not ship the build host's.
  : > "$r/etc/resolv.conf"
  printf 'localhost\n' > "$r/etc/hostname"
  : > "$r/etc/machine-id"
  # Device nodes come from the runtime's /dev tmpfs.
  find "$r/dev" -mindepth 1 -delete
  chmod 1777 "$r/tmp" "$r/var/tmp"
}

# rootfs_tar NAME PACKAGES...: sets ROOTFS_TAR to a cached tarball of a debootstrap
# minbase rootfs with PACKAGES, building it first if needed (the slow part, keyed on the list).
rootfs_tar() {
  local name="$1"; shift
  local pkgs key dir start
  pkgs="$(printf '%s\n' "$@" | LC_ALL=C sort -u | paste -sd, -)"
  key="$(printf 'recipe=%s suite=%s variant=minbase include=%s\n' "$ROOTFS_RECIPE" "$SUITE" "$pkgs" | short_sha)"
  ROOTFS_TAR="$ROOTFS_CACHE/$name-$key.tar"
  ROOTFS_KEY="$key"
  if [[ -f "$ROOTFS_TAR" ]]; then
    return 0
  fi
  command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)."
  say "$name: debootstrap $SUITE minbase + $pkgs (first run only, a few minutes)"
  start=$SECONDS
  mkdir -p "$ROOTFS_CACHE" "$WORK"
  dir="$WORK/debootstrap-$name"
  safe_rmtree "$dir"
  mkdir -p "$dir"
  debootstrap --variant=minbase --include="$pkgs" "$SUITE" "$dir" "$MIRROR" >>"$LOG" 2>&1 \
    || fail "debootstrap of the $name rootfs from $MIRROR failed."
  clean_rootfs "$dir"
  tar -C "$dir" --numeric-owner -cpf "$ROOTFS_TAR.partial" . >>"$LOG" 2>&1 \
    || fail "Could not write the $name rootfs tarball."
  mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
  safe_rmtree "$dir"
  find "$ROOTFS_CACHE" -maxdepth 1 -name "$name-*.tar" ! -name "$(basename "$ROOTFS_TAR")" -delete
  say "$name: rootfs cached as $ROOTFS_TAR ($(( SECONDS - start ))s)"
}

# unpack_rootfs TAR DIR
unpack_rootfs() {
  safe_rmtree "$2"
  mkdir -p "$2"
  tar -C "$2" --numeric-owner -xpf "$1" >>"$LOG" 2>&1 || fail "Could not unpack $1."
}

# image_key NAME PARTS...: the hash of the build scripts plus PARTS (strings).
image_key() {
  local name="$1"; shift
  { sha256sum "$HERE/build.sh" "$HERE/lib/oci.py" | cut -d' ' -f1
    printf 'image=%s\n' "$name"
    printf '%s\n' "$@"
  } | short_sha
}

# cached NAME REF KEY: true (and says so) when the archive was built from the same inputs.
cached() {
  local archive="$OUT/$1.oci.tar"
  if [[ -f "$archive" && -f "$archive.key" && "$(cat "$archive.key")" == "$3" ]]; then
    say "$1: cached $2 -> $archive"
    return 0
  fi
  return 1
}

# write_image NAME REF ROOTFS_DIR KEY CONFIG_JSON START
write_image() {
  local name="$1" ref="$2" rootfs="$3" key="$4" config="$5" start="$6"
  local archive="$OUT/$name.oci.tar" info
  printf '%s\n' "$config" > "$WORK/$name.config.json"
  rm -f "$archive.key"
  info="$(python3 "$HERE/lib/oci.py" "$rootfs" "$ref" "$archive" "$WORK/$name.config.json" 2>>"$LOG")" \
    || fail "Writing the OCI archive for $ref failed."
  printf '%s\n' "$info" >> "$LOG"
  printf '%s\n' "$key" > "$archive.key"
  safe_rmtree "$rootfs"
  rm -f "$WORK/$name.config.json"
  local digest size
  digest="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["manifest"])' <<<"$info")"
  size="$(du -h "$archive" | cut -f1)"
  say "$name: built $ref -> $archive ($size, manifest $digest) in $(( SECONDS - start ))s"
}

build_pause() {
  local start=$SECONDS key rootfs="$WORK/pause-rootfs"
  key="$(image_key pause "$(sha256sum "$HERE/pause/pause.c")" "$(gcc --version 2>/dev/null | head -1)")"
  cached pause codemode.local/pause:v1 "$key" && return 0
  say "pause: compiling pause/pause.c (gcc -static -Os)"
  safe_rmtree "$rootfs"
  mkdir -p "$rootfs"
  gcc -static -Os -s -Wall -Wextra -o "$rootfs/pause" "$HERE/pause/pause.c" >>"$LOG" 2>&1 \
    || fail "Compiling pause/pause.c with gcc -static failed (is libc6-dev installed?)."
  "$rootfs/pause" -v >>"$LOG" 2>&1 || fail "The compiled pause binary does not run."
  if ldd "$rootfs/pause" >/dev/null 2>&1; then
    fail "The pause binary is dynamically linked; it must be static."
  fi
  touch -h -d "$FIXED_MTIME" "$rootfs/pause" "$rootfs"
  write_image pause codemode.local/pause:v1 "$rootfs" "$key" \
    '{"User":"65535:65535","Env":["'"$PATH_ENV"'"],"Entrypoint":["/pause"],"WorkingDir":"/"}' "$start"
}

# sandbox_user_lookup ROOTFS: a sandbox pod runs as a user of its own (src/sandbox/pod.ts), not in
# /etc/passwd; the container's command writes that user's line to /tmp/.codemode-passwd (the root
# file system is read-only) and glibc reads it through libnss-extrausers (whoami, getpwuid, Node's
# os.userInfo). Same lines as the Dockerfiles' (test/unit/images checks).
sandbox_user_lookup() {
  local r="$1"
  mkdir -p "$r/var/lib/extrausers"
  ln -sfn /tmp/.codemode-passwd "$r/var/lib/extrausers/passwd"
  sed -i 's/^passwd:.*$/& extrausers/' "$r/etc/nsswitch.conf"
  grep -q '^passwd:.* extrausers$' "$r/etc/nsswitch.conf" || fail "No passwd line in the rootfs's /etc/nsswitch.conf."
  printf 'sandbox:x:1234567890:65534:sandbox:/workspace:/bin/sh\n' >"$r/tmp/.codemode-passwd"
  [[ "$(chroot "$r" /usr/bin/env -i "$PATH_ENV" getent passwd 1234567890)" == sandbox:* ]] \
    || fail "The rootfs does not find the sandbox user through libnss-extrausers."
  rm -f "$r/tmp/.codemode-passwd"
  touch -h -d "$FIXED_MTIME" "$r/var/lib/extrausers" "$r/var/lib/extrausers/passwd" "$r/etc/nsswitch.conf"
}

build_sandbox() {
  local start=$SECONDS key rootfs="$WORK/sandbox-rootfs"
  rootfs_tar sandbox "${SANDBOX_PACKAGES[@]}"
  key="$(image_key sandbox "rootfs=$ROOTFS_KEY")"
  cached sandbox codemode.local/sandbox:v1 "$key" && return 0
  say "sandbox: assembling image"
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  sandbox_user_lookup "$rootfs"
  # emptyDirs are mounted on these; the root file system itself is read-only in the pod.
  mkdir -p "$rootfs/workspace" "$rootfs/tmp"
  # 0777 so a tmpfs that runc mounts there (it copies the mountpoint's mode) is writable too.
  chown 65534:65534 "$rootfs/workspace"
  chmod 0777 "$rootfs/workspace"
  chmod 1777 "$rootfs/tmp"
  touch -h -d "$FIXED_MTIME" "$rootfs/workspace" "$rootfs/tmp"
  # Smoke test inside the rootfs (no .pyc writes, so the layer is not changed by it).
  PYTHONDONTWRITEBYTECODE=1 chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" HOME=/workspace \
    /bin/bash -c 'python3 -c "import json, asyncio, sqlite3, ssl; print(\"python\", json.dumps([1]))" &&
      node -e "console.log(\"node\", process.version)" && test -x /usr/bin/ps && pkill --version && echo bash ok' \
    >>"$LOG" 2>&1 || fail "The sandbox rootfs failed its smoke test (python3 stdlib, node, bash or procps missing)."
  write_image sandbox codemode.local/sandbox:v1 "$rootfs" "$key" \
    '{"User":"65534:65534","Env":["'"$PATH_ENV"'","HOME=/workspace"],"Cmd":["sleep","infinity"],"WorkingDir":"/workspace"}' \
    "$start"
}

build_gateway() {
  local start=$SECONDS key rootfs="$WORK/gateway-rootfs" staging="$WORK/gateway-npm" src node_bin node_version
  node_bin="$REPO_ROOT/node_modules/node/bin/node"
  [[ -x "$node_bin" ]] || fail "$node_bin is missing; run npm ci in the repo root first (the gateway ships npm's Node 22)."
  node_version="$("$node_bin" --version 2>>"$LOG")" || fail "$node_bin does not run."
  rootfs_tar gateway "${GATEWAY_PACKAGES[@]}"
  # What `npm run build` (tsc -p tsconfig.build.json) and `npm ci` read.
  local inputs=() p
  for p in src scripts runtime package.json package-lock.json tsconfig.json tsconfig.build.json; do
    [[ -e "$REPO_ROOT/$p" ]] && inputs+=("$p")
  done
  src="$(cd "$REPO_ROOT" && find "${inputs[@]}" -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum | cut -d' ' -f1)"
  key="$(image_key gateway "rootfs=$ROOTFS_KEY" "node=$node_version" "src=$src")"
  cached gateway codemode.local/gateway:v1 "$key" && return 0

  say "gateway: npm run build"
  (cd "$REPO_ROOT" && npm run build) >>"$LOG" 2>&1 \
    || fail "npm run build failed in $REPO_ROOT, so the gateway is not ready to be imaged yet."
  [[ -f "$REPO_ROOT/dist/src/entry.js" ]] \
    || fail "npm run build did not produce dist/src/entry.js, the gateway's entrypoint; the gateway source is not ready yet."

  say "gateway: npm ci --omit=dev (production node_modules)"
  safe_rmtree "$staging"
  mkdir -p "$staging"
  cp "$REPO_ROOT/package.json" "$REPO_ROOT/package-lock.json" "$staging/"
  (cd "$staging" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund) >>"$LOG" 2>&1 \
    || fail "npm ci --omit=dev failed for the gateway's production dependencies (is package-lock.json in sync with package.json?)."

  say "gateway: assembling image"
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  mkdir -p "$rootfs/app" "$rootfs/usr/local/bin"
  cp -a "$REPO_ROOT/dist" "$rootfs/app/dist"
  # The session kernels the operator ships to sandbox pods in a ConfigMap.
  [[ -d "$REPO_ROOT/runtime" ]] && cp -a "$REPO_ROOT/runtime" "$rootfs/app/runtime"
  cp "$staging/package.json" "$rootfs/app/package.json"
  [[ -d "$staging/node_modules" ]] && cp -a "$staging/node_modules" "$rootfs/app/node_modules"
  install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  chown -R 0:0 "$rootfs/app"
  chmod -R a+rX,go-w "$rootfs/app"
  find "$rootfs/app" "$rootfs/usr/local/bin" -exec touch -h -d "$FIXED_MTIME" {} +
  safe_rmtree "$staging"
  chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" /usr/local/bin/node \
    -e 'require("node:crypto").randomUUID(); console.log("node", process.version)' >>"$LOG" 2>&1 \
    || fail "Node does not run inside the gateway rootfs (a shared library is probably missing; see ldd)."
  write_image gateway codemode.local/gateway:v1 "$rootfs" "$key" \
    '{"User":"65534:65534","Env":["'"$PATH_ENV"'","NODE_ENV=production"],"Entrypoint":["/usr/local/bin/node","/app/dist/src/entry.js"],"WorkingDir":"/app"}' \
    "$start"
}

# ---- datascience (issue 12) ---------------------------------------------------------------------
# The sandbox rootfs plus the PyPI wheels pinned in images/datascience/requirements.txt, installed
# by the build host's pip into /usr/local/lib/python3.11/dist-packages (pip itself is not shipped).
DATASCIENCE_DIR="$REPO_ROOT/images/datascience"
DATASCIENCE_SITE=usr/local/lib/python3.11/dist-packages
# The wheels of bookworm's CPython 3.11 on x86_64 (glibc 2.36): pip 23 does not widen a manylinux
# --platform to older glibc tags by itself, so every one is named.
datascience_pip_target() {
  local v
  printf -- '--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 --platform manylinux2014_x86_64'
  for v in $(seq 36 -1 17); do printf -- ' --platform manylinux_2_%s_x86_64' "$v"; done
}

build_datascience() {
  local start=$SECONDS key rootfs="$WORK/datascience-rootfs" wheels="$CACHE/wheels/datascience"
  local req="$DATASCIENCE_DIR/requirements.txt" site t0 target
  python3 -m pip --version >>"$LOG" 2>&1 || fail "The build host has no pip for python3 (apt-get install python3-pip)."
  rootfs_tar sandbox "${SANDBOX_PACKAGES[@]}"
  key="$(image_key datascience "rootfs=$ROOTFS_KEY" "$(sha256sum "$req" "$DATASCIENCE_DIR"/codemode_mpl.* | cut -d' ' -f1)")"
  cached datascience codemode.local/datascience:v1 "$key" && return 0
  read -r -a target <<<"$(datascience_pip_target)"
  # Downloaded once into the cache; pip checks every wheel against its pinned hash again below.
  t0=$SECONDS
  mkdir -p "$wheels"
  env -u PIP_FIND_LINKS python3 -m pip download --no-deps --require-hashes -r "$req" "${target[@]}" \
    --dest "$wheels" --progress-bar off >>"$LOG" 2>&1 \
    || fail "pip could not download the pinned wheels of $req into $wheels."
  say "datascience: wheels ready in $wheels ($(du -sh "$wheels" | cut -f1), $(( SECONDS - t0 ))s)"
  say "datascience: assembling image"
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  sandbox_user_lookup "$rootfs"
  site="$rootfs/$DATASCIENCE_SITE"
  # --no-compile: .pyc files are compiled below by the image's own python3, with the paths it sees.
  env -u PIP_FIND_LINKS python3 -m pip install --no-index --find-links "$wheels" --no-deps --require-hashes \
    -r "$req" "${target[@]}" --target "$site" --no-compile --no-warn-script-location >>"$LOG" 2>&1 \
    || fail "pip install --target of the pinned wheels failed."
  rm -rf "$site/bin"  # console scripts with the build host's shebang
  install -m 0644 "$DATASCIENCE_DIR/codemode_mpl.py" "$DATASCIENCE_DIR/codemode_mpl.pth" "$site/"
  mkdir -p "$rootfs/workspace" "$rootfs/tmp" "$rootfs/usr/local/share/codemode/matplotlib"
  chown 65534:65534 "$rootfs/workspace"
  chmod 0777 "$rootfs/workspace"
  chmod 1777 "$rootfs/tmp"
  # The font list, built once here so the first plot in a pod does not spend seconds on it.
  chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" HOME=/tmp MPLCONFIGDIR=/usr/local/share/codemode/matplotlib MPLBACKEND=Agg \
    python3 -c 'import matplotlib.font_manager as f; f.fontManager.findfont("DejaVu Sans")' >>"$LOG" 2>&1 \
    || fail "Matplotlib could not build its font list inside the datascience rootfs."
  find "$rootfs/usr/local" -exec touch -h -d "$FIXED_MTIME" {} +
  # unchecked-hash: valid whatever the mtimes; the root fs is read-only in the pod, so no writes.
  chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" python3 -m compileall -q --invalidation-mode unchecked-hash \
    "/$DATASCIENCE_SITE" >>"$LOG" 2>&1 || fail "Compiling the datascience packages' .pyc files failed."
  find "$rootfs/usr/local" -exec touch -h -d "$FIXED_MTIME" {} +
  touch -h -d "$FIXED_MTIME" "$rootfs/workspace" "$rootfs/tmp"
  # Smoke test: every package imports and a figure renders, with the config dir the pod has.
  PYTHONDONTWRITEBYTECODE=1 chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" HOME=/workspace MPLCONFIGDIR=/tmp/mpl-smoke \
    python3 -c '
import io, matplotlib, numpy, pandas, scipy, sklearn, sympy, seaborn, openpyxl, matplotlib.pyplot as plt
assert matplotlib.get_backend().lower() == "agg", matplotlib.get_backend()
buf = io.BytesIO(); plt.plot(numpy.arange(3)); plt.savefig(buf, format="png")
assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
print("datascience ok", numpy.__version__, pandas.__version__, matplotlib.__version__)' >>"$LOG" 2>&1 \
    || fail "The datascience rootfs failed its smoke test (an import or a plot)."
  rm -rf "$rootfs/tmp/mpl-smoke"
  write_image datascience codemode.local/datascience:v1 "$rootfs" "$key" \
    '{"User":"65534:65534","Env":["'"$PATH_ENV"'","HOME=/workspace","MPLCONFIGDIR=/tmp/matplotlib","MPLBACKEND=Agg"],"Cmd":["sleep","infinity"],"WorkingDir":"/workspace"}' \
    "$start"
}

# ---- stdio UpstreamServers (issue 11): our bridge, and a real stdio server to run behind it -----
# Pinned: the reference filesystem MCP server the e2e tests run through the bridge.
MCP_FILESYSTEM_VERSION=2026.8.31

# stdio-bridge: images/stdio-bridge as one static binary (/bridge), nothing else in the image.
build_stdio-bridge() {
  local start=$SECONDS key rootfs="$WORK/stdio-bridge-rootfs" src_dir="$REPO_ROOT/images/stdio-bridge" go_bin go_version src
  go_bin="$(command -v go || echo /usr/local/go/bin/go)"
  [[ -x "$go_bin" ]] || fail "Go is not installed; it is needed to build the stdio bridge (Go >= 1.26)."
  go_version="$("$go_bin" env GOVERSION 2>>"$LOG")" || fail "$go_bin does not run."
  src="$(cd "$src_dir" && find . -maxdepth 1 -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) ! -name '*_test.go' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
  key="$(image_key stdio-bridge "go=$go_version" "src=$src")"
  cached stdio-bridge codemode.local/stdio-bridge:v1 "$key" && return 0
  say "stdio-bridge: go build (CGO_ENABLED=0, static)"
  safe_rmtree "$rootfs"
  mkdir -p "$rootfs" "$CACHE/go/mod" "$CACHE/go/build"
  (cd "$src_dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" \
    "$go_bin" build -trimpath -ldflags='-s -w' -o "$rootfs/bridge" .) >>"$LOG" 2>&1 \
    || fail "go build of images/stdio-bridge failed."
  if ldd "$rootfs/bridge" >/dev/null 2>&1; then
    fail "The bridge binary is dynamically linked; it must be static to run in any server image."
  fi
  touch -h -d "$FIXED_MTIME" "$rootfs/bridge" "$rootfs"
  write_image stdio-bridge codemode.local/stdio-bridge:v1 "$rootfs" "$key" \
    '{"User":"65534:65534","Env":["'"$PATH_ENV"'"],"Entrypoint":["/bridge"],"WorkingDir":"/"}' "$start"
}

# mcp-filesystem: the sandbox rootfs (cached already; it has libstdc++ for Node) + npm's Node 22
# (the server's dependencies need Node >= 20; Debian's is 18) + @modelcontextprotocol/server-filesystem.
build_mcp-filesystem() {
  local start=$SECONDS key rootfs="$WORK/mcp-filesystem-rootfs" staging="$WORK/mcp-filesystem-npm" node_bin node_version
  node_bin="$REPO_ROOT/node_modules/node/bin/node"
  [[ -x "$node_bin" ]] || fail "$node_bin is missing; run npm ci in the repo root first (the image ships npm's Node 22)."
  node_version="$("$node_bin" --version 2>>"$LOG")" || fail "$node_bin does not run."
  rootfs_tar sandbox "${SANDBOX_PACKAGES[@]}"
  key="$(image_key mcp-filesystem "rootfs=$ROOTFS_KEY" "node=$node_version" "server-filesystem=$MCP_FILESYSTEM_VERSION")"
  cached mcp-filesystem codemode.local/mcp-filesystem:v1 "$key" && return 0
  say "mcp-filesystem: npm install @modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION"
  safe_rmtree "$staging"
  mkdir -p "$staging"
  (cd "$staging" && printf '{"name":"mcp-filesystem","private":true}\n' > package.json &&
    npm install --omit=dev --ignore-scripts --no-audit --no-fund --save-exact "@modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION") >>"$LOG" 2>&1 \
    || fail "npm install of @modelcontextprotocol/server-filesystem@$MCP_FILESYSTEM_VERSION failed."
  say "mcp-filesystem: assembling image"
  unpack_rootfs "$ROOTFS_TAR" "$rootfs"
  mkdir -p "$rootfs/app" "$rootfs/usr/local/bin" "$rootfs/tmp"
  cp -a "$staging/node_modules" "$staging/package.json" "$rootfs/app/"
  install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
  chown -R 0:0 "$rootfs/app"
  chmod -R a+rX,go-w "$rootfs/app"
  chmod 1777 "$rootfs/tmp"
  find "$rootfs/app" "$rootfs/usr/local/bin" "$rootfs/tmp" -exec touch -h -d "$FIXED_MTIME" {} +
  safe_rmtree "$staging"
  chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" /usr/local/bin/node -e \
    'require("node:fs").accessSync("/app/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"); console.log("node", process.version)' \
    >>"$LOG" 2>&1 || fail "Node or the filesystem server does not run inside the mcp-filesystem rootfs."
  write_image mcp-filesystem codemode.local/mcp-filesystem:v1 "$rootfs" "$key" \
    '{"User":"65534:65534","Env":["'"$PATH_ENV"'","HOME=/tmp"],"Entrypoint":["/usr/local/bin/node","/app/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"],"Cmd":["/tmp"],"WorkingDir":"/tmp"}' \
    "$start"
}

# ---- main -------------------------------------------------------------------------------------
targets=()
for arg in "${@:-all}"; do
  case "$arg" in
    all) targets+=(pause sandbox gateway datascience) ;;
    pause|sandbox|gateway|datascience) targets+=("$arg") ;;
    stdio-bridge|mcp-filesystem) targets+=("$arg") ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) printf '[images] FAILED: unknown image "%s" (expected pause, sandbox, gateway, datascience, stdio-bridge, mcp-filesystem or all).\n' "$arg" >&2; exit 2 ;;
  esac
done
[[ "$(id -u)" == 0 ]] || { printf '[images] FAILED: build.sh must run as root (debootstrap and chroot need it).\n' >&2; exit 1; }
for tool in python3 gcc tar sha256sum flock; do
  command -v "$tool" >/dev/null || { printf '[images] FAILED: %s is not installed.\n' "$tool" >&2; exit 1; }
done

mkdir -p "$OUT" "$WORK" "$LOGS" "$ROOTFS_CACHE"
exec 9>"$OUT/.lock"
flock -w 3600 9 || { printf '[images] FAILED: another build.sh holds %s.\n' "$OUT/.lock" >&2; exit 1; }

failed=()
declare -A seen=()
for t in "${targets[@]}"; do
  [[ -n "${seen[$t]:-}" ]] && continue
  seen[$t]=1
  LOG="$LOGS/$t.log"
  : > "$LOG"
  set +e
  (
    set -eE
    trap 'fail "build.sh stopped on an unexpected error at line $LINENO: $BASH_COMMAND."' ERR
    "build_$t"
  )
  rc=$?
  set -e
  # A failed target keeps its previous archive (import.sh warns that it is stale).
  if (( rc == 0 )); then
    rm -f "$OUT/$t.oci.tar.failed"
  else
    failed+=("$t")
    [[ -f "$OUT/$t.oci.tar" ]] && printf 'last build failed; see %s\n' "$LOG" > "$OUT/$t.oci.tar.failed"
  fi
done

if (( ${#failed[@]} )); then
  say "not built: ${failed[*]} (the other images are usable)"
  exit 1
fi
