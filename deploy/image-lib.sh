# Sourced by the image scripts (train-image.sh, service-images.sh): an image's root filesystem
# made from this machine's files with umoci, then pushed with skopeo; nothing is downloaded.

# Starts an image in a fresh folder: sets image_work, image_layout, image_bundle, image_root.
image_start() {
  image_work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")"
  image_layout="$image_work/layout" image_bundle="$image_work/bundle"
  image_root="$image_work/bundle/rootfs"
  umoci init --layout "$image_layout"
  umoci new --image "$image_layout:build"
  umoci unpack --rootless --image "$image_layout:build" "$image_bundle" >/dev/null
}

# image_add_libraries PROGRAM...: every library each program loads, and the dynamic loader,
# into the image where the program looks for them (nothing for a static one).
image_add_libraries() {
  local p
  for p in "$@"; do
    # A static program (tessera-sandbox-init) loads nothing: ldd says so and fails.
    { ldd "$p" 2>/dev/null || true; } | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
  done | sort -u | while read -r lib; do cp -L --parents "$lib" "$image_root/"; done
}

# image_add_programs BIN_DIR PROGRAM...: each program into the image, those of BIN_DIR in
# /usr/local/bin (stripped), others where they are here, with their libraries.
image_add_programs() {
  local bin="$1" p
  shift
  mkdir -p "$image_root/usr/local/bin"
  for p in "$@"; do
    case "$p" in
      "$bin"/*) cp "$p" "$image_root/usr/local/bin/" && strip "$image_root/usr/local/bin/${p##*/}" ;;
      *) cp -L --parents "$p" "$image_root/" ;;
    esac
  done
  image_add_libraries "$@"
}

# image_push DESTINATION [umoci config flags...]: the image, configured, to a skopeo destination
# (docker://HOST/NAME:TAG, over plain HTTP for a loopback registry; or oci:DIR:TAG), and the
# folder removed.
image_push() {
  local dest="$1" tls=true
  shift
  case "$dest" in docker://127.0.0.1:* | docker://localhost:*) tls=false ;; esac
  umoci repack --image "$image_layout:build" "$image_bundle"
  umoci config --image "$image_layout:build" "$@" >/dev/null
  case "$dest" in
    docker://*) skopeo copy --quiet --dest-tls-verify="$tls" "oci:$image_layout:build" "$dest" ;;
    *) skopeo copy --quiet "oci:$image_layout:build" "$dest" ;;
  esac
  rm -rf "$image_work"
}
