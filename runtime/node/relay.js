'use strict';
// Relay between an exec stream and the kernel's socket (runtime/README.md):
//   node relay.js /tmp/.codemode/kernel.sock
// Copies stdin to the socket and the socket to stdout, byte for byte; exits when either side
// closes. Exit codes: 0 closed, 2 usage, 3 cannot connect. Node 18+, built-ins only.
// A pod is Ready as soon as its container started, possibly before the kernel listens: the
// relay waits up to CONNECT_WAIT_MS for the socket.
const net = require('node:net');

const CONNECT_WAIT_MS = 10000;
const path = process.argv[2];
if (!path || process.argv.length !== 3) {
  process.stderr.write('usage: relay.js SOCKET_PATH\n');
  process.exit(2);
}
const deadline = Date.now() + CONNECT_WAIT_MS;

function connect() {
  const sock = net.connect(path);
  sock.on('error', (err) => {
    if ((err.code === 'ENOENT' || err.code === 'ECONNREFUSED') && Date.now() < deadline) {
      // A cold run waits for this: poll finely (an attempt costs microseconds; every 5 ms cost a cold
      // run ~2.5 ms on average, docs/performance.md, 2026-12-03 18:20-19:00).
      setTimeout(connect, 1);
      return;
    }
    process.stderr.write(`relay: kernel socket ${path}: ${err.message}\n`);
    process.exit(3);
  });
  sock.on('connect', () => {
    process.stdin.pipe(sock);
    // Writes to a pipe are synchronous on Linux, so nothing is lost when we exit on close.
    sock.pipe(process.stdout);
    sock.on('close', () => process.exit(0));
  });
}

connect();
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
