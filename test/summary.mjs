// Adds up vitest JSON reports into the one closing line CI reads: "N passed, N failed, N skipped".
// A test file that failed to load (no test ran) counts as one failure.
import { readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of process.argv.slice(2)) {
  const r = JSON.parse(readFileSync(file, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  for (const suite of r.testResults ?? []) {
    if (suite.status === 'failed' && (suite.assertionResults ?? []).every((a) => a.status !== 'failed')) failed += 1;
  }
}
console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
