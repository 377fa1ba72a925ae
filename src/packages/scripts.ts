// The two fixed programs of an install (python3 standard library; python3 is in every profile's
// image). FETCHER_SCRIPT runs in the fetcher pod — the profile's image, so resolution sees the
// same Python version, platform and preinstalled packages as the session — and is the only code
// that talks to the index: `prepare` fetches pip or npm itself (pinned by hash: the images carry
// neither), `resolve` prints what the gateway reads of pip's installation report or npm's lockfile, `fetch` downloads
// exactly the pinned set the gateway approved (hashes checked by pip --require-hashes and npm's
// lockfile integrity), unpacks it offline (wheels only and --ignore-scripts: no package code runs)
// and packs it into one archive that `read` hands out in chunks. SESSION_SCRIPT runs in the
// session's pod: `append` writes one chunk (the first also removes archives that failed installs
// left behind), `extract` checks the archive's sha256 and unpacks it, and removes it whatever
// happens; `discard` removes the archive of a delivery that failed. Arguments come from the
// gateway, already validated, except the index URL: it is the first line of stdin (it may hold
// credentials, and an exec's arguments are kept in the API server's audit log); messages go to
// stderr for the caller.
export const FETCHER_SCRIPT = String.raw`
import base64, hashlib, json, os, ssl, subprocess, sys, tarfile, urllib.parse, urllib.request
W = "/tmp/fetch"
ENV = dict(os.environ, HOME=W + "/home", PIP_CONFIG_FILE="/dev/null", PIP_DISABLE_PIP_VERSION_CHECK="1",
           PIP_NO_INPUT="1", npm_config_cache=W + "/npm-cache", npm_config_userconfig="/dev/null",
           npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
def die(code, msg):
    sys.stderr.write(msg[-3000:] + "\n"); sys.exit(code)
AUTH = {}
def bare(url):
    """The URL without its user:password@ (a private index's credentials), kept for its host as an
    Authorization header: urllib would take them for part of the host name, and a message quoting
    the URL would show them to the user, the session's status and its Events."""
    u = urllib.parse.urlsplit(url)
    if "@" not in u.netloc:
        return url
    cred, _, host = u.netloc.rpartition("@")
    AUTH[host] = "Basic " + base64.b64encode(urllib.parse.unquote(cred).encode()).decode()
    return urllib.parse.urlunsplit((u.scheme, host, u.path, u.query, u.fragment))
def get(url, limit, accept=None):
    url = bare(url)
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    if urllib.parse.urlsplit(url).netloc in AUTH:
        # Not sent on to where the index redirects (a CDN): only to the host they were given for.
        req.add_unredirected_header("Authorization", AUTH[urllib.parse.urlsplit(url).netloc])
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=W + "/ca.pem"), timeout=60) as r:
            data, final = r.read(limit + 1), r.geturl()
    except Exception as e:
        die(3, "could not fetch %s: %s" % (url, e))
    if len(data) > limit:
        die(3, "%s is larger than %d bytes" % (url, limit))
    return data, final
def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip() or p.stdout.decode("utf-8", "replace").strip()
        die(4, err)
    return p.stdout
def pip(*args):
    return run([sys.executable, W + "/pip.whl/pip", *args, "--no-cache-dir", "--cert", W + "/ca.pem"])
def npm(*args):
    return run(["node", W + "/npm/package/bin/npm-cli.js", *args, "--cafile", W + "/ca.pem"], cwd=W + "/n")
def stdin_index():
    """The index URL, the first line of stdin: never an argument, for an exec's arguments are in its
    request's URL, which the API server's audit log keeps, and a private index's URL holds its
    credentials."""
    line = sys.stdin.buffer.readline(8192).decode("utf-8", "replace").strip()
    if not line.startswith(("http://", "https://")):
        die(2, "the index URL is missing from the first line of stdin")
    return line
def prepare(eco, tool, digest):
    index = stdin_index()
    os.makedirs(W + "/home", exist_ok=True)
    with open(W + "/ca.pem", "wb") as f:
        f.write(sys.stdin.buffer.read(4 << 20))
    if eco == "pypi":
        body, base = get(index.rstrip("/") + "/pip/", 16 << 20, "application/vnd.pypi.simple.v1+json")
        try:
            url = next(f["url"] for f in json.loads(body)["files"] if f.get("filename") == tool)
        except Exception:
            die(3, "the index at %s does not offer %s (needed to resolve packages)" % (bare(index), tool))
        data, _ = get(urllib.parse.urljoin(base, url), 64 << 20)
        if hashlib.sha256(data).hexdigest() != digest:
            die(3, "%s from the index does not have the expected sha256" % tool)
        with open(W + "/pip.whl", "wb") as f:
            f.write(data)
    else:
        data, _ = get(index.rstrip("/") + "/npm/-/" + tool, 64 << 20)
        if "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode() != digest:
            die(3, "%s from the registry does not have the expected sha512" % tool)
        with open(W + "/npm.tgz", "wb") as f:
            f.write(data)
        with tarfile.open(W + "/npm.tgz") as t:
            for m in t.getmembers():
                if m.name.startswith("/") or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
                    die(3, "unexpected member %r in %s" % (m.name, tool))
            t.extractall(W + "/npm")
        os.makedirs(W + "/n", exist_ok=True)
        with open(W + "/n/package.json", "w") as f:
            json.dump({"name": "codemode-fetch", "version": "0.0.0", "private": True}, f)
def pick(d, keys):
    return {k: d[k] for k in keys if isinstance(d, dict) and k in d}
def slim_pip(i):
    d = i.get("download_info") if isinstance(i, dict) else None
    info = pick(d, ("url",))
    if isinstance(d, dict) and isinstance(d.get("archive_info"), dict):
        info["archive_info"] = {k: pick(v, ("sha256",)) for k, v in d["archive_info"].items() if k == "hashes"}
    return {"metadata": pick(i.get("metadata") if isinstance(i, dict) else None, ("name", "version")), "download_info": info}
def resolve(eco, specs):
    # Only what the gateway reads, compact: pip's report carries each package's whole metadata
    # (its README too) and the gateway parses the answer in memory, so it is kept small.
    index = stdin_index()
    if eco == "pypi":
        pip("install", "--dry-run", "--quiet", "--only-binary=:all:", "--report", W + "/report.json", "--index-url", index, *specs)
        with open(W + "/report.json") as f:
            out = {"install": [slim_pip(i) for i in json.load(f).get("install", [])]}
    else:
        npm("install", "--package-lock-only", "--ignore-scripts", "--registry", index, *specs)
        with open(W + "/n/package-lock.json") as f:
            packages = json.load(f).get("packages", {})
        out = {"packages": {k: pick(v, ("name", "version", "resolved", "integrity", "link")) for k, v in packages.items()}}
    json.dump(out, sys.stdout, separators=(",", ":"))
def dir_bytes(top):
    total = 0
    for root, dirs, files in os.walk(top):
        if "node_modules" in dirs:
            dirs.remove("node_modules")
        for n in files:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
    return total
def fetch(eco, max_one, max_all):
    index = stdin_index()
    pins = json.loads(sys.stdin.buffer.read(1 << 20))
    rows = []
    if eco == "pypi":
        with open(W + "/req.txt", "w") as f:
            for p in pins:
                f.write("%s==%s --hash=sha256:%s\n" % (p["name"], p["version"], p["sha256"]))
        pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "--require-hashes", "-d", W + "/dl", "-r", W + "/req.txt", "--index-url", index)
        for n in sorted(os.listdir(W + "/dl")):
            rows.append({"file": n, "bytes": os.path.getsize(os.path.join(W + "/dl", n))})
        check(rows, max_one, max_all)
        pip("install", "--quiet", "--no-index", "--find-links", W + "/dl", "--no-deps", "--require-hashes", "--no-compile",
            "--no-warn-script-location", "--target", W + "/t", "-r", W + "/req.txt")
        top, arc = W + "/t", "."
        # The limit is on what lands in the session: a wheel unpacks to many times its size.
        unpacked = dir_bytes(top)
        if unpacked > max_all:
            die(5, "the packages take %d bytes unpacked; the limit is %d" % (unpacked, max_all))
    else:
        npm("ci", "--ignore-scripts", "--registry", index)
        with open(W + "/n/package-lock.json") as f:
            keys = [k for k in json.load(f).get("packages", {}) if k.startswith("node_modules/")]
        for k in sorted(keys):
            d = os.path.join(W + "/n", k)
            if os.path.isdir(d):
                rows.append({"file": k, "bytes": dir_bytes(d)})
        check(rows, max_one, max_all)
        top, arc = W + "/n/node_modules", "node_modules"
        unpacked = sum(r["bytes"] for r in rows)
    with tarfile.open(W + "/out.tgz", "w:gz", compresslevel=3) as t:
        t.add(top, arcname=arc)
    h = hashlib.sha256()
    with open(W + "/out.tgz", "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    size = os.path.getsize(W + "/out.tgz")
    if size > max_all:
        die(5, "the packages take %d bytes packed; the limit is %d" % (size, max_all))
    json.dump({"packages": rows, "unpackedBytes": unpacked, "archiveBytes": size, "sha256": h.hexdigest()}, sys.stdout)
def check(rows, max_one, max_all):
    for r in rows:
        if r["bytes"] > max_one:
            die(5, "%s is %d bytes; the largest package allowed is %d bytes" % (r["file"], r["bytes"], max_one))
    total = sum(r["bytes"] for r in rows)
    if total > max_all:
        die(5, "the packages take %d bytes together; the limit is %d" % (total, max_all))
def read(offset, length):
    with open(W + "/out.tgz", "rb") as f:
        f.seek(offset)
        sys.stdout.buffer.write(f.read(length))
op = sys.argv[1]
if op == "prepare":
    prepare(*sys.argv[2:5])
elif op == "resolve":
    resolve(sys.argv[2], sys.argv[3:])
elif op == "fetch":
    fetch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif op == "read":
    read(int(sys.argv[2]), int(sys.argv[3]))
else:
    die(2, "unknown operation " + op)
`;

