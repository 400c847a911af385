// cli.test.mjs — the bad-input catalogue (catalogue.mjs) through the native `vitlens` CLI: every
// malformed input exits with status 1 (not a signal, not an internal error), and stderr names
// the expected error code and message; the valid hostile inputs succeed. CTest runs it in every
// native build (tests/CMakeLists.txt), so under ASan + UBSan in build-asan too, where a
// sanitizer report would break the expected stderr and exit status.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';

import { nativeDir, tmpDir } from '../node/support.mjs';
import { categories, cliOptionFlags, expectationFor, makeCatalogue } from './catalogue.mjs';

const exe = path.join(nativeDir, 'vitlens');
const dir = tmpDir();
const { cases, base } = makeCatalogue(dir);
const at = (name) => path.join(dir, name);

// The command line that feeds a case to the CLI, and the subcommand that reports the error.
function commandFor(c) {
  switch (c.entry) {
    case 'model': return ['info', at(c.files.model)];
    case 'checkpoint': return ['import', at(c.files.checkpoint), '--config', at(c.files.config), '-o', at(`${c.id}.out.vitl`)];
    case 'image': return ['predict', at(base.model), at(c.files.image), '--top', '2'];
    case 'npy': return ['predict', at(base.model), '--input', at(c.files.input)];
    case 'options':
      if ('top' in c.options) return ['predict', at(base.model), '--input', at(base.input), '--top', String(c.options.top)];
      return ['explain', at(base.model), '--input', at(base.input), '--method', c.options.method, ...cliOptionFlags(c.options)];
    default: throw new Error(`${c.id}: unknown entry ${c.entry}`);
  }
}

test('the catalogue has at least 30 distinct cases covering every category', () => {
  assert.ok(cases.length >= 30, `${cases.length} cases`);
  assert.equal(new Set(cases.map((c) => c.id)).size, cases.length);
  for (const cat of categories) assert.ok(cases.some((c) => c.category === cat), `no case of category ${cat}`);
  for (const entry of ['model', 'checkpoint', 'image', 'npy', 'options'])
    assert.ok(cases.some((c) => c.entry === entry), `no case for entry ${entry}`);
});

test('the base files are valid (each case changes one thing in one of them)', () => {
  const run = (args) => spawnSync(exe, args, { encoding: 'utf8' });
  for (const args of [['info', at(base.model)], ['info', at(base.modelInt8)],
    ['predict', at(base.model), '--input', at(base.input)], ['predict', at(base.model), at(base.image)]]) {
    const r = run(args);
    assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
  }
});

for (const c of cases) {
  const want = expectationFor(c, 'cli');
  test(`${c.id}: ${c.description}`, { skip: want.skip }, () => {
    const args = commandFor(c);
    const r = spawnSync(exe, args, { encoding: 'utf8', timeout: 60_000 });
    const shown = `vitlens ${args.join(' ')}\nstatus ${r.status} signal ${r.signal}\nstderr: ${r.stderr}`;
    assert.equal(r.signal, null, `killed by a signal\n${shown}`);
    assert.doesNotMatch(r.stderr, /Sanitizer|runtime error/, shown);
    if (want.ok) {
      assert.equal(r.status, 0, shown);
      assert.match(r.stdout, /logit/, shown);
      return;
    }
    assert.equal(r.status, 1, `an input error exits with 1\n${shown}`);
    const m = /^vitlens ([a-z-]+): error \(([a-z_]+)\): ([^\n]*)\n$/.exec(r.stderr);
    assert.ok(m, `stderr is one 'vitlens CMD: error (code): message' line\n${shown}`);
    assert.equal(m[2], want.code, shown);
    assert.ok(m[3].includes(want.message), `the message contains ${JSON.stringify(want.message)}\n${shown}`);
    if (c.entry === 'checkpoint') assert.equal(fs.existsSync(at(`${c.id}.out.vitl`)), false, 'no output file after a failed import');
  });
}

test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
