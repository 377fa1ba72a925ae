// The `session` argument of every tool that takes one: a name create_session returned (a DNS
// label, as the session's pod name is made from it). Checked before anything is looked up, so a
// made-up name of any size is refused with a fixed sentence instead of being echoed back.
import { z } from 'zod';

export const SessionArg = z
  .string()
  .max(63, { error: 'session must be a session name returned by create_session (at most 63 characters).' })
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { error: 'session must be a session name returned by create_session.' });