export const SESSION_SCRIPT = String.raw`
import csv, hashlib, os, re, shutil, stat, sys, tarfile, time
def die(code, msg):
    sys.stderr.write(msg + "\n"); sys.exit(code)
def parts(name):
    return (name[2:] if name.startswith("./") else name).split("/")
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
def project(info):
    return norm(info[: -len(".dist-info")].rsplit("-", 1)[0])
def remove_record(dest, info):
    root = os.path.realpath(dest)
    try:
        with open(os.path.join(dest, info, "RECORD"), newline="") as f:
            rows = [r[0] for r in csv.reader(f) if r]
    except OSError:
        rows = []
    for rel in rows:
        p = os.path.realpath(os.path.join(dest, rel))
        if p.startswith(root + os.sep) and os.path.isfile(p):
            os.unlink(p)
    shutil.rmtree(os.path.join(dest, info), ignore_errors=True)
def replace(dest, names):
    """An upgrade replaces: the old version's files go first (a wheel's RECORD lists them; an npm
    package is its directory), so no stale module or second dist-info is left beside the new."""
    new = {parts(n)[0] for n in names if parts(n)[0].endswith(".dist-info")}
    for old in os.listdir(dest):
        if old.endswith(".dist-info") and old not in new and project(old) in {project(x) for x in new}:
            remove_record(dest, old)
    for n in names:
        p = parts(n)
        if p[0] == "node_modules" and (len(p) == 2 and not p[1].startswith("@") or len(p) == 3 and p[1].startswith("@")):
            shutil.rmtree(os.path.join(dest, *p), ignore_errors=True)
def discard(path):
    """Removes the archive itself: a link is unlinked, not followed; a directory is left alone."""
    try:
        os.unlink(path)
    except OSError:
        pass
def sweep(path, max_age):
    """Archives of installs that ended without removing theirs (the gateway died mid-way). One is
    written to only while its install runs, which ends by the install timeout, so one not written
    to for longer is nobody's. Sandbox code owns this directory and may put anything there under
    such a name: only files and links are removed, never followed."""
    top = os.path.dirname(path)
    before = time.time() - max_age
    try:
        names = os.listdir(top)
    except OSError:
        return
    for n in names:
        p = os.path.join(top, n)
        if not (n.startswith(".incoming-") and n.endswith(".tgz")) or p == path:
            continue
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and st.st_mtime < before:
            discard(p)
op, path = sys.argv[1], sys.argv[2]
if op == "append":
    # The chunk is read before anything can fail: an exec whose program exits with its stdin unread
    # often gets no answer at all, and the install would wait for its deadline.
    data = sys.stdin.buffer.read()
    offset = int(sys.argv[3])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if offset == 0 and len(sys.argv) > 4:
        sweep(path, int(sys.argv[4]))
    with open(path, "r+b" if offset else "wb") as f:
        f.truncate(offset)
        f.seek(offset)
        f.write(data)
    print(offset + len(data))
elif op == "extract":
    dest, want = sys.argv[3], sys.argv[4]
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
        if h.hexdigest() != want:
            die(3, "the packages arrived damaged (sha256 mismatch)")
        os.makedirs(dest, exist_ok=True)
        root = os.path.realpath(dest)
        def inside(p):
            return p == root or p.startswith(root + os.sep)
        with tarfile.open(path, "r:gz") as t:
            members = [m for m in t.getmembers() if not m.name.startswith("/") and ".." not in parts(m.name) and (m.isfile() or m.isdir() or m.issym())]
            replace(dest, [m.name for m in members])
            for m in members:
                # Names alone are not enough: a link (the archive's own, extracted before, or one
                # already in the workspace) could lead a later entry out. Each is checked where it
                # lands as the disk is now; a link may only point inside the destination.
                where = os.path.join(dest, *parts(m.name))
                if not inside(os.path.realpath(os.path.dirname(where))) or not m.issym() and not inside(os.path.realpath(where)):
                    die(3, "an entry of the packages would be written outside " + dest)
                if m.issym() and not inside(os.path.realpath(os.path.join(os.path.dirname(where), m.linkname))):
                    die(3, "the packages hold a link that leads outside " + dest)
                t.extract(m, dest, set_attrs=False)
    finally:
        discard(path)
    print(len(members))
elif op == "discard":
    discard(path)
else:
    die(2, "unknown operation " + op)
`;
