// The program the file tools run in a session pod (python3 is in every sandbox image). It walks
// the path one component at a time from a descriptor of /workspace, opening each with
// O_NOFOLLOW, so no path is checked first and opened later: user code swapping a component for
// a symlink between the two steps (a race the old realpath-then-cat script lost) meets a
// refused open, never a file outside. Symlinks are still followed when they stay inside
// /workspace: the walker reads them itself (readlink relative to the held descriptor) and goes
// on from there, so `..` and absolute targets are judged against the tree it holds.
// Exit codes and messages are those of the shell scripts this replaces (files.ts maps them).
// A listing is NUL-separated records, which no file name can break (files.ts parses them).
export const FILE_OPS_SCRIPT = String.raw`
import os, stat, sys
ROOT = b"/workspace"
F = os.O_NOFOLLOW | os.O_CLOEXEC
op, arg = sys.argv[1], sys.argv[3] if len(sys.argv) > 3 else ""
def die(code, msg):
    if op == "write":
        # The content comes on stdin: read it to its end first, or the exec may not answer before
        # the gateway's watchdog (the runtime holds the exit status while stdin is unread).
        try:
            while sys.stdin.buffer.read(65536): pass
        except OSError: pass
    sys.stderr.write(msg + "\n"); sys.exit(code)
shown = sys.argv[2]
path = os.fsencode(shown)
class Outside(Exception):
    pass
def parts(p):
    if p.startswith(ROOT + b"/") or p == ROOT:
        p = p[len(ROOT):]
    elif p.startswith(b"/"):
        raise Outside(p)
    return [c for c in p.split(b"/") if c not in (b"", b".")]
def walk(comps, create=False):
    """Opens every directory of comps from the root; returns (stack of fds, last name or None)."""
    stack = [os.open(ROOT, os.O_RDONLY | os.O_DIRECTORY | F)]
    todo = list(comps)
    hops = 0
    while todo:
        c = todo.pop(0)
        if c == b"..":
            if len(stack) == 1:
                raise Outside(b"..")
            os.close(stack.pop()); continue
        if not todo:
            st = lstat(stack[-1], c)
            if st is None or not stat.S_ISLNK(st.st_mode):
                return stack, c
        else:
            try:
                stack.append(os.open(c, os.O_RDONLY | os.O_DIRECTORY | F, dir_fd=stack[-1])); continue
            except FileNotFoundError:
                if not create: raise
                os.mkdir(c, 0o777, dir_fd=stack[-1])
                todo.insert(0, c); continue
            except (NotADirectoryError, OSError) as e:
                st = lstat(stack[-1], c)
                if st is None or not stat.S_ISLNK(st.st_mode): raise e
        hops += 1
        if hops > 40:
            die(2, "too many levels of symbolic links: " + shown)
        target = os.readlink(c, dir_fd=stack[-1])
        if target.startswith(b"/"):
            rest = parts(target)
            for fd in stack[1:]: os.close(fd)
            del stack[1:]
            todo[0:0] = rest
        else:
            todo[0:0] = [x for x in target.split(b"/") if x not in (b"", b".")]
    return stack, None
def lstat(dfd, name):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
def outside():
    die(3, shown + " resolves outside /workspace (symlinks may not leave it)")
try:
    stack, name = walk(parts(path), create=(op == "write"))
except Outside:
    outside()
except (FileNotFoundError, NotADirectoryError):
    die(2, "no such file or directory: " + shown)
except OSError as e:
    die(6 if op == "write" else 2, "cannot open " + shown + ": " + e.strerror)
d = stack[-1]
if op == "read":
    if name is None: die(4, "not a regular file: " + shown)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | F, dir_fd=d)
    except FileNotFoundError:
        die(2, "no such file or directory: " + shown)
    except OSError:
        die(4, "not a regular file: " + shown)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode): die(4, "not a regular file: " + shown)
    limit = int(arg)
    if st.st_size > limit: die(5, "the file is %d bytes; the limit is %d bytes" % (st.st_size, limit))
    out, left = sys.stdout.buffer, limit + 1
    while left > 0:
        b = os.read(fd, min(left, 65536))
        if not b: break
        out.write(b); left -= len(b)
    if left <= 0: die(5, "the file grew past the limit of %d bytes while it was read" % limit)
    out.flush()
elif op == "write":
    if name is None: die(4, shown + " is a directory")
    st = lstat(d, name)
    if st is not None and stat.S_ISDIR(st.st_mode): die(4, shown + " is a directory")
    # A short name of its own (the file's name and a suffix could pass NAME_MAX, 255 bytes), and
    # removed on failure only once it is ours (one that was there already is someone's file).
    tmp, fd = b".codemode-write-%d" % os.getpid(), None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | F, 0o666, dir_fd=d)
        size = 0
        with os.fdopen(fd, "wb") as f:
            while True:
                b = sys.stdin.buffer.read(65536)
                if not b: break
                f.write(b); size += len(b)
        os.rename(tmp, name, src_dir_fd=d, dst_dir_fd=d)
    except OSError:
        if fd is not None:
            try: os.unlink(tmp, dir_fd=d)
            except OSError: pass
        die(7, "could not write " + shown)
    print(size)
elif op == "list":
    if name is not None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | F, dir_fd=d)
        except FileNotFoundError:
            die(2, "no such file or directory: " + shown)
        except OSError:
            die(4, "not a directory: " + shown)
    else:
        fd = os.dup(d)
    rows = []
    with os.scandir(fd) as it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            m = st.st_mode
            t = "l" if stat.S_ISLNK(m) else "d" if stat.S_ISDIR(m) else "f" if stat.S_ISREG(m) else "o"
            rows.append((os.fsencode(e.name), t, st.st_size))
    rows.sort()
    out = sys.stdout.buffer
    # type NUL size NUL name NUL: a name holds no NUL, so it cannot end its record or forge one.
    for n, t, s in rows[: int(arg)]:
        out.write(b"%s\0%d\0%s\0" % (t.encode(), s, n))
    out.flush()
`;
