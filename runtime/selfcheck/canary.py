"""The sandbox canary: runs inside a canary sandbox pod and reports, as ONE JSON line on stdout,
what a sandbox can observe and reach. The operator decides what is enforced (src/selfcheck/);
this program only measures, and never fails: every probe catches its own errors.

Delivered on the exec stream's stdin (`python3 - <targets-json>`), never on a command line with
user input. argv[1] is JSON written by the operator:
  {"timeout": 1.5, "max_processes": 128,
   "targets": [{"name": "api_server", "host": "10.0.0.1", "port": 443, "proto": "tls"}, ...]}
The canary adds what only the inside knows: the API server from KUBERNETES_SERVICE_HOST/PORT and
the nameservers of /etc/resolv.conf.

A network probe counts as `reply` only when bytes came BACK (a TLS ClientHello answered, an
HTTP request answered, an echo echoed, a DNS answer): a connect that succeeds but exchanges
nothing is not reachability, and a policy that rejects with a TCP reset is still a denial.
"""
import errno
import json
import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time

PIDS_FILES = ("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max")
MEMORY_FILES = ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max")
TOKEN_DIRS = ("/var/run/secrets/kubernetes.io/serviceaccount", "/run/secrets/kubernetes.io/serviceaccount")
MAX_TARGETS = 16


def read_first(paths):
    for path in paths:
        try:
            with open(path) as f:
                return {"path": path, "value": f.read(64).strip()}
        except OSError:
            continue
    return None


def errname(e):
    code = getattr(e, "errno", None)
    return errno.errorcode.get(code, type(e).__name__) if isinstance(code, int) else type(e).__name__


def fork_probe(limit):
    """Forks up to `limit` idle children and reports after how many fork() failed (None: never).
    Shows a process cap that a cgroup ABOVE the container enforces (the kubelet's pod PID limit
    sits on the pod's cgroup, which a container's own pids.max does not show). Bounded: at most
    `limit` children, all killed before returning."""
    children = []
    failed_after = None
    error = None
    try:
        for _ in range(limit):
            try:
                pid = os.fork()
            except OSError as e:
                failed_after, error = len(children), errname(e)
                break
            if pid == 0:
                try:
                    signal.pause()
                finally:
                    os._exit(0)
            children.append(pid)
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return {"attempted": limit, "failed_after": failed_after, "error": error}


def write_probe(directory):
    path = os.path.join(directory, ".codemode-canary-%d" % os.getpid())
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        return errname(e)
    os.close(fd)
    try:
        os.unlink(path)
    except OSError:
        pass
    return "written"


def readonly_root():
    result = {}
    for d in ("/", "/usr"):
        try:
            ro = bool(os.statvfs(d).f_flag & os.ST_RDONLY)
        except OSError:
            ro = None
        result[d] = {"readonly_mount": ro, "write": write_probe(d)}
    return result


def client_hello(host):
    """The bytes of a TLS ClientHello, produced without a socket (memory BIOs)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=None)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def dns_query():
    # id, flags (recursion desired), 1 question: "kubernetes.default.svc.cluster.local" A IN.
    labels = b"".join(bytes([len(p)]) + p for p in b"kubernetes.default.svc.cluster.local".split(b"."))
    return struct.pack(">HHHHHH", 0x4344, 0x0100, 1, 0, 0, 0) + labels + b"\x00" + struct.pack(">HH", 1, 1)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def probe_udp_dns(host, port, timeout):
    s = socket.socket(family(host), socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(dns_query(), (host, port))
        data, _ = s.recvfrom(512)
        return ("reply", "%d bytes" % len(data)) if data else ("no_reply", "empty datagram")
    finally:
        s.close()


def probe_tcp(host, port, proto, timeout):
    if proto == "tls":
        payload = client_hello(host)
    elif proto == "http":
        payload = b"GET / HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n"
    else:
        payload = b"codemode-canary\n"
    deadline = time.monotonic() + timeout
    s = socket.socket(family(host), socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        s.settimeout(max(0.05, deadline - time.monotonic()))
        s.sendall(payload)
        data = s.recv(1)
        # Connected, sent, and the peer closed without a byte: nothing was exchanged.
        return ("reply", "answered") if data else ("no_reply", "closed without data")
    finally:
        s.close()


def probe(target, timeout, out):
    host, port, proto = target["host"], int(target["port"]), target["proto"]
    entry = {"name": target["name"], "address": "%s:%d" % (host, port), "proto": proto}
    try:
        if proto == "dns":
            entry["outcome"], entry["detail"] = probe_udp_dns(host, port, timeout)
        else:
            entry["outcome"], entry["detail"] = probe_tcp(host, port, proto, timeout)
    except socket.timeout:
        entry["outcome"], entry["detail"] = "no_reply", "timeout"
    except Exception as e:  # any failure to exchange data is a denial; say which
        entry["outcome"], entry["detail"] = "no_reply", errname(e)
    out.append(entry)


def inside_targets():
    targets = []
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if host and port and port.isdigit():
        targets.append({"name": "api_server", "host": host, "port": int(port), "proto": "tls"})
    try:
        with open("/etc/resolv.conf") as f:
            for line in f.read(65536).splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "nameserver":
                    targets.append({"name": "dns", "host": parts[1].split("%")[0], "port": 53, "proto": "dns"})
    except OSError:
        pass
    return targets


def network(targets, timeout):
    results = []
    threads = [threading.Thread(target=probe, args=(t, timeout, results), daemon=True) for t in targets[:MAX_TARGETS]]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout + 1.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return list(results)


def main():
    try:
        args = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    except ValueError:
        args = {}
    timeout = min(max(float(args.get("timeout", 1.5)), 0.2), 5.0)
    max_processes = min(max(int(args.get("max_processes", 128)), 1), 4096)
    targets = [t for t in args.get("targets", []) if isinstance(t, dict)] + inside_targets()
    report = {
        "v": 1,
        "uid": os.getuid(),
        "pids_max": read_first(PIDS_FILES),
        "memory_limit": read_first(MEMORY_FILES),
        # Before any thread starts: fork() in a threaded process is unsafe.
        "fork_probe": fork_probe(max_processes),
        "root": readonly_root(),
        "service_account_token": any(os.path.exists(d) for d in TOKEN_DIRS),
    }
    report["network"] = network(targets, timeout)
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
