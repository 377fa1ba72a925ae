// Deterministic names for the objects the controller creates, so a second reconcile finds the
// pod the first one created instead of making another (controller-runtime's advice).
import { createHash, randomBytes } from 'node:crypto';

const MAX_LABEL = 63;
const HASH_LEN = 8;
const POD_PREFIX = 'sbr-';
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

function shortHash(s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, HASH_LEN);
}

/** Cuts `base` so that `<base>-<hash>` fits in 63 characters and still ends alphanumeric. */
function truncateWithHash(base: string, original: string): string {
  const head = base.slice(0, MAX_LABEL - HASH_LEN - 1).replace(/[^a-z0-9]+$/i, '');
  return `${head}-${shortHash(original)}`;
}

/**
 * `sbr-<runName>` when that is a valid DNS-1123 label of at most 63 characters. Otherwise (long
 * names, or names with dots, which are valid object names but not labels) the name is
 * sanitized, cut, and suffixed with 8 hex of sha256(runName), so distinct runs never collide.
 */
export function podNameForRun(runName: string): string {
  return podName(POD_PREFIX, runName);
}

/** `sbs-<sessionName>`, with the same rules as podNameForRun. */
export function podNameForSession(sessionName: string): string {
  return podName('sbs-', sessionName);
}

function podName(prefix: string, objectName: string): string {
  const plain = `${prefix}${objectName}`;
  if (plain.length <= MAX_LABEL && DNS_LABEL.test(plain)) return plain;
  const sanitized = `${prefix}${objectName.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;
  return truncateWithHash(sanitized, objectName);
}

/**
 * Value of the codemode.dev/run label for a run: the name itself when it fits a label value
 * (63 characters), otherwise a cut name plus a hash. Select pods by this, never by the raw name.
 */
export function runLabelValue(runName: string): string {
  if (runName.length <= MAX_LABEL && LABEL_VALUE.test(runName)) return runName;
  return truncateWithHash(runName, runName);
}

const BASE36 = '0123456789abcdefghijklmnopqrstuvwxyz';
const RUN_SUFFIX_LEN = 10;

/** `run-` + 10 random base36 characters (~51 bits): unique enough to create without a retry loop. */
export function generateSessionName(): string {
  return `session-${randomBytes(8).toString('hex').slice(0, 10)}`;
}

export function generateRunName(): string {
  let suffix = '';
  while (suffix.length < RUN_SUFFIX_LEN) {
    for (const byte of randomBytes(RUN_SUFFIX_LEN * 2)) {
      // 252 = 7 * 36: rejecting the top 4 values keeps every character equally likely.
      if (byte < 252 && suffix.length < RUN_SUFFIX_LEN) suffix += BASE36[byte % 36];
    }
  }
  return `run-${suffix}`;
}
