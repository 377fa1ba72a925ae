// Who a SandboxRun or SandboxSession belongs to. The gateway records its caller; a run created with
// kubectl must name its creator, which the chart's ValidatingAdmissionPolicy enforces in the API
// server (charts/codemode-operator/templates/owner-policy.yaml). The label makes `kubectl get -l` filter by owner.
import { createHash } from 'node:crypto';
import { z } from 'zod';

export const LABEL_OWNER = 'codemode.dev/owner';

/** The longest user or group name spec.owner holds, and the most groups. */
export const MAX_OWNER_NAME_CHARS = 256;
export const MAX_OWNER_GROUPS = 64;

export const OwnerSchema = z
  .object({
    user: z
      .string()
      .min(1)
      .max(MAX_OWNER_NAME_CHARS)
      .describe('User name of the creator, as the gateway authenticated it or as the API server knows it (kubectl).'),
    groups: z.array(z.string().min(1).max(MAX_OWNER_NAME_CHARS).describe('A group name.')).max(MAX_OWNER_GROUPS).optional().describe("The creator's groups."),
  })
  .describe('Who created the object. Set by the gateway; with kubectl it must be your own user name (an admission policy checks it).');
export type Owner = z.infer<typeof OwnerSchema>;

/**
 * A label value for `user` (at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends).
 * A name that had to be changed gets a hash suffix, so two users never share a value by accident;
 * authorization always compares spec.owner.user itself, never the label.
 */
export function ownerLabelValue(user: string): string {
  const clean = user.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  if (clean === user && clean.length <= 63 && clean.length > 0) return clean;
  const hash = createHash('sha256').update(user, 'utf8').digest('hex').slice(0, 10);
  const head = clean.slice(0, 52).replace(/[^A-Za-z0-9]+$/, '');
  return head ? `${head}-${hash}` : hash;
}
