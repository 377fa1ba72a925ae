#!/usr/bin/env python3
"""Turn a rootfs directory into a single-layer OCI image archive (no Docker needed).

    oci.py ROOTFS REF OUT.tar CONFIG.json

ROOTFS    directory to pack as the only layer (owners kept numerically)
REF       full image reference, e.g. codemode.local/pause:v1
OUT.tar   the OCI image layout, as a tar that `ctr images import` accepts
CONFIG    JSON object with the OCI image "config" section (User, Env, Entrypoint, Cmd, ...)

The layer tar is made by GNU tar (sorted names, numeric owners, no atime/ctime; mtimes
are kept so Python's .pyc files stay valid), gzipped with a zero header time. Every other
file in the archive has fixed metadata, so the same rootfs gives the same digests.
Prints the manifest digest and sizes as JSON on stdout.
"""
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

CREATED = "1970-01-01T00:00:00Z"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_layer(rootfs, tmpdir):
    """Return (path, digest, size, diff_id) of the gzipped layer."""
    names = sorted(
        os.path.relpath(os.path.join(d, n), rootfs)
        for d, dirs, files in os.walk(rootfs)
        for n in dirs + files
    )
    listing = os.path.join(tmpdir, "files")
    with open(listing, "wb") as f:
        for n in names:
            f.write(os.fsencode(n) + b"\0")
    raw = os.path.join(tmpdir, "layer.tar")
    subprocess.run(
        ["tar", "-C", rootfs, "--create", "--file", raw, "--null", "--no-recursion",
         "--files-from", listing, "--numeric-owner", "--format=posix",
         "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime"],
        check=True,
    )
    diff_id = "sha256:" + sha256_file(raw)
    gz = os.path.join(tmpdir, "layer.tar.gz")
    with open(raw, "rb") as src, open(gz, "wb") as out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as z:
            shutil.copyfileobj(src, z, 1 << 20)
    os.unlink(raw)
    return gz, sha256_file(gz), os.path.getsize(gz), diff_id


def blob(data):
    return hashlib.sha256(data).hexdigest(), len(data)


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, name):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = 0
    tar.addfile(info)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    rootfs, ref, out, config_path = sys.argv[1:]
    with open(config_path) as f:
        image_config = json.load(f)
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "latest"

    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
        layer_path, layer_digest, layer_size, diff_id = make_layer(rootfs, tmp)

        config = {
            "created": CREATED,
            "architecture": "amd64",
            "os": "linux",
            "config": image_config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": CREATED, "created_by": "codemode test/cluster/images/build.sh"}],
        }
        config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        config_digest, config_size = blob(config_bytes)

        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": "sha256:" + config_digest,
                "size": config_size,
            },
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": "sha256:" + layer_digest,
                "size": layer_size,
            }],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
        manifest_digest, manifest_size = blob(manifest_bytes)

        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": "sha256:" + manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": ref,
                },
            }],
        }
        index_bytes = json.dumps(index, sort_keys=True, indent=2).encode() + b"\n"

        partial = out + ".partial"
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes(tar, "index.json", index_bytes)
            add_dir(tar, "blobs")
            add_dir(tar, "blobs/sha256")
            for digest, data in sorted([(config_digest, config_bytes), (manifest_digest, manifest_bytes)]):
                add_bytes(tar, "blobs/sha256/" + digest, data)
            info = tarfile.TarInfo("blobs/sha256/" + layer_digest)
            info.size = layer_size
            info.mode = 0o644
            info.mtime = 0
            with open(layer_path, "rb") as f:
                tar.addfile(info, f)
        os.replace(partial, out)

    json.dump({
        "ref": ref,
        "tag": tag,
        "manifest": "sha256:" + manifest_digest,
        "config": "sha256:" + config_digest,
        "layer": "sha256:" + layer_digest,
        "layer_size": layer_size,
        "archive_size": os.path.getsize(out),
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
